"""Tensor-parallel linear layers (Megatron-LM, Shoeybi et al. 2019) in all-reduce or sequence-parallel mode.

ColumnParallelLinear splits the weight's output dim across the TP group; RowParallelLinear splits the
input dim and sums the partial outputs. Mode ALL_REDUCE keeps activations replicated between the pair
(``f``/``g`` collectives); mode REDUCE_SCATTER is sequence parallelism (Korthikanti et al. 2023): the
activations outside the pair are split along the sequence, an all-gather precedes the column layer and a
reduce-scatter follows the row layer. Both modes compute the same numbers as one unsharded linear.

Every parameter carries a :class:`ShardSpec`, enough to rebuild the full tensor from the shards.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from executors import collectives as C
from executors.config import TPMode
from executors.weight_grad import WeightGradStore, linear, weight_grad_unless_deferred
from pipesim.topology import Dim


@dataclass(frozen=True)
class ShardSpec:
    """Where a parameter's shard sits in the full model.

    ``dim`` is the parallel dimension it is split over (None: replicated), ``shard_dim`` the tensor dim
    that is split; ``stage``/``chunk`` locate it in the pipeline; ``name`` is its key in the full state dict.
    ``partial_grad_over`` names a dimension whose ranks each hold only a partial gradient of a replicated
    parameter (LayerNorm weights under sequence parallelism): those grads are summed over that group.
    """

    name: str = ""
    dim: Dim | None = None
    shard_dim: int | None = None
    stage: int = -1
    chunk: int = -1
    partial_grad_over: Dim | None = None


def shard_spec(param: nn.Parameter) -> ShardSpec:
    return getattr(param, "pipesim_shard", ShardSpec())


def set_shard_spec(param: nn.Parameter, spec: ShardSpec) -> None:
    param.pipesim_shard = spec


def _shard(full: torch.Tensor, dim: int, group: dist.ProcessGroup) -> torch.Tensor:
    size = dist.get_world_size(group)
    if full.shape[dim] % size:
        raise ValueError(f"dimension {dim} of size {full.shape[dim]} is not divisible by tp={size}")
    return full.chunk(size, dim=dim)[dist.get_rank(group)].clone()


class ColumnParallelLinear(nn.Module):
    """``y = x Aᵀ`` with A split by rows (output features): each rank computes its slice of y; in the
    backward the input gradient's collective runs beside the weight gradient (:class:`_ColumnLinear`).

    Input: ``[s, b, in]`` replicated (ALL_REDUCE) or ``[s/tp, b, in]`` (REDUCE_SCATTER). Output:
    ``[s, b, out/tp]`` in both modes.
    """

    def __init__(self, full_weight: torch.Tensor, group: dist.ProcessGroup, mode: TPMode):
        super().__init__()
        self.group, self.mode = group, mode
        self.weight = nn.Parameter(_shard(full_weight, 0, group))
        set_shard_spec(self.weight, ShardSpec(dim=Dim.TP, shard_dim=0))
        self.weight_grad_store: WeightGradStore | None = None  # split backward defers the weight GEMM

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ColumnLinear.apply(x, self.weight, self.group, self.mode is TPMode.REDUCE_SCATTER,
                                   self.weight_grad_store)


class _ColumnLinear(torch.autograd.Function):
    """The column-parallel linear with its input collective (identity, or the sequence all-gather), run as
    Megatron-LM's ``LinearWithGradAccumulationAndAsyncCommunication`` and Transformer Engine's linears run it:

    - under sequence parallelism it keeps its input sharded and the backward gathers it again, started before
      the input-gradient GEMM and waited for after it (pipesim's ``--column-input regather``, the default);
    - the backward then starts the input gradient's collective (all-reduce, or reduce-scatter) and computes
      the weight gradient while it runs (``--overlap-tp-dgrad``, the default). A split backward's ``I`` queues
      the weight GEMM (``store``, with the gathered input), so it waits for the collective with nothing beside
      it, as pipesim takes it.

    The same numbers as the collectives and the linear run one after the other."""

    @staticmethod
    def forward(ctx, inputs, weight, group, sequence_parallel, store):
        total = C.all_gather_along_sequence(inputs, group) if sequence_parallel else inputs
        ctx.save_for_backward(inputs if sequence_parallel else total)  # the shard: 1/tp of the gathered bytes
        # the parameter itself, not a saved copy: a deferred weight gradient accumulates into its own .grad
        ctx.weight, ctx.group, ctx.sequence_parallel, ctx.store = weight, group, sequence_parallel, store
        return F.linear(total, weight)

    @staticmethod
    def backward(ctx, grad_output):
        (kept,) = ctx.saved_tensors
        weight = ctx.weight
        total, gather = kept, None
        if ctx.sequence_parallel and ctx.needs_input_grad[1]:  # beside the input-gradient GEMM
            total, gather = C.start_sequence_all_gather(kept, ctx.group)
        grad_input, work = None, None
        if ctx.needs_input_grad[0]:
            input_grad = grad_output @ weight
            if gather is not None:
                gather.wait()
            grad_input, work = C.start_input_grad_collective(input_grad, ctx.group, ctx.sequence_parallel)
        elif gather is not None:
            gather.wait()
        grad_weight = None
        if ctx.needs_input_grad[1]:  # beside the collective
            grad_weight = weight_grad_unless_deferred(ctx.store, weight, total, grad_output)
        if work is not None:
            work.wait()
        return grad_input, grad_weight, None, None, None


class RowParallelLinear(nn.Module):
    """``y = x Aᵀ`` with A split by columns (input features): partial outputs summed across the group.

    Input: ``[s, b, in/tp]`` (the column layer's output). Output: ``[s, b, out]`` replicated (ALL_REDUCE)
    or ``[s/tp, b, out]`` (REDUCE_SCATTER).
    """

    def __init__(self, full_weight: torch.Tensor, group: dist.ProcessGroup, mode: TPMode):
        super().__init__()
        self.group, self.mode = group, mode
        self.weight = nn.Parameter(_shard(full_weight, 1, group))
        set_shard_spec(self.weight, ShardSpec(dim=Dim.TP, shard_dim=1))
        self.weight_grad_store: WeightGradStore | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = linear(x, self.weight, self.weight_grad_store)
        if self.mode is TPMode.ALL_REDUCE:
            return C.reduce_from_tp(partial, self.group)
        return C.reduce_scatter_seq(partial, self.group)
