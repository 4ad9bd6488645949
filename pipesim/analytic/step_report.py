"""Step time, throughput, MFU and per-rank GiB of one simulated step, as text and as a dict for --json.

MFU follows Chowdhery et al. 2022 (PaLM, App. B): model FLOPs (forward + backward, no recomputation) per
second over the peak of all chips. HFU adds the recomputed forward work; it is what Narayanan et al. 2021
report as "achieved teraFLOP/s per GPU". The peak is the chip's dense BF16 one for every run, FP8 included (as
published FP8 runs quote MFU, so the numbers compare): an FP8 run's MFU can exceed what BF16 could reach, and
its output says so (:data:`MFU_PEAK_NOTE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pipesim.analytic.allocator import RESERVED_SHARE, RESERVED_SHARE_RANGE
from pipesim.analytic.attention_shapes import REFERENCE_SEQ
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.error_band import ErrorBand, error_band, features_of, groups_of, run_traits
from pipesim.analytic.flops import model_flops_per_microbatch
from pipesim.analytic.frameworks import DEFAULT_FRAMEWORK, Framework, runs_megatron_core
from pipesim.analytic.kernels import attention_shape_factors, fused_attention_slowdown, kv_repeat, runs_unvectorised
from pipesim.analytic.layout import (
    DEFAULT_RECOMPUTE_MODULES,
    ElementwiseKernels,
    Fp8Params,
    Fp8Recipe,
    GradAccumulation,
    Layout,
    LossKernel,
    MoeDispatcher,
    P2pCalls,
    PipelineBuffers,
    ZeroCollectives,
    ZeroStage,
    context_parallel_summary,
)
from pipesim.analytic.measured import CollectiveOp
from pipesim.analytic.memory_gib import GIB, MemoryReport, memory_report
from pipesim.analytic.model_spec import ModelSpec
from pipesim.analytic.params import active_params, total_params
from pipesim.analytic.steady_state import StepBoundary
from pipesim.analytic.time_breakdown import RankTime, rank_times
from pipesim.analytic.to_costs import compute_pace, recomputed_layers, stage_layer_counts
from pipesim.analytic.training_time import TrainingTime
from pipesim.program.ir import OP_CODE, Op, PipelineShape
from pipesim.sim.simulator import SimulationResult

# FP8 runs: MFU keeps the BF16 peak in its denominator (the published convention), which the output states.
MFU_PEAK_NOTE = "MFU and HFU against the BF16 peak, FP8 and FP4 runs included"


# how the summary line names the element-wise kernels (nothing for the fused default)
_ELEMENTWISE_SAID = {ElementwiseKernels.FUSED: "", ElementwiseKernels.EAGER: ", eager element-wise ops",
                     ElementwiseKernels.EAGER_FUSED_NORM: ", eager element-wise ops with fused norms",
                     ElementwiseKernels.EAGER_ACTIVATION: ", eager MLP activation and attention layout copies "
                                                          "(fused norms and RoPE)"}
_LOSS_SAID = {LossKernel.MEGATRON: "", LossKernel.PYTORCH: ", PyTorch cross-entropy",
              LossKernel.GATHERED: ", cross-entropy on the logits gathered over tp",
              LossKernel.NANOTRON: ", nanotron cross-entropy", LossKernel.FUSED: ", fused cross-entropy kernel",
              LossKernel.COMPILED: ", compiled cross-entropy",
              LossKernel.MEGATRON_FUSED: ", Megatron's fused cross-entropy",
              LossKernel.TE: ", Transformer Engine's cross-entropy"}


# the exposed data-parallel sync's share of the busiest rank's step above which a report suggests the switches that
# overlap it (StepReport.dp_sync_note): below it, the flags would move the step by less than the band's width
DP_SYNC_NOTE_SHARE = 0.05


@dataclass(frozen=True)
class StepReport:
    model: ModelSpec
    chip: ChipSpec
    layout: Layout
    step_time: float  # s, the simulated makespan
    tokens_per_step: int
    model_flops: float  # per step, all replicas
    hardware_flops: float
    bubble_fraction: float
    memory: MemoryReport
    boundary: StepBoundary = StepBoundary.SYNC
    single_step: float | None = None  # makespan of one isolated step, s
    shape: PipelineShape | None = None  # the simulated placement of stages on ranks
    simulated_busy: tuple[float, ...] | None = None  # each rank's compute time in the simulated step
    split_backward: bool = False  # the schedule splits each backward into I and W passes (zero bubble)
    # each rank's wait at its optimizer step for the asynchronous gradient sync, in the simulated step; None: the
    # simulation had no asynchronous sync (nobody waited)
    simulated_sync_wait: tuple[float, ...] | None = None
    framework: str | None = None  # the training framework named (--framework), None: Megatron's defaults

    @cached_property
    def rank_times(self) -> tuple[RankTime, ...]:
        """Where each rank's seconds of the step go (computed on first use: the planner never asks)."""
        if self.shape is None:
            return ()
        busy = None if self.simulated_busy is None else list(self.simulated_busy)
        wait = None if self.simulated_sync_wait is None else list(self.simulated_sync_wait)
        return tuple(rank_times(self.model, self.chip, self.layout, self.shape, self.step_time, busy,
                                self.split_backward, wait))

    @property
    def busiest(self) -> RankTime | None:
        """The rank with the least idle time: the one that sets the pace."""
        return min(self.rank_times, key=lambda t: t.idle, default=None)

    @property
    def error_band(self) -> ErrorBand:
        """The step-time error validation measured on published runs of this kind (chip family, precision), and
        whether any of them had this layout's features."""
        if self.chip.achievable_fraction is not None:
            return ErrorBand(None, None, 0, "--achievable-fraction replaces the validated per-kernel model")
        busiest = self.busiest
        return error_band(self.chip.name, self.layout.precision, features_of(self.layout, self.model.is_moe),
                          self.framework, groups_of(self.layout),
                          None if busiest is None else busiest.communication_share,
                          run_traits(self.chip.name, self.layout, self.model).kinds(of_memory=False))

    @property
    def dp_sync_note(self) -> str | None:
        """A note where a Megatron-Core run leaves a sizeable data-parallel sync after the passes for want of the
        switches that overlap it, else None. Megatron-LM's command line runs the gradient reduce after the backward
        and the distributed optimizer's gather after the step unless told (``--overlap-grad-reduce``,
        ``--overlap-param-gather``); its tuned runs and NeMo's recipes set both, and a layout simulated without
        them can be the step's difference (at tp 8 over 32 nodes, 16 % of it against 7 %)."""
        busiest, lay = self.busiest, self.layout
        if (busiest is None or not lay.reduces_gradients or not runs_megatron_core(self.framework)
                or busiest.grad_sync < DP_SYNC_NOTE_SHARE * busiest.step):
            return None
        missing = [] if lay.overlap_grad_reduce else ["--overlap-grad-reduce"]
        if lay.sharding.gathers_after_step and not lay.overlap_param_gather:
            missing.append("--overlap-param-gather")
        if not missing:
            return None
        return (f"{busiest.grad_sync / busiest.step:.1%} of the step on rank {busiest.rank} waits on the "
                f"data-parallel sync; {' '.join(missing)} (what Megatron-LM's tuned runs and NeMo's recipes, "
                "--framework nemo, set) would overlap it with the passes")

    @property
    def param_gather_note(self) -> str | None:
        """A note where a Megatron-LM run overlaps the parameter gather but not the gradient reduce, a pair its
        command line refuses (``megatron/training/arguments.py``: "Must use --overlap-param-gather with
        --overlap-grad-reduce"): simulated as given, a what-if Megatron-LM does not launch. None elsewhere (NeMo
        sets Megatron-Core's DDP config itself, past that check)."""
        lay = self.layout
        megatron_lm = Framework(self.framework or DEFAULT_FRAMEWORK.value) is Framework.MEGATRON
        if not (megatron_lm and lay.overlap_param_gather and not lay.overlap_grad_reduce and lay.reduces_gradients):
            return None
        return ("Megatron-LM refuses --overlap-param-gather without --overlap-grad-reduce (\"Must use "
                "--overlap-param-gather with --overlap-grad-reduce\"): simulated as given; add "
                "--overlap-grad-reduce for a run it launches")

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_per_step / self.step_time

    def training(self, tokens: float) -> TrainingTime:
        """``tokens`` trained at this step: the steps, days and GPU-hours, and the days its error band allows."""
        return TrainingTime(tokens, self.tokens_per_step, self.step_time, self.layout.world_size,
                            self.error_band.relative)

    def _utilization(self, flops: float) -> float:
        return flops / (self.step_time * self.layout.world_size * self.chip.peak_flops)

    @property
    def mfu_note(self) -> str:
        """What MFU is measured against, where it is not obvious: FP8 and FP4 runs still use the BF16 peak."""
        return MFU_PEAK_NOTE if self.layout.precision.quantized else ""

    @property
    def mfu(self) -> float:
        return self._utilization(self.model_flops)

    @property
    def hfu(self) -> float:
        return self._utilization(self.hardware_flops)

    @property
    def tflops_per_chip(self) -> float:
        """Hardware TFLOP/s per chip (Narayanan et al. 2021's metric)."""
        return self.hardware_flops / (self.step_time * self.layout.world_size) / 1e12

    def to_dict(self) -> dict:
        lay = self.layout
        return {
            "model": self.model.to_dict(),
            "parameters": total_params(self.model),
            "active_parameters": active_params(self.model),
            "chip": self.chip.to_dict(),
            "layout": {"tp": lay.tp, "dp": lay.dp, "pp": lay.pp, "chunks": lay.chunks,
                       "microbatches": lay.microbatches, "world_size": lay.world_size,
                       "recompute": lay.recompute.value, "recompute_layers": lay.recompute_layers,
                       "recompute_modules": sorted(m.value for m in lay.recomputed_modules),
                       "distribute_saved_activations": lay.distribute_saved_activations,
                       "sequence_parallel": lay.sequence_parallel,
                       "distributed_optimizer": lay.distributed_optimizer, "attention": lay.attention.value,
                       "repeat_kv": lay.kv_repeated,
                       "elementwise": lay.elementwise.value, "loss": lay.loss.value, "z_loss": lay.z_loss,
                       "loss_input_copy": lay.loss_input_copy,
                       "grad_accumulation": lay.grad_accumulation.value,
                       "halve_causal_attention": lay.halve_causal_attention,
                       "param_bytes": vars(lay.param_bytes) | {"total": lay.param_bytes.total},
                       "stage_layers": list(stage_layer_counts(self.model, lay)),
                       "stages_after_head": lay.stages_after_head, "zero": int(lay.sharding),
                       "zero_collectives": lay.zero_collectives.value, "gathers_per_layer": lay.gathers_per_layer,
                       "shard_group": lay.shard_group,
                       "sharding_note": lay.sharding_note, "column_input_note": lay.column_input_note,
                       "grad_reduce_note": lay.grad_reduce_note,
                       "inert_flag_notes": inert_flag_notes(self.model, lay),
                       "dp_sync_note": self.dp_sync_note, "param_gather_note": self.param_gather_note,
                       "cp": lay.cp, "cp_comm_ctas": lay.cp_comm_ctas, "cp_comm_type": lay.cp_comm.value,
                       "cp_kernels": lay.cp_kernels.value,
                       "hierarchical_context_parallel_sizes": ([lay.cp_a2a_ranks, lay.cp_ring_ranks]
                                                               if lay.cp_a2a_size is not None else None),
                       "precision": lay.precision.value,
                       "fp8_params": lay.fp8_params.value,
                       "fp8_recipe": lay.fp8_recipe.value, "fp8_linears": lay.fp8_linears.value,
                       "fp8_all_gather": lay.fp8_all_gather, "fsdp2": lay.fsdp2,
                       "async_tp": lay.async_tp,
                       "overlap_tp_dgrad": lay.hides_tp_dgrad,
                       "overlap_tp_local_shard": lay.hides_gathers_locally,
                       "column_input": lay.column_input.value,
                       "overlap_p2p": lay.overlap_p2p, "p2p_tensor": lay.p2p_tensor.value,
                       "p2p_calls": lay.p2p_calls.value, "pipeline_buffers": lay.pipeline_buffers.value,
                       "pipeline_outputs_kept": lay.pipeline_outputs_kept, "mlp_up": lay.mlp_up.value,
                       "overlap_grad_reduce": lay.overlap_grad_reduce,
                       "overlap_param_gather": lay.overlap_param_gather, "grad_buckets": lay.grad_buckets.value,
                       "ep": lay.ep, "expert_tp": lay.etp,
                       "moe_imbalance": lay.moe_imbalance, "moe_dispatcher": lay.moe_dispatcher.value,
                       "moe_dispatch_fp8": lay.moe_dispatch_fp8,
                       "moe_shared_expert_overlap": lay.moe_shared_expert_overlap,
                       "model_copies": lay.model_copies},
            "cost_sources": cost_sources(self.chip),
            # the compute slowdown of waiting for the slowest of the step's GPUs (pipesim.analytic.slowest_gpu)
            "slowest_gpu_factor": compute_pace(self.chip, lay),
            # what the chip's attention shape table scales its two efficiencies by at this layer's shape (forward,
            # backward); null where none applies (pipesim.analytic.kernels.attention_shape_factors)
            "attention_shape_factors": attention_shape_factors(self.model, lay, self.chip),
            "step_boundary": self.boundary.value,
            "step_time_s": self.step_time,
            "step_time_band": self.error_band.to_dict(),
            "single_step_makespan_s": self.single_step,
            "tokens_per_step": self.tokens_per_step,
            "tokens_per_s": self.tokens_per_second,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "mfu_peak": "bf16",  # MFU and HFU are against the dense BF16 peak, for FP8 and FP4 runs too
            "tflops_per_chip": self.tflops_per_chip,
            "bubble_fraction": self.bubble_fraction,
            "memory": self.memory.to_dict(),
            "time_per_rank": [t.to_dict() for t in self.rank_times],
        }


