"""A real model on a real chip: from the user's options to the model, chip, layout and the CostModel in seconds,
and from a simulation to the steady-state step time and the step report (tokens/s, MFU, per-rank GiB).

:class:`ModelOptions` holds every option that only means something with a model; ``None`` in a field means
"the default" (listed on each field), so that giving an option without a model can be refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from pipesim.analytic.chip_load import load_chip
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.layout import (
    AttentionKernel,
    ElementwiseKernels,
    GradAccumulation,
    Layout,
    LossKernel,
    Precision,
    Recompute,
    ZeroStage,
)
from pipesim.analytic.model_load import load_model
from pipesim.analytic.model_spec import ModelSpec
from pipesim.analytic.stage_split import StageSplitRequest, resolve_stage_layers
from pipesim.analytic.steady_state import StepBoundary, default_boundary, steady_state_step_time, sync_latency
from pipesim.analytic.step_report import StepReport, step_report
from pipesim.analytic.to_costs import build_cost_model
from pipesim.api.defaults import DEFAULT_HARDWARE, DEFAULT_PARAM_BYTES, DEFAULT_STEPS, PARAM_BYTES
from pipesim.errors import PipesimError
from pipesim.program.ir import PipelineShape
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import SimulationResult

__all__ = ["ModelOptions", "ModelSetup", "model_setup", "model_step_report", "steady_step_time"]


@dataclass(frozen=True)
class ModelOptions:
    """Layout and fidelity options of a model-based simulation (each the ``simulate`` flag of the same name).

    Attributes:
        tp: tensor-parallel degree (default 1).
        dp: data-parallel degree (default 1).
        recompute: ``"none"`` (default), ``"selective"``, ``"full"`` or ``"per-op"`` (torchtitan's per-op
            selective checkpointing) activation recomputation.
        sequence_parallel: shard norms/dropout along the sequence (needs ``tp > 1``).
        distributed_optimizer: shard optimizer state over dp (ZeRO-1).
        attention: ``"fused"`` (FlashAttention-2, default), ``"triton"`` (FlashAttention in Triton, slower) or
            ``"unfused"``.
        elementwise: ``"fused"`` (fused norm, RoPE and activation kernels, default) or ``"eager"`` (one PyTorch
            kernel per op, as reference model code runs without torch.compile).
        loss: ``"megatron"`` (vocabulary-parallel cross-entropy in place, default) or ``"pytorch"``
            (F.cross_entropy on FP32 logits).
        grad_accumulation: ``"fused"`` (the weight-gradient GEMM accumulates, Megatron-LM's default) or
            ``"autograd"`` (PyTorch's ``.grad +=`` after every microbatch but the first).
        halve_causal_attention: count half of QKᵀ and ·V FLOPs.
        achievable_fraction: one fraction of peak FLOP/s for every kernel (default: the chip's per-kernel model).
        seq_len: override the model's sequence length.
        micro_batch_size: sequences per microbatch (default: the model's).
        param_bytes: ``"18"`` (default) or ``"16"`` bytes per parameter for weights, grads and Adam.
        first_stage_layers: layers on stage 0, which also holds the embedding (default: an even split).
        last_stage_layers: layers on the last stage, which also holds the LM head and loss.
        stage_layers: layers on every stage, stage 0 first (pp·v counts summing to the model's layers).
        zero: ZeRO stage 1, 2 or 3 over the dp·cp ranks (default 0: nothing sharded).
        cp: context-parallel degree (default 1).
        fp8: FP8 GEMMs at the chip's FP8 peak.
        async_tp: overlap tensor-parallel collectives with their GEMMs.
        step_boundary: ``"sync"`` or ``"post-validation"`` (default: post-validation for split-backward
            schedules, sync otherwise).
        steps: back-to-back steps of the post-validation steady state (default 3).
        overlap_p2p: pipeline sends overlap compute (default: blocking sends).
        ep: expert-parallel degree of a mixture-of-experts model, carved out of dp·cp (default 1).
        moe_imbalance: the most-loaded expert-parallel rank's routed tokens over the mean (≥ 1; default 1).
        expert_tp: expert tensor-parallel degree; only ``tp`` itself (the default) is modelled.
    """

    tp: int | None = None
    dp: int | None = None
    recompute: str | None = None
    sequence_parallel: bool | None = None
    distributed_optimizer: bool | None = None
    attention: str | None = None
    elementwise: str | None = None
    loss: str | None = None
    grad_accumulation: str | None = None
    halve_causal_attention: bool | None = None
    achievable_fraction: float | None = None
    seq_len: int | None = None
    micro_batch_size: int | None = None
    param_bytes: str | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    stage_layers: tuple[int, ...] | None = None
    zero: int | None = None
    cp: int | None = None
    fp8: bool | None = None
    async_tp: bool | None = None
    step_boundary: str | None = None
    steps: int | None = None
    overlap_p2p: bool | None = None  # (the order of the fields is the order a refusal names them in)
    ep: int | None = None
    moe_imbalance: float | None = None
    expert_tp: int | None = None

    def given(self) -> list[str]:
        """Names of the options set (not None), in declaration order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]


@dataclass(frozen=True)
class ModelSetup:
    """Everything a model on a chip implies for one simulation."""

    model: ModelSpec
    chip: ChipSpec
    layout: Layout
    costs: CostModel
    boundary: StepBoundary | None = None  # None: default_boundary of the schedule
    steps: int = DEFAULT_STEPS


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def check_no_model_options(options: ModelOptions, hardware: str | None) -> None:
    """Model-only options without a model are a mistake worth naming."""
    given = options.given() + (["hardware"] if hardware is not None else [])
    if given:
        raise PipesimError(f"{_flag(given[0])} describes a real model; add --model NAME (see 'pipesim models')")


def model_setup(model: str | ModelSpec, hardware: str | ChipSpec | None, options: ModelOptions,
                shape: PipelineShape) -> ModelSetup:
    """The model, chip, layout and the CostModel in seconds for ``shape``.

    ``model`` and ``hardware`` are preset names, files, or specs already loaded (``hardware`` None: h100-sxm).
    """
    o = options
    spec = load_model(model) if isinstance(model, str) else model
    spec = spec.with_shape(o.seq_len, o.micro_batch_size)
    chip = hardware if isinstance(hardware, ChipSpec) else load_chip(hardware or DEFAULT_HARDWARE)
    if o.achievable_fraction is not None:
        chip = replace(chip, achievable_fraction=o.achievable_fraction)
    if o.distributed_optimizer and o.zero is not None and o.zero != 1:
        raise PipesimError(f"--distributed-optimizer is ZeRO-1, but --zero {o.zero} is given; keep one")
    split = StageSplitRequest(o.first_stage_layers, o.last_stage_layers,
                              tuple(o.stage_layers) if o.stage_layers is not None else None)
    stage_layers = None if split.is_default else resolve_stage_layers(  # per model slice (DualPipe: pp of them)
        spec.layers, shape.num_slices, split, model_name=f"model {spec.name}")
    boundary = StepBoundary(o.step_boundary) if o.step_boundary else None
    if o.steps is not None and boundary is StepBoundary.SYNC:
        raise PipesimError("--steps sets how many steps the post-validation steady state simulates, but "
                           "--step-boundary is sync; drop one")
    if o.param_bytes is not None and str(o.param_bytes) not in PARAM_BYTES:
        raise PipesimError(f"param_bytes={o.param_bytes!r}: choose {' or '.join(sorted(PARAM_BYTES))}")
    layout = Layout(
        # chunk_share: the v of the cost convention (1 under DualPipe, whose two copies model_copies counts)
        tp=o.tp or 1, dp=o.dp or 1, pp=shape.pp, chunks=shape.chunk_share, microbatches=shape.microbatches,
        model_copies=shape.pipelines,
        recompute=Recompute(o.recompute or "none"), sequence_parallel=bool(o.sequence_parallel),
        distributed_optimizer=bool(o.distributed_optimizer),
        attention=AttentionKernel(o.attention or "fused"),
        elementwise=ElementwiseKernels(o.elementwise or "fused"), loss=LossKernel(o.loss or "megatron"),
        grad_accumulation=GradAccumulation(o.grad_accumulation or "fused"),
        halve_causal_attention=bool(o.halve_causal_attention),
        param_bytes=PARAM_BYTES[str(o.param_bytes or DEFAULT_PARAM_BYTES)],
        stage_layers=stage_layers, zero=ZeroStage(o.zero or 0), cp=o.cp or 1,
        precision=Precision.FP8 if o.fp8 else Precision.BF16, async_tp=bool(o.async_tp),
        overlap_p2p=bool(o.overlap_p2p), ep=o.ep or 1, moe_imbalance=o.moe_imbalance or 1.0,
    )
    if o.expert_tp is not None and o.expert_tp != layout.tp:
        raise PipesimError(f"--expert-tp {o.expert_tp}: pipesim splits experts over tp like the dense MLP (expert "
                           f"tensor parallelism = --tp {layout.tp}, Megatron's default); a separate expert-tp degree "
                           "(MoE parallel folding) is not modelled: drop --expert-tp or set it to --tp")
    if layout.sequence_parallel and layout.tp == 1:
        raise PipesimError("--sequence-parallel shards along tp, but --tp is 1; add --tp N (N > 1) or drop it")
    return ModelSetup(spec, chip, layout, build_cost_model(spec, chip, layout, shape), boundary,
                      o.steps or DEFAULT_STEPS)


def boundary_of(setup: ModelSetup, result: SimulationResult) -> StepBoundary:
    return setup.boundary or default_boundary(result.program)


def steady_step_time(setup: ModelSetup, result: SimulationResult) -> float:
    """Seconds per step with steps back to back (:mod:`pipesim.analytic.steady_state`)."""
    return steady_state_step_time(result, boundary_of(setup, result), sync_latency(setup.layout, setup.chip),
                                  setup.steps)


def model_step_report(setup: ModelSetup, result: SimulationResult) -> StepReport:
    """Step time, tokens/s, MFU, bubble and per-rank GiB of ``result`` (render with ``report_text``/``to_dict``)."""
    return step_report(setup.model, setup.chip, setup.layout, result, steady_step_time(setup, result),
                       boundary_of(setup, result))
