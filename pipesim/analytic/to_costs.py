"""A CostModel in seconds from a model, a chip and a layout: every schedule gets real-unit timelines.

Per stage (its layer count from :mod:`.stage_split`; stage 0 adds the embedding, the last the LM head and loss):

- ``forward``, ``backward_input``, ``backward_weight``: per-operation times from the shapes
  (:mod:`.kernels`: GEMM roofline with wave quantization, fused attention, element-wise bytes over HBM
  bandwidth), or FLOPs / (tp · peak · ``achievable_fraction``) when that override is set; plus the exposed
  TP collectives (all of them, or with ``async_tp`` what the GEMMs do not hide), the ring-attention P2P of
  context parallelism beyond the ring step's attention each hop overlaps, and ZeRO-3's per-layer gathers
  beyond the compute they overlap; for mixture-of-experts layers the expert-parallel all-to-all (dispatch and
  combine, forward and backward), kept also as ``a2a_forward``/``a2a_backward`` (the part an overlapped pair of
  a forward and a backward may hide). Recomputation runs inside the input backward; ``backward =
  backward_input + backward_weight``;
- values per rank's share of the model, pipesim's one convention (:mod:`pipesim.sim.costs`): a stage is one
  of the rank's v chunks, so its times and ``activation_bytes`` are multiplied by v and the simulator takes
  1/v of them back;
- ``activation = 1`` (one microbatch through a rank's share) and ``activation_bytes`` from
  :mod:`.activations` (divided by cp), so the simulator's memory profile is in bytes;
  ``weight_grad_activation`` is the share of linear-layer inputs (what the zero-bubble W pass keeps);
- ``reduce_grad``: the stage's data-parallel gradient sync; ``optimizer_step``: Adam on the rank with the most
  parameters plus the sharded optimizer's parameter all-gather;
- ``p2p_bytes`` per tp rank, with the P2P link's latency and bandwidth; blocking sends (the default) put the
  wire time and the device synchronisation after each call (``p2p_sync_overhead``) into the sender's pass.

Not modelled: data loading, kernel-launch gaps within a pass, stragglers, DP sync overlapped with the
backward.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from pipesim.analytic.activations import (
    embedding_activation_bytes,
    head_input_bytes,
    layer_activation_bytes,
    linear_input_bytes,
    loss_logit_bytes,
    output_activation_bytes,
)
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.comm import (
    TP_OVERLAP_SM_VOLUME,
    LayerComm,
    boundary_bandwidths,
    chunked_overlap,
    column_input_regather,
    contended_overlap,
    cp_exposed,
    dgrad_hidden_by_wgrad,
    dp_grad_sync,
    embedding_grad_sum,
    fsdp_layer_comm,
    kernel_work_chip,
    local_shard_hidden,
    logits_gather_time,
    mirror_grad_sum,
    moe_layer_a2a,
    optimizer_step_time,
    p2p_bandwidth,
    per_tensor_host_time,
    per_tensor_layer_comm,
    prefetched_overlap,
    replica_weight_gather,
    sharded_collective,
    stage_output_bytes,
    tp_dgrad_collective,
    tp_layer_comm,
)
from pipesim.analytic.flops import layer_flops, lm_head_flops, mtp_projection_flops
from pipesim.analytic.grad_buckets import bucket_capacity, last_bucket_share
from pipesim.analytic.kernels import (
    EMBEDDING_KERNELS,
    HeadTimes,
    PassKernels,
    PassTimes,
    attention_core_times,
    column_parallel_input_grads,
    column_parallel_local_forwards,
    column_parallel_weight_grads,
    grad_accumulation_time,
    head_kernels,
    head_part_times,
    layer_kernel_counts,
    layer_parameter_tensors,
    layer_times,
    linear_times,
    row_parallel_local_input_grads,
    shared_expert_times,
    step_end_passes_time,
    weight_cast_time,
)
from pipesim.analytic.layout import CpComm, HeadParts, Layout, Recompute, ZeroStage
from pipesim.analytic.measured import CollectiveOp
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.mtp import (
    mtp_embedding_copy,
    mtp_expert_params,
    mtp_head_times,
    mtp_kind,
    mtp_module_activation_bytes,
    mtp_module_params,
    mtp_module_times,
)
from pipesim.analytic.params import (
    embedding_params,
    layer_expert_params,
    layer_params,
    output_params,
    stage_expert_params,
    stage_params,
)
from pipesim.analytic.pipeline_buffers import with_runtime_buffers
from pipesim.analytic.slowest_gpu import slowest_gpu_factor
from pipesim.analytic.stage_split import resolve_stage_layers
from pipesim.errors import PipesimError
from pipesim.sim.costs import COST_RANGE, CostModel, StageCosts, TimeUnit


def stage_layer_counts(model: ModelSpec, layout: Layout) -> tuple[int, ...]:
    """Layers on each stage: the layout's explicit split, or an even one (refused, with a fix, if uneven)."""
    if layout.stage_layers is not None:
        if sum(layout.stage_layers) != model.layers:
            raise PipesimError(
                f"the stage split {list(layout.stage_layers)} sums to {sum(layout.stage_layers)}, "
                f"but {model.name} has {model.layers} layers"
            )
        return layout.stage_layers
    return resolve_stage_layers(model.layers, layout.num_stages, model_name=f"model {model.name}")


def stage_kind_counts(model: ModelSpec, layout: Layout, stage: int) -> dict[LayerKind, int]:
    """How many dense and MoE layers ``stage`` holds (stages take consecutive layers, stage 0 first)."""
    return dict(_kind_counts_per_stage(model, stage_layer_counts(model, layout))[stage])


@lru_cache(maxsize=1024)
def _kind_counts_per_stage(model: ModelSpec, counts: tuple[int, ...]) -> tuple[tuple[tuple[LayerKind, int], ...], ...]:
    """Per stage, (kind, layers of that kind) in LayerKind order. Cached: the planner asks for the same split
    of one model tens of thousands of times, and walking its layers one by one dominated its search."""
    kinds = model.layer_kinds()
    out = []
    first = 0
    for n in counts:
        own = kinds[first : first + n]
        out.append(tuple((kind, own.count(kind)) for kind in LayerKind if kind in own))
        first += n
    return tuple(out)


LayerGroup = tuple[LayerKind, int, Layout]  # (kind, layers of that kind, the layout they run under)


@lru_cache(maxsize=4096)
def stage_last_bucket(model: ModelSpec, layout: Layout, stage: int) -> float:
    """The share of ``stage``'s parameters in the data-parallel bucket its backward fills last
    (:func:`~pipesim.analytic.grad_buckets.last_bucket_share`); 0 where no overlapped reduce or gather buckets
    them (:attr:`~pipesim.analytic.layout.Layout.buckets_matter`)."""
    if not layout.buckets_matter:
        return 0.0
    counts = stage_layer_counts(model, layout)
    first = sum(counts[:stage])
    kinds = tuple(model.layer_kind(first + i) for i in range(counts[stage]))
    head = layout.head_parts(stage).projection
    # what the share reads (the tensors' shapes per rank, the cut): the planner asks for it per stage of every
    # layout it builds a cost model for, and a mixture-of-experts stage holds thousands of expert tensors
    key = (model, stage == 0, kinds, head, layout.tp, layout.ep, layout.etp, layout.mlp_up, layout.num_stages == 1,
           layout.grad_buckets, bucket_capacity(model, layout, stage))
    share = _LAST_BUCKETS.get(key)
    if share is None:
        if len(_LAST_BUCKETS) >= _BREAKDOWNS_KEPT:
            del _LAST_BUCKETS[next(iter(_LAST_BUCKETS))]
        share = _LAST_BUCKETS[key] = last_bucket_share(model, layout, stage, kinds, head)
    return share


_LAST_BUCKETS: dict[tuple, float] = {}


