"""How many bytes a MoE layer's dispatch and combine move, and how long they take, by dispatcher.

A token routed to ``k`` experts has to reach the ranks that hold them. Megatron-Core's all-to-all dispatcher
(:attr:`~pipesim.analytic.layout.MoeDispatcher.ALLTOALL`) sends one copy per routed expert, straight to its
rank; DeepEP's normal kernels (:attr:`~pipesim.analytic.layout.MoeDispatcher.DEEPEP`, DeepSeek-V3 §3.2.2) send
one copy per destination *node* across the network, to the rank with the sender's local index there, which
forwards it over NVLink to each rank of that node holding one of its experts (one copy per rank). The combine
runs the same paths back, summing within a node before the network. What limits the network's share is how many
nodes a token's experts are on: :func:`expected_units_reached` counts them from the routing, and group-limited
routing (``ModelSpec.expert_groups``; DeepSeek-V3's node-limited routing, §2.1.2: at most 4 of 8 nodes) bounds it.

DeepSeek-V3 dispatches in FP8 with a scale per 128 elements (§3.3.3: the activations before the experts' up
projections and, in the backward, the gradients before their down projections) and combines in BF16
(``Layout.moe_dispatch_fp8``).

Routing is taken as uniform over the experts a token may reach (the balance that auxiliary losses and DeepSeek's
bias terms aim at); ``Layout.moe_imbalance`` scales the most-loaded rank's share, as for the computation.
"""

from __future__ import annotations

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.layout import Layout, MoeDispatcher
from pipesim.analytic.measured import CollectiveOp
from pipesim.analytic.model_spec import ModelSpec

# An FP8 dispatch's bytes per element: one E4M3 byte and an FP32 scale per 128 elements (DeepSeek-V3 §3.3.2's
# 1×128 activation tiles; DeepEP's ``per_token_cast_to_fp8``).
FP8_DISPATCH_BYTES = 1 + 4 / 128

# The share of the NIC's line rate DeepEP's internode kernels carry, measured: DeepEP's README (docs/legacy.md,
# "Normal kernels with NVLink and RDMA forwarding", H800 with a 400 Gb/s CX7 NIC, ~50 GB/s, DeepSeek-V3's setting)
# reports 51 and 50 GB/s at EP 64 (8 nodes, each token on 4), 58 and 57 GB/s at EP 32 (4 nodes) for dispatch and
# combine. Those are logical rates, every node a token reaches counted, its own too; the NIC carries the other
# nodes' share, (N − 1)/N of them: 44.6, 43.8, 43.5 and 42.8 GB/s, 0.87 of 50 on average
# (tests/test_moe_dispatch.py derives it from the table). EP 16 (two nodes) is NVLink-bound and not used.
DEEPEP_RDMA_SHARE = 0.87


def _miss(total: float, held: float, draws: int) -> float:
    """Probability that ``draws`` distinct picks, uniform among ``total`` items, all miss the ``held`` of them."""
    p = 1.0
    for i in range(draws):
        p *= max(0.0, total - held - i) / (total - i)
    return p


def expected_units_reached(model: ModelSpec, units: int) -> float:
    """Expected number of distinct units (the expert-parallel group's nodes or ranks, each holding
    ``experts / units`` consecutive experts) that one token's ``k`` experts are on.

    Without group-limited routing: ``k`` of the ``E`` experts, uniform, so ``units · (1 − P(all k miss a unit))``.
    With it (``g`` groups, ``m`` chosen): a unit holding whole groups is reached when one of its groups is among the
    ``m`` (each chosen group contributes the experts it was chosen for); a group spanning several units spreads
    its ``k/m`` experts over them. Groups and units that do not nest are taken as unlimited."""
    experts, k = model.experts, model.experts_per_token
    groups, chosen = model.expert_groups, model.expert_groups_per_token
    if units <= 1:
        return 1.0
    if groups and groups % units == 0:
        return units * (1 - _miss(groups, groups / units, chosen))
    if groups and units % groups == 0:
        per_group = units // groups
        draws = max(1, round(k / chosen))
        return chosen * per_group * (1 - _miss(experts / groups, experts / units, draws))
    return units * (1 - _miss(experts, experts / units, k))


def routed_tokens(model: ModelSpec, layout: Layout) -> float:
    """Tokens one rank sends to the experts per microbatch: its ``b·s/cp``, all of the tp group's gathered where the
    experts split over tp, its own 1/tp under MoE parallel folding (:attr:`Layout.expert_token_share`)."""
    return model.micro_batch * model.seq_len / layout.cp * layout.expert_token_share


def nodes_spanned(layout: Layout, chip: ChipSpec) -> tuple[int, float]:
    """(ranks of the expert-parallel group in one node, nodes it spans): its members are the expert tensor
    parallelism apart (tp, or adjacent under MoE parallel folding)."""
    local = max(1, min(layout.ep, chip.node_size // layout.etp))
    return local, layout.ep / local


def nvlink_all_to_all_rate(chip: ChipSpec, ranks: int) -> float:
    """Bytes/s one rank sends over NVLink in an all-to-all among ``ranks`` GPUs of its node: the link at the
    share the chip's measured table gives (``nvlink_collective_shares``), the whole link without one."""
    rate = chip.intra_node_bandwidth
    if chip.nvlink_collective_shares is not None:
        rate *= chip.nvlink_collective_shares.share(CollectiveOp.ALL_TO_ALL, max(2, ranks))
    return rate


def deepep_time(model: ModelSpec, layout: Layout, chip: ChipSpec, element_bytes: float) -> float:
    """Seconds of one DeepEP dispatch (or combine) per microbatch, ``element_bytes`` a token's element.

    Per rank, of its ``b·s/cp`` tokens: each reached node other than its own takes one copy over the NIC, at
    :data:`DEEPEP_RDMA_SHARE` of its line rate; each reached rank other than the one a copy lands on takes one
    over NVLink (the forward, or inside the sender's node the send itself). The two links work at once, so the
    slower is the time, plus NCCL's base latency and a hop (the network's when the group spans nodes)."""
    local, nodes = nodes_spanned(layout, chip)
    token_bytes = model.hidden * element_bytes * layout.moe_imbalance
    tokens = routed_tokens(model, layout)
    nvlink_copies = expected_units_reached(model, layout.ep) * (local - 1) / local
    nvlink = tokens * nvlink_copies * token_bytes / nvlink_all_to_all_rate(chip, local)
    if nodes <= 1:
        return nvlink + chip.collective_base_latency + chip.nvlink_hop_latency
    network_copies = expected_units_reached(model, round(nodes)) * (nodes - 1) / nodes
    network = tokens * network_copies * token_bytes / (chip.inter_node_bandwidth * DEEPEP_RDMA_SHARE)
    return max(nvlink, network) + chip.collective_base_latency + chip.network_hop_latency


def dispatch_element_bytes(model: ModelSpec, layout: Layout) -> tuple[float, float]:
    """(bytes of an element dispatched toward the experts, bytes of one combined back): FP8 with its scales the
    first under ``moe_dispatch_fp8``, the model's dtype otherwise."""
    toward = FP8_DISPATCH_BYTES if layout.moe_dispatch_fp8 else model.dtype_bytes
    return toward, model.dtype_bytes


def uses_deepep(layout: Layout) -> bool:
    return layout.moe_dispatcher is MoeDispatcher.DEEPEP