def _slowest_gpu_text(chip: ChipSpec, layout: Layout) -> str:
    """The compute slowdown of waiting for the slowest of the step's GPUs, where there is one."""
    factor = compute_pace(chip, layout)
    if factor == 1.0:
        return ""
    return (f", slowest of {layout.world_size:,} GPUs +{(factor - 1) * 100:.1f}% "
            f"(speed spread {chip.gpu_speed_spread:g})")


def _attention_text(chip: ChipSpec, model: ModelSpec, layout: Layout) -> str:
    """The fused-attention efficiencies, where the chip's shape table scales them by how much at this layer's
    shape (:func:`pipesim.analytic.kernels.attention_shape_factors`), and a slower kernel's factor
    (:func:`pipesim.analytic.kernels.fused_attention_slowdown`: FlashAttention v1's, the Triton one's)."""
    text = f"attention {chip.attention_forward_efficiency:g}/{chip.attention_backward_efficiency:g}"
    shape = attention_shape_factors(model, layout, chip)
    if shape is not None:
        text += (f" at {REFERENCE_SEQ // 1024}k tokens, ×{shape[0]:.2f}/×{shape[1]:.2f} at "
                 f"{model.seq_len / layout.cp:g} tokens of head {model.qk_head_dim}")
    slowdown = fused_attention_slowdown(model, layout, chip)  # 1 for FlashAttention-2 and for unfused attention
    if slowdown != 1.0:
        text += f", {layout.attention.value} ÷{slowdown:.2f}"
    return text