def stage_layer_groups(model: ModelSpec, layout: Layout, stage: int) -> tuple[LayerGroup, ...]:
    """The stage's layers by kind and by the recomputation they run under. Under ``layout.recompute_layers``
    (Megatron's block method) the stage's first N layers are recomputed in full and the others keep their
    activations: two groups, each under a layout of its own (``recompute_layers`` cleared, so every per-layer
    model reads it as it reads any layout); otherwise one group per kind, under ``layout``. The modules' slice
    (:attr:`Layout.mtp_slice`, the loss's unless named) adds the multi-token-prediction modules' layers
    (:mod:`.mtp`), under the layout's own policy, last."""
    return _model_layer_groups(model, layout, stage) + _mtp_layer_groups(model, layout, stage)


def _model_layer_groups(model: ModelSpec, layout: Layout, stage: int) -> tuple[LayerGroup, ...]:
    counts = stage_layer_counts(model, layout)
    n = layout.recompute_layers
    if n is None or n >= counts[stage]:
        whole = layout if n is None else replace(layout, recompute_layers=None)
        return tuple((kind, count, whole) for kind, count in _kind_counts_per_stage(model, counts)[stage])
    first = sum(counts[:stage])
    kinds = model.layer_kinds()
    recomputed, kept = kinds[first : first + n], kinds[first + n : first + counts[stage]]
    full = replace(layout, recompute_layers=None)
    none = replace(layout, recompute=Recompute.NONE, recompute_layers=None, distribute_saved_activations=False)
    return (tuple((kind, recomputed.count(kind), full) for kind in LayerKind if kind in recomputed)
            + tuple((kind, kept.count(kind), none) for kind in LayerKind if kind in kept))


def _mtp_layer_groups(model: ModelSpec, layout: Layout, stage: int) -> tuple[LayerGroup, ...]:
    if not model.mtp_layers or stage != layout.mtp_slice:
        return ()
    own = layout if layout.recompute_layers is None else replace(layout, recompute_layers=None)
    return ((mtp_kind(model), model.mtp_layers, own),)


def recomputed_layers(model: ModelSpec, layout: Layout) -> dict[LayerKind, int] | None:
    """Per kind, the layers a microbatch recomputes through the whole model under ``recompute_layers``; None
    when every layer runs under the layout's own recomputation."""
    if layout.recompute_layers is None:
        return None
    counts: dict[LayerKind, int] = dict.fromkeys(LayerKind, 0)
    for stage in range(layout.num_stages):
        for kind, n, group in _model_layer_groups(model, layout, stage):
            if group.recompute is Recompute.FULL:
                counts[kind] += n
    return counts


def stage_first_layer(model: ModelSpec, layout: Layout, stage: int) -> int:
    return sum(stage_layer_counts(model, layout)[:stage])


