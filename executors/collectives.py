"""Differentiable collectives for tensor and sequence parallelism, each with its conjugate in backward.

Megatron-LM (Shoeybi et al. 2019, §3): ``f`` is identity forward / all-reduce backward before a
column-parallel layer; ``g`` is all-reduce forward / identity backward after a row-parallel layer.
Sequence parallelism (Korthikanti et al. 2023, §4.2.2) replaces them by an all-gather along the sequence
before the column layer (reduce-scatter backward) and a reduce-scatter after the row layer (all-gather
backward). Activations are sequence-first, ``[s, b, h]``, so every sequence collective works on dim 0.
The group is always an argument. The pair before a column-parallel layer (``f``, or the sequence all-gather)
lives in the layer itself (:class:`executors.tp_layers.ColumnParallelLinear`), whose backward overlaps the
input gradient's collective with the weight gradient (:func:`start_input_grad_collective`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _all_gather_seq(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    size = dist.get_world_size(group)
    if size == 1:
        return x
    x = x.contiguous()
    out = torch.empty((x.shape[0] * size, *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_single(out, x, group=group)
    return out


def _reduce_scatter_seq(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    size = dist.get_world_size(group)
    if size == 1:
        return x
    if x.shape[0] % size:
        raise ValueError(f"sequence length {x.shape[0]} is not divisible by the tensor-parallel size {size}")
    out = torch.empty((x.shape[0] // size, *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_single(out, x.contiguous(), group=group)
    return out


def _split_seq(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    size = dist.get_world_size(group)
    if size == 1:
        return x
    return x.chunk(size, dim=0)[dist.get_rank(group)].contiguous()


def _all_reduce(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    if dist.get_world_size(group) == 1:
        return x
    x = x.clone()  # never reduce in place into a tensor autograd saved
    dist.all_reduce(x, group=group)
    return x


def _identity(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    return x.view_as(x)


def conjugate(name: str, doc: str, forward, backward) -> type[torch.autograd.Function]:
    """An autograd Function running ``forward(x, group)`` and, on the gradient, ``backward(grad, group)``.

    Every collective here is such a pair: tensor and sequence parallelism differ only in which pair sits
    where.
    """

    def forward_fn(ctx, x, group):
        ctx.group = group
        return forward(x, group)

    def backward_fn(ctx, grad):
        return backward(grad, ctx.group), None

    return type(name, (torch.autograd.Function,), {
        "__doc__": doc, "forward": staticmethod(forward_fn), "backward": staticmethod(backward_fn),
    })


ReduceFromTensorParallel = conjugate(
    "ReduceFromTensorParallel",
    "Megatron's ``g``: all-reduce forward (sum the row-parallel partial outputs), identity backward.",
    _all_reduce, _identity)
ReduceScatterSequence = conjugate(
    "ReduceScatterSequence",
    "Sequence parallel after a row layer: reduce-scatter along s forward, all-gather backward.",
    _reduce_scatter_seq, _all_gather_seq)
ScatterSequence = conjugate(
    "ScatterSequence",
    "Enter the sequence-parallel region from a replicated tensor: keep my slice, all-gather backward.",
    _split_seq, _all_gather_seq)
# Leaving the sequence-parallel region into replicated compute: every rank then computes the same thing on
# the full sequence, so the gradient it gets back is already complete; summing would count it tp times.
GatherSequenceReplicated = conjugate(
    "GatherSequenceReplicated",
    "Leave the sequence-parallel region into replicated compute: all-gather forward, split backward.",
    _all_gather_seq, _split_seq)


def start_sequence_all_gather(x: torch.Tensor, group: dist.ProcessGroup):
    """Start, without waiting, the all-gather along the sequence of a kept shard (a column-parallel layer's
    input, gathered again for its weight gradient). Returns ``(result, work)`` as
    :func:`start_input_grad_collective`."""
    size = dist.get_world_size(group)
    if size == 1:
        return x, None
    x = x.contiguous()
    out = torch.empty((x.shape[0] * size, *x.shape[1:]), dtype=x.dtype, device=x.device)
    return out, dist.all_gather_single(out, x, group=group, async_op=True)


def start_input_grad_collective(grad: torch.Tensor, group: dist.ProcessGroup, sequence_parallel: bool):
    """Start, without waiting, the collective a column-parallel layer's input gradient needs: the
    reduce-scatter back to the sequence shards (sequence parallelism) or the all-reduce of ``f``. Returns
    ``(result, work)``: ``result`` holds the reduced gradient once ``work.wait()`` returns (``work`` is None
    when the group has one rank and ``result`` is ``grad``). ``grad`` must be a fresh tensor: the all-reduce
    works in place."""
    size = dist.get_world_size(group)
    if size == 1:
        return grad, None
    grad = grad.contiguous()
    if not sequence_parallel:
        return grad, dist.all_reduce(grad, group=group, async_op=True)
    if grad.shape[0] % size:
        raise ValueError(f"sequence length {grad.shape[0]} is not divisible by the tensor-parallel size {size}")
    out = torch.empty((grad.shape[0] // size, *grad.shape[1:]), dtype=grad.dtype, device=grad.device)
    return out, dist.reduce_scatter_single(out, grad, group=group, async_op=True)


# The raw collectives, outside autograd (emulation runs them on stand-in tensors of the real size).
all_reduce_copy = _all_reduce
all_gather_along_sequence = _all_gather_seq
reduce_scatter_along_sequence = _reduce_scatter_seq


def reduce_from_tp(x, group):
    return ReduceFromTensorParallel.apply(x, group)


def reduce_scatter_seq(x, group):
    return ReduceScatterSequence.apply(x, group)


def scatter_seq(x, group):
    return ScatterSequence.apply(x, group)


def gather_seq_replicated(x, group):
    return GatherSequenceReplicated.apply(x, group)
