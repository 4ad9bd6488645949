"""Context-parallel attention, the three ways Megatron-LM's ``--cp-comm-type`` names (``pipesim.analytic.layout.
CpComm``): the ring (:mod:`executors.ring_attention`), an all-gather of the keys and values, and Ulysses'
all-to-alls. Each gives the same causal attention over the whole sequence to every cp rank's load-balanced
tokens (chunks ``i`` and ``2·cp − 1 − i`` of ``2·cp``, :func:`~executors.ring_attention.chunk_ids`).

- **All-gather** (Llama 3 §3.3.2; Transformer Engine's ``AttnFuncWithCPAndKVAllGather``): the forward gathers
  every rank's K and V and attends this rank's two query chunks to the key chunks they see, merging the partial
  results through their log-sum-exps as the ring does; the backward gathers again, computes the gradients of
  every rank's K and V that this rank's queries touched, and reduce-scatters them, so each rank gets the sum of
  every rank's contribution to its own K and V.
- **Ulysses** (Jacobs et al. 2023): an all-to-all trades the sequence split for a head split, so each rank
  holds the whole sequence (its chunks put back in order) on ``heads/cp`` of its heads, runs ordinary causal
  attention, and a second all-to-all trades back. Its gradient is the same two all-to-alls the other way, so
  autograd runs it through the two differentiable exchanges below.

Every wait on the cp group is logged through the ring's :class:`~executors.ring_attention.TransferLog` (a
``CP_RING`` row of the running instruction, peer −1 for a collective), as the ring logs its hops.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.distributed as dist
import torch.nn.functional as F

from executors.collectives import conjugate
from executors.ring_attention import (
    Ring,
    TransferLog,
    add_visiting_block_grads,
    attention_function,
    chunk_ids,
    merge_visiting_block,
    ring_attention,
)
from pipesim.analytic.layout import CpComm

COLLECTIVE_PEER = -1  # the peer column of a logged collective: it has no single peer


class ContextParallel(Protocol):
    """Causal attention of this cp rank's load-balanced tokens, ``[b, heads, s_local, d]`` in and out."""

    log: TransferLog | None

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor: ...


class RingCp:
    """The ring (``p2p``): :func:`executors.ring_attention.ring_attention` over ``ring``."""

    def __init__(self, ring: Ring):
        self.ring = ring

    @property
    def log(self) -> TransferLog | None:
        return self.ring.log

    @log.setter
    def log(self, value: TransferLog | None) -> None:
        self.ring.log = value

    def attend(self, q, k, v):
        return ring_attention(q, k, v, self.ring)


