"""Gradient sync of a MoE GPT: dense weights over dp×cp, routed experts over their expert data-parallel group.

Each EP rank holds distinct experts, so summing expert gradients over dp×cp (as :class:`TorchCompute` does for
dense weights) would add unrelated tensors. An expert's gradient on its rank already sums the gradients of the
losses of every EP rank whose tokens it served (the combine and dispatch all-to-alls carried them back); the
expert data-parallel group (the ranks holding the same experts, dp·cp/ep of them, possibly one) sums the rest,
and dividing by dp·cp — as for the dense weights — gives the gradient of the global batch mean.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from executors.compute import TorchCompute, sum_tp_partial_grads
from executors.moe import is_expert


class MoECompute(TorchCompute):
    """:class:`TorchCompute` whose REDUCE_GRAD syncs routed experts over ``ctx.expert_dp_group``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The dense reduction of the base class sees only the dense parameters.
        self._expert_params = {c: [p for p in ps if is_expert(p)] for c, ps in self._chunk_params.items()}
        self._chunk_params = {c: [p for p in ps if not is_expert(p)] for c, ps in self._chunk_params.items()}

    def reduce_grad(self, seq, chunk) -> None:
        super().reduce_grad(seq, chunk)
        params = [p for p in self._expert_params[chunk] if p.grad is not None]
        sum_tp_partial_grads(params, self.ctx)  # each TP rank routed its slice of the tokens
        if not params or self.ctx.dp_cp == 1:
            return
        group = self.ctx.expert_dp_group
        if group is None:  # one replica of these experts: nothing to sum, only the 1/dp of the batch mean
            for p in params:
                p.grad.div_(self.ctx.dp_cp)
            return
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        # Queued with the dense reductions: STEP waits for it and divides by dp, as for them.
        self._reduces.append((dist.all_reduce(flat, group=group, async_op=True), flat, params))