def _modules_text(layout: Layout) -> str:
    """A selective recomputation's modules where they are not Megatron-Core's default, the attention core."""
    modules = layout.recomputed_modules
    if not modules or modules == frozenset(DEFAULT_RECOMPUTE_MODULES):
        return ""
    return f" ({', '.join(sorted(m.value for m in modules))})"


def _unvectorised_text(chip: ChipSpec, model: ModelSpec, layout: Layout) -> str:
    """The shares of HBM of the memory-bound work PyTorch cannot vectorise, where the layout runs any
    (pipesim.analytic.kernels.UnvectorisedBytes), or nothing."""
    strided, converting = runs_unvectorised(model, layout)
    said = ([f"strided {chip.strided_stream_bandwidth / chip.hbm_bandwidth:.2g}"] if strided else []) + (
        [f"FP32 chains {chip.converting_stream_bandwidth / chip.hbm_bandwidth:.2g}"] if converting else [])
    return f" ({', '.join(said)})" if said else ""


def _gemm_overheads_text(chip: ChipSpec) -> str:
    """The GEMM overheads a chip states (pipesim.analytic.kernels.gemm_time), or nothing when it has none."""
    if chip.gemm_tile_overhead <= 0 and chip.gemm_kernel_overhead <= 0:
        return ""
    return (f", GEMM overheads {chip.gemm_tile_overhead * 1e6:g} µs/tile {chip.gemm_kernel_overhead * 1e6:g} "
            "µs/kernel")


