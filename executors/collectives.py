"""Differentiable collectives for tensor and sequence parallelism, each with its conjugate in backward.

Megatron-LM (Shoeybi et al. 2019, §3): ``f`` is identity forward / all-reduce backward before a
column-parallel layer; ``g`` is all-reduce forward / identity backward after a row-parallel layer.
Sequence parallelism (Korthikanti et al. 2023, §4.2.2) replaces them by an all-gather along the sequence
before the column layer (reduce-scatter backward) and a reduce-scatter after the row layer (all-gather
backward). Activations are sequence-first, ``[s, b, h]``, so every sequence collective works on dim 0.
The group is always an argument.
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


class CopyToTensorParallel(torch.autograd.Function):
    """Megatron's ``f``: identity forward, all-reduce of the input gradient backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad, ctx.group), None


class ReduceFromTensorParallel(torch.autograd.Function):
    """Megatron's ``g``: all-reduce forward (sum the row-parallel partial outputs), identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x, group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GatherSequenceForColumn(torch.autograd.Function):
    """Sequence parallel before a column layer: all-gather along s forward, reduce-scatter backward.

    The backward sums because each rank's column shard contributed a partial gradient to every position.
    """

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _all_gather_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter_seq(grad, ctx.group), None


class ReduceScatterSequence(torch.autograd.Function):
    """Sequence parallel after a row layer: reduce-scatter along s forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _reduce_scatter_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_seq(grad, ctx.group), None


class ScatterSequence(torch.autograd.Function):
    """Enter the sequence-parallel region from a replicated tensor: keep my slice, all-gather backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _split_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_seq(grad, ctx.group), None


class GatherSequenceReplicated(torch.autograd.Function):
    """Leave the sequence-parallel region into replicated compute: all-gather forward, split backward.

    Every rank then computes the same thing on the full sequence, so the gradient it gets back is already
    complete; summing (reduce-scatter) would count it tp times.
    """

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _all_gather_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _split_seq(grad, ctx.group), None


def copy_to_tp(x, group):
    return CopyToTensorParallel.apply(x, group)


def reduce_from_tp(x, group):
    return ReduceFromTensorParallel.apply(x, group)


def gather_seq_for_column(x, group):
    return GatherSequenceForColumn.apply(x, group)


def reduce_scatter_seq(x, group):
    return ReduceScatterSequence.apply(x, group)


def scatter_seq(x, group):
    return ScatterSequence.apply(x, group)


def gather_seq_replicated(x, group):
    return GatherSequenceReplicated.apply(x, group)
