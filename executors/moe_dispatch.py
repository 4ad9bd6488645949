"""Top-k routing and the expert-parallel dispatch and combine: the maths as pure functions, plus the one
differentiable all-to-all they need.

Routing (Shazeer et al. 2017; Mixtral's variant, Jiang et al. 2024): softmax over the router's logits, the k
most probable experts per token, their probabilities renormalised to sum to one. Ties are broken towards the
lower expert index (a stable sort), so every process that sees the same logits picks the same experts.

Dispatch (GShard, Lepikhin et al. 2021; dropless, as Megatron-Core's ``alltoall`` token dispatcher): each
token's k copies are sorted by expert; as the experts are laid out contiguously over the ``ep`` ranks (rank j
owns experts ``j·E/ep … (j+1)·E/ep − 1``), that order is also by destination rank. The per-(rank, expert)
counts are exchanged first — token counts vary per rank and per microbatch — then one all-to-all with uneven
splits carries the rows. The receiver regroups its rows by local expert, runs each expert on its rows, and
the combine all-to-all is the same exchange with the splits swapped. Autograd flows through both: the
backward of an all-to-all is the all-to-all in the other direction (:class:`AllToAll`).

gloo implements ``all_to_all_single`` with uneven splits on CPU (torch 2.13), so no point-to-point fallback is
needed; NCCL has it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Routing:
    """The router's choice for ``T`` tokens: ``experts[t, j]`` is token t's j-th expert, ``gates[t, j]`` its
    weight (each row sums to one); the j-th choice has probability at least that of the (j+1)-th."""

    experts: torch.Tensor  # [T, k] int64
    gates: torch.Tensor  # [T, k], differentiable w.r.t. the logits


def route(logits: torch.Tensor, top_k: int) -> Routing:
    """Softmax gating and top-k of ``logits [T, E]`` with deterministic tie-breaking (lower index first)."""
    probs = torch.softmax(logits, dim=-1)
    # torch.topk does not promise an order among equal values; a stable descending sort does.
    order = torch.sort(probs.detach(), dim=-1, descending=True, stable=True).indices[:, :top_k]
    chosen = probs.gather(1, order)
    return Routing(order, chosen / chosen.sum(dim=-1, keepdim=True))


@dataclass(frozen=True)
class DispatchPlan:
    """Where this rank's token copies go: ``order`` sorts the ``T·k`` copies (copy ``t·k + j`` is token t's
    j-th choice) by expert; ``send_counts[r, e]`` copies go to local expert e of EP rank r."""

    order: torch.Tensor  # [T·k] int64: a permutation
    send_counts: torch.Tensor  # [ep, E/ep] int64
    top_k: int

    @property
    def send_splits(self) -> list[int]:
        """Rows sent to each EP rank, in rank order (the all-to-all's input splits)."""
        return self.send_counts.sum(dim=1).tolist()

    @property
    def source_tokens(self) -> torch.Tensor:
        """The token each sorted copy comes from: the rows to gather before sending."""
        return torch.div(self.order, self.top_k, rounding_mode="floor")


def plan_dispatch(experts: torch.Tensor, num_experts: int, ep: int) -> DispatchPlan:
    """The :class:`DispatchPlan` of a routing's ``experts [T, k]`` over ``ep`` ranks of ``num_experts/ep``."""
    flat = experts.reshape(-1)
    order = torch.sort(flat, stable=True).indices  # by expert, and within an expert by token
    counts = torch.bincount(flat, minlength=num_experts)
    return DispatchPlan(order, counts.view(ep, num_experts // ep), experts.shape[1])


def local_expert_order(recv_counts: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """Received rows arrive by source rank, then by local expert (``recv_counts[r, e]`` rows of source r for
    local expert e). Returns the permutation that groups them by local expert (source order kept within one)
    and the number of rows of each local expert."""
    ep, local = recv_counts.shape
    expert_of_row = torch.arange(local, device=recv_counts.device).repeat(ep).repeat_interleave(recv_counts.reshape(-1))
    return torch.sort(expert_of_row, stable=True).indices, recv_counts.sum(dim=0).tolist()


def inverse(permutation: torch.Tensor) -> torch.Tensor:
    """``inverse(p)[p[i]] = i``: indexing by it undoes indexing by ``p``."""
    out = torch.empty_like(permutation)
    out[permutation] = torch.arange(permutation.numel(), device=permutation.device)
    return out


# --- communication -----------------------------------------------------------------------------------------


def _all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
    out = x.new_empty((sum(out_splits), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
    return out


class AllToAll(torch.autograd.Function):
    """Rows ``in_splits[r]`` of ``x`` go to rank r, ``out_splits[r]`` rows arrive from it; backward sends the
    gradient rows back the way they came (splits swapped)."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group):
        ctx.splits, ctx.group = (out_splits, in_splits), group
        return _all_to_all(x, out_splits, in_splits, group)

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits = ctx.splits
        return _all_to_all(grad, in_splits, out_splits, ctx.group), None, None, None


def exchange_counts(send_counts: torch.Tensor, group) -> torch.Tensor:
    """Every EP rank learns how many rows of each of its local experts each peer will send: row r of the result
    is what rank r sends here (an equal-split all-to-all of the count matrix's rows)."""
    received = torch.empty_like(send_counts)
    dist.all_to_all_single(received, send_counts.contiguous(), group=group)
    return received


def exchange(x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
    """Differentiable all-to-all over ``group`` (None: one rank, nothing moves)."""
    if group is None:
        return x
    return AllToAll.apply(x, out_splits, in_splits, group)