def cost_sources(chip: ChipSpec) -> dict[str, str]:
    """Which cost terms come from measurement (a ``pipesim profile`` chip file) and which from the roofline."""
    if chip.measured is None:
        return {"all": "roofline"}
    sources = chip.measured.sources()
    sources["pipeline P2P"] = (
        "measured (the p2p fit, as the link fields)"
        if chip.measured.collective(CollectiveOp.P2P, 2)
        else "roofline (link fields derived from the stream rate)"
    )
    sources["optimizer step"] = "roofline over the measured stream rate"
    # the measurements under load (a field set where measured, its default rule otherwise; the notes say which)
    sources["GEMM and attention clock"] = f"× {chip.sustained_clock_ratio:g} sustained_clock_ratio"
    sources["overlapped collectives"] = (f"take {chip.comm_sm_share:.3g} of the compute beside them"
                                         + (" (measured)" if chip.collective_sm_share is not None
                                            else " (collective_ctas / sm_count)"))
    return sources


def step_report(
    model: ModelSpec,
    chip: ChipSpec,
    layout: Layout,
    result: SimulationResult,
    step_time: float | None = None,
    boundary: StepBoundary = StepBoundary.SYNC,
    memory: MemoryReport | None = None,
    framework: str | None = None,
) -> StepReport:
    """``step_time``: the steady-state seconds per step (:mod:`.steady_state`); default the one step's makespan.
    ``memory``: :func:`memory_report` of this configuration when the caller has it already (it depends on the
    instruction order alone, never on the timing, so one made from an untimed result is the same).
    ``framework``: the training framework the run names, whose published runs' errors the band quotes."""
    per_mb = model_flops_per_microbatch(model, layout, recomputed_layers(model, layout))
    replicas_mb = layout.dp * layout.microbatches
    step = result.metrics.makespan if step_time is None else step_time
    return StepReport(
        model,
        chip,
        layout,
        step,
        replicas_mb * model.tokens_per_microbatch,
        replicas_mb * per_mb.model,
        replicas_mb * per_mb.hardware,
        result.metrics.bubble_fraction,
        memory or memory_report(model, chip, layout, result),
        boundary,
        result.metrics.makespan,
        result.program.shape,
        tuple(r.busy for r in result.metrics.ranks),
        bool(np.any(result.program.columns.op == OP_CODE[Op.W])),
        result.gradient_sync_waits(),
        framework,
    )


