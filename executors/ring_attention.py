"""Ring attention over the context-parallel group (Liu et al. 2023, "Ring Attention with Blockwise Transformers").

Layout (causal load balancing, as Megatron-Core's context parallelism): the sequence is cut into ``2·cp``
equal chunks and cp rank ``i`` holds chunks ``i`` and ``2·cp − 1 − i``, so every rank has the same share of
the causal triangle to compute. :func:`local_positions` gives a rank's global token positions.

Forward: each rank keeps its queries; the K/V of every rank travel once around the ring (``cp − 1`` hops,
rank ``i`` sends to ``i + 1``). At ring step ``t`` rank ``i`` holds the K/V of rank ``i − t`` and attends its
two query chunks to their two key chunks. Per pair of global chunks ``(a, b)``: ``a == b`` is causal (the
diagonal), ``a > b`` fully visible, ``a < b`` skipped (all future). Partial results are merged exactly
with their log-sum-exp: ``lse = logaddexp(lse₁, lse₂)``, ``o = o₁·e^{lse₁−lse} + o₂·e^{lse₂−lse}``.

Backward (the same ring, reversed roles for the gradients): with ``δ = rowsum(dO ∘ O)`` and the saved
``lse``, each block pair gives ``P = exp(S − lse)``, ``dV += Pᵀ dO``, ``dS = P ∘ (dO Vᵀ − δ)``,
``dQ += dS K``, ``dK += dSᵀ Q`` (times the softmax scale). K/V circulate as in the forward, and the dK/dV
accumulator of each K/V block travels with it, one hop behind: after ``cp`` hops it is back at its owner
holding every rank's contribution. The next K/V hop is posted before the step's compute so it overlaps;
the dK/dV hop needs the step's result and does not.

Communication goes through a :class:`Ring` (``start(tensor) → Pending``: send to the next rank, receive
from the previous). :class:`GroupRing` is point-to-point on a process group (gloo isend/irecv, or NCCL);
tests use a threaded ring to run all cp ranks in one process.
"""

from __future__ import annotations

import abc
import math
from typing import Protocol

import torch
import torch.distributed as dist


def chunk_ids(cp_rank: int, cp: int) -> tuple[int, int]:
    """The two global chunks (of ``2·cp``) cp rank ``cp_rank`` holds, in local order."""
    return cp_rank, 2 * cp - 1 - cp_rank


def local_positions(cp_rank: int, cp: int, seq_len: int) -> torch.Tensor:
    """Global token positions of cp rank ``cp_rank``'s ``seq_len / cp`` tokens, in local order."""
    block = seq_len // (2 * cp)
    return torch.cat([torch.arange(c * block, (c + 1) * block) for c in chunk_ids(cp_rank, cp)])


def split_sequence(x: torch.Tensor, cp_rank: int, cp: int, dim: int) -> torch.Tensor:
    """cp rank ``cp_rank``'s share of ``x`` along ``dim`` (chunks ``i`` and ``2cp−1−i`` of ``2cp``)."""
    if cp == 1:
        return x
    chunks = x.chunk(2 * cp, dim=dim)
    return torch.cat([chunks[c] for c in chunk_ids(cp_rank, cp)], dim=dim).contiguous()


class Pending(Protocol):
    def wait(self) -> torch.Tensor: ...


class TransferLog(Protocol):
    """Where a ring reports its transfers (the executor's timeline recorder)."""

    def stamp(self): ...

    def ring_transfer(self, t0, t1, nbytes: int, peer: int) -> None: ...


class Ring(abc.ABC):
    """A ring of ``size`` ranks; this one is ``rank``. ``start`` sends to ``rank + 1``, receives from ``rank − 1``."""

    rank: int
    size: int
    log: TransferLog | None = None

    @abc.abstractmethod
    def start(self, tensor: torch.Tensor) -> Pending: ...


class _GroupPending:
    def __init__(self, ring: GroupRing, works, buffer: torch.Tensor, nbytes: int):
        self.ring, self.works, self.buffer, self.nbytes = ring, works, buffer, nbytes

    def wait(self) -> torch.Tensor:
        log = self.ring.log
        # The logged span is the wait: what the hop costs the rank beyond the compute it overlapped (the whole
        # transfer for a dK/dV hop, which is waited at once), the quantity the simulator charges as exposed.
        t0 = log.stamp() if log is not None else None
        for work in self.works:
            work.wait()
        if log is not None:
            log.ring_transfer(t0, log.stamp(), self.nbytes, self.ring.next_rank)
        return self.buffer


class GroupRing(Ring):
    """Point-to-point on ``group`` (the cp group): isend to the next cp rank, irecv from the previous one."""

    def __init__(self, group: dist.ProcessGroup):
        self.group = group
        self.rank, self.size = dist.get_rank(group), dist.get_world_size(group)
        self.next_rank = dist.get_global_rank(group, (self.rank + 1) % self.size)
        self.prev_rank = dist.get_global_rank(group, (self.rank - 1) % self.size)
        self.log = None

    def start(self, tensor: torch.Tensor) -> Pending:
        tensor = tensor.contiguous()
        buffer = torch.empty_like(tensor)
        # The receive first: on gloo both are non-blocking, and on NCCL a batch pairs them without deadlock.
        works = dist.batch_isend_irecv([
            dist.P2POp(dist.irecv, buffer, self.prev_rank, self.group),
            dist.P2POp(dist.isend, tensor, self.next_rank, self.group),
        ])
        return _GroupPending(self, works, buffer, tensor.numel() * tensor.element_size())


# --- the math of one block pair -----------------------------------------------------------------------------
def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:  # the diagonal block: query j sees keys 0..j of the same chunk
        n = s.shape[-1]
        future = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(future, float("-inf"))
    return s


