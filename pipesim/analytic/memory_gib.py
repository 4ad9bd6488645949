"""Memory per pipeline rank in GiB: weights, gradients, optimizer state and the schedule's own activations.

Static part (per tp rank, for the stages the rank holds under the schedule's placement): parameters ×
:class:`~pipesim.analytic.layout.OptimizerBytes` (default 18 B = 2 BF16 weight + 4 FP32 gradient + 12 FP32
master/m/v, Megatron-LM's count; see ``OptimizerBytes`` for why not ZeRO's 16), with the 12 optimizer bytes
divided by dp under a distributed optimizer / ZeRO-1 (Rajbhandari et al. 2020; Megatron-LM's
``6 + 12/dp``). Mixture of experts: a rank holds ``E/ep`` of each MoE layer's routed experts (and 1/tp of
each), every dense weight in full (1/tp); the experts' ZeRO state is sharded over their own data-parallel
group, dp·cp/ep ranks (Megatron-Core's expert data parallelism), the dense weights' over dp·cp.

Activations: not a formula for "the first stage". Each stage's per-microbatch bytes
(:mod:`.activations`, Korthikanti et al. 2023 Table 2 per layer, plus embedding / logits on the stages that
have them) are handed to the simulator as ``activation_bytes``; the simulator replays the schedule and
reports the most bytes each rank holds at once. So a schedule that keeps more microbatches in flight on a
middle rank, or a last stage whose logits outweigh its share of layers, shows up where it happens.

Reserved beside allocated: the peaks above are what tensors hold (``torch.cuda.max_memory_allocated``); what the
caching allocator holds, the figure many frameworks print, is :func:`.allocator.reserved_peak` of it.

Pipeline buffers: what a runtime keeps of the tensors crossing stage boundaries beyond the activations (nothing
in Megatron's way; torch.distributed.pipelining's receive buffers, outputs and held sends: :mod:`.pipeline_buffers`,
``Layout.pipeline_buffers``), its own column.

Left out (add a margin): CUDA context and NCCL buffers (~1–3 GiB), temporary
buffers of the backward (e.g. the all-gathered input under sequence parallelism), Megatron's received P2P buffers
(each freed once read).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pipesim.analytic.activations import cp_backward_buffers, layer_activation_bytes, loss_transient_bytes
from pipesim.analytic.allocator import RESERVED_SHARE, RESERVED_SHARE_RANGE, reserved_peak
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.error_band import ErrorBand, features_of, may_not_fit, memory_band, run_traits
from pipesim.analytic.kernels import layer_parameter_tensors
from pipesim.analytic.layout import Fp8Params, Layout, Precision, Recompute, ZeroStage
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.params import largest_layer_params
from pipesim.analytic.pipeline_buffers import receive_buffer_bytes
from pipesim.analytic.to_costs import rank_end_params, rank_expert_params, rank_params
from pipesim.sim.simulator import SimulationResult

GIB = 2**30


@dataclass(frozen=True)
class RankMemory:
    """Peak memory of one pipeline rank (one tp rank of it), bytes."""

    rank: int
    stages: tuple[int, ...]
    params: float  # parameters held (per tp rank)
    weights: float
    grads: float
    optimizer: float
    activations: float  # simulated peak of stored activations
    in_flight: float  # simulated peak, in microbatches through one rank's share of the model
    # transient bytes on top of the stored activations: one layer's backward (backward_working_set) or, on a
    # rank holding a last stage, the loss's peak if larger (activations.loss_transient_bytes)
    working: float = 0.0
    # what the pipeline runtime keeps of the boundary tensors beyond the activations (pipeline_buffers): its receive
    # buffers, and what it held until the step's end at the peak; 0 for Megatron's way
    pipeline_buffers: float = 0.0

    @property
    def static(self) -> float:
        return self.weights + self.grads + self.optimizer

    @property
    def total(self) -> float:
        # Static memory is constant over the step, so the peak total is static + peak activations.
        return self.static + self.activations + self.working + self.pipeline_buffers

    def to_dict(self) -> dict:
        gib = {k: getattr(self, k) / GIB for k in ("weights", "grads", "optimizer", "activations", "working",
                                                   "pipeline_buffers", "total")}
        return {
            "rank": self.rank,
            "stages": list(self.stages),
            "params": self.params,
            "in_flight_microbatches": self.in_flight,
            **{f"{k}_gib": v for k, v in gib.items()},
        }


@dataclass(frozen=True)
class MemoryReport:
    ranks: tuple[RankMemory, ...]
    capacity_gib: float
    chip: str
    layout: Layout = field(default_factory=Layout)  # what the warnings suggest depends on what is on
    moe: bool = False  # a mixture-of-experts model (its routed activations: a regime of its own for the band)

    @property
    def peak(self) -> RankMemory:
        return max(self.ranks, key=lambda r: r.total)

    def reserved(self, rank: RankMemory) -> float:
        """What the caching allocator would hold at ``rank``'s allocated peak (``max_memory_reserved``)."""
        return reserved_peak(rank.total, self.capacity_gib * GIB)

    @property
    def over_capacity(self) -> list[RankMemory]:
        return [r for r in self.ranks if r.total > self.capacity_gib * GIB]

    @property
    def over_capacity_beyond_band(self) -> list[RankMemory]:
        """Ranks over the capacity by more than the memory band: a run like this cannot fit by pipesim's own
        measured error. A published run that ran and lands here is a miss of the memory model, or of the
        settings its row infers (``tests/test_published_runs.py`` lists each with why)."""
        margin = 1 + (self.band.relative or 0.0)
        return [r for r in self.ranks if r.total > self.capacity_gib * GIB * margin]

    @property
    def band(self) -> ErrorBand:
        """How far the peaks can be trusted: the error validation measured on published peak-memory rows, and
        whether any of them was a run like this one."""
        return memory_band(features_of(self.layout, self.moe),
                           run_traits(self.chip, self.layout).kinds(of_memory=True))

    @property
    def within_band_of_capacity(self) -> list[RankMemory]:
        """Ranks under the capacity by less than the memory band: they may not fit."""
        return [r for r in self.ranks if may_not_fit(r.total, self.capacity_gib * GIB, self.band)]

    def warnings(self) -> list[str]:
        fixes = ", ".join(remedies(self.layout, self.moe))
        over = [
            f"rank {r.rank} needs {r.total / GIB:.1f} GiB, more than the {self.capacity_gib:g} GiB of one "
            f"{self.chip}: {fixes}"
            for r in self.over_capacity
        ]
        close = [
            f"rank {r.rank} needs {r.total / GIB:.1f} GiB, within the memory band (± {self.band.relative:.0%}) of the "
            f"{self.capacity_gib:g} GiB of one {self.chip}: it may not fit; to be sure, {fixes}"
            for r in self.within_band_of_capacity
        ]
        return over + close

    def to_dict(self) -> dict:
        return {
            "capacity_gib": self.capacity_gib,
            "peak_rank": self.peak.rank,
            "peak_gib": self.peak.total / GIB,
            "peak_measure": "allocated",  # torch.cuda.max_memory_allocated
            "peak_band": self.band.to_dict(),
            # torch.cuda.max_memory_reserved: the allocated peak and the caching allocator's median share above it
            "peak_reserved_gib": self.reserved(self.peak) / GIB,
            "reserved_share": RESERVED_SHARE,
            "reserved_share_range": list(RESERVED_SHARE_RANGE),
            "ranks": [{**r.to_dict(), "reserved_gib": self.reserved(r) / GIB} for r in self.ranks],
            "warnings": self.warnings(),
        }


