"""DualPipe's two copies of each stage: their gradients summed across the mirror pair of pipeline ranks.

Under the dual placement (bidirectional DualPipe, DeepSeek-V3 technical report §3.2.1) pipeline rank r holds
slice r of the down copy of the model (chunk 0) and slice pp−1−r of the up copy (chunk 1); its mirror rank
pp−1−r holds the other copy of both. Each copy's gradient covers only the half of the microbatches that
passed it, so before the optimizer step the two gradients of each slice are summed (the DualPipe
repository's example does the same); both copies then take the same step from the same values and stay
equal, as they started (the executor builds both from the same full weights).

One all-reduce per step over the two-rank mirror group (the two ranks with the same tp, cp and dp
coordinates), at STEP after the data-parallel sync: a sum of sums, so the order does not matter, and at STEP
every compute has run, so the blocking collective cannot hold up a pipeline message. Its buffer holds the
rank's two slices in slice order, so both ranks lay out the same tensors (the copies of a slice have the
same parameters in the same order), plus one flag per parameter so that a parameter neither copy touched
(an expert no token reached) keeps no gradient, as in the one-process run.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


class MirrorCopies:
    """This rank's parameters by model slice and the mirror group to sum their gradients over."""

    def __init__(self, group: dist.ProcessGroup, slices: dict[int, list[nn.Parameter]]) -> None:
        self.group = group
        self.params = [p for s in sorted(slices) for p in slices[s]]

    def sum_gradients(self) -> None:
        grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in self.params]
        touched = torch.tensor([p.grad is not None for p in self.params], dtype=grads[0].dtype)
        flat = torch.cat([*(g.reshape(-1) for g in grads), touched.to(grads[0].device)])
        dist.all_reduce(flat, group=self.group)
        offset = 0
        for p, flag in zip(self.params, flat[-len(self.params) :].tolist(), strict=True):
            n = p.numel()
            if flag > 0:
                summed = flat[offset : offset + n].view_as(p)
                if p.grad is None:
                    p.grad = summed.clone()
                else:
                    p.grad.copy_(summed)
            offset += n

    def difference(self) -> float:
        """The largest gap between this rank's parameters and the mirror rank's copies of them (tests: the
        copies must stay equal)."""
        flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        both = [torch.empty_like(flat) for _ in range(2)]
        dist.all_gather(both, flat, group=self.group)
        return float((both[0] - both[1]).abs().max())
