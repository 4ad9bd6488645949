"""What a compute instruction does on a rank: real autograd (:class:`TorchCompute`) or, in
``executors.emulation``, a sleep of its cost. The interpreter hands tensors in and out; it never looks inside.

Loss scaling: each microbatch's mean loss is divided by the number of microbatches and gradients are
averaged over dp×cp, so the step equals one full-batch mean (all microbatches hold equally many tokens, and
so do all cp ranks of one: under context parallelism a rank's loss is the mean over its seq/cp tokens, and
the ring backward has already sent each rank the gradient of the other cp ranks' losses through its K/V).

Split backward (Zero Bubble, Qi et al. 2024): ``I`` runs the stage's backward once, graph-freeing, with
the weight GEMMs deferred (:mod:`executors.weight_grad`); it keeps only their inputs and output gradients
(M_W) and ``W`` runs the deferred GEMMs. ``I`` then ``W`` sums to exactly the fused ``B``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from executors.mirror_grads import MirrorCopies
from executors.parallel_context import ParallelContext
from executors.recorder import ActivationMeter
from executors.tp_layers import shard_spec
from executors.weight_grad import DeferredGrad, WeightGradStore, apply_weight_grads
from pipesim.program.ir import PipelineShape
from pipesim.topology import Dim


class Compute(abc.ABC):
    """One rank's compute over its stage modules; ``seq`` is the instruction's index in the rank's program.

    ``forward`` returns the stage output to hand to the next stage (None on the last stage);
    ``backward_input`` returns the gradient of the stage input (None on the first stage).
    """

    @abc.abstractmethod
    def begin_step(self, tokens: list[torch.Tensor], targets: list[torch.Tensor]) -> None: ...

    @abc.abstractmethod
    def forward(self, seq: int, mb: int, chunk: int, stage: int, inputs: torch.Tensor | None): ...

    @abc.abstractmethod
    def backward_input(
        self, seq: int, mb: int, chunk: int, stage: int, grad_output: torch.Tensor | None, *, split: bool
    ) -> torch.Tensor | None: ...

    @abc.abstractmethod
    def backward_weight(self, seq: int, mb: int, chunk: int, stage: int) -> None: ...

    @abc.abstractmethod
    def reduce_grad(self, seq: int, chunk: int) -> None: ...

    @abc.abstractmethod
    def step(self, seq: int) -> None: ...

    @abc.abstractmethod
    def end_step(self) -> float | None:
        """This rank's sum of scaled microbatch losses (last stage only), else None."""


@dataclass
class _Pending:
    """What one forward left for its backward."""

    inputs: torch.Tensor
    output: torch.Tensor


class TorchCompute(Compute):
    """Real forward and backward with autograd; activation bytes measured by ``meter``."""

    def __init__(
        self,
        ctx: ParallelContext,
        stages: dict[int, nn.Module],
        optimizer: torch.optim.Optimizer,
        meter: ActivationMeter,
        *,
        microbatches: int,
        shape: PipelineShape,
        mirror: MirrorCopies | None = None,
    ):
        self.ctx, self.stages, self.optimizer, self.meter = ctx, stages, optimizer, meter
        self.microbatches, self.shape, self.mirror = microbatches, shape, mirror
        self.store = WeightGradStore()
        for module in stages.values():
            module.use_weight_grad_store(self.store)
        self._chunk_params = {c: list(m.parameters()) for c, m in stages.items()}

    def begin_step(self, tokens, targets) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self._tokens, self._targets = tokens, targets
        self._pending: dict[tuple[int, int], _Pending] = {}
        self._deferred: dict[tuple[int, int], list[DeferredGrad]] = {}
        self._reduces: list[tuple[dist.Work, torch.Tensor, list[nn.Parameter]]] = []
        self._losses: list[torch.Tensor] = []

    def forward(self, seq, mb, chunk, stage, inputs):
        module = self.stages[chunk]
        # A pipeline's first stage reads tokens; others take the previous stage's output, received from another
        # rank or handed over locally (V placement fold), as a fresh leaf so backward stops at this stage.
        first = self.shape.is_first_stage(stage)
        x = self._tokens[mb] if first else inputs.detach().requires_grad_()
        with self.meter.owning((mb, stage)):
            if self.shape.is_last_stage(stage):
                # Scale so the microbatch losses sum to the batch mean (equal tokens per microbatch).
                output = module(x, self._targets[mb]) / self.microbatches
                self._losses.append(output.detach())
                handed_on = None
            else:
                output = module(x)
                handed_on = output.detach()
        self._pending[(mb, stage)] = _Pending(x, output)
        return handed_on

    def backward_input(self, seq, mb, chunk, stage, grad_output, *, split):
        pending = self._pending.pop((mb, stage))
        owner = (mb, stage)
        if split:
            # Free the graph now; keep only the deferred weight GEMMs' operands until W.
            with self.store.deferring() as deferred:
                torch.autograd.backward(pending.output, grad_output)
            self._deferred[owner] = deferred
            self.meter.release(owner)
            self.meter.hold(owner, [t for item in deferred for t in item.tensors])
        else:
            torch.autograd.backward(pending.output, grad_output)
            self.meter.release(owner)
        return None if self.shape.is_first_stage(stage) else pending.inputs.grad

    def backward_weight(self, seq, mb, chunk, stage) -> None:
        apply_weight_grads(self._deferred.pop((mb, stage)))
        self.meter.release((mb, stage))

    def reduce_grad(self, seq, chunk) -> None:
        params = [p for p in self._chunk_params[chunk] if p.grad is not None]
        sum_tp_partial_grads(params, self.ctx)
        if self.ctx.dp_cp == 1:
            return
        # One coalesced buffer per chunk, reduced asynchronously; STEP waits for it.
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        work = dist.all_reduce(flat, group=self.ctx.dp_cp_group, async_op=True)
        self._reduces.append((work, flat, params))

    def step(self, seq) -> None:
        for work, flat, params in self._reduces:
            work.wait()
            _unflatten_into(flat.div_(self.ctx.dp_cp), params)
        self._reduces = []
        if self.mirror is not None:  # DualPipe: sum the two copies of each stage (after dp: sums commute)
            self.mirror.sum_gradients()
        self.optimizer.step()

    def end_step(self) -> float | None:
        return float(torch.stack(self._losses).sum()) if self._losses else None


def sum_tp_partial_grads(params: list[nn.Parameter], ctx: ParallelContext) -> None:
    """Sequence parallelism: each TP rank saw a slice of the sequence, so the weights marked TP-partial (the
    LayerNorms, and the MoE layer replicated over tp) hold partial gradients; sum them over the TP group."""
    partial = [p for p in params if shard_spec(p).partial_grad_over is Dim.TP]
    if partial and ctx.tp > 1:
        flat = torch.cat([p.grad.reshape(-1) for p in partial])
        dist.all_reduce(flat, group=ctx.tp_group)
        _unflatten_into(flat, partial)


def _unflatten_into(flat: torch.Tensor, params: list[nn.Parameter]) -> None:
    offset = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
        offset += n