def check_layout(model: ModelSpec, layout: Layout, chip: ChipSpec | None = None) -> None:
    """Refuse splits and combinations that do not exist, naming what would work."""
    stage_layer_counts(model, layout)
    if model.mtp_layers and layout.stages_after_head:
        raise PipesimError(f"model {model.name}'s multi-token-prediction modules run beside the LM head and its loss "
                           "(Megatron-Core's); a loss on stages of its own (--stages-after-head) is nanotron's, which "
                           "has no such modules: drop one")
    if layout.mtp_stage is not None:
        counts = stage_layer_counts(model, layout)
        last_layer = max((s for s, n in enumerate(counts) if n), default=0)
        if not model.mtp_layers or layout.mtp_stage < last_layer:
            raise PipesimError(f"the multi-token-prediction modules' stage {layout.mtp_stage}: " + (
                f"model {model.name} has none (mtp_layers 0)" if not model.mtp_layers else
                f"they follow the last layer, on stage {last_layer}; put them there or later"))
    t = layout.tp
    if model.heads % t:
        options = [d for d in range(1, model.heads + 1) if model.heads % d == 0 and d <= 64]
        raise PipesimError(
            f"model {model.name} has {model.heads} attention heads, which --tp {t} does not divide; "
            f"use --tp in {options}"
        )
    if model.kv_heads % t:
        options = [d for d in range(1, model.kv_heads + 1) if model.kv_heads % d == 0]
        raise PipesimError(
            f"model {model.name} has {model.kv_heads} KV heads (GQA), which --tp {t} does not "
            f"divide (each tp rank needs whole KV groups); use --tp in {options}"
        )
    if model.ffn_hidden % t:
        raise PipesimError(f"model {model.name}: ffn_hidden={model.ffn_hidden} is not divisible by --tp {t}")
    if model.vocab % t:
        raise PipesimError(
            f"model {model.name}: vocab={model.vocab} is not divisible by --tp {t} "
            "(the output layer is vocabulary-parallel); pad the vocabulary in the model file"
        )
    cp = layout.cp
    if model.attention_chunk and model.local_attention_layers and not layout.attention.fused:
        raise PipesimError(f"model {model.name}'s chunked attention under --attention {layout.attention.value} is not "
                           "modelled (the unfused kernel's scores per chunk are not counted); use a fused attention")
    if cp > 1 and model.local_attention_layers:
        raise PipesimError(f"model {model.name}'s attention in {model.local_attention_kind} under --cp {cp} is not "
                           "modelled (each context-parallel rank's share of them depends on the ring's chunks); use "
                           "--cp 1")
    if cp > 1 and model.seq_len % (2 * cp):
        fits = [c for c in range(2, min(model.seq_len // 2, 64) + 1) if model.seq_len % (2 * c) == 0]
        raise PipesimError(
            f"--cp {cp} splits each sequence into 2·cp = {2 * cp} load-balanced chunks, but "
            f"--seq-len {model.seq_len} is not divisible by {2 * cp}; use a --cp whose 2·cp divides it"
            + (f" ({', '.join(map(str, fits[:6]))}{', …' if len(fits) > 6 else ''})" if fits else "")
            + " or a --seq-len that 2·cp divides")
    if cp > 1 and layout.cp_comm.all_to_all:
        a = layout.cp_a2a_ranks
        flag = f"--cp {cp}" if layout.cp_comm is CpComm.A2A else f"the all-to-all groups' {a}"
        for what, heads in (("attention heads", model.heads), ("KV heads", model.kv_heads)):
            if (heads // t) % a:
                raise PipesimError(
                    f"--cp-comm-type {layout.cp_comm.value} splits each tp rank's heads over the all-to-all ranks, "
                    f"but model {model.name}'s {heads} {what} over --tp {t} are {heads // t}, which {flag} does not "
                    "divide; use --cp-comm-type p2p or allgather, or sizes that divide them")
    if layout.sharding is ZeroStage.GRADIENTS and layout.pp > 1:
        raise PipesimError(
            "--zero 2 shards gradients that every pipeline microbatch accumulates into, which "
            "no framework supports with --pp > 1 (DeepSpeed refuses it); use --zero 1 or --zero 3"
        )
    _check_moe_layout(model, layout)
    if chip is not None:
        chip.peak_for(layout.precision)  # FP8 on a chip without it: one clear line


def _check_moe_layout(model: ModelSpec, layout: Layout) -> None:
    if not model.is_moe:
        if layout.ep > 1:
            raise PipesimError(
                f"--ep {layout.ep} shards mixture-of-experts layers, but model {model.name} is dense "
                "(experts: 0); drop --ep or use a MoE model (pipesim models)"
            )
        if layout.moe_imbalance != 1.0:
            raise PipesimError(f"--moe-imbalance describes routing, but model {model.name} is dense; drop it")
        return
    if model.experts % layout.ep:
        options = [d for d in range(1, model.experts + 1) if model.experts % d == 0]
        raise PipesimError(
            f"model {model.name} has {model.experts} experts per layer, which --ep {layout.ep} does "
            f"not divide (each rank holds whole experts); use --ep in {options}"
        )
    for key, t, flag in (("expert_ffn_hidden", layout.etp, "the expert tensor parallelism"),
                         ("shared_expert_ffn_hidden", layout.tp, "--tp")):
        if getattr(model, key) % t:
            raise PipesimError(
                f"model {model.name}: {key}={getattr(model, key)} is not divisible by {flag} ({t}), which splits it; "
                "change the tp degree"
            )


@dataclass(frozen=True)
class StageBreakdown:
    """Per-stage quantities the report and memory model reuse."""

    layers: int
    params: float  # per tp rank (the routed experts' also divided by ep)
    activation_bytes: float  # per microbatch, per tp (and cp) rank
    expert_params: float = 0.0  # the routed experts' part of ``params`` (per etp·ep rank)
    # the embedding's and the output layer's part of ``params`` (per tp rank): what Transformer Engine does not
    # run in FP8, so an FP8 run keeps no FP8 copy of them
    end_params: float = 0.0


def stage_breakdown(model: ModelSpec, layout: Layout, stage: int) -> StageBreakdown:
    return stage_breakdowns(model, layout)[stage]


def stage_breakdowns(model: ModelSpec, layout: Layout) -> tuple[StageBreakdown, ...]:
    """:class:`StageBreakdown` of every stage. Cached by what they depend on (:func:`_breakdowns_key`): a cost
    model, the optimizer step and the memory report each read every stage's parameters, and the planner asks
    for tens of thousands of layouts that differ only in dp, microbatches or the ZeRO stage."""
    kept = layout.__dict__.get("_breakdowns")  # this layout's, kept beside its fields: asked ~14 times a layout
    if kept is not None and kept[0] is model:
        return kept[1]
    key = _breakdowns_key(model, layout)
    hit = _BREAKDOWNS.get(key)
    if hit is None:
        if len(_BREAKDOWNS) >= _BREAKDOWNS_KEPT:
            del _BREAKDOWNS[next(iter(_BREAKDOWNS))]
        hit = _BREAKDOWNS[key] = _stage_breakdowns(model, layout)
    layout.__dict__["_breakdowns"] = (model, hit)
    return hit


# The layout fields a stage's layers, parameters and activation bytes read (stage_layer_counts, params.py,
# activations.py); tests/test_layer_costs_key.py holds cached and fresh cost models equal over plan spaces.
_BREAKDOWNS: dict[tuple, tuple[StageBreakdown, ...]] = {}
_BREAKDOWNS_KEPT = 4096


def _breakdowns_key(model: ModelSpec, layout: Layout) -> tuple:
    return (
        model,
        layout.num_stages,
        layout.stage_layers,
        layout.stages_after_head,  # where the LM head's parameters and the loss's logits sit
        layout.mtp_stage,  # where the multi-token-prediction modules sit
        layout.tp,
        layout.cp,
        layout.ep,
        layout.expert_tp,  # MoE parallel folding: whole experts, a rank's own tokens
        layout.sequence_parallel,
        layout.recompute,
        layout.recomputed_modules,  # what a selective recomputation keeps (activations.layer_activation_bytes)
        layout.recompute_layers,
        layout.distribute_saved_activations,  # a recomputed layer's input kept split over tp
        layout.attention,
        layout.kv_repeated,  # the attention kernel keeps K and V as it reads them, repeated to every query head
        layout.elementwise,  # eager modules keep more activations (activations._eager_kept)
        layout.column_input,  # --column-input saved keeps the gathered inputs, the LM head's under any recompute
        layout.loss,  # what the last stage keeps of the logits for the loss's backward (activations.loss_logit_bytes)
        layout.moe_imbalance,
        layout.precision,  # FP8 linears keep their inputs in one byte (activations.linear_input_element_bytes)
        layout.fp8_linears,  # ... Transformer Engine's; torchao's keep them in BF16
    )


def _stage_breakdowns(model: ModelSpec, layout: Layout) -> tuple[StageBreakdown, ...]:
    stages = layout.num_stages
    counts = stage_layer_counts(model, layout)
    activation: dict[tuple[LayerKind, Layout], float] = {}  # one layer's bytes by kind and its group's layout
    out = []
    first = 0
    for stage, layers in enumerate(counts):
        act = 0.0
        for kind, n, group in stage_layer_groups(model, layout, stage):
            one = activation.get((kind, group))
            if one is None:
                one = activation[kind, group] = layer_activation_bytes(model, group, kind)
            act += n * one
        if stage == 0:
            act += embedding_activation_bytes(model, layout)
        end = layout.head_parts(stage)
        if end.projection:
            act += head_input_bytes(model, layout)
        if end.loss:  # the cast between (nanotron's own stage, stages_after_head 2) keeps nothing for its backward
            act += loss_logit_bytes(model, layout)
            act += model.mtp_layers * output_activation_bytes(model, layout)  # each module's pass through the head
        # Every parameter, embeddings and norms included, is counted as sharded by tp (Megatron-LM's formula
        # does the same; replicated norm weights are < 0.01 % of a layer).
        total = stage_params(model, stage, stages, layers, first, layout.head_stage)
        experts = stage_expert_params(model, stage, stages, layers, first)
        ends = (embedding_params(model) if stage == 0 else 0) + (
            output_params(model, stages) if end.projection else 0)
        if model.mtp_layers and stage == layout.mtp_slice:  # the modules (their layers' activations: the groups)
            total += mtp_module_params(model) + mtp_embedding_copy(model, layout)
            experts += mtp_expert_params(model)
            ends += mtp_embedding_copy(model, layout)
            act += mtp_module_activation_bytes(model, layout)
        per_rank_experts = experts / (layout.etp * layout.ep)
        out.append(
            StageBreakdown(layers, (total - experts) / layout.tp + per_rank_experts, act / layout.cp, per_rank_experts,
                           ends / layout.tp)
        )
        first += layers
    return tuple(out)


@dataclass(frozen=True)
class StageTimeParts:
    """One microbatch through one stage (one chunk), seconds, by what the time is spent on."""

    compute: float  # the passes' kernels, recomputation included
    exposed_comm: float  # TP collectives, ring attention and ZeRO-3 gathers that compute does not hide
    p2p_wire: float  # blocking sends' transfer time (0 with overlap_p2p: the links carry it)
    p2p_sync: float  # the device synchronisation after each blocking P2P call
    a2a: float = 0.0  # expert-parallel all-to-all, forward and backward (inside the passes; an overlapped pair
    #                   of a forward and a backward may hide it)
    host_wait: float = 0.0  # the device waiting for the host to issue small kernels (ChipSpec.host_kernel_overhead)
    # One microbatch's forward and (fused) backward pass as the cost model runs them: what an overlapped parameter
    # gather and gradient reduce hide behind.
    forward_pass: float = 0.0
    backward_pass: float = 0.0


Layers = dict  # LayerKind → PassTimes (or LayerComm): one value per kind of layer the model has


def _compute_times(model: ModelSpec, chip: ChipSpec,
                   layout: Layout) -> tuple[Layers, HeadTimes, tuple[PassTimes, PassTimes]]:
    """One layer of each kind, the head and the multi-token-prediction modules' parts beyond their layers:
    per-operation times, or FLOPs at one achievable fraction when set (the loss, memory-bound, then costs
    nothing)."""
    kinds = [kind for kind in LayerKind if kind in model.layer_kinds()]
    if chip.achievable_fraction is None:
        return ({k: layer_times(model, layout, chip, k) for k in kinds}, head_part_times(model, layout, chip),
                (mtp_module_times(model, layout, chip), mtp_head_times(model, layout, chip)))
    rate = chip.peak_for(layout.precision) * chip.achievable_fraction * layout.tp * layout.cp
    h = lm_head_flops(model)
    layers = {}
    for kind in kinds:
        f = layer_flops(model, layout, kind)
        layers[kind] = PassTimes(
            f.forward / rate, f.backward_input / rate, f.backward_weight / rate, f.recompute / rate
        )
    head = PassTimes(h.forward / rate, h.backward_input / rate, h.backward_weight / rate)
    nothing = PassTimes(0.0, 0.0, 0.0)
    m = mtp_projection_flops(model)
    return (layers, HeadTimes(head, nothing, nothing, head),
            (PassTimes(m.forward / rate, m.backward_input / rate, m.backward_weight / rate),
             head.scaled(model.mtp_layers)))


def _layer_comm(
    model: ModelSpec, chip: ChipSpec, layout: Layout, layer: PassTimes, kind: LayerKind = LayerKind.DENSE
) -> LayerComm:
    """Exposed communication of one layer per microbatch: TP collectives, CP ring, ZeRO-3 gathers (the MoE
    all-to-all is kept apart: :func:`_layer_a2a`)."""
    tp = tp_layer_comm(model, layout, chip, kind)
    tokens = model.micro_batch * model.seq_len // layout.cp
    if layout.hides_tp_dgrad:
        # Megatron-LM and Transformer Engine issue each column-parallel linear's input-gradient collective
        # asynchronously and compute its weight gradient meanwhile: a fused backward hides that much of it.
        weight_grads = column_parallel_weight_grads(model, layout, chip, tokens, kind)
        hidden = dgrad_hidden_by_wgrad(tp_dgrad_collective(model, layout, chip), weight_grads, chip)
        tp = LayerComm(tp.forward, tp.backward, hidden)
    if layout.async_tp:
        # Async TP (Wang et al. 2023, "Overlap Communication with Dependent Computation via Decomposition"):
        # each collective is cut into tp chunks run beside the GEMM that consumes or produces it; the
        # first chunk cannot overlap, and the reduce-scatter half takes SMs from the GEMMs beside it.
        gemms = linear_times(model, layout, chip, tokens, kind)
        share = chip.comm_sm_share * TP_OVERLAP_SM_VOLUME
        tp = LayerComm(
            chunked_overlap(tp.forward, gemms.forward, layout.tp, share),
            chunked_overlap(tp.backward, gemms.backward_input, layout.tp, share),
        )
    elif layout.overlap_tp_local_shard:
        # nanotron's asynchronous TP: each gather beside the GEMM of the rank's own shard, the rest waited for
        hidden = local_shard_hidden(model, layout, chip,
                                    column_parallel_local_forwards(model, layout, chip, tokens, kind),
                                    row_parallel_local_input_grads(model, layout, chip, tokens, kind))
        tp = LayerComm(tp.forward - hidden.forward, tp.backward - hidden.backward, tp.hidden_by_weight_grad)
    # under sequence parallelism the weight gradients need each column-parallel input gathered again
    regather = column_input_regather(model, layout, chip,
                                     column_parallel_input_grads(model, layout, chip, tokens, kind))
    tp = LayerComm(tp.forward, tp.backward + regather, tp.hidden_by_weight_grad)
    ring = LayerComm(0.0, 0.0)
    if layout.cp > 1:
        core = attention_core_times(model, layout, chip)
        ring = cp_exposed(model, layout, chip, core.forward, core.backward_input)
        if layout.recompute is Recompute.FULL or layout.recomputes_attention_core:
            # the recomputed attention (the whole layer's, or the core's under selective recomputation) exchanges
            # its keys and values again as its forward did, inside the backward
            ring = LayerComm(ring.forward, ring.backward + ring.forward)
    gathers = LayerComm(0.0, 0.0)
    if layout.gathers_per_layer:
        # ZeRO-3's NCCL gathers and reduce-scatters, prefetched one layer ahead, run beside the layers' kernels
        # only in part (comm.prefetched_overlap) and take SMs from them while they do (comm.contended_overlap);
        # in the backward they overlap the recomputed forward too. A rank gathers its share: the dense weights
        # and its ep-th of the routed experts.
        host = LayerComm(0.0, 0.0)
        if layout.collectives_per_tensor:
            # DeepSpeed's 2021 ZeRO-3: a collective per tensor, each costing the host one operation per rank;
            # it synchronises the device before each gather (per_tensor_host_time), so its kernels' work is
            # taken as the whole collective
            tensors = layer_parameter_tensors(model, layout, kind)
            fsdp = per_tensor_layer_comm(tensors, layout, chip)
            work = fsdp
            host = per_tensor_host_time(tensors, layout, chip)
        else:
            routed = layer_expert_params(model, kind)
            held = (layer_params(model, kind) - routed) / layout.tp + routed / (layout.ep * layout.etp)
            fsdp = fsdp_layer_comm(held, layout, chip)
            # the part of each collective that is its kernels' own work, the network never the bottleneck
            work = fsdp_layer_comm(held, layout, kernel_work_chip(chip))
        share, eta = chip.comm_sm_share, chip.zero3_overlap_share
        gathers = LayerComm(
            host.forward + prefetched_overlap(fsdp.forward, layer.forward, share, eta, work.forward),
            host.backward + prefetched_overlap(fsdp.backward, layer.backward_input + layer.backward_weight
                                               + layer.recompute, share, eta, work.backward),
        )
    return LayerComm(tp.forward + ring.forward + gathers.forward, tp.backward + ring.backward + gathers.backward,
                     tp.hidden_by_weight_grad)


def _layer_a2a(model: ModelSpec, chip: ChipSpec, layout: Layout, kind: LayerKind) -> LayerComm:
    """The expert-parallel all-to-all of one layer per microbatch (0 for dense layers and ep = 1). It runs on
    the critical path between the router and the experts and between the experts and the combine, so a
    pass waits for it in full; only a schedule that pairs one microbatch's forward with another's backward
    can hide it (the StageCosts ``a2a_*`` fields say how much there is to hide). With
    ``moe_shared_expert_overlap`` the shared experts run beside it, each pass's beside that pass's all-to-alls,
    taking SMs from them as an overlapped collective does (:func:`~.comm.contended_overlap`)."""
    if kind is not LayerKind.MOE:
        return LayerComm(0.0, 0.0)
    a2a = moe_layer_a2a(model, layout, chip)
    if not layout.moe_shared_expert_overlap or not model.shared_experts or not a2a.forward:
        return a2a
    shared = shared_expert_times(model, layout, chip)
    share = chip.comm_sm_share
    # the pass: its compute, the shared experts' among it, then max(σ·a2a, a2a − shared) more
    return LayerComm(contended_overlap(a2a.forward, shared.forward, share),
                     contended_overlap(a2a.backward, shared.backward_input + shared.backward_weight, share))


@dataclass(frozen=True)
class _LayerCosts:
    """Per kind of layer: its compute, its exposed communication and its all-to-all (one microbatch)."""

    passes: Layers
    comm: Layers
    a2a: Layers
    head: HeadTimes
    head_comm: float  # the logits' all-gather before a gathered loss (comm.logits_gather_time), forward only
    mtp_module: PassTimes  # multi-token prediction's projections and norms (mtp.mtp_module_times), on its slice
    mtp_head: PassTimes  # ... and the head's pass for each module (mtp.mtp_head_times), on the loss's slice
    kernels: dict[LayerKind, PassKernels]  # the kernels the host issues for one layer of each kind


def _layer_costs(model: ModelSpec, chip: ChipSpec, layout: Layout) -> _LayerCosts:
    key = _layer_costs_key(model, chip, layout)
    hit = _LAYER_COSTS.get(key)
    if hit is not None:
        return hit[1]
    layers, head, (mtp_module, mtp_head) = _compute_times(model, chip, layout)
    costs = _LayerCosts(
        layers,
        {k: _layer_comm(model, chip, layout, t, k) for k, t in layers.items()},
        {k: _layer_a2a(model, chip, layout, k) for k in layers},
        head,
        logits_gather_time(model, layout, chip),
        mtp_module,
        mtp_head,
        {k: layer_kernel_counts(model, layout, k) for k in layers},
    )
    if len(_LAYER_COSTS) >= _LAYER_COSTS_KEPT:
        del _LAYER_COSTS[next(iter(_LAYER_COSTS))]
    _LAYER_COSTS[key] = (chip, costs)
    return costs


# One layer's costs by what they depend on: a search builds tens of thousands of cost models whose layouts
# differ in dp, pp, v, microbatches or the ZeRO stage, none of which a layer's kernels, TP/CP collectives or
# all-to-all read. Only per-layer sharding without pipelining (ZeRO-3, FSDP's ZeRO-2: gathers over dp·cp)
# reads dp, the bytes per parameter, whether the backward gathers again (FSDP2 copies each gather out), the
# shard group and what crosses its replicas, and how far apart the group's ranks are. tests/test_layer_costs_key.py
# holds cached and fresh cost models equal over plan spaces, so a new dependency that this key misses fails
# there. The chip is kept in the value: its id cannot be reused.
_LAYER_COSTS: dict[tuple, tuple[ChipSpec, _LayerCosts]] = {}
_LAYER_COSTS_KEPT = 4096


def _layer_costs_key(model: ModelSpec, chip: ChipSpec, layout: Layout) -> tuple:
    gathers = layout.gathers_per_layer
    return (
        id(chip),
        model,
        layout.tp,
        layout.cp,
        layout.cp_comm_ctas,
        layout.cp_comm,
        layout.cp_kernels,
        layout.kv_repeated,  # K and V copied to every query head: the copy, what the kernel saves, what cp exchanges
        layout.cp_a2a_size,
        layout.ep,
        layout.expert_tp,  # MoE parallel folding: the experts' GEMMs, the all-to-all's tokens, the MLP collective
        layout.recompute,
        layout.recomputed_modules,  # what a selective recomputation re-runs (kernels.layer_times)
        layout.distribute_saved_activations,  # the recomputed layer's input gathered over tp first
        layout.sequence_parallel,
        layout.attention,
        layout.elementwise,
        layout.loss,
        layout.z_loss,
        layout.loss_input_copy,
        layout.precision,
        layout.fp8_recipe,
        layout.fp8_linears,  # torchao's linears cast each weight at each GEMM (kernels.quantization_cast_bytes)
        layout.fp8_all_gather,  # ... unless FSDP gathers them in FP8: half the gather, a shard cast instead
        layout.async_tp,
        layout.overlap_tp_dgrad,
        layout.overlap_tp_local_shard,
        layout.column_input,
        layout.mlp_up,  # two GEMMs, and without SP a collective more (kernels.split_up_collectives)
        layout.moe_imbalance,
        layout.moe_dispatcher,  # how the all-to-all travels (comm.moe_layer_a2a, moe_dispatch)
        layout.moe_dispatch_fp8,
        layout.moe_shared_expert_overlap,
        layout.halve_causal_attention,
        # the per-layer collectives' group (hybrid sharding's, and what crosses its replicas) and its ranks' distance
        (layout.dp, layout.param_bytes, layout.regathers_for_backward, layout.collectives_per_tensor,
         layout.fsdp2, layout.shard_group, layout.outer_optimizer_sharding, layout.dp_stride) if gathers else None,
    )


def _stage_parts(
    model: ModelSpec, chip: ChipSpec, layout: Layout, stage: int, costs: _LayerCosts
) -> tuple[PassTimes, LayerComm, LayerComm]:
    """The stage's pass times (its layers, plus the LM head on the last stage), its exposed communication and
    its all-to-all. ``costs``: the layout's own layer costs; a group of layers under another layout (partial
    recomputation, :func:`stage_layer_groups`) reads its own."""
    groups = [(kind, n, costs if group is layout else _layer_costs(model, chip, group))
              for kind, n, group in stage_layer_groups(model, layout, stage)]

    def total(part: str, attribute: str) -> float:
        return sum(n * getattr(getattr(own, part)[kind], attribute) for kind, n, own in groups)

    passes = PassTimes(
        total("passes", "forward"),
        total("passes", "backward_input"),
        total("passes", "backward_weight"),
        total("passes", "recompute"),
    )
    head_comm = 0.0
    end = layout.head_parts(stage)
    if end != HeadParts():
        head = costs.head.of(end)
        passes = PassTimes(
            passes.forward + head.forward,
            passes.backward_input + head.backward_input,
            passes.backward_weight + head.backward_weight,
            passes.recompute,
        )
        head_comm = costs.head_comm * (1 + model.mtp_layers) if end.loss else 0.0  # each module's head again
    if model.mtp_layers:  # the modules' projections and norms, and the head's pass for each (their layers: groups)
        if stage == layout.mtp_slice:
            passes = passes + costs.mtp_module
        if end.loss:
            passes = passes + costs.mtp_head
    return (
        passes.scaled(compute_pace(chip, layout)),
        LayerComm(total("comm", "forward") + head_comm, total("comm", "backward"),
                  total("comm", "hidden_by_weight_grad")),
        LayerComm(total("a2a", "forward"), total("a2a", "backward")),
    )


def _stage_host_seconds(model: ModelSpec, chip: ChipSpec, layout: Layout, stage: int,
                        costs: _LayerCosts) -> PassTimes:
    """Host time to issue the stage's kernels per pass (:func:`~pipesim.analytic.kernels.layer_kernel_counts`,
    the LM head on the last stage, the embedding on the first). ``costs``: the layout's own layer costs, which
    hold its layers' kernel counts; a group of layers under another layout reads its own."""
    kernels = PassKernels(0, 0, 0)
    for kind, n, group in stage_layer_groups(model, layout, stage):
        own = costs if group is layout else _layer_costs(model, chip, group)
        kernels = kernels + own.kernels[kind].scaled(n)
    end = layout.head_parts(stage)
    if end != HeadParts():
        kernels = kernels + head_kernels(end)
    if end.loss and model.mtp_layers:  # the second head, as many times as modules (their layers are in the groups)
        kernels = kernels + head_kernels(HeadParts(True, True, True)).scaled(model.mtp_layers)
    if stage == 0:
        kernels = kernels + EMBEDDING_KERNELS
    each = chip.host_kernel_overhead
    return PassTimes(each * kernels.forward, each * kernels.backward_input, each * kernels.backward_weight,
                     each * kernels.recompute)


@dataclass(frozen=True)
class _PassSeconds:
    """One microbatch through one stage: each pass at least as long as the host takes to issue its kernels.
    The host runs ahead of the device within a pass; a pass of many small kernels (small layers, wide tensor
    parallelism, small micro-batches) leaves the device waiting for it."""

    forward: float
    backward_input: float
    backward_weight: float
    backward: float  # the fused backward (I and W issued together, one floor for both)
    host_wait: float  # what the floors added to F + B
    host_wait_split: float  # what they added to F + I + W, the backward split (zero bubble)


def _host_floor(passes: PassTimes, exposed: LayerComm, a2a: LayerComm, host: PassTimes) -> _PassSeconds:
    forward = passes.forward + exposed.forward + a2a.forward
    backward_input = passes.backward_input + passes.recompute + exposed.backward + a2a.backward
    backward_weight = passes.backward_weight
    host_input = host.backward_input + host.recompute
    # A fused backward computes each weight gradient with its input gradient, hiding some TP collectives;
    # a split one (B now, W later) waits for them all in B.
    device_backward = backward_input + backward_weight - exposed.hidden_by_weight_grad
    host_backward = host_input + host.backward_weight
    waits_forward = max(0.0, host.forward - forward)
    wait = waits_forward + max(0.0, host_backward - device_backward)
    wait_split = (waits_forward + max(0.0, host_input - backward_input)
                  + max(0.0, host.backward_weight - backward_weight))
    return _PassSeconds(max(forward, host.forward), max(backward_input, host_input),
                        max(backward_weight, host.backward_weight), max(device_backward, host_backward), wait,
                        wait_split)


def compute_pace(chip: ChipSpec, layout: Layout) -> float:
    """How much longer the device's compute takes in the step than on one typical GPU: every GPU waits for the
    slowest one at its collectives, sends and the gradient sync (:mod:`pipesim.analytic.slowest_gpu`). Not with
    ``--achievable-fraction``, which states the share a run reaches as a whole."""
    if chip.achievable_fraction is not None:
        return 1.0
    return slowest_gpu_factor(layout.world_size, chip.gpu_speed_spread)


def _stage_costs(model: ModelSpec, chip: ChipSpec, layout: Layout, stage: int, costs: _LayerCosts) -> StageCosts:
    part = stage_breakdown(model, layout, stage)
    passes, exposed, a2a = _stage_parts(model, chip, layout, stage, costs)
    seconds = _host_floor(passes, exposed, a2a, _stage_host_seconds(model, chip, layout, stage, costs))
    # Summing the microbatches' weight gradients (autograd's .grad +=) follows the weight-gradient GEMMs; the
    # quantized linears' weight casts (once a step, Transformer Engine's) precede a forward.
    accumulate = grad_accumulation_time(part.params, layout, chip)
    forward = seconds.forward + weight_cast_time(part.params - part.end_params, layout, chip)
    backward_input = seconds.backward_input
    backward_weight, backward = seconds.backward_weight + accumulate, seconds.backward + accumulate
    kept_for_w = sum(n * linear_input_bytes(model, group, kind)
                     for kind, n, group in stage_layer_groups(model, layout, stage)) / layout.cp
    # Costs files describe a rank's share of the model (pipesim.sim.costs): this stage is one of v chunks, so
    # its values are scaled up by v here and the simulator takes 1/v of them back for the chunk.
    v = layout.chunks
    reduce = stage_reduce_grad(part.params, layout, chip, part.expert_params, backward,
                               stage_last_bucket(model, layout, stage))
    return StageCosts(
        forward=v * forward,
        backward=v * backward,
        backward_input=v * backward_input,
        backward_weight=v * backward_weight,
        reduce_grad=v * reduce.busy,
        reduce_grad_async=v * reduce.asynchronous,
        activation=1.0,
        weight_grad_activation=min(1.0, kept_for_w / part.activation_bytes) if part.activation_bytes else 0.0,
        activation_bytes=v * part.activation_bytes,
        p2p_bytes=stage_output_bytes(model, layout, stage),
        a2a_forward=v * a2a.forward,
        a2a_backward=v * a2a.backward,
        # An overlapped pair's all-to-all kernels hold SMs beside its compute, as any overlapped NCCL
        # collective does (comm.contended_overlap): the same share of the chip.
        overlap_slowdown=chip.comm_sm_share if a2a.forward or a2a.backward else 0.0,
    )


def _all_stage_costs(model: ModelSpec, chip: ChipSpec, layout: Layout, costs: _LayerCosts) -> list[StageCosts]:
    """:func:`_stage_costs` of every stage, computed once per distinct stage: a stage's values follow from how
    many layers of each kind it holds, whether it is the first (embedding) and what of the model's end it runs
    (the LM head, the loss), so the middle stages of an even split share one (the same object, the same
    floats)."""
    made: dict[tuple, StageCosts] = {}
    result = []
    for s in range(layout.num_stages):
        key = (stage_layer_groups(model, layout, s), s == 0, layout.head_parts(s),
               stage_output_bytes(model, layout, s))  # (what crosses differs after the MTP modules' stage)
        value = made.get(key)
        if value is None:
            value = made[key] = _stage_costs(model, chip, layout, s, costs)
        result.append(value)
    return result


@dataclass(frozen=True)
class PassFloor:
    """At most what one microbatch's forward and fused backward through a stage cost (seconds), with no cost model
    built: see :func:`stage_pass_floors`."""

    forward: float
    backward: float


def stage_pass_floors(model: ModelSpec, chip: ChipSpec, layout: Layout) -> tuple[PassFloor, ...]:
    """Each stage's (cost-model stage, one chunk's slice) floor: its layers' compute at the step's pace plus
    their exposed communication, the all-to-all left out.

    These are the first terms of what :func:`build_cost_model` gives a stage; everything else it adds only adds
    (the LM head and the embedding, the host's issue floor, which takes the larger of the device's time and the
    host's, weight casts, gradient accumulation, blocking sends). So a floor is at most the stage's forward less
    its all-to-all, and its fused backward less its all-to-all, up to the rounding of summing the same terms in
    another order. The planner orders and prunes candidates by them before it pays for a cost model
    (:func:`pipesim.plan.bounds.time_floor`); ``tests/test_plan.py`` holds them under the cost model's."""
    if layout.recompute_layers is not None:  # two groups of layers a stage, each under a layout of its own
        return tuple(_pass_floor(model, chip, layout, stage_layer_groups(model, layout, s))
                     for s in range(layout.num_stages))
    # Otherwise a stage's floor follows from its layers' costs (one per kind), the pace and its layers of each
    # kind: layouts that differ in dp, the ZeRO stage, the microbatches or the schedule share one
    counts = stage_layer_counts(model, layout)
    key = (_layer_costs_key(model, chip, layout), compute_pace(chip, layout), counts)
    hit = _PASS_FLOORS.get(key)
    if hit is not None:
        return hit[1]
    made: dict[tuple[tuple[LayerKind, int], ...], PassFloor] = {}
    floors = []
    for kinds in _kind_counts_per_stage(model, counts):
        floor = made.get(kinds)
        if floor is None:
            floor = made[kinds] = _pass_floor(model, chip, layout, tuple((k, n, layout) for k, n in kinds))
        floors.append(floor)
    if len(_PASS_FLOORS) >= _PASS_FLOORS_KEPT:
        del _PASS_FLOORS[next(iter(_PASS_FLOORS))]
    _PASS_FLOORS[key] = (chip, tuple(floors))
    return _PASS_FLOORS[key][1]


# Floors by what they read (the chip is kept in the value: its id in the key cannot be reused); bounded, the
# oldest dropped first
_PASS_FLOORS: dict[tuple, tuple[ChipSpec, tuple[PassFloor, ...]]] = {}
_PASS_FLOORS_KEPT = 1 << 14


def _pass_floor(model: ModelSpec, chip: ChipSpec, layout: Layout, groups: tuple[LayerGroup, ...]) -> PassFloor:
    """One stage's floor from its groups of layers (:func:`stage_layer_groups`), as :func:`_stage_parts` and
    :func:`_host_floor` sum them."""
    costs = _layer_costs(model, chip, layout)
    pace = compute_pace(chip, layout)
    forward = backward = 0.0
    for kind, n, group in groups:
        own = costs if group is layout else _layer_costs(model, chip, group)
        passes, comm = own.passes[kind], own.comm[kind]
        forward += n * (pace * passes.forward + comm.forward)
        # the fused device backward: I (recomputation included) and W, less what W hides of I's collectives
        backward += n * (pace * (passes.backward_input + passes.recompute + passes.backward_weight)
                         + comm.backward - comm.hidden_by_weight_grad)
    return PassFloor(forward, backward)


@dataclass(frozen=True)
class ReduceGradTime:
    """A stage's gradient sync in the simulator's two parts (:class:`~pipesim.sim.costs.StageCosts`): ``busy``
    seconds its REDUCE_GRAD holds the rank, then ``asynchronous`` seconds on the rank's data-parallel channel,
    beside whatever the rank runs next, waited for before the optimizer step."""

    busy: float
    asynchronous: float = 0.0

    @property
    def alone(self) -> float:
        """Seconds the sync adds when nothing runs after it (the last chunk's, or a lone stage's)."""
        return self.busy + self.asynchronous


def stage_reduce_grad(params: float, layout: Layout, chip: ChipSpec, expert_params: float = 0.0,
                      backward: float = 0.0, last_bucket: float = 0.0) -> ReduceGradTime:
    """The stage's gradient sync at the end of the step; ZeRO-2 reduce-scatters every microbatch's gradients
    (DeepSpeed's partitioned accumulation; with ``overlap_grad_reduce``, each beside its own microbatch's backward,
    DeepSpeed's ``overlap_comm`` and Megatron-FSDP's ``optim_grads``), ZeRO-3 without pipelining did it per layer
    already. DualPipe's two
    copies then sum theirs over the mirror ranks (:func:`~pipesim.analytic.comm.mirror_grad_sum`). Without
    overlap all of it holds the rank (the framework reduces after the backward and waits).

    With ``overlap_grad_reduce`` the reduce runs in buckets beside the ``backward`` seconds of the stage's last
    microbatch (Megatron-Core's DDP launches a bucket's reduce as soon as its gradients are ready) and goes on,
    asynchronously, beside whatever the rank runs next: in Megatron-Core the schedule starts each model chunk's
    sync after the chunk's last backward (``forward_backward_pipelining_with_interleaving`` calls
    ``grad_sync_func`` for that chunk) and waits for all of them only before the optimizer
    (``finalize_model_grads`` → ``finish_grad_sync``). But the bucket the backward fills last (``last_bucket``,
    the share of the stage's parameters in it: :mod:`~pipesim.analytic.grad_buckets`; 1 where the stage is one
    bucket) starts its reduce only when the backward ends: of the reduce's ``c`` seconds, ``t = last_bucket·c``
    run after it and ``r = c − t`` beside it. Those ``r`` seconds' NCCL kernels hold ``σ`` of the SMs
    (:func:`comm.contended_overlap`): the rank is busy ``σ·r`` for them, and the channel carries
    ``max(0, r − backward − σ·r)`` then ``t``; alone, the two add up to ``max(σ·r, r − backward) + t``."""
    if layout.gathers_per_layer:
        return ReduceGradTime(0.0)
    mirror = mirror_grad_sum(params, layout, chip, expert_params)
    reduce = dp_grad_sync(params, layout, chip, expert_params).reduce
    if layout.sharding is ZeroStage.GRADIENTS:
        one = sharded_collective(CollectiveOp.REDUCE_SCATTER, params * layout.param_bytes.grads, layout, chip)
        count = layout.microbatches // layout.model_copies  # a copy: half the microbatches
        if not layout.overlap_grad_reduce:
            return ReduceGradTime(count * one + mirror)
        # each microbatch's reduce-scatter beside its own backward; what that backward does not hide is waited
        # for before the next one reuses the buffers (DeepSpeed's overlap_comm epilogue synchronises each
        # micro-step), the last microbatch's beside whatever follows, as for one reduce a step
        each = _overlapped_reduce(one, backward, last_bucket, chip)
        return ReduceGradTime(count * each.busy + (count - 1) * each.asynchronous + mirror, each.asynchronous)
    if not layout.overlap_grad_reduce:
        return ReduceGradTime(reduce + mirror)
    once = _overlapped_reduce(reduce, backward, last_bucket, chip)
    return ReduceGradTime(once.busy + mirror, once.asynchronous)


def _overlapped_reduce(reduce: float, backward: float, last_bucket: float, chip: ChipSpec) -> ReduceGradTime:
    """A reduce of ``reduce`` seconds launched bucket by bucket beside ``backward`` seconds of it, as
    :func:`stage_reduce_grad` splits it: the last bucket's share after the backward, the rest beside it holding
    ``σ`` of the SMs."""
    tail = reduce * last_bucket
    rest = reduce - tail  # the buckets the backward fills while it runs, reduced beside it
    contended = chip.comm_sm_share * rest
    return ReduceGradTime(contended, contended_overlap(rest, backward, chip.comm_sm_share) - contended + tail)


def param_gather_time(params: float, layout: Layout, chip: ChipSpec, expert_params: float = 0.0,
                      forward: float = 0.0, first_bucket: float = 0.0) -> float:
    """The distributed optimizer's parameter all-gather after the optimizer step, for a rank of ``params``. With
    ``overlap_param_gather`` it runs in buckets beside the next step's first microbatch, ``forward`` seconds
    through the rank's chunks (Megatron-Core gathers a bucket in the forward pre-hook of the module that needs
    it), and only what that forward does not hide is exposed; but the first bucket (``first_bucket`` of the
    rank's parameters: the first stage's embedding and first layers, :mod:`~pipesim.analytic.grad_buckets`) is
    launched at ``zero_grad`` and waited for before the first layer runs, with nothing to hide it. ZeRO-3 without
    pipelining gathers per layer."""
    if layout.gathers_per_layer:
        return 0.0
    gather = dp_grad_sync(params, layout, chip, expert_params).gather
    if layout.overlap_param_gather:
        first = gather * first_bucket
        gather = first + contended_overlap(gather - first, forward, chip.comm_sm_share)
    return gather


def _boundary_sends(
    nbytes: list[float], boundaries: list[float], chunks: int, sync_overhead: float, transfers: int = 1
) -> list[tuple[float, float]]:
    """(wire, sync) seconds of one blocking send of ``nbytes[s]`` across each stage boundary s, for one chunk's
    pass.

    Blocking P2P (Megatron-LM's ``_communicate``: batched isend/irecv, then wait): the sender of a boundary
    tensor is busy until it has arrived. Each such call also leaves the device idle for ``sync_overhead``
    (the chip's ``p2p_sync_overhead``): Megatron-LM synchronises the device after a batched isend/irecv
    (``batch_p2p_sync``, on by default), so the host has no work queued ahead when the next pass starts.
    Single-chunk schedules (GPipe, 1F1B, ZB-H1/H2) make one call per sending pass. Megatron's interleaved
    schedule exchanges a forward's output and a backward's gradient in one call, so a chunk's pass pays half
    of it; every schedule with several chunks per rank (the V schedules too, unmeasured) is taken alike. The
    constant is measured, not assumed: ``experiments/p2p_sync_overhead.py`` derives it from Qi et al. 2024 (Table 4's
    step time per microbatch against Table 9's per-pass profile of the same runs). ``transfers``: the transfers
    a pass waits out (:attr:`~pipesim.analytic.layout.P2pCalls.transfers_per_pass`: 2 where the engine receives
    and sends one after the other, each blocking)."""
    per_pass = sync_overhead if chunks == 1 else sync_overhead / 2
    return [(transfers * size / bandwidth, per_pass) for size, bandwidth in zip(nbytes, boundaries, strict=True)]


def _blocking_sends(
    per_stage: list[StageCosts], boundaries: list[float], chunks: int, sync_overhead: float, transfers: int = 1
) -> list[StageCosts]:
    """Blocking sends (:func:`_boundary_sends`) join the sender's pass: the forward of the stage below the
    boundary and the input backward of the stage above it. Stage values are a rank's share (v chunks' worth),
    so one chunk's send is added v times over: the simulator gives the chunk 1/v of it back."""
    sends = _boundary_sends([costs.p2p_bytes for costs in per_stage[:len(boundaries)]], boundaries, chunks,
                            sync_overhead, transfers)
    added = [chunks * (wire + sync) for wire, sync in sends]
    result = []
    # Stages with the same values and the same sends share one result (most of a long pipeline's stages do):
    # `replace` costs more than the arithmetic, and the planner builds tens of thousands of these.
    made: dict[tuple[int, float | None, float | None], StageCosts] = {}
    for s, costs in enumerate(per_stage):
        forward = added[s] if s < len(added) else None  # this stage's output crosses boundary s
        backward = added[s - 1] if s > 0 else None  # its input gradient crosses boundary s − 1
        key = (id(costs), forward, backward)
        new = made.get(key)
        if new is None:
            changes = {}
            if forward is not None:
                changes["forward"] = costs.forward + forward
            if backward is not None:
                changes["backward_input"] = costs.backward_input + backward
                changes["backward"] = costs.backward + backward
            new = made[key] = replace(costs, **changes) if changes else costs
        result.append(new)
    return result


def _shape_of(layout: Layout, shape):
    """``shape``, or the placement of ``layout`` when none is given: loop, or DualPipe's with two copies."""
    if shape is not None:
        return shape
    from pipesim.program.ir import PipelineShape, Placement

    if layout.model_copies == 2:
        return PipelineShape(layout.pp, layout.microbatches, 2, Placement.DUAL)
    return PipelineShape(layout.pp, layout.microbatches, layout.chunks)


def stage_time_parts(model: ModelSpec, chip: ChipSpec, layout: Layout, shape=None,
                     split_backward: bool = False) -> list[StageTimeParts]:
    """Each stage's :class:`StageTimeParts`: the terms :func:`build_cost_model` adds into its pass times, kept
    apart (for the report of where a step's time goes). ``split_backward``: the schedule runs each backward as
    an input-gradient pass and a later weight-gradient pass (zero bubble), which hides no TP collective behind
    the weight gradients and floors each of the two passes on its own."""
    check_layout(model, layout, chip)
    shape = _shape_of(layout, shape)
    costs = _layer_costs(model, chip, layout)
    parts = [_stage_parts(model, chip, layout, s, costs) for s in range(layout.num_stages)]
    sends = [(0.0, 0.0)] * (layout.num_stages - 1)
    if not layout.overlap_p2p:
        boundaries = boundary_bandwidths(layout, chip, shape)
        sends = _boundary_sends(
            [stage_output_bytes(model, layout, s) for s in range(len(boundaries))], boundaries, layout.chunks,
            chip.p2p_sync_overhead, layout.p2p_calls.transfers_per_pass,
        )
    result = []
    for s, (passes, exposed, a2a) in enumerate(parts):
        crossing = ([sends[s]] if s < len(sends) else []) + ([sends[s - 1]] if s > 0 else [])
        host = _host_floor(passes, exposed, a2a, _stage_host_seconds(model, chip, layout, s, costs))
        part = stage_breakdown(model, layout, s)
        accumulate = grad_accumulation_time(part.params, layout, chip)
        cast = weight_cast_time(part.params - part.end_params, layout, chip)
        hidden = 0.0 if split_backward else exposed.hidden_by_weight_grad
        result.append(StageTimeParts(
            compute=(passes.forward + passes.backward_input + passes.backward_weight + passes.recompute + accumulate
                     + cast),
            exposed_comm=exposed.forward + exposed.backward - hidden,
            p2p_wire=sum(wire for wire, _ in crossing), p2p_sync=sum(sync for _, sync in crossing),
            a2a=a2a.forward + a2a.backward, host_wait=host.host_wait_split if split_backward else host.host_wait,
            forward_pass=host.forward + cast, backward_pass=host.backward + accumulate))
    return result


def rank_params(model: ModelSpec, layout: Layout, shape) -> list[float]:
    """Parameters per tp rank held by each pipeline rank (the sum over its chunks' stages; experts / ep). Under
    DualPipe's dual placement a rank holds two whole slices, one of each copy: twice the parameters."""
    stages = stage_breakdowns(model, layout)
    return [sum(stages[s].params for s in slices) for slices in shape.slices_by_rank]


def rank_first_bucket(model: ModelSpec, layout: Layout, shape) -> list[float]:
    """The share of each rank's parameters in the bucket its first forward waits for before the first layer runs
    (:func:`param_gather_time`): the first stage's last-filled bucket on the rank holding that stage, 0 on the
    others, whose gathers the pipeline's start gives time."""
    stages = stage_breakdowns(model, layout)
    first = stages[0].params * stage_last_bucket(model, layout, 0)
    held = rank_params(model, layout, shape)
    return [first / held[r] if 0 in slices and held[r] else 0.0 for r, slices in enumerate(shape.slices_by_rank)]


def rank_expert_params(model: ModelSpec, layout: Layout, shape) -> list[float]:
    """The routed-expert part of :func:`rank_params` (per tp·ep rank)."""
    stages = stage_breakdowns(model, layout)
    return [sum(stages[s].expert_params for s in slices) for slices in shape.slices_by_rank]


def rank_end_params(model: ModelSpec, layout: Layout, shape) -> list[float]:
    """The embedding's and output layer's part of :func:`rank_params` (per tp rank)."""
    stages = stage_breakdowns(model, layout)
    return [sum(stages[s].end_params for s in slices) for slices in shape.slices_by_rank]


def build_cost_model(model: ModelSpec, chip: ChipSpec, layout: Layout, shape=None) -> CostModel:
    """The CostModel (time unit "s") of ``model`` on ``chip`` under ``layout``.

    ``shape`` (a :class:`pipesim.program.ir.PipelineShape`) gives the stage → rank placement used to find the
    rank with the most parameters for the optimizer step; without it the loop placement of ``layout`` is assumed.
    """
    check_layout(model, layout, chip)
    stages = layout.num_stages
    shape = _shape_of(layout, shape)
    costs = _layer_costs(model, chip, layout)
    per_stage = with_runtime_buffers(_all_stage_costs(model, chip, layout, costs), model, layout, shape)
    largest = max(stage.activation_bytes for stage in per_stage)
    if largest > COST_RANGE[1]:  # a cost out of the range any CostModel accepts: say which input made it
        raise PipesimError(
            f"--micro-batch-size {model.micro_batch} × --seq-len {model.seq_len}: one microbatch's activations on a "
            f"stage come to {largest:.3g} bytes, beyond any device (pipesim's costs stop at {COST_RANGE[1]:g}); "
            "lower the micro-batch size or the sequence length")
    # one microbatch's forward through each rank's chunks, before any blocking send joins it (what an overlapped
    # parameter gather hides behind); a stage's values are its rank's share, v chunks of it
    rank_forward = [sum(per_stage[s].forward for s in slices) / layout.chunks if layout.overlap_param_gather else 0.0
                    for slices in shape.slices_by_rank]
    link = p2p_bandwidth(layout, chip)
    boundaries = boundary_bandwidths(layout, chip, shape)
    if layout.overlap_p2p:
        for s, bandwidth in enumerate(boundaries):
            if bandwidth != link:
                per_stage[s] = replace(per_stage[s], p2p_bandwidth=bandwidth)
    else:
        per_stage = _blocking_sends(per_stage, boundaries, layout.chunks, chip.p2p_sync_overhead,
                                    layout.p2p_calls.transfers_per_pass)
        link = None  # the wire time is inside the sender's compute: transfers then cost their latency only
    default = per_stage[1] if stages > 2 else per_stage[0]
    overrides = {}
    diffs: dict[int, dict] = {}  # by id: stages sharing one StageCosts share its difference to the default
    for s, costs in enumerate(per_stage):
        diff = diffs.get(id(costs))
        if diff is None:
            diff = diffs[id(costs)] = {k: v for k, v in vars(costs).items() if getattr(default, k) != v}
        if diff:
            overrides[s] = dict(diff)
    # Once per distinct (parameters, expert parameters, forward): the ranks of an even split hold the same.
    held = dict.fromkeys(zip(rank_params(model, layout, shape), rank_expert_params(model, layout, shape),
                             rank_forward, rank_first_bucket(model, layout, shape), strict=True))
    # the optimizer, the parameter gather it starts and the cleared gradient buffer the next step accumulates into
    step = max(optimizer_step_time(p, layout, chip, e) + param_gather_time(p, layout, chip, e, f, b)
               + replica_weight_gather(p, layout, chip) + step_end_passes_time(p, layout, chip)
               for p, e, f, b in held)
    # the embedding's copies summed over their pipeline ranks: every rank waits for it before its optimizer step
    step += embedding_grad_sum(model, layout, chip, shape)
    return CostModel(
        default=default,
        overrides=overrides,
        p2p_latency=chip.link_latency,
        p2p_bandwidth=link,
        optimizer_step=step,
        time_unit=TimeUnit.SECONDS,
    )
