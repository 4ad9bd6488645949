"""The executor GPT's mixture-of-experts MLP: configuration, weights, the expert-parallel layer and its
single-process reference.

A MoE layer replaces a block's MLP by a router (one ``h × E`` linear), ``E`` routed experts (each a GELU MLP
``h → f → h``, no bias) of which every token uses its top k (:func:`~executors.moe_dispatch.route`), and
optionally shared experts every token uses (DeepSeekMoE, Dai et al. 2024). The first ``first_dense_layers``
blocks keep the dense MLP (DeepSeek's ``first_k_dense_replace``). No token is dropped (no capacity factor)
and there is no load-balancing loss, so the layer is a deterministic function of its input and the one-process
reference computes exactly the same numbers.

Expert parallelism folds over the dp×cp ranks as in Megatron-Core (:mod:`pipesim.topology`): EP rank j of an
EP group holds the routed experts ``j·E/ep … (j+1)·E/ep − 1`` of every MoE layer of its stages; the router and
shared experts are replicated like every dense weight, and the whole layer over TP. Expert parameters carry
``pipesim_expert = True`` (:func:`is_expert`): their gradients sync over the expert data-parallel group, not
over dp×cp (:mod:`executors.moe_compute`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from executors.config import MoEConfig
from executors.moe_dispatch import exchange, exchange_counts, inverse, local_expert_order, plan_dispatch, route
from executors.tp_layers import ShardSpec, set_shard_spec
from executors.weight_grad import WeightGradStore, linear
from pipesim.topology import Dim


def init_moe_weights(prefix: str, moe: MoEConfig, hidden: int, layers: int, normal: Callable) -> dict:
    """One MoE layer's weights, drawn in a fixed order with ``normal(*shape, scale=...)``.

    The router is drawn at ``1/√h`` rather than GPT-2's 0.02 so its logits spread by about one: routing is then
    decided by clear margins, never by rounding-level near-ties between the one-process and the sharded run.
    """
    f, out_scale = moe.ffn_hidden, 0.02 / math.sqrt(2 * layers)
    weights = {f"{prefix}.router.weight": normal(moe.experts, hidden, scale=1 / math.sqrt(hidden))}
    names = [f"experts.{e}" for e in range(moe.experts)] + [f"shared.{i}" for i in range(moe.shared_experts)]
    for name in names:
        weights[f"{prefix}.{name}.fc1.weight"] = normal(f, hidden, scale=0.02)
        weights[f"{prefix}.{name}.fc2.weight"] = normal(hidden, f, scale=out_scale)
    return weights


def is_expert(param: nn.Parameter) -> bool:
    """A routed expert's weight: held by one EP rank, its gradient synced over the expert data-parallel group."""
    return getattr(param, "pipesim_expert", False)


class ExpertMLP(nn.Module):
    """``fc2(gelu(fc1(x)))`` on rows ``[n, h]``; both GEMMs may defer their weight gradient to W."""

    def __init__(self, fc1: torch.Tensor, fc2: torch.Tensor, *, routed: bool):
        super().__init__()
        self.fc1, self.fc2 = nn.Module(), nn.Module()
        self.fc1.weight, self.fc2.weight = nn.Parameter(fc1.clone()), nn.Parameter(fc2.clone())
        for param in (self.fc1.weight, self.fc2.weight):
            param.pipesim_expert = routed
        self.weight_grad_store: WeightGradStore | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        store = self.weight_grad_store
        return linear(F.gelu(linear(x, self.fc1.weight, store)), self.fc2.weight, store)