_FOLDING_SAID = "MoE parallel folding: whole experts, each rank routing its own tokens"


def inert_flag_notes(model: ModelSpec, layout: Layout) -> list[str]:
    """The layout's notes on options that change nothing here (:attr:`Layout.inert_flag_notes`), with those only
    the model can tell: overlapping shared experts a model does not have (Megatron-Core ignores the flag then)."""
    notes = list(layout.inert_flag_notes)
    if layout.moe_shared_expert_overlap and not model.shared_experts:
        notes.append(f"--moe-shared-expert-overlap changes nothing here: {model.name} has no shared experts")
    return notes


def _hybrid(layout: Layout) -> bool:
    """ZeRO state sharded within groups, replicated across them (a group of one rank shards nothing)."""
    return layout.shard_replicas > 1 and layout.sharding > ZeroStage.NONE


def _outer_optimizer_text(layout: Layout) -> str:
    """The summary's words for hybrid FSDP's optimizer state sharded across the groups too, or nothing."""
    if not layout.outer_optimizer_sharding:
        return ""
    return f", the optimizer state over all {layout.optimizer_shards} (hybrid FSDP)"


def _reduces_hierarchically(layout: Layout) -> bool:
    """ZeRO-1 within groups that reduce-scatters within each group and all-reduces across them (Megatron-LM's
    optimizer instances), where hybrid ZeRO-1 otherwise all-reduces whole gradients over every rank."""
    return _hybrid(layout) and layout.zero_collectives is ZeroCollectives.HIERARCHICAL