class _Group:
    """A cp process group and the log its waits go to."""

    def __init__(self, group: dist.ProcessGroup):
        self.group = group
        self.rank, self.size = dist.get_rank(group), dist.get_world_size(group)
        self.log: TransferLog | None = None

    def logged(self, work, nbytes: int) -> None:
        """Wait for ``work`` and log the wait (what the exchange costs this rank beyond what it overlapped)."""
        t0 = self.log.stamp() if self.log is not None else None
        work.wait()
        if self.log is not None:
            self.log.ring_transfer(t0, self.log.stamp(), nbytes, COLLECTIVE_PEER)

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's ``x`` stacked along a new first dimension, in cp-rank order."""
        x = x.contiguous()
        out = torch.empty((self.size * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
        self.logged(dist.all_gather_single(out, x, group=self.group, async_op=True), out.numel() * x.element_size())
        return out.view(self.size, *x.shape)

    def reduce_scatter(self, x: torch.Tensor) -> torch.Tensor:
        """The sum over ranks of ``x[r]`` on rank ``r`` (``x``'s first dimension is the cp size)."""
        x = x.contiguous()
        out = torch.empty(x.shape[1:], dtype=x.dtype, device=x.device)
        flat = x.view(self.size * x.shape[1], *x.shape[2:])
        self.logged(dist.reduce_scatter_single(out, flat, group=self.group, async_op=True),
                    x.numel() * x.element_size())
        return out

    def all_to_all(self, x: torch.Tensor) -> torch.Tensor:
        """Row ``r`` of ``x`` (first dimension the cp size) to rank ``r``; row ``r`` of the result from rank ``r``."""
        x = x.contiguous()
        out = torch.empty_like(x)
        self.logged(dist.all_to_all_single(out, x, group=self.group, async_op=True), x.numel() * x.element_size())
        return out


# --- all-gather ------------------------------------------------------------------------------------------------
def gathered_forward(q, k, v, cp: _Group) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention of this rank's queries over every rank's gathered K and V: ``(out, lse)``."""
    me, scale = cp.rank, 1.0 / math.sqrt(q.shape[-1])
    kv = cp.all_gather(torch.stack([k, v]))  # [cp, 2, b, h, s_local, d]
    queries, state = q.chunk(2, dim=2), [None, None]
    for src in range(cp.size):
        keys, values = kv[src, 0].chunk(2, dim=2), kv[src, 1].chunk(2, dim=2)
        merge_visiting_block(state, queries, keys, values, me, src, cp.size, scale)
    return torch.cat([state[0][0], state[1][0]], dim=2), torch.cat([state[0][1], state[1][1]], dim=2)


def gathered_backward(dout, q, k, v, out, lse, cp: _Group) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of :func:`gathered_forward` with respect to this rank's q, k and v (the ring's block math)."""
    me, scale = cp.rank, 1.0 / math.sqrt(q.shape[-1])
    delta = (dout * out).sum(-1)
    halves = [t.chunk(2, dim=2) for t in (q, dout, lse, delta)]
    dq = [torch.zeros_like(h) for h in halves[0]]
    kv = cp.all_gather(torch.stack([k, v]))  # gathered again, as Transformer Engine's backward does
    dkv = torch.zeros_like(kv)
    for src in range(cp.size):
        keys, values = kv[src, 0].chunk(2, dim=2), kv[src, 1].chunk(2, dim=2)
        dkeys, dvalues = list(dkv[src, 0].chunk(2, dim=2)), list(dkv[src, 1].chunk(2, dim=2))
        add_visiting_block_grads(halves, keys, values, dq, dkeys, dvalues, me, src, cp.size, scale)
        dkv[src] = torch.stack([torch.cat(dkeys, dim=2), torch.cat(dvalues, dim=2)])
    mine = cp.reduce_scatter(dkv)  # every rank's contribution to this rank's K and V, summed
    return torch.cat(dq, dim=2), mine[0], mine[1]


_GatheredAttention = attention_function("GatheredAttention", gathered_forward, gathered_backward)


class GatherCp(_Group):
    """The all-gather (``allgather``)."""

    def attend(self, q, k, v):
        return _GatheredAttention.apply(q, k, v, self)


# --- Ulysses ---------------------------------------------------------------------------------------------------
def heads_to_sequence(x: torch.Tensor, cp: _Group) -> torch.Tensor:
    """``[b, h, s_local, d]`` (this rank's tokens, every head) → ``[b, h/cp, s, d]`` (every token in order, this
    rank's ``h/cp`` heads): head group ``r`` goes to rank ``r``, and the chunks come back in sequence order."""
    b, h, s_local, d = x.shape
    parts = cp.all_to_all(x.reshape(b, cp.size, h // cp.size, s_local, d).transpose(0, 1))  # [src, b, h/cp, s_l, d]
    chunks: list[torch.Tensor | None] = [None] * (2 * cp.size)
    for src in range(cp.size):
        for half, c in zip(parts[src].chunk(2, dim=2), chunk_ids(src, cp.size), strict=True):
            chunks[c] = half
    return torch.cat(chunks, dim=2)


def sequence_to_heads(y: torch.Tensor, cp: _Group) -> torch.Tensor:
    """The inverse of :func:`heads_to_sequence`: ``[b, h/cp, s, d]`` → ``[b, h, s_local, d]``."""
    b, h_part, _, d = y.shape
    chunks = y.chunk(2 * cp.size, dim=2)
    parts = torch.stack([torch.cat([chunks[c] for c in chunk_ids(dst, cp.size)], dim=2)
                         for dst in range(cp.size)])  # [dst, b, h/cp, s_local, d]
    back = cp.all_to_all(parts)  # row r: this rank's tokens on rank r's head group
    return back.transpose(0, 1).reshape(b, cp.size * h_part, back.shape[3], d)


HeadsToSequence = conjugate(
    "HeadsToSequence", "Ulysses before the attention: heads split over the cp ranks forward, the inverse backward.",
    heads_to_sequence, sequence_to_heads)
SequenceToHeads = conjugate(
    "SequenceToHeads", "Ulysses after the attention: the sequence split back forward, the inverse backward.",
    sequence_to_heads, heads_to_sequence)


class UlyssesCp(_Group):
    """Ulysses' all-to-alls (``a2a``): the heads split over the cp ranks, the whole sequence on each."""

    def attend(self, q, k, v):
        full = [HeadsToSequence.apply(t, self) for t in (q, k, v)]
        return SequenceToHeads.apply(F.scaled_dot_product_attention(*full, is_causal=True), self)


def context_parallel(comm: CpComm, group: dist.ProcessGroup, ring: Ring | None = None) -> ContextParallel:
    """The attention of ``comm`` over the cp ``group`` (the ring uses ``ring``, a :class:`GroupRing` on it)."""
    if comm is CpComm.P2P:
        if ring is None:
            raise ValueError("the ring needs its Ring")
        return RingCp(ring)
    return GatherCp(group) if comm is CpComm.ALL_GATHER else UlyssesCp(group)