def remedies(layout: Layout, moe: bool = False) -> list[str]:
    """What would lower memory and is not already on (the warning used to suggest options already given); for a
    mixture-of-experts model (``moe``) first the expert parallelism, whose experts are most of its weights."""
    options = ["raise --tp/--pp"]
    ranks = layout.dp * layout.cp
    if moe and layout.ep < ranks:
        options.insert(0, f"raise --ep (now {layout.ep}: the experts split over up to dp·cp = {ranks} ranks)")
    elif moe and ranks == 1:
        options.insert(0, "add --dp with --ep (the experts split over the data-parallel ranks)")
    if layout.recompute is not Recompute.FULL:
        options.append("use --recompute " + ("full" if layout.recompute is Recompute.SELECTIVE else "selective/full"))
    elif layout.recompute_layers is not None:
        options.append("raise --recompute-layers (or drop it: every layer recomputed)")
    if layout.tp > 1 and not layout.sequence_parallel:
        options.append("add --sequence-parallel")
        if layout.recompute is Recompute.FULL and not layout.distribute_saved_activations:
            options[-1] += " (or --distribute-saved-activations)"
    if layout.sharding < ZeroStage.PARAMETERS:
        options.append("add --distributed-optimizer" if layout.sharding is ZeroStage.NONE else "raise --zero")
        if layout.shards == 1:
            options[-1] += " with dp·cp > 1"
    return options