def _dispatch_text(model: ModelSpec, layout: Layout) -> str:
    """How the tokens reach their experts, as the cost model counts it (moe_dispatch)."""
    routing = (f"; routing limited to {model.expert_groups_per_token} of {model.expert_groups} expert groups"
               if model.expert_groups else "")
    overlap = ", the shared experts beside it" if layout.moe_shared_expert_overlap and model.shared_experts else ""
    if layout.moe_dispatcher is MoeDispatcher.ALLTOALL:
        return f"all-to-all dispatch, a copy per routed expert{routing}{overlap}"
    fp8 = ", FP8 dispatch" if layout.moe_dispatch_fp8 else ""
    return f"DeepEP dispatch, a copy per node across the network, forwarded over NVLink{fp8}{routing}{overlap}"


def report_text(report: StepReport) -> str:
    m, c, lay = report.model, report.chip, report.layout
    moe = ""
    if m.is_moe:
        moe = (
            f", MoE {m.experts} experts top-{m.experts_per_token}"
            f"{f' + {m.shared_experts} shared' if m.shared_experts else ''}, {active_params(m) / 1e9:.1f}B active"
        )
    if m.local_attention_layers:
        moe += f", {m.local_attention_text} on {m.local_attention_layers} of {m.layers} layers"
    if m.mtp_layers:
        where = "the loss's stage" if lay.mtp_stage is None else f"stage {lay.mtp_stage}"
        moe += f", {m.mtp_layers} multi-token-prediction module{'s' if m.mtp_layers > 1 else ''} on {where}"
    buffers = any(r.pipeline_buffers for r in report.memory.ranks)
    lines = [
        f"model {m.name} ({total_params(m) / 1e9:.1f}B params{moe}, seq {m.seq_len}, micro-batch {m.micro_batch}) on "
        f"{lay.world_size}× {c.name} (tp={lay.tp} cp={lay.cp} dp={lay.dp} pp={lay.pp} v={lay.chunks}"
        f"{f' ep={lay.ep}' if m.is_moe else ''}, {lay.microbatches} microbatches/pipeline"
        f"{', half through each of two model copies (DualPipe)' if lay.model_copies == 2 else ''})",
        *([f"expert parallelism: {m.experts // lay.ep} experts per rank, expert gradients sync over "
           f"{'dp·cp/ep' if lay.etp == lay.tp else 'tp·dp·cp/ep'} = {lay.expert_shards} ranks, routing imbalance "
           f"{lay.moe_imbalance:g}× (most-loaded rank / mean); "
           f"{'expert tensor parallelism = tp' if lay.etp == lay.tp else _FOLDING_SAID}; "
           f"{_dispatch_text(m, lay)}"] if m.is_moe else []),
        f"recompute {lay.recompute.value}"
        f"{f' (the first {lay.recompute_layers} layers of each chunk)' if lay.recompute_layers else ''}"
        f"{_modules_text(lay)}"
        f"{', stored inputs split over tp' if lay.distribute_saved_activations else ''}"
        f", sequence parallel {'on' if lay.sequence_parallel and lay.tp > 1 else 'off'}, "
        f"ZeRO {int(lay.sharding)}"
        f"{f' within groups of {lay.shards} ({lay.shard_replicas} replicas)' if _hybrid(lay) else ''}"
        f"{', reduced within each and across them' if _reduces_hierarchically(lay) else ''}"
        f"{_outer_optimizer_text(lay)}"
        f", {lay.attention.value} attention"
        f"{' (K and V repeated to the query heads)' if kv_repeat(m, lay) != 1.0 else ''}, {lay.precision.value}"
        f"{f' (FP8 parameters, {lay.fp8_params.value})' if lay.fp8_params is not Fp8Params.OFF else ''}"
        f"{', per-tensor current scaling' if lay.fp8_recipe is Fp8Recipe.TENSORWISE else ''}"
        f"{_ELEMENTWISE_SAID[lay.elementwise]}"
        f"{_LOSS_SAID[lay.loss]}{' (loss_parallel over tp)' if lay.torch_loss_parallel else ''}"
        f"{' with z-loss' if lay.z_loss else ''}"
        f"{', the loss input copied' if lay.loss_input_copy else ''}"
        f"{', autograd gradient accumulation' if lay.grad_accumulation is GradAccumulation.AUTOGRAD else ''}"
        f"{', async TP' if lay.async_tp else ''}"
        f"{', TP all-gathers beside the local shard' if lay.hides_gathers_locally else ''}"
        f"{', TP collectives all blocking' if lay.tp > 1 and not lay.async_tp and not lay.overlap_tp_dgrad else ''}"
        f"{f', {lay.column_input.summary}' if lay.column_input_differs else ''}"
        f"{f', {context_parallel_summary(lay.cp_comm, lay.cp_kernels)}' if lay.cp > 1 else ''}"
        f"{f', {lay.cp_comm_ctas} CTA(s) for the ring sends' if lay.cp_comm_ctas else ''}"
        f", {lay.param_bytes.total:g} B/param, "
        + (
            f"achievable {c.achievable_fraction:g} of {c.peak_flops / 1e12:g} TFLOP/s"
            if c.achievable_fraction
            else f"per-kernel efficiency (GEMM {c.gemm_efficiency:g}, {_attention_text(c, m, lay)}, "
            f"HBM {c.memory_efficiency:g}{_unvectorised_text(c, m, lay)}"
            f"{f', sustained clock {c.sustained_clock_ratio:g}' if c.sustained_clock_ratio < 1 else ''}"
            f"{f', training GEMM ratio {c.training_gemm_ratio:g}' if c.training_gemm_ratio < 1 else ''}"
            f"{_gemm_overheads_text(c)}{_slowest_gpu_text(c, lay)})"
        )
        + (f", per-layer ZeRO-{int(lay.sharding)} collectives: {c.zero3_overlap_share:g} of their kernel work "
           "overlapped, the network's wait beside compute" if lay.gathers_per_layer else "")
        + (
            ", P2P "
            + ("overlapped" if lay.overlap_p2p else
               f"blocking{', send and receive in turn' if lay.p2p_calls is P2pCalls.SEQUENTIAL else ''} "
               f"(+{c.p2p_sync_overhead * 1e3:g} ms sync per call)")
            + _pipeline_buffers_text(lay)
            if lay.pp > 1
            else ""
        )
        + (", gradient reduce overlapped" if lay.overlap_grad_reduce and lay.reduces_gradients else "")
        + (", parameter gather overlapped" if lay.overlap_param_gather else ""),
        *(
            [
                f"cost terms from {c.name}'s measured tables (pipesim profile) or the roofline: "
                + "; ".join(f"{k} {v}" for k, v in cost_sources(c).items())
            ]
            if c.measured
            else []
        ),
        f"layers per stage {','.join(map(str, stage_layer_counts(m, lay)))}"
        + (" (the stages do not divide the layers: the first and last one lighter, as Megatron-LM's "
           "--account-for-embedding/loss-in-pipeline-split)" if _lighter_ends_by_default(m, lay) else "")
        + _head_placement(lay)
        + f"; steady state ({report.boundary.value} "
        f"step boundary) {report.step_time:.4g} s per step, one isolated step {report.single_step or 0:.4g} s",
        f"step time {report.step_time:.4g} s {report.error_band.text()}",
        f"tokens/s {report.tokens_per_second:,.0f}   "
        f"MFU {report.mfu:.1%}   HFU {report.hfu:.1%} ({report.tflops_per_chip:.0f} TFLOP/s/chip)   "
        f"bubble {report.bubble_fraction:.1%}" + (f"   ({report.mfu_note})" if report.mfu_note else ""),
        *(
            [f"where the step goes on rank {report.busiest.rank}, the busiest: {report.busiest.text()}"]
            if report.busiest
            else []
        ),
        *(
            [
                f"MoE all-to-all on rank {report.busiest.rank}: {report.busiest.a2a + report.busiest.a2a_hidden:.4g} s "
                f"per step, hidden by overlap {report.busiest.a2a_hidden:.4g} s, exposed {report.busiest.a2a:.4g} s "
                f"({report.busiest.a2a_exposed_share:.1%} of the step)"
            ]
            if report.busiest and m.is_moe
            else []
        ),
        f"{'rank':>4} {'stages':<10} {'weights':>8} {'grads':>8} {'optim':>8} {'activ':>8} {'work':>6}"
        + (f" {'p2p':>6}" if buffers else "") + f" {'total':>8}"
        f" {'in-flight':>9}  (GiB per GPU; work = one layer's backward gradients, or the loss's peak on a last "
        f"stage; " + ("p2p = what the pipeline runtime keeps of the tensors crossing stage boundaries; "
                      if buffers else "") + "in-flight = peak microbatches through a rank's share of the model)",
    ]
    peak = report.memory.peak.rank
    for r in report.memory.ranks:
        stages = ",".join(map(str, r.stages))
        lines.append(
            f"{r.rank:>4} {stages:<10} {r.weights / GIB:>8.2f} {r.grads / GIB:>8.2f} {r.optimizer / GIB:>8.2f} "
            f"{r.activations / GIB:>8.2f} {r.working / GIB:>6.2f}"
            + (f" {r.pipeline_buffers / GIB:>6.2f}" if buffers else "")
            + f" {r.total / GIB:>8.2f} {r.in_flight:>9g}"
            + ("  ← peak" if r.rank == peak else "")
        )
    # what tensors hold (torch.cuda.max_memory_allocated), then what the caching allocator holds (max_memory_reserved)
    low, high = RESERVED_SHARE_RANGE
    lines.append(f"peak rank {peak}: {report.memory.peak.total / GIB:.2f} GiB allocated {report.memory.band.text()} "
                 f"of {c.memory_gib:g} GiB")
    if report.memory.peak.total > c.memory_gib * GIB:  # the allocator cannot reserve less than is allocated
        lines.append(f"reserved: at least the {report.memory.peak.total / GIB:.2f} GiB allocated, more than the "
                     f"{c.memory_gib:g} GiB there are (the run does not fit: the warnings below say where)")
    else:
        lines.append(f"reserved ≈ {report.memory.reserved(report.memory.peak) / GIB:.2f} GiB on rank {peak} "
                     f"(torch.cuda.max_memory_reserved: the caching allocator's +{RESERVED_SHARE:.1%}, the median "
                     f"of published logs, one run's +{low:.0%}…+{high:.0%}; at most the capacity)")
    lines += [f"warning: {w}" for w in report.memory.warnings()]
    for note in (lay.sharding_note, lay.column_input_note, lay.grad_reduce_note, *inert_flag_notes(m, lay),
                 report.dp_sync_note, report.param_gather_note):
        if note:
            lines.append(f"note: {note}")
    return "\n".join(lines)


