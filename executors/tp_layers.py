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
from torch import nn

from executors import collectives as C
from executors.config import TPMode
from executors.weight_grad import WeightGradStore, linear
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
    """``y = x Aᵀ`` with A split by rows (output features): each rank computes its slice of y.

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
        x = C.copy_to_tp(x, self.group) if self.mode is TPMode.ALL_REDUCE else C.gather_seq_for_column(x, self.group)
        return linear(x, self.weight, self.weight_grad_store)


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