# DeepSpeed's 2021 ZeRO-3 (v0.4.0, deepspeed/runtime/zero/constants.py and stage3.py; ``--zero-collectives
# per-tensor``) gathers a submodule's parameters in its forward hook and releases them in the post-forward hook, and
# prefetches up to ``prefetch_bucket_size`` elements of the next ones (default 5·10⁷); it reduce-scatters gradients
# once ``reduce_bucket_size`` elements of them are waiting (default 5·10⁸; ZeRO-3's ``contiguous_gradients`` is off
# by default, so they wait as the parameters' own ``.grad``), a larger tensor on its own.
DEEPSPEED_PREFETCH_ELEMENTS = 50_000_000
DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000


def per_tensor_working_sets(model: ModelSpec, layout: Layout) -> tuple[float, float]:
    """Gathered parameters and waiting gradients, in elements per rank, that DeepSpeed's 2021 ZeRO-3 holds at its
    peak beside the shards: the largest parameter tensor with the prefetch bucket after it, and the reduce bucket
    (or the largest tensor, where one is larger). Where Megatron-style layers hold their weights in a few large
    matrices this is one matrix, not FSDP's two whole layers."""
    largest = max(max(layer_parameter_tensors(model, layout, kind)) for kind in set(model.layer_kinds()))
    return largest + DEEPSPEED_PREFETCH_ELEMENTS, max(largest, DEEPSPEED_REDUCE_BUCKET_ELEMENTS)