def _block_forward(q, k, v, causal: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    s = _scores(q, k, causal, scale)
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse[..., None]) @ v, lse


def _merge(state, out: torch.Tensor, lse: torch.Tensor):
    """Combine two softmax-normalised partial results exactly through their log-sum-exps."""
    if state is None:
        return out, lse
    out0, lse0 = state
    new = torch.logaddexp(lse0, lse)
    return out0 * torch.exp(lse0 - new)[..., None] + out * torch.exp(lse - new)[..., None], new


def _pairs(me: int, src: int, cp: int):
    """(query half, key half, causal) of every block pair rank ``me`` computes against rank ``src``'s K/V."""
    for a, qa in enumerate(chunk_ids(me, cp)):
        for b, kb in enumerate(chunk_ids(src, cp)):
            if qa >= kb:  # qa < kb: the keys are all in the queries' future
                yield a, b, qa == kb


def merge_visiting_block(state: list, queries, keys, values, me: int, src: int, cp: int, scale: float) -> None:
    """Fold rank ``src``'s K/V chunks (``keys``, ``values``: its two) into ``state``, this rank's two query
    chunks' running (out, lse), for every pair the causal mask lets through (:func:`_pairs`)."""
    for a, b, causal in _pairs(me, src, cp):
        state[a] = _merge(state[a], *_block_forward(queries[a], keys[b], values[b], causal, scale))


def add_visiting_block_grads(halves, keys, values, dq: list, dkeys: list, dvalues: list, me: int, src: int, cp: int,
                             scale: float) -> None:
    """Add rank ``src``'s K/V chunks' part of the gradients: this rank's query chunks' into ``dq``, and this rank's
    queries' share of the visiting chunks' into ``dkeys``, ``dvalues`` (``halves``: this rank's q, dO, lse and δ,
    each in its two chunks; the module docstring's formulas)."""
    for a, b, causal in _pairs(me, src, cp):
        qa, doa, lsea, deltaa = (h[a] for h in halves)
        p = torch.exp(_scores(qa, keys[b], causal, scale) - lsea[..., None])
        dvalues[b] = dvalues[b] + p.transpose(-2, -1) @ doa
        ds = p * (doa @ values[b].transpose(-2, -1) - deltaa[..., None])
        dq[a] = dq[a] + (ds @ keys[b]) * scale
        dkeys[b] = dkeys[b] + (ds.transpose(-2, -1) @ qa) * scale


def ring_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: Ring) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention of this rank's queries over the whole sequence; ``[b, h, s_local, d]`` in, ``(out,
    lse)`` out (``lse`` is ``[b, h, s_local]``, kept for the backward)."""
    cp, me, scale = ring.size, ring.rank, 1.0 / math.sqrt(q.shape[-1])
    queries = q.chunk(2, dim=2)
    state = [None, None]
    kv = torch.stack([k, v])
    for t in range(cp):
        pending = ring.start(kv) if t < cp - 1 else None  # the next hop overlaps this step's compute
        keys, values = kv[0].chunk(2, dim=2), kv[1].chunk(2, dim=2)
        merge_visiting_block(state, queries, keys, values, me, (me - t) % cp, cp, scale)
        if pending is not None:
            kv = pending.wait()
    # Every query chunk saw at least its own diagonal block at t = 0, so both states are set.
    return torch.cat([state[0][0], state[1][0]], dim=2), torch.cat([state[0][1], state[1][1]], dim=2)


def ring_backward(dout, q, k, v, out, lse, ring: Ring) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of :func:`ring_forward`'s output with respect to this rank's q, k, v."""
    cp, me, scale = ring.size, ring.rank, 1.0 / math.sqrt(q.shape[-1])
    delta = (dout * out).sum(-1)
    halves = [t.chunk(2, dim=2) for t in (q, dout, lse, delta)]
    dq = [torch.zeros_like(h) for h in halves[0]]
    kv = torch.stack([k, v])
    dkv = torch.zeros_like(kv)
    for t in range(cp):
        pending = ring.start(kv) if t < cp - 1 else None
        keys, values = kv[0].chunk(2, dim=2), kv[1].chunk(2, dim=2)
        dkeys, dvalues = list(dkv[0].chunk(2, dim=2)), list(dkv[1].chunk(2, dim=2))
        add_visiting_block_grads(halves, keys, values, dq, dkeys, dvalues, me, (me - t) % cp, cp, scale)
        dkv = torch.stack([torch.cat(dkeys, dim=2), torch.cat(dvalues, dim=2)])
        if pending is not None:  # one transfer per link at a time: each link stays a FIFO channel
            kv = pending.wait()
        if cp > 1:
            # This block's gradient follows its K/V one hop behind; the last hop returns it to its owner.
            dkv = ring.start(dkv).wait()
    return torch.cat(dq, dim=2), dkv[0], dkv[1]


def attention_function(name: str, forward, backward) -> type[torch.autograd.Function]:
    """A differentiable attention over a cp exchange: ``forward(q, k, v, exchange) → (out, lse)``, and on the
    output's gradient ``backward(dout, q, k, v, out, lse, exchange) → (dq, dk, dv)``."""

    def forward_fn(ctx, q, k, v, exchange):
        out, lse = forward(q, k, v, exchange)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.exchange = exchange
        return out

    def backward_fn(ctx, dout):
        return (*backward(dout.contiguous(), *ctx.saved_tensors, ctx.exchange), None)

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward_fn),
                                                     "backward": staticmethod(backward_fn)})


_RingAttention = attention_function("RingAttention", ring_forward, ring_backward)


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: Ring) -> torch.Tensor:
    """Differentiable causal ring attention, ``[b, h, s_local, d]`` (this rank's load-balanced tokens)."""
    return _RingAttention.apply(q, k, v, ring)