class MoELayer(nn.Module):
    """Router, this EP rank's routed experts and the shared experts; ``[s, b, h] → [s, b, h]``.

    Forward: route every token, dispatch its k copies to the EP ranks owning their experts (counts first, then
    the rows), run the local experts on what arrived, combine the outputs back and sum them weighted by the
    gates (:mod:`executors.moe_dispatch`). ``ep_group`` None: one EP rank holding every expert.

    Not tensor-parallel: each TP rank holds the whole layer. Under Megatron's all-reduce mode the TP ranks then
    compute the same thing on the same tokens; under sequence parallelism (``sequence_parallel``) each routes
    its own slice of the sequence, so every weight's gradient is partial over TP (summed at REDUCE_GRAD).
    """

    def __init__(
        self, prefix: str, moe: MoEConfig, full: dict[str, torch.Tensor], ep_group, *, sequence_parallel=False
    ):
        super().__init__()
        self.moe, self.group = moe, ep_group
        self.ep = 1 if ep_group is None else dist.get_world_size(ep_group)
        ep_rank = 0 if ep_group is None else dist.get_rank(ep_group)
        local = moe.experts // self.ep
        self.router = nn.Module()
        self.router.weight = nn.Parameter(full[f"{prefix}.router.weight"].clone())
        # Keyed by the global expert index, so parameter names are the full model's on every EP rank.
        self.experts = nn.ModuleDict(
            {
                str(e): ExpertMLP(
                    full[f"{prefix}.experts.{e}.fc1.weight"], full[f"{prefix}.experts.{e}.fc2.weight"], routed=True
                )
                for e in range(ep_rank * local, (ep_rank + 1) * local)
            }
        )
        self.shared = nn.ModuleDict(
            {
                str(i): ExpertMLP(
                    full[f"{prefix}.shared.{i}.fc1.weight"], full[f"{prefix}.shared.{i}.fc2.weight"], routed=False
                )
                for i in range(moe.shared_experts)
            }
        )
        self.weight_grad_store: WeightGradStore | None = None
        for param in self.parameters():
            set_shard_spec(param, ShardSpec(partial_grad_over=Dim.TP if sequence_parallel else None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s, b, h = x.shape
        tokens = x.reshape(s * b, h)
        routing = route(linear(tokens, self.router.weight, self.weight_grad_store), self.moe.top_k)
        plan = plan_dispatch(routing.experts, self.moe.experts, self.ep)
        recv_counts = plan.send_counts if self.group is None else exchange_counts(plan.send_counts, self.group)
        send_splits, recv_splits = plan.send_splits, recv_counts.sum(dim=1).tolist()
        received = exchange(tokens[plan.source_tokens], recv_splits, send_splits, self.group)
        by_expert, sizes = local_expert_order(recv_counts)
        # Every local expert runs, on zero rows if none arrived, so each has a gradient (zero) every step and
        # the expert data-parallel ranks reduce buffers of one layout.
        parts = received[by_expert].split(sizes)
        processed = torch.cat([expert(part) for expert, part in zip(self.experts.values(), parts, strict=True)])
        returned = exchange(processed[inverse(by_expert)], send_splits, recv_splits, self.group)
        copies = returned[inverse(plan.order)].view(s * b, self.moe.top_k, h)
        out = (copies * routing.gates.unsqueeze(-1)).sum(dim=1)
        for expert in self.shared.values():
            out = out + expert(tokens)
        return out.view(s, b, h)


def reference_moe(x: torch.Tensor, w: dict[str, torch.Tensor], prefix: str, moe: MoEConfig) -> torch.Tensor:
    """The MoE MLP on ``x [..., h]`` in one process with every expert, written without the dispatch: each
    expert runs on the tokens that chose it and adds its gated output there."""
    shape = x.shape
    tokens = x.reshape(-1, shape[-1])
    routing = route(tokens @ w[f"{prefix}.router.weight"].t(), moe.top_k)

    def mlp(rows, name):
        return F.gelu(rows @ w[f"{prefix}.{name}.fc1.weight"].t()) @ w[f"{prefix}.{name}.fc2.weight"].t()

    out = torch.zeros_like(tokens)
    for e in range(moe.experts):
        token, slot = (routing.experts == e).nonzero(as_tuple=True)
        out = out.index_add(0, token, mlp(tokens[token], f"experts.{e}") * routing.gates[token, slot, None])
    for i in range(moe.shared_experts):
        out = out + mlp(tokens, f"shared.{i}")
    return out.view(shape)