def static_bytes(
    params: float, layout: Layout, model: ModelSpec | None = None, expert_params: float = 0.0, end_params: float = 0.0,
    fp8_weight_transpose: bool = True,
) -> tuple[float, float, float]:
    """Weights, gradients and optimizer state for ``params`` parameters on one rank.

    ZeRO (Rajbhandari et al. 2020, §5): stage 1 divides the optimizer state by the data-parallel size
    ``n = dp·cp``, stage 2 the gradients too, stage 3 the weights too — plus, without pipelining, the
    unsharded weights and gradients of the layer being computed and the one prefetched (two layers; Zhao et
    al. 2023, PyTorch FSDP §3.2). With pipelining a stage's weights stay gathered through the step (what
    torchtitan's FSDP + PP does), so only the optimizer state is divided. FSDP's ZeRO-2 (SHARD_GRAD_OP,
    ``--zero-collectives per-layer``) keeps each layer's gathered weights from its forward to its backward, so
    at the peak the whole weights, plus the two layers' unsharded gradients. FP8 (Transformer Engine) keeps an
    FP8 copy of every weight of its FP8 linears beside the BF16 one: +1 byte per parameter, except the
    ``end_params`` of ``params`` (the embedding and the output layer, which Transformer Engine leaves in BF16);
    NVFP4 two copies (row- and column-wise, each with its scales), +1.125 bytes.
    With FP8 parameters (:class:`~pipesim.analytic.layout.Fp8Params`) the FP8 data *is* the linears' weight: 2
    bytes per parameter with its transpose kept (Transformer Engine 2.x), 1 without, in place of 2 + 1; the
    transpose only on chips whose FP8 GEMMs need it (``fp8_weight_transpose``, the chip's field: not Blackwell).
    DeepSpeed's 2021 ZeRO-3 (``--zero-collectives per-tensor``) holds a parameter tensor at a time instead of
    two layers (:func:`per_tensor_working_sets`).
    Hybrid FSDP's outer optimizer sharding (:attr:`~pipesim.analytic.layout.Layout.outer_optimizer_sharding`)
    divides the optimizer state over every dp·cp rank, the weights and gradients over the shard group.
    ``expert_params`` of ``params`` are routed experts, sharded over dp·cp/ep instead of dp·cp. torchao's FSDP
    float8 all-gather (:attr:`~pipesim.analytic.layout.Layout.fp8_all_gather`) gathers and holds the linears'
    weights in one byte.
    """
    b = layout.param_bytes
    zero = layout.sharding
    dense = params - expert_params

    def sharded(per_param: float) -> float:
        """``per_param`` bytes of every parameter, divided over each part's ZeRO group."""
        return dense * per_param / layout.shards + expert_params * per_param / layout.expert_shards

    weights, grads, optimizer = params * b.weights, params * b.grads, params * b.optimizer
    if zero >= ZeroStage.OPTIMIZER:  # over every dp·cp rank under hybrid FSDP's outer optimizer sharding
        optimizer = dense * b.optimizer / layout.optimizer_shards + expert_params * b.optimizer / layout.expert_shards
    if zero >= ZeroStage.GRADIENTS and layout.pp == 1:
        grads = sharded(b.grads)
    if layout.collectives_per_tensor and model is not None:  # DeepSpeed's 2021 ZeRO-3: a tensor at a time
        gathered, waiting = per_tensor_working_sets(model, layout)
        weights = sharded(b.weights) + gathered * layout.gathered_weight_bytes
        grads += waiting * b.grads
    elif layout.gathers_per_layer:  # ZeRO-2 per layer (SHARD_GRAD_OP) holds every gathered layer until its backward
        unsharded = 2 * largest_layer_params(model) / layout.tp if model is not None else 0.0
        if layout.regathers_for_backward:
            weights = sharded(b.weights) + unsharded * layout.gathered_weight_bytes
        grads += unsharded * b.grads
    elif layout.fp8_all_gather:  # FSDP under pipelining holds its stage's gathered weights, the linears' in FP8
        weights -= (params - end_params) * (b.weights - layout.gathered_weight_bytes)
    if layout.keeps_quantized_copies:  # torchao's FP8 linears cast their weights at each GEMM, keeping no copy
        linears = params - end_params  # what Transformer Engine quantizes (norm weights: < 0.01 % of them)
        # the cached quantized copy: FP8 one byte; NVFP4 a row-wise and a column-wise copy (block scales run along
        # each GEMM's inner dimension, so the dgrad's transposed use is quantized apart), 1.125 bytes
        copy = 1.0 if layout.precision is Precision.FP8 else 2 * layout.precision.element_bytes
        if layout.fp8_params is not Fp8Params.OFF:  # a distributed optimizer (never ZeRO-3): weights not sharded
            kept = layout.fp8_params.weight_bytes if fp8_weight_transpose else Fp8Params.ROWWISE.weight_bytes
            weights -= linears * (b.weights - kept)
        else:  # the quantized copy is sharded like the BF16 weights under ZeRO-3 without pipelining
            weights += (sharded(copy) - copy * end_params / layout.shards if layout.regathers_for_backward
                        else copy * linears)
    return weights, grads, optimizer