def _pipeline_buffers_text(layout: Layout) -> str:
    """What the pipeline runtime keeps of the boundary tensors, where it keeps more than the activations."""
    kept = {PipelineBuffers.FREED: "",
            PipelineBuffers.TORCH: ", torch.distributed.pipelining's buffers (a receive buffer per microbatch, each "
                                   "output until its backward)",
            PipelineBuffers.TORCH_RUNTIME: ", torch.distributed.pipelining's runtime buffers (a receive buffer per "
                                           "microbatch, every send held until the step ends)"}[layout.pipeline_buffers]
    return kept + (", the last stage's outputs kept until the step ends" if layout.pipeline_outputs_kept else "")


def _head_placement(layout: Layout) -> str:
    """Where the model's end runs, said only where the LM head is not on the last stage."""
    after = layout.stages_after_head
    if not after:
        return ""
    last, head = layout.num_stages - 1, layout.head_stage
    rest = (f"the logits' FP32 cast and the loss on stage {last}" if after == 1 else
            f"the logits' FP32 cast on stage {head + 1}, the loss on stage {last}")
    crossed = "1 stage boundary" if after == 1 else f"{after} stage boundaries"
    return f" (the LM head on stage {head}, {rest}: the logits cross {crossed})"


def _lighter_ends_by_default(model: ModelSpec, layout: Layout) -> bool:
    """Whether no split was asked for and the layers, not dividing by the stages, got the lighter ends."""
    return layout.stage_layers is None and model.layers % layout.num_stages != 0
