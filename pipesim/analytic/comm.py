"""Communication times: tensor-parallel collectives per layer, pipeline P2P, data-parallel gradient sync.

Ring collectives over ``n`` ranks with per-rank one-direction bandwidth ``β`` (Patarasuk & Yuan 2009,
"Bandwidth optimal all-reduce algorithms"; Thakur et al. 2005, "Optimization of collective communication
operations in MPICH"): reduce-scatter and all-gather of an ``N``-byte buffer take ``(n−1)/n · N/β``;
all-reduce is one of each, ``2(n−1)/n · N/β``. Latency is NCCL's own cost model for its ring
(``src/graph/tuning.cc``, ``ncclTopoTuneModel``): a base latency plus one hop latency per ring step, NVLink's
for the steps inside a node and the network's for the ``nodes − 1`` (all-reduce: ``2(nodes − 1)``) steps that
cross one (:func:`ring_latency`). NCCL has two protocols for such messages, and its tuner runs each call with
the one its model predicts fastest (``ncclTopoGetAlgoTime``): Simple, at the full bus bandwidth, and LL128,
at 0.92 of it with about half Simple's latency per hop. Inside one node the two are within a few percent for
tens of megabytes (Simple wins above about 60 MB for an 8-rank all-reduce); on hundreds of ranks, where the
ring's latency outweighs its bytes, LL128 does (:func:`nccl_ring_time`).

Which link: ranks are ordered tp fastest, then cp, then dp, then pp (Megatron-LM's order). A group whose
ranks all lie in one node (``node_size`` chips) uses the intra-node link; otherwise a ring crosses nodes and
the NICs are its bottleneck: as many NICs as the group has members in a node (:func:`group_bandwidth`). TP
collectives are exposed unless ``async_tp``, but for the column-parallel linears' input-gradient collectives,
which the weight-gradient GEMMs hide with ``overlap_tp_dgrad`` (Megatron-LM since September 2021, Transformer
Engine; :func:`dgrad_hidden_by_wgrad`); DP sync is one REDUCE_GRAD per chunk in the Program.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.kernels import (
    FP32,
    kv_repeat,
    recomputed_mlp_width,
    recomputes_moe_block,
    split_up_collectives,
)
from pipesim.analytic.layout import (
    BoundaryTensor,
    ColumnInput,
    CpComm,
    CpKernels,
    Layout,
    Precision,
    Recompute,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.analytic.measured import CollectiveOp, measured_collective_time
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.moe_dispatch import (
    deepep_time,
    dispatch_element_bytes,
    nvlink_all_to_all_rate,
    routed_tokens,
    uses_deepep,
)
from pipesim.analytic.mtp import mtp_embedding_copy

# What NCCL takes one channel of a send/recv to move over the network when it chooses how many channels a remote
# peer gets (NCCL_P2P_PER_CHANNEL_NET_BW, 14 GB/s: src/graph/paths.cc)
NCCL_NET_CHANNEL_BANDWIDTH = 14e9


def ring_latency(chip: ChipSpec, n: int, span: int, all_reduce: bool = False, ll128: bool = False) -> float:
    """Latency of one ring collective over ``n`` ranks spanning ``span`` consecutive ranks (NCCL's model, see
    the module doc): ``base + (steps − inter)·hop_nvlink + inter·hop_network`` with ``steps = n − 1`` and
    ``inter = nodes − 1`` (twice both for an all-reduce); the Simple protocol's latencies, or LL128's."""
    if n <= 1:
        return 0.0
    nodes = min(n, max(1, -(-span // chip.node_size)))
    factor = 2 if all_reduce else 1
    steps, inter = factor * (n - 1), factor * (nodes - 1)
    if ll128:
        return (chip.ll128_base_latency + (steps - inter) * chip.ll128_nvlink_hop_latency
                + inter * chip.ll128_network_hop_latency)
    return (chip.collective_base_latency + (steps - inter) * chip.nvlink_hop_latency
            + inter * chip.network_hop_latency)


def nccl_ring_time(wire: float, chip: ChipSpec, n: int, span: int, all_reduce: bool = False) -> float:
    """One ring collective over ``n`` ranks spanning ``span``, whose bytes take ``wire`` seconds at the ring's
    bandwidth: the faster of NCCL's Simple protocol (``wire`` plus Simple's latency) and LL128 (``wire`` at
    ``ll128_bandwidth_share`` of the bandwidth plus LL128's latency), as NCCL's tuner picks per call."""
    if n <= 1:
        return 0.0
    simple = wire + ring_latency(chip, n, span, all_reduce)
    if chip.ll128_bandwidth_share <= 0:
        return simple
    return min(simple, wire / chip.ll128_bandwidth_share + ring_latency(chip, n, span, all_reduce, ll128=True))


def ring_reduce_scatter(nbytes: float, n: int, bandwidth: float, chip: ChipSpec, span: int) -> float:
    """Ring reduce-scatter (equally all-gather) of ``nbytes`` over ``n`` ranks spanning ``span``, with NCCL's
    choice of protocol (:func:`nccl_ring_time`)."""
    return nccl_ring_time(ring_reduce_scatter_time(nbytes, n, bandwidth), chip, n, span)


def ring_all_reduce(nbytes: float, n: int, bandwidth: float, chip: ChipSpec, span: int) -> float:
    """Ring all-reduce of ``nbytes`` over ``n`` ranks spanning ``span``, with NCCL's choice of protocol."""
    return nccl_ring_time(ring_all_reduce_time(nbytes, n, bandwidth), chip, n, span, all_reduce=True)


def ring_reduce_scatter_time(nbytes: float, n: int, bandwidth: float, latency: float = 0.0) -> float:
    """Ring reduce-scatter (equally all-gather): ``(n−1)/n · N/β`` (Thakur et al. 2005) plus the collective's
    whole ``latency`` (:func:`ring_latency`)."""
    if n <= 1:
        return 0.0
    return (n - 1) / n * nbytes / bandwidth + latency


def ring_all_reduce_time(nbytes: float, n: int, bandwidth: float, latency: float = 0.0) -> float:
    """Ring all-reduce = reduce-scatter + all-gather: ``2(n−1)/n · N/β`` (Patarasuk & Yuan 2009) plus the
    collective's whole ``latency`` (:func:`ring_latency` with ``all_reduce``)."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bandwidth + latency


def group_bandwidth(chip: ChipSpec, span: int, stride: int = 1, op: CollectiveOp = CollectiveOp.ALL_REDUCE) -> float:
    """Per-chip one-direction bandwidth of collective ``op`` over ranks ``stride`` apart that span ``span``
    consecutive ranks.

    Inside one node: the intra-node link, times the share ``op`` reaches over that many ranks where the chip has
    a measured table of them (``nvlink_collective_shares``, :mod:`pipesim.analytic.collective_shares`: on an H100
    node a reduce-scatter or a pair of GPUs reaches well under an 8-GPU all-reduce), else
    ``collective_efficiency``. Across nodes, NCCL builds one ring per NIC and balances them over the
    node's NICs through NVLink (NVIDIA/nccl issue #601, the maintainers' answer: "we can use NVLink to split the
    operations in N parts then balance the traffic onto the N NICs"), so a group with ``k`` members in each
    node moves its data through ``k`` NICs (one per chip, as the presets assume), never faster than the
    intra-node link. Times ``collective_efficiency``: the share of the link NCCL's ring kernels reach (the bus
    bandwidth nccl-tests reports over the link's). Data parallelism with tp = 1 has all of a node's chips in
    one group (k = node size); with tp = 8 each chip's group has one member per node (k = 1, one NIC)."""
    if span <= chip.node_size:
        link = chip.intra_node_bandwidth
        if chip.nvlink_collective_shares is not None:
            return link * chip.nvlink_collective_shares.share(op, max(2, span // max(1, stride)))
    else:
        members_per_node = max(1, min(span // stride, chip.node_size // stride))
        link = min(chip.intra_node_bandwidth, members_per_node * chip.inter_node_bandwidth)
    return link * chip.collective_efficiency  # what NCCL's rings reach of the link (nccl-tests bus bandwidth)


def collective_time(op: CollectiveOp, nbytes: float, n: int, chip: ChipSpec, span: int, stride: int = 1) -> float:
    """One ``op`` (all-reduce, reduce-scatter or all-gather) of an ``nbytes`` buffer (the unsharded one: an
    all-gather's output, a reduce-scatter's input) over ``n`` ranks ``stride`` apart spanning ``span``: `pipesim
    profile`'s fit where the chip has one for ``op`` at ``n`` ranks, else the ring model at
    :func:`group_bandwidth` for ``op``."""
    measured = measured_collective_time(chip.measured, op, n, nbytes)
    if measured is not None:
        return measured
    bandwidth = group_bandwidth(chip, span, stride, op)
    if op is CollectiveOp.ALL_REDUCE:
        return ring_all_reduce(nbytes, n, bandwidth, chip, span)
    return ring_reduce_scatter(nbytes, n, bandwidth, chip, span)


@dataclass(frozen=True)
class LayerComm:
    """Exposed TP communication of one layer per microbatch, seconds."""

    forward: float
    backward: float  # including the recomputed forward's collectives under full recompute
    # Of ``backward``, what a backward that computes the weight gradients with the input gradients hides behind
    # the weight-gradient GEMMs (Layout.overlap_tp_dgrad); a split backward (zero bubble's B, then W later)
    # waits for all of ``backward``.
    hidden_by_weight_grad: float = 0.0


def tp_layer_comm(model: ModelSpec, layout: Layout, chip: ChipSpec, kind: LayerKind = LayerKind.DENSE) -> LayerComm:
    """Tensor-parallel collectives of one layer (Shoeybi et al. 2019 §3; Korthikanti et al. 2023 §4.2.2).

    ALL_REDUCE mode: the ``g`` operator all-reduces the ``bsh`` output of attention and of the MLP in the
    forward, and the conjugate ``f`` all-reduces their input gradients in the backward: 2 + 2 all-reduces, or
    2 + 3 where a gated MLP's gate and up projections are two column-parallel linears, each with its own ``f``
    (``layout.mlp_up``, :func:`~pipesim.analytic.kernels.split_up_collectives`).
    Sequence parallel: each all-reduce becomes an all-gather before the column-parallel linear and a
    reduce-scatter after the row-parallel one — the same bytes on the wire (Korthikanti §4.2.2), each at the
    rate its own collective reaches (:func:`group_bandwidth`); the backward's second all-gather of the input
    for the weight gradient is :func:`column_input_regather`'s. Full recompute repeats the forward's
    collectives, and with the stored input split over tp (:attr:`Layout.distribute_saved_activations`) the
    recomputed forward first all-gathers it; a selective recomputation of the MLP (``mlp``, a MoE layer's ``moe``)
    repeats the MLP's. All of it is counted exposed here; what the weight-gradient
    GEMMs hide of the backward's input-gradient collectives (:func:`tp_dgrad_collective`,
    :func:`dgrad_hidden_by_wgrad`) is set apart by the cost model.
    """
    t = layout.tp
    if t == 1:
        return LayerComm(0.0, 0.0)
    nbytes = _activation_bytes(model, layout)
    one, one_backward = _block_collectives(nbytes, tp_gather_bytes(model, layout),
                                           tp_gather_bytes(model, layout, TpGather.OUTPUT_GRADIENT), layout, chip)
    # A MoE layer's MLP block: its token dispatcher gathers the tokens over tp and scatters them back in the model's
    # dtype (Megatron-Core's gather_from_sequence_parallel_region, before the experts' linears quantize); under MoE
    # parallel folding the routed experts see the rank's own tokens, and only its shared experts, split over tp,
    # gather and scatter them, through their own linears
    folded = kind is LayerKind.MOE and layout.etp != t
    if folded and not model.shared_experts:
        mlp_block, mlp_block_backward = 0.0, 0.0
    elif kind is LayerKind.MOE and not folded:
        mlp_block, mlp_block_backward = _block_collectives(nbytes, nbytes, nbytes, layout, chip)
    else:
        mlp_block, mlp_block_backward = one, one_backward
    forward = one + mlp_block
    # the second up projection's own ``f``
    extra = one_backward if split_up_collectives(model, layout, kind) else 0.0
    # a checkpointed dense MLP or MoE block (selective ``mlp``, ``moe``) re-runs its forward's collective
    rerun = mlp_block if recomputed_mlp_width(model, layout, kind) and (
        kind is LayerKind.DENSE or recomputes_moe_block(layout, kind)) else 0.0
    backward = (one_backward + mlp_block_backward + extra + rerun
                + (forward if layout.recompute is Recompute.FULL else 0.0))
    if layout.distribute_saved_activations:  # full recomputation only (Layout refuses it otherwise)
        # the stored input's 1/tp shards gathered (gather_split_1d_tensor) on the compute stream, so waited for
        backward += collective_time(CollectiveOp.ALL_GATHER, nbytes, t, chip, t)
    return LayerComm(forward, backward)


def _block_collectives(nbytes: float, gathered: float, gathered_backward: float, layout: Layout,
                       chip: ChipSpec) -> tuple[float, float]:
    """One block's (attention's or MLP's) TP collectives over ``nbytes`` of activations, forward and backward: under
    sequence parallelism a gather of ``gathered`` bytes and a reduce-scatter, and the backward's conjugates, the
    input gradient reduce-scattered and the output gradient gathered (``gathered_backward`` bytes); without it an
    all-reduce each way."""
    t = layout.tp
    if not layout.sequence_parallel:
        reduce = collective_time(CollectiveOp.ALL_REDUCE, nbytes, t, chip, t)
        return reduce, reduce
    scatter = collective_time(CollectiveOp.REDUCE_SCATTER, nbytes, t, chip, t)
    return (collective_time(CollectiveOp.ALL_GATHER, gathered, t, chip, t) + scatter,
            scatter + collective_time(CollectiveOp.ALL_GATHER, gathered_backward, t, chip, t))


def local_shard_hidden(model: ModelSpec, layout: Layout, chip: ChipSpec, column_forwards: Sequence[float],
                       row_input_grads: Sequence[float]) -> LayerComm:
    """What nanotron's asynchronous TP (:attr:`Layout.overlap_tp_local_shard`) hides of a layer's all-gathers per
    microbatch: each column-parallel linear's input gather beside its own shard's forward GEMM
    (``column_forwards``), each row-parallel linear's output-gradient gather beside its own shard's input-gradient
    GEMM (``row_input_grads``), with the SM contention of an overlapped collective (:func:`contended_overlap`);
    the recomputed forward of full recomputation hides as the forward does. 0 without it or its gathers."""
    if not layout.hides_gathers_locally:
        return LayerComm(0.0, 0.0)
    gather = collective_time(CollectiveOp.ALL_GATHER, _activation_bytes(model, layout), layout.tp, chip, layout.tp)
    forward = sum(gather - contended_overlap(gather, g, chip.comm_sm_share) for g in column_forwards)
    backward = sum(gather - contended_overlap(gather, g, chip.comm_sm_share) for g in row_input_grads)
    return LayerComm(forward, backward + (forward if layout.recompute is Recompute.FULL else 0.0))


def logits_gather_time(model: ModelSpec, layout: Layout, chip: ChipSpec) -> float:
    """The all-gather of a microbatch's BF16 logits over tp before a gathered cross-entropy (``--loss
    gathered``: a column-parallel output layer with ``parallel_output`` off, Aleph Alpha's scaling framework),
    waited for; its backward takes the rank's own slice of the logits' gradient, no collective. 0 for a
    vocabulary-parallel loss."""
    if layout.loss.vocab_parallel or layout.tp == 1:
        return 0.0
    tokens = model.micro_batch * model.seq_len // layout.cp
    return collective_time(CollectiveOp.ALL_GATHER, model.dtype_bytes * tokens * model.vocab, layout.tp, chip,
                           layout.tp)


def _activation_bytes(model: ModelSpec, layout: Layout) -> int:
    """The ``b·s·h`` activation of this rank's cp share of the sequence: what one TP collective moves, and tp
    times what a pipeline send carries."""
    return model.dtype_bytes * model.micro_batch * model.seq_len // layout.cp * model.hidden


class TpGather(enum.Enum):
    """Which tensor a sequence-parallel all-gather carries (:func:`tp_gather_bytes`)."""

    INPUT = "input"  # a column-parallel linear's input, before its forward GEMM
    OUTPUT_GRADIENT = "output gradient"  # a row-parallel linear's output gradient, in the backward
    SAVED_INPUT = "saved input"  # a column-parallel linear's input as saved, gathered again for its weight gradient


def tp_gather_bytes(model: ModelSpec, layout: Layout, tensor: TpGather = TpGather.INPUT) -> float:
    """The bytes one sequence-parallel all-gather moves (its output, ``b·s·h`` elements): at the precision the
    GEMM reads where the linears quantize before they gather, else the model's dtype.

    Transformer Engine quantizes first and gathers the quantized tensor (``gather_along_first_dim(...,
    quantizer=...)`` in ``layernorm_linear.py`` and ``linear.py``: ``_all_gather_fp8``, ``_all_gather_nvfp4``; in
    its 2024 releases the fused norm wrote FP8 straight into the tensor it gathers): the forward's inputs, the
    output gradients (``grad_output_preprocess``: "FP8 with all-gather", cast first) and the inputs it saved
    quantized. An FP8 tensor's transpose is made after the gather; an NVFP4 output gradient is gathered both
    row-wise and column-wise (two quantizations, each with its own scales). torchao's tensor-parallel float8
    (``Float8ColwiseParallel``, ``PrepareFloat8ModuleInput``, what torchtitan applies under float8) casts a
    linear's input before redistributing it, so its forward gathers are FP8; the output gradient reaches the
    float8 matmul in BF16 and is cast there, after its gather, and the input it saves is BF16. The
    reduce-scatters carry the GEMMs' BF16 outputs."""
    precision = layout.precision
    # torchao quantizes only what it gathers before the forward GEMM; Transformer Engine everything it keeps
    quantized = precision.quantized if tensor is TpGather.INPUT else layout.keeps_quantized_copies
    copies = 2 if tensor is TpGather.OUTPUT_GRADIENT and precision is Precision.FP4 else 1
    element = copies * precision.element_bytes if quantized else model.dtype_bytes
    return _activation_bytes(model, layout) / model.dtype_bytes * element


def tp_dgrad_collective(model: ModelSpec, layout: Layout, chip: ChipSpec) -> float:
    """One column-parallel linear's input-gradient collective in the backward: the reduce-scatter back to the
    sequence shards with sequence parallelism, else the all-reduce of the conjugate ``f`` (0 at tp = 1)."""
    t = layout.tp
    if t == 1:
        return 0.0
    op = CollectiveOp.REDUCE_SCATTER if layout.sequence_parallel else CollectiveOp.ALL_REDUCE
    return collective_time(op, _activation_bytes(model, layout), t, chip, t)


def dgrad_hidden_by_wgrad(collective: float, weight_grads: Sequence[float], chip: ChipSpec) -> float:
    """What the weight-gradient GEMMs hide of the column-parallel linears' input-gradient collectives, one
    ``collective`` per linear beside that linear's own weight-gradient GEMM (``weight_grads``): each runs for
    its full length only beside compute it slows by the chip's SM share (:func:`contended_overlap`)."""
    return sum(collective - contended_overlap(collective, w, chip.comm_sm_share) for w in weight_grads)


def column_input_regather(model: ModelSpec, layout: Layout, chip: ChipSpec, input_grads: Sequence[float]) -> float:
    """Exposed time per layer and microbatch of the backward's second all-gather of each column-parallel
    linear's input, one per linear, ``input_grads`` their input-gradient GEMMs (0 unless sequence parallelism
    gathers that input, :attr:`Layout.gathers_column_input`).

    Korthikanti et al. 2023 §4.2.2: sequence parallelism stores the linear's input sharded and all-gathers it
    again in the backward for the weight gradient. Megatron-LM issues that gather asynchronously and runs the
    input-gradient GEMM meanwhile (:attr:`ColumnInput.REGATHER`): ``max(σ·c, c − g)`` beside the GEMM ``g``
    (:func:`contended_overlap`). nanotron waits for it (``REGATHER_BLOCKING``): ``c``. A framework that keeps
    the gathered input (``SAVED``) has none, unless its checkpointing recomputes the gather (per-op), waited
    for too."""
    if not layout.gathers_column_input:
        return 0.0
    # the input as saved, or under per-op recomputation its forward gather again
    tensor = TpGather.INPUT if layout.column_input is ColumnInput.SAVED else TpGather.SAVED_INPUT
    gather = collective_time(CollectiveOp.ALL_GATHER, tp_gather_bytes(model, layout, tensor), layout.tp, chip,
                             layout.tp)
    if layout.column_input is ColumnInput.REGATHER:
        return sum(contended_overlap(gather, g, chip.comm_sm_share) for g in input_grads)
    if layout.column_input is ColumnInput.SAVED and layout.recompute is not Recompute.PER_OP:
        return 0.0
    return gather * len(input_grads)


def p2p_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes one tp rank sends across a stage boundary per microbatch (activation forward, gradient back).

    The boundary tensor is ``b·s·h`` elements. With sequence parallelism each tp rank holds 1/t of it and sends
    that. Without, it is on every tp rank whole: Megatron-LM's scatter/gather optimization (Narayanan et al.
    2021 §4.1) and DeepSpeed's partitioned pipeline buffers send 1/t from each rank and all-gather it on the
    receiving node (over NVLink: cheap, not counted), where Megatron-Core, nanotron and Aleph Alpha's scaling
    send all of it from every rank (``layout.p2p_tensor``), t times the bytes over t NICs.
    """
    split = layout.sequence_parallel or layout.p2p_tensor is BoundaryTensor.SPLIT
    return _activation_bytes(model, layout) / (layout.tp if split else 1)


def stage_output_bytes(model: ModelSpec, layout: Layout, stage: int) -> float:
    """Bytes one tp rank sends across ``stage``'s output boundary per microbatch: :func:`p2p_bytes`, except where
    the LM head's stage is not the last (:attr:`Layout.stages_after_head`): the head's stage sends its BF16 logits,
    each tp rank its shard of the vocabulary (nanotron's vocabulary-parallel head), and a stage of the cast
    alone sends them in FP32; their gradients come back the same size. From the multi-token-prediction modules'
    stage to the loss's, each module's hidden states travel beside the model's (Megatron-Core concatenates them
    along the sequence)."""
    end = layout.head_parts(stage)
    if stage == layout.num_stages - 1 or not (end.projection or end.cast):
        carried = 1 + model.mtp_layers if model.mtp_layers and stage >= layout.mtp_slice else 1
        return carried * p2p_bytes(model, layout)
    logits = model.micro_batch * model.seq_len / layout.cp * model.vocab / layout.tp
    return logits * (4 if end.cast else model.dtype_bytes)


def p2p_bandwidth(layout: Layout, chip: ChipSpec) -> float:
    """The bandwidth of a pipeline send when the whole pipeline fits one node, else the NIC's.

    Inside a node a point-to-point send reaches less than a ring collective on the same link (NCCL gives it
    fewer channels): ``p2p_efficiency`` of it, a chip constant (see the presets). Between nodes the NIC is
    the bottleneck either way."""
    if layout.world_size <= chip.node_size:
        return chip.intra_node_bandwidth * chip.p2p_efficiency
    return chip.inter_node_bandwidth


def boundary_bandwidths(layout: Layout, chip: ChipSpec, shape) -> list[float]:
    """Bandwidth of each stage's output boundary (stage s → s+1): pipeline neighbours are ``tp·cp·dp``
    ranks apart in Megatron's default rank order, ``tp·cp`` with ``--tp-pp-dp-mapping``
    (:attr:`Layout.pipeline_stride`); a boundary whose two ranks sit in different nodes uses the NIC."""
    group = layout.pipeline_stride
    intra = chip.intra_node_bandwidth * chip.p2p_efficiency
    result = []
    for s in range(shape.num_slices - 1):  # DUAL: the down pipeline's; the up one crosses the same rank pairs
        a, b = shape.rank_of(s) * group, shape.rank_of(s + 1) * group
        result.append(intra if a // chip.node_size == b // chip.node_size else chip.inter_node_bandwidth)
    return result


def cp_kv_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes of one rank's keys and values under context parallelism: its ``s/cp`` tokens' K and V on its tp
    rank's heads, ``2·b·(s/cp)·kv_dim/t`` elements; ``heads/kv_heads`` times that where they are repeated to
    every query head before the attention call (:func:`~pipesim.analytic.kernels.kv_repeat`), which is what
    the call hands context parallelism to exchange."""
    return (2 * model.dtype_bytes * model.micro_batch * model.seq_len / layout.cp * model.kv_dim / layout.tp
            * kv_repeat(model, layout))


def _cp_capped(nbytes: float, seconds: float, layout: Layout, chip: ChipSpec) -> float:
    """``seconds`` for ``nbytes`` of the cp group's traffic, no faster than ``layout.cp_comm_ctas`` channels allow
    (inside a node :attr:`ChipSpec.p2p_channel_bandwidth` each, across nodes :data:`NCCL_NET_CHANNEL_BANDWIDTH`)."""
    if layout.cp_comm_ctas is None:
        return seconds
    in_node = layout.tp * layout.cp <= chip.node_size
    per_channel = chip.p2p_channel_bandwidth if in_node else NCCL_NET_CHANNEL_BANDWIDTH
    return max(seconds, nbytes / (layout.cp_comm_ctas * per_channel))


def cp_ring_hop(model: ModelSpec, layout: Layout, chip: ChipSpec) -> float:
    """One hop of ring attention (Liu et al. 2023, "Ring Attention"; Megatron-LM context parallelism): the K and V
    block of ``s/cp`` tokens (``2·b·(s/cp)·kv_dim/t`` elements) sent to the next rank, seconds. A point-to-point
    send, as a pipeline's: inside a node at ``p2p_efficiency`` of the link, between nodes over the sender's own
    NIC. With the cp group's CTAs capped (``layout.cp_comm_ctas``: NCCL runs one channel per CTA, and its P2P
    channels honour the communicator's ``maxCTAs``, ``ncclTopoComputeP2pChannels``) no faster than that many
    channels: inside a node :attr:`ChipSpec.p2p_channel_bandwidth` each, across nodes NCCL's own per-channel
    network figure (:data:`NCCL_NET_CHANNEL_BANDWIDTH`)."""
    block = cp_kv_bytes(model, layout)
    in_node = layout.tp * layout.cp <= chip.node_size
    bandwidth = chip.intra_node_bandwidth * chip.p2p_efficiency if in_node else chip.inter_node_bandwidth
    return _cp_capped(block, block / bandwidth, layout, chip) + chip.link_latency


def cp_gather_time(model: ModelSpec, layout: Layout, chip: ChipSpec) -> float:
    """One all-gather of every cp rank's K and V (``cp`` blocks of :func:`cp_kv_bytes`) over the cp group, ranks
    tp apart: a ring collective (:func:`collective_time`); the reduce-scatter of their gradients takes as long."""
    gathered = layout.cp * cp_kv_bytes(model, layout)
    seconds = collective_time(CollectiveOp.ALL_GATHER, gathered, layout.cp, chip, layout.tp * layout.cp, layout.tp)
    return _cp_capped(gathered * (layout.cp - 1) / layout.cp, seconds, layout, chip)


def cp_all_to_all_time(elements: float, model: ModelSpec, layout: Layout, chip: ChipSpec) -> float:
    """One Ulysses all-to-all of a rank's ``elements`` (its tensors' elements on its tp rank) over the
    :attr:`Layout.cp_a2a_ranks` adjacent cp ranks it spans (all of cp, or a2a+p2p's inner group): it keeps
    1/a and sends the rest, a share to each peer at once, over NVLink to the peers in its node and its NIC to
    the others (:func:`all_to_all_time`)."""
    a = layout.cp_a2a_ranks
    sent = model.dtype_bytes * elements * (a - 1) / a
    return _cp_capped(sent, all_to_all_time(sent, a, layout.tp, chip), layout, chip)


def cp_ring_comm(model: ModelSpec, layout: Layout, chip: ChipSpec) -> LayerComm:
    """Ring attention's P2P per layer, the *total* transfer time: ``cp − 1`` hops of K and V in the forward, and
    twice the bytes (K and V, then their gradients) in the backward. :func:`cp_ring_exposed` says how much of
    it the attention hides."""
    n = layout.cp_ring_ranks
    if n == 1:
        return LayerComm(0.0, 0.0)
    forward = (n - 1) * cp_ring_hop(model, layout, chip)
    return LayerComm(forward, 2 * forward)


def cp_ring_exposed(model: ModelSpec, layout: Layout, chip: ChipSpec, core_forward: float,
                    core_backward: float) -> LayerComm:
    """The part of ring attention's P2P per layer that its attention kernels do not hide, step by step.

    Transformer Engine's ring (``AttnFuncWithCPAndKVP2P``, what Megatron-Core runs for context parallelism)
    computes the attention in ``cp`` steps, one per K/V block, and sends the block for step ``i + 1`` while step
    ``i`` computes: a step lasts the longer of its kernel and its hop, so a hop hides behind one step's share of
    the attention (``core / cp``, the load-balanced split gives every step the same work), not behind the
    layer's whole attention. Forward: ``cp − 1`` hops of K and V. Backward: the first step's hop carries K and
    V, the middle steps' K, V and the dK, dV accumulated so far (twice the bytes), the last step's dK and dV
    alone. ``core_forward`` and ``core_backward``: the layer's attention kernels, seconds. Under a2a+p2p the ring
    is the one between the all-to-all groups, ``cp / cp_a2a_size`` long (:attr:`Layout.cp_ring_ranks`), its
    blocks as many bytes (a group's ``s·a/cp`` tokens on ``1/a`` of the heads)."""
    n = layout.cp_ring_ranks
    if n == 1:
        return LayerComm(0.0, 0.0)
    hop = cp_ring_hop(model, layout, chip)
    step_forward, step_backward = core_forward / n, core_backward / n
    forward = (n - 1) * overlapped(hop, step_forward)
    backward = 2 * overlapped(hop, step_backward) + (n - 2) * overlapped(2 * hop, step_backward)
    return LayerComm(forward, backward)


def cp_exposed(model: ModelSpec, layout: Layout, chip: ChipSpec, core_forward: float,
               core_backward: float) -> LayerComm:
    """The part of context parallelism's communication per layer that the attention kernels do not hide, as
    the code running it (:attr:`Layout.cp_kernels`) exchanges keys and values (:attr:`Layout.cp_comm`).
    ``core_forward`` and ``core_backward``: the layer's attention kernels, seconds, over ``cp`` steps of equal
    work (the load-balanced split) where the attention runs in steps.

    Transformer Engine (``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``):
    the ring as :func:`cp_ring_exposed` has it; the all-gather (``AttnFuncWithCPAndKVAllGather``, "KV
    all-gather between CP ranks is exposed") of K and V before the attention, in the backward gathered again
    and their gradients reduce-scattered, all waited for; Ulysses (``AttnFuncWithCPAndQKVOA2A``): q, k and v
    all-to-all before the attention and its output after (the backward: the output's gradient, then q's, k's
    and v's), each waited for before the kernel that reads it; a2a+p2p (``AttnFuncWithCPAndKVP2P`` given two
    groups): those all-to-alls inside each group of adjacent cp ranks, then the ring between the groups.

    PyTorch's ``context_parallel`` (``torch/distributed/tensor/experimental/_context_parallel/_attention.py``,
    ``_templated_ring_attention`` and its backward): the all-gather rotation issues the gather at the first
    step and waits for it at the second, so the first step's attention hides it (the backward gathers again);
    the ring rotation (its ``alltoall`` method, a permute to the next rank) sends each step's block beside the
    step. In the backward the K and V gradients travel on after every step in FP32 (twice the bytes),
    each waited for at the next step after its kernel, the last one after the loop."""
    cp = layout.cp
    if cp == 1:
        return LayerComm(0.0, 0.0)
    step_forward, step_backward = core_forward / cp, core_backward / cp
    if layout.cp_kernels is CpKernels.TRANSFORMER_ENGINE:
        if layout.cp_comm is CpComm.ALL_GATHER:
            gather = cp_gather_time(model, layout, chip)
            return LayerComm(gather, 2 * gather)
        ring = cp_ring_exposed(model, layout, chip, core_forward, core_backward)  # 0 without a ring
        if not layout.cp_comm.all_to_all:
            return ring
        queries = model.micro_batch * model.seq_len / cp * model.heads / layout.tp * model.qk_head_dim
        outputs = queries / model.qk_head_dim * model.value_head_dim
        keys_values = cp_kv_bytes(model, layout) / model.dtype_bytes
        both = cp_all_to_all_time(queries + keys_values, model, layout, chip) + cp_all_to_all_time(
            outputs, model, layout, chip)
        return LayerComm(ring.forward + both, ring.backward + both)
    hop = cp_ring_hop(model, layout, chip)
    gradients = 2 * hop  # the K and V gradients rotate in FP32
    if layout.cp_comm is CpComm.ALL_GATHER:
        gather = cp_gather_time(model, layout, chip)
        forward = overlapped(gather, step_forward)
        backward = overlapped(gather, step_backward) + (cp - 1) * overlapped(gradients, step_backward)
    else:
        forward = (cp - 1) * overlapped(hop, step_forward)
        backward = (cp - 1) * overlapped(hop + gradients, step_backward)
    return LayerComm(forward, backward + gradients)


def overlapped(comm: float, compute: float, floor: float = 0.0) -> float:
    """Exposed time of ``comm`` run beside ``compute``: what sticks out, and at least ``floor``."""
    return max(floor, comm - compute)


def contended_overlap(comm: float, compute: float, sm_share: float) -> float:
    """Exposed time of an NCCL collective of ``comm`` seconds run beside ``compute`` seconds of kernels, when
    the collective holds ``sm_share`` of the SMs while it runs (:attr:`ChipSpec.comm_sm_share`).

    While the collective runs, compute proceeds at ``1 − σ`` of its rate; after it, at full rate. If the
    collective ends first (``comm < T``), the work ``compute = (1 − σ)·comm + (T − comm)`` ends at
    ``T = compute + σ·comm``; otherwise the pair ends with the collective. So the time beyond ``compute`` is
    ``max(σ·comm, comm − compute)``: never free, as :func:`overlapped` takes it. The size of the effect is
    measured: Hu et al. 2025 ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
    Learning", arXiv 2507.03114, abstract) find compute 18.9 % slower on average while a collective overlaps
    it (A100, H100, MI250, MI210; up to 40 %); 24 CTAs of an H100's 132 SMs is 18 %, of an A100's 108, 22 %.
    Not counted: the HBM traffic the collective adds beside memory-bound kernels, and the extra wave a GEMM
    sized to the whole chip needs when SMs are taken (the forum report above saw it double one GEMM).
    """
    return max(sm_share * comm, comm - compute)


def prefetched_overlap(comm: float, compute: float, sm_share: float, overlap_share: float,
                       kernel_work: float | None = None) -> float:
    """Exposed time of a collective that the next layer waits for (ZeRO-3 / FSDP's per-layer gathers and
    reduce-scatters, prefetched one layer ahead), when only ``overlap_share`` of its kernels' work really runs
    beside compute.

    A collective's kernels need SMs to make progress; launched beside compute kernels that occupy every SM,
    they wait for SMs to free up (Cui & Pericàs 2026, "Resource-aware Computation-Communication Overlap for
    multi-GPU ML Workloads", arXiv 2606.09200: communication kernels make progress only once the computation
    kernels leave them on-chip resources; reserving them cut execution time by up to 25.5 %). A collective the
    next layer depends on, issued one layer ahead, then mostly runs in the gap before that layer: serialised.
    Lee et al. 2025 (arXiv 2507.03114, abstract) measure overlapped execution only 10.2 % faster than running
    compute and communication one after the other, on average. So ``1 − η`` of the kernels' work is exposed in
    full and the rest of the collective overlaps as :func:`contended_overlap` takes it; ``η``
    (``ChipSpec.zero3_overlap_share``) is fitted to the published FSDP and ZeRO-3 runs
    (pipesim.validation.constants), not measured.

    ``kernel_work``: what of ``comm`` is the kernels' own work, the part that needs SMs. Inside a node NCCL's
    kernels move every byte (loads and stores over NVLink), so it is all of it; across nodes the NIC moves the
    bytes between nodes (GPUDirect RDMA, driven by NCCL's proxy thread on the host) while the kernels copy,
    reduce and forward them at the GPU's own rates, so a collective that waits on a thinner network is not more
    work for them. Taken as the collective's time at the intra-node link's bandwidth
    (:func:`kernel_work_chip`); None: all of ``comm``. Two published runs of one job on two networks say so
    (pipesim.validation.network_pairs: fms-fsdp's H100 rows at 800 Gb/s and 3.2 Tb/s a node ran at the same
    MFU, which a serialised quarter of the whole collective put 11–20 % apart)."""
    work = comm if kernel_work is None else min(comm, kernel_work)
    serialised = (1.0 - overlap_share) * work
    return serialised + contended_overlap(comm - serialised, compute, sm_share)


def kernel_work_chip(chip: ChipSpec) -> ChipSpec:
    """``chip`` with its network as fast as its intra-node link: the time a collective takes on it is what its
    kernels' own work would take, the network never the bottleneck (:func:`prefetched_overlap`). A chip whose
    collectives `pipesim profile` measured keeps those times (:func:`collective_time` reads them first), so there
    the kernel work is taken as the whole measured collective."""
    if chip.inter_node_bandwidth >= chip.intra_node_bandwidth:
        return chip
    return replace(chip, inter_node_bandwidth=chip.intra_node_bandwidth)


# Share of a tensor-parallel collective's volume that runs on SMs when it is overlapped with the GEMMs
# (Transformer Engine's userbuffers, what Megatron-LM's --tp-comm-overlap uses): the reduce-scatters run as
# pipelined or bulk SM kernels (their num_sm, up to UB_MAX_SM = 32 in TE's comm_gemm_overlap), the all-gathers
# as ring-exchange P2P copies that hold one SM (RingExchangeOverlapCfg's num_sm = 1). With sequence
# parallelism the two move the same bytes, so half the volume takes SMs.
TP_OVERLAP_SM_VOLUME = 0.5


def chunked_overlap(comm: float, compute: float, chunks: int, sm_share: float) -> float:
    """Exposed time of a collective cut into ``chunks`` pieces that run beside the GEMM consuming or producing
    them (async TP): the first piece has nothing to hide behind, the rest overlap ``compute`` while holding
    ``sm_share`` of the SMs (:func:`contended_overlap`)."""
    first = comm / chunks
    return first + contended_overlap(comm - first, compute, sm_share)


@dataclass(frozen=True)
class GradSync:
    """Data-parallel time for one stage's gradients (REDUCE_GRAD) and the post-step parameter all-gather."""

    reduce: float
    gather: float


def moe_all_to_all_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes one rank sends in one dispatch (or combine) all-to-all of a MoE layer, per microbatch.

    Each of the rank's ``b·s/cp`` tokens goes to ``k`` experts: ``tokens·k·h`` elements, of which the share
    ``(ep−1)/ep`` is for experts on the other ranks of the expert-parallel group (uniform routing), times
    ``moe_imbalance`` (the most-loaded rank receives, and in the combine sends back, that many times the mean).
    With experts split over tp each tp rank exchanges the whole tokens with its peers' same tp rank; under MoE
    parallel folding its own 1/tp of them (:attr:`Layout.expert_token_share`)."""
    if layout.ep == 1 or not model.is_moe:
        return 0.0
    elements = routed_tokens(model, layout) * model.experts_per_token * model.hidden * layout.moe_imbalance
    return model.dtype_bytes * elements * (layout.ep - 1) / layout.ep


def moe_all_to_all_time(model: ModelSpec, layout: Layout, chip: ChipSpec) -> float:
    """Seconds of one dispatch (or combine) all-to-all over the ep ranks, per microbatch.

    The expert-parallel group is ``ep`` members of the stage's dp·cp ranks, ``tp`` ranks apart (Megatron's
    order; adjacent under MoE parallel folding, the expert tensor parallelism apart), so ``min(ep,
    node_size/tp)`` of them share a node. A rank sends to every peer at once (NCCL's
    all-to-all is one grouped send/receive per peer): the part for peers in its node goes over NVLink (at the
    share an all-to-all over that many GPUs of the node reaches, where the chip has a measured table:
    ``nvlink_collective_shares``), the rest over its own NIC, in parallel, and the slower of the two is the
    time. Latency: NCCL's base latency plus one hop (network when the group crosses nodes), the peers being
    reached at once rather than in ``ep − 1`` ring steps."""
    nbytes = moe_all_to_all_bytes(model, layout)
    if nbytes == 0:
        return 0.0
    return all_to_all_time(nbytes, layout.ep, layout.etp, chip)


def all_to_all_time(nbytes: float, members: int, stride: int, chip: ChipSpec) -> float:
    """One all-to-all in which a rank sends ``nbytes`` in all, an equal share to each of the group's other
    ``members − 1`` ranks (``stride`` ranks apart), to every peer at once: the part for peers in its node over
    NVLink (at the share an all-to-all over that many GPUs of the node reaches, where the chip has a measured
    table: ``nvlink_collective_shares``), the rest over its own NIC, in parallel; the slower of the two, plus
    NCCL's base latency and one hop (the network's when the group crosses nodes)."""
    local = max(1, min(members, chip.node_size // stride))
    intra = nbytes * (local - 1) / (members - 1)
    inter = nbytes - intra
    wire = max(intra / nvlink_all_to_all_rate(chip, local), inter / chip.inter_node_bandwidth)
    hop = chip.network_hop_latency if inter > 0 else chip.nvlink_hop_latency
    return wire + chip.collective_base_latency + hop


def moe_layer_a2a(model: ModelSpec, layout: Layout, chip: ChipSpec) -> LayerComm:
    """A MoE layer's all-to-alls per microbatch: dispatch and combine in the forward, their gradients (combine
    and dispatch reversed) in the backward, and under full recomputation (or the ``moe`` module's) the forward's
    two again. With DeepEP (:mod:`.moe_dispatch`) each way moves what it reaches, the tokens toward the experts
    (the dispatch, and the combine's gradient) in FP8 where ``moe_dispatch_fp8``."""
    if uses_deepep(layout) and layout.ep > 1 and model.is_moe:
        toward, back = dispatch_element_bytes(model, layout)
        both = deepep_time(model, layout, chip, toward) + deepep_time(model, layout, chip, back)
    else:
        both = 2 * moe_all_to_all_time(model, layout, chip)
    again = layout.recompute is Recompute.FULL or recomputes_moe_block(layout, LayerKind.MOE)  # (selective "moe")
    return LayerComm(both, both + (both if again else 0.0))


def dp_grad_sync(stage_params_per_rank: float, layout: Layout, chip: ChipSpec,
                 expert_params_per_rank: float = 0.0) -> GradSync:
    """Gradient sync of ``stage_params_per_rank`` parameters (already divided by tp) over the dp group.

    Plain data parallel: ring all-reduce of the gradient buffer (``grads`` bytes per parameter, FP32 in
    Megatron-LM). Distributed optimizer / ZeRO-1 (Rajbhandari et al. 2020, §5.1; Megatron-LM's distributed
    optimizer): reduce-scatter of the gradients, the optimizer updates its 1/dp shard, then an all-gather of
    the BF16 parameters — ``(n−1)/n`` of each, on the same link. The dp group spans ``tp·dp`` ranks. Hybrid
    ZeRO-1 (:attr:`Layout.shard_group`, InternEvo's): the whole gradients all-reduced over the group,
    the updated parameters gathered within each shard group; under :attr:`ZeroCollectives.HIERARCHICAL`
    (Megatron-LM's optimizer instances) reduce-scattered within the shard group and the shard all-reduced across
    the groups, as hybrid ZeRO-2/3 reduces.

    ``expert_params_per_rank`` of them are routed experts sharded over ep: those sync over their expert
    data-parallel group instead, the dp·cp/ep ranks that hold the same experts (``tp·ep`` ranks apart).
    """
    # context-parallel ranks hold the same weights: gradients reduce over dp·cp
    # members layout.dp_stride ranks apart (tp, or tp·pp with --tp-pp-dp-mapping)
    dense = _grad_sync(stage_params_per_rank - expert_params_per_rank, layout.dp * layout.cp, layout.dp_stride,
                       layout, chip)
    if not expert_params_per_rank:
        return dense
    stride = layout.etp * layout.ep if layout.etp != layout.tp else layout.dp_stride * layout.ep
    expert = _grad_sync(expert_params_per_rank, layout.expert_shards, stride, layout, chip)
    return GradSync(dense.reduce + expert.reduce, dense.gather + expert.gather)


def _grad_sync(params: float, d: int, stride: int, layout: Layout, chip: ChipSpec) -> GradSync:
    """:func:`dp_grad_sync` of ``params`` over ``d`` ranks ``stride`` apart (spanning ``tp·dp·cp`` ranks)."""
    if d == 1:
        return GradSync(0.0, 0.0)
    span = stride * d
    grad_bytes = params * layout.param_bytes.grads
    if layout.sharding is ZeroStage.NONE:
        return GradSync(collective_time(CollectiveOp.ALL_REDUCE, grad_bytes, d, chip, span, stride), 0.0)
    weight_bytes = params * layout.gathered_weight_bytes
    group = layout.shard_group
    if group is not None and group < d and (layout.sharding >= ZeroStage.GRADIENTS
                                            or layout.zero_collectives is ZeroCollectives.HIERARCHICAL):
        # hybrid ZeRO-2/3 (FSDP's HYBRID_SHARD) and Megatron-LM's optimizer instances: reduce-scattered within the
        # group, the shard all-reduced across the replicas, the weights gathered within the group
        wire = collective_time(CollectiveOp.REDUCE_SCATTER, grad_bytes, group, chip, stride * group, stride)
        return GradSync(wire + replica_reduce(grad_bytes / group, layout, chip),
                        collective_time(CollectiveOp.ALL_GATHER, weight_bytes, group, chip, stride * group, stride))
    if group is not None and group < d:
        # hybrid ZeRO-1: every rank's whole gradients all-reduced over the d ranks (the groups are replicas), then
        # the updated weights gathered within the rank's group, ``group`` consecutive members of the d
        wire = params * FP32 if layout.zero_collectives is ZeroCollectives.ALL_REDUCE_FP32 else grad_bytes
        return GradSync(collective_time(CollectiveOp.ALL_REDUCE, wire, d, chip, span, stride),
                        collective_time(CollectiveOp.ALL_GATHER, weight_bytes, group, chip, stride * group, stride))
    if layout.zero_collectives is ZeroCollectives.ALL_REDUCE_FP32:  # whole gradients, cast to FP32 for the wire
        return GradSync(collective_time(CollectiveOp.ALL_REDUCE, params * FP32, d, chip, span, stride),
                        collective_time(CollectiveOp.ALL_GATHER, weight_bytes, d, chip, span, stride))
    return GradSync(collective_time(CollectiveOp.REDUCE_SCATTER, grad_bytes, d, chip, span, stride),
                    collective_time(CollectiveOp.ALL_GATHER, weight_bytes, d, chip, span, stride))


def mirror_grad_sum(stage_params_per_rank: float, layout: Layout, chip: ChipSpec,
                    expert_params_per_rank: float = 0.0) -> float:
    """DualPipe's two copies of a stage (``layout.model_copies`` = 2): the sum of their gradients across the
    mirror pair of pipeline ranks r and pp−1−r before the optimizer step (DeepSeek-V3 §3.2.1), taken as a
    two-rank all-reduce of what each rank holds after its data-parallel sync — its 1/(dp·cp) shard of the dense
    and 1/(dp·cp/ep) of the expert gradients under ZeRO ≥ 1, the whole gradient without sharding. The two
    ranks are (pp−1−2r)·tp·cp·dp ranks apart, so one NIC each, unless the whole job fits in one node."""
    if layout.model_copies == 1:
        return 0.0
    sharded = layout.sharding > ZeroStage.NONE
    dense = stage_params_per_rank - expert_params_per_rank
    held = dense / (layout.shards if sharded else 1) + expert_params_per_rank / (layout.expert_shards if sharded
                                                                                   else 1)
    span = layout.world_size
    # the ring model, not a profile's 2-rank fit: the pair is usually in two nodes, the fit's two ranks in one
    bandwidth = group_bandwidth(chip, span, stride=max(1, span // 2))
    return ring_all_reduce(held * layout.param_bytes.grads, 2, bandwidth, chip, span)


def embedding_copy_ranks(model: ModelSpec, layout: Layout, shape) -> tuple[int, ...]:
    """The pipeline ranks that hold a copy of the embedding table, in ``shape``'s placement: the first slice's
    (the table itself), a tied output layer's (its weight is the table) and a multi-token-prediction module's
    copy (:func:`~pipesim.analytic.mtp.mtp_embedding_copy`). One rank when no copy sits elsewhere. DualPipe's
    two model copies share the table physically (DeepSeek-V3 §3.2.3): their rank 0 holds the first slice of one
    and the last of the other."""
    holders = {shape.rank_of(0)}
    if layout.model_copies == 2:
        return tuple(holders)
    if model.tied_embeddings and layout.num_stages > 1:
        holders.add(shape.rank_of(layout.head_stage))
    if mtp_embedding_copy(model, layout):
        holders.add(shape.rank_of(layout.mtp_slice))
    return tuple(sorted(holders))


def embedding_grad_sum(model: ModelSpec, layout: Layout, chip: ChipSpec, shape) -> float:
    """Seconds the step waits to sum the embedding table's gradients over the pipeline ranks that hold a copy
    (:func:`embedding_copy_ranks`) before the optimizer step, so the copies stay equal; zero where one rank holds
    them all.

    Megatron-Core's ``finalize_model_grads`` all-reduces the table's gradient (its ``main_grad``, the whole
    buffer whatever the optimizer shards) over the embedding group, the first and last pipeline stages (and the
    MTP stage's copy: ``_get_shared_word_embedding_weight``), after the data-parallel sync has finished
    (``finish_grad_sync``) and before the optimizer; DeepSpeed's pipeline engine runs ``ReduceTiedGrads`` the
    same way, one blocking all-reduce per tied weight before ``OptimizerStep``. The ranks not in the group wait
    for it at the optimizer's gradient norm, a collective over every model-parallel rank, so the whole step
    waits. Each (tp, cp, dp) position has its own group, all at once, the table split over tp (Megatron's
    vocabulary-parallel embedding); the copies sit ``pipeline_stride`` ranks apart per pipeline rank, in two
    nodes unless the whole span fits one (then NVLink's share for that many GPUs). A ring all-reduce, not a
    profile's fit: those are measured on ranks that share a node. With gradients sharded (ZeRO-2, FSDP) a rank
    holds and sums its 1/shards of them."""
    holders = embedding_copy_ranks(model, layout, shape)
    n = len(holders)
    if n == 1:
        return 0.0
    table = model.vocab * model.hidden / layout.tp
    if layout.sharding >= ZeroStage.GRADIENTS:
        table /= layout.shards
    stride = layout.pipeline_stride
    span = (holders[-1] - holders[0]) * stride + 1
    bandwidth = group_bandwidth(chip, span, stride=max(1, (span - 1) // (n - 1)))
    return ring_all_reduce(table * layout.param_bytes.grads, n, bandwidth, chip, span)


def optimizer_step_time(params_per_rank: float, layout: Layout, chip: ChipSpec,
                        expert_params_per_rank: float = 0.0) -> float:
    """Adam is memory-bound: per updated parameter it reads grad, master weight, m, v (16 B) and writes master,
    m, v (12 B) and the BF16 weight (2 B) — 30 B over HBM bandwidth (the fused Adam kernels of Apex/TE).
    Sharded, a rank updates 1/(dp·cp) of its dense parameters (1/group in a shard group, unless hybrid FSDP shards
    the optimizer across the groups too: :attr:`Layout.optimizer_shards`) and 1/(dp·cp/ep) of its experts."""
    sharded = layout.sharding > ZeroStage.NONE
    dense = params_per_rank - expert_params_per_rank
    updated = (dense / (layout.optimizer_shards if sharded else 1)
               + expert_params_per_rank / (layout.expert_shards if sharded else 1))
    return 30.0 * updated / chip.stream_bandwidth


def fsdp_layer_comm(layer_params_per_rank: float, layout: Layout, chip: ChipSpec) -> LayerComm:
    """ZeRO-3 / FSDP without pipelining, per layer and microbatch (Rajbhandari et al. 2020 §5.3; Zhao et al.
    2023, "PyTorch FSDP", §3.2): the layer's BF16 weights (FP8 under torchao's float8 all-gather,
    :attr:`Layout.gathered_weight_bytes`) are all-gathered before its forward and again
    before its backward, and its gradients reduce-scattered after it. FSDP's SHARD_GRAD_OP (ZeRO-2 per layer,
    :attr:`Layout.regathers_for_backward` false) keeps the gathered weights until the backward: no second
    gather. Under hybrid sharding the gathers and reduce-scatters run within the shard group and each reduced
    shard is then all-reduced across the replicas (:func:`sharded_collective`). Total transfer time; the prefetch
    overlaps it with the neighbouring layer's compute, so :func:`prefetched_overlap` decides what is exposed."""
    gather = sharded_collective(CollectiveOp.ALL_GATHER, layer_params_per_rank * layout.gathered_weight_bytes,
                                 layout, chip)
    scatter = sharded_collective(CollectiveOp.REDUCE_SCATTER, layer_params_per_rank * layout.param_bytes.grads,
                                  layout, chip)
    return LayerComm(gather, (gather if layout.regathers_for_backward else 0.0) + scatter)


def sharded_collective(op: CollectiveOp, nbytes: float, layout: Layout, chip: ChipSpec) -> float:
    """One ZeRO collective of an ``nbytes`` buffer over the ranks that share a tp rank's shard: dp·cp, or the
    shard group under hybrid sharding; with replicas (:attr:`Layout.shard_replicas`), a reduce-scatter's shard
    is then all-reduced across them (:func:`replica_all_reduce`)."""
    n = layout.shards
    own = collective_time(op, nbytes, n, chip, layout.dp_stride * n, stride=layout.dp_stride)
    if op is CollectiveOp.REDUCE_SCATTER:
        own += replica_reduce(nbytes / n, layout, chip)
    return own


def replica_reduce(shard_bytes: float, layout: Layout, chip: ChipSpec) -> float:
    """A reduced shard's second step across the replicas of hybrid sharding: all-reduced
    (:func:`replica_all_reduce`), or, where hybrid FSDP shards the optimizer across the replicas too
    (:attr:`Layout.outer_optimizer_sharding`), reduce-scattered, each rank keeping the 1/replicas its optimizer
    updates (Megatron-FSDP's HFSDP: the outer reduce-scatter, the updated pieces gathered after the step by
    :func:`replica_weight_gather`)."""
    if not layout.outer_optimizer_sharding:
        return replica_all_reduce(shard_bytes, layout, chip)
    return _across_replicas(CollectiveOp.REDUCE_SCATTER, shard_bytes, layout, chip)


def replica_weight_gather(params_per_rank: float, layout: Layout, chip: ChipSpec) -> float:
    """Hybrid FSDP's gather after the optimizer step (:attr:`Layout.outer_optimizer_sharding`): each rank's
    updated 1/(dp·cp) of the weights all-gathered across the replicas into its shard group's 1/group, in the
    weights' bytes (Megatron-FSDP's HFSDP: the outer all-gather of the updated parameters). Waited for before the
    next step's first gather: nothing in pipesim overlaps it. 0 without outer optimizer sharding."""
    if not layout.outer_optimizer_sharding:
        return 0.0
    shard = params_per_rank / layout.shards * layout.param_bytes.weights
    return _across_replicas(CollectiveOp.ALL_GATHER, shard, layout, chip)


def _across_replicas(op: CollectiveOp, nbytes: float, layout: Layout, chip: ChipSpec) -> float:
    """One collective of an ``nbytes`` buffer over the replicas of hybrid sharding, ``shard_group·dp_stride``
    ranks apart (so across nodes wherever the group fills one)."""
    replicas = layout.shard_replicas
    if replicas == 1:
        return 0.0
    stride = layout.dp_stride * layout.shards
    return collective_time(op, nbytes, replicas, chip, stride * replicas, stride=stride)


def replica_all_reduce(shard_bytes: float, layout: Layout, chip: ChipSpec) -> float:
    """Hybrid sharding's second step (PyTorch FSDP's HYBRID_SHARD: ``_reduce_grad`` all-reduces each reduced
    shard over the inter-node group; torchtitan's HSDP the same over dp_replicate): a rank's ``shard_bytes`` of
    reduced gradients all-reduced with the same shard of every other replica, ``shard_group·dp_stride`` ranks
    apart, so across nodes wherever the group fills one. 0 without replicas."""
    return _across_replicas(CollectiveOp.ALL_REDUCE, shard_bytes, layout, chip)


# DeepSpeed's ``param_persistence_threshold`` default (runtime/zero/constants.py, unchanged since ZeRO-3's
# release): under ZeRO-3 a tensor with fewer elements is never partitioned, so it is never gathered.
ZERO3_PERSISTENCE_THRESHOLD = 100_000


def per_tensor_layer_comm(tensors: Sequence[int], layout: Layout, chip: ChipSpec) -> LayerComm:
    """DeepSpeed's 2021 ZeRO-3 (:attr:`ZeroCollectives.PER_TENSOR`) per layer and microbatch: each tensor of at
    least :data:`ZERO3_PERSISTENCE_THRESHOLD` elements all-gathered on its own before the forward, again before
    the backward, and once more before a forward recomputed in full; every tensor's gradient reduce-scattered
    on its own. The bytes are :func:`fsdp_layer_comm`'s; each collective pays its ring's latency.
    ``tensors``: elements per tensor on this rank (:func:`pipesim.analytic.kernels.layer_parameter_tensors`)."""
    gather = sum(sharded_collective(CollectiveOp.ALL_GATHER, size * layout.param_bytes.weights, layout, chip)
                 for size in _gathered(tensors))
    scatter = sum(sharded_collective(CollectiveOp.REDUCE_SCATTER, size * layout.param_bytes.grads, layout, chip)
                  for size in tensors)
    return LayerComm(gather, gather * _backward_gathers(layout) + scatter)


def per_tensor_host_time(tensors: Sequence[int], layout: Layout, chip: ChipSpec) -> LayerComm:
    """The host's share of :func:`per_tensor_layer_comm`, per layer and microbatch. DeepSpeed hands PyTorch each
    collective as a list of one view per rank (``partitions.append(flat_tensor.narrow(...))`` for all N ranks),
    and ProcessGroupNCCL moves a list through a flat buffer with one ``copy_`` per view (after an all-gather,
    before a reduce-scatter): N tensor operations per collective, each :attr:`ChipSpec.host_kernel_overhead`.
    Exposed in full: ``_allgather_param`` calls ``torch.cuda.synchronize()`` first, so the device has no work
    queued to hide it behind. Taken one after the other with the transfer, which errs long where a tensor's
    transfer outlasts the N copies issued while it runs."""
    per_collective = layout.shards * chip.host_kernel_overhead  # one view per rank of the collective's group
    gathers = len(_gathered(tensors))
    return LayerComm(gathers * per_collective,
                     (gathers * _backward_gathers(layout) + len(tensors)) * per_collective)


def _gathered(tensors: Sequence[int]) -> list[int]:
    """The tensors ZeRO-3 partitions and so gathers: those of at least :data:`ZERO3_PERSISTENCE_THRESHOLD`."""
    return [size for size in tensors if size >= ZERO3_PERSISTENCE_THRESHOLD]


def _backward_gathers(layout: Layout) -> int:
    """Gathers of a tensor-by-tensor ZeRO-3 layer in its backward: one, and one more for a recomputed forward
    (its forward hooks fetch the weights and release them before the backward's hooks fetch them again)."""
    return 2 if layout.recompute is Recompute.FULL else 1