def fsdp2_layer_gradients(model: ModelSpec, layout: Layout) -> float:
    """Bytes of one layer's gradients in the weights' dtype that PyTorch's FSDP2 holds during that layer's
    backward under pipelining, beside the FP32 accumulators the static gradients count. A pipelined stage keeps
    its weights gathered and syncs its gradients once a step (``set_requires_gradient_sync(False)`` until the last
    microbatch), so autograd writes each microbatch's BF16 gradients onto the layer's unsharded parameters and the
    layer's post-backward hook adds them into the FP32 ``unsharded_accumulated_grad``
    (``accumulate_unsharded_grad_if_needed``, ``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``): the largest
    layer's ``params/tp`` at the weights' bytes. 0 otherwise (without pipelining the per-layer reduce-scatter's
    buffers are :func:`static_bytes`' two layers)."""
    if not layout.accumulates_unsharded_grads:
        return 0.0
    return largest_layer_params(model) / layout.tp * layout.param_bytes.weights


def backward_working_set(model: ModelSpec, layout: Layout) -> float:
    """Transient bytes while one layer runs its backward, on top of the simulated peak (once per rank).

    Autograd gives each saved tensor of the layer a gradient of the same size before the saved tensor is
    freed, so about one layer's full activations ``A`` (what the layer saves without recomputation) exist
    twice at the peak: the saved copy, and the gradients. What the schedule already holds is the layer's stored
    activations ``S``; recomputation re-materialises the rest of ``A`` inside the backward (Korthikanti et al.
    2023 §5: full recomputation re-runs the layer's forward from its stored input; selective re-runs the
    attention core). So the working set is ``A`` (gradients) plus ``A − S`` (recomputed): ``A`` without
    recomputation, ``2A − S`` under full recomputation, ``A + scores`` under selective. PyTorch's
    context-parallel attention holds its exchange's buffers beside them (:func:`.activations.cp_backward_buffers`),
    and FSDP2 under pipelining the layer's BF16 weight gradients (:func:`fsdp2_layer_gradients`).
    """
    kinds = [kind for kind in LayerKind if kind in model.layer_kinds()]
    return (
        max(
            2 * layer_activation_bytes(model, replace(layout, recompute=Recompute.NONE, recompute_layers=None,
                                                         distribute_saved_activations=False), kind)
            - layer_activation_bytes(model, layout, kind)
            for kind in kinds
        )
        / layout.cp
        + cp_backward_buffers(model, layout)
        + fsdp2_layer_gradients(model, layout)
    )


def memory_report(model: ModelSpec, chip: ChipSpec, layout: Layout, result: SimulationResult) -> MemoryReport:
    """Per-rank memory from the simulated schedule ``result`` (built from :func:`build_cost_model`'s costs)."""
    shape = result.program.shape
    peaks = result.memory.peak_bytes
    sent = result.memory.peak_held_bytes or (0.0,) * shape.pp  # held until the step's end, at the peak
    if peaks is None:
        raise ValueError("the cost model has no activation_bytes; build it with build_cost_model")
    params = rank_params(model, layout, shape)
    experts = rank_expert_params(model, layout, shape)
    ends = rank_end_params(model, layout, shape)
    working = backward_working_set(model, layout)
    # The loss's transient sits on the ranks holding a pipeline's last stage, while no layer runs its backward
    loss_working = max(working, loss_transient_bytes(model, layout))
    ranks = []
    static: dict[tuple[float, float, float], tuple[float, float, float]] = {}  # an even split's ranks hold the same
    for r in range(shape.pp):
        key = (params[r], experts[r], ends[r])
        held = static.get(key)
        if held is None:
            held = static[key] = static_bytes(params[r], layout, model, experts[r], ends[r],
                                              chip.fp8_weight_transpose)
        weights, grads, optimizer = held
        stages = tuple(shape.stage(r, c) for c in range(shape.chunks))
        transient = loss_working if any(shape.is_last_stage(stage) for stage in stages) else working
        ranks.append(
            RankMemory(
                r, stages, params[r], weights, grads, optimizer, peaks[r], result.memory.peak_activations[r],
                transient, receive_buffer_bytes(model, layout, shape, r) + sent[r],
            )
        )
    return MemoryReport(tuple(ranks), chip.memory_gib, chip.name, layout, moe=model.is_moe)
