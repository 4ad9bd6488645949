"""The Program interpreter: replays one pipeline rank's instructions on torch.distributed, one by one.

No schedule is special-cased; GPipe, 1F1B, interleaved and split-backward programs run through the same
loop. Communication follows the validator's BUFFERED semantics (``pipesim.program.validate``): a RECV posts an
``irecv`` (on gloo every RECV of the step is posted up front, in program order, so each directed link stays
one FIFO channel; :class:`RecvPolicy` says why NCCL posts at the instruction), and the compute that
consumes the tensor waits for it — its RECV row spans from the instruction to the data being there; sends
are ``isend``s whose handles are waited at the end of the step. ``REDUCE_GRAD`` launches the
chunk's dp×cp all-reduce asynchronously (it overlaps the remaining backwards, as lowering intends) and
``STEP`` waits for it before the optimizer.

Loss scaling: each microbatch's mean loss is divided by the number of microbatches and gradients are
averaged over dp×cp, so the step equals one full-batch mean (all microbatches hold equally many tokens).

Split backward (zero-bubble, Qi et al. 2024): ``I`` computes only the input gradient with
``autograd.grad(..., retain_graph=True)``; ``W`` then accumulates the weight gradients. The sum is exactly
the fused ``B``; memory is only freed at ``W`` (a true ZB implementation would drop what I alone needed).
"""

from __future__ import annotations

import enum
import os
import signal
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from executors.parallel_context import ParallelContext
from executors.recorder import ActivationMeter, TimelineRecorder
from executors.tp_layers import shard_spec
from pipesim.program.ir import Instruction, Op, Program
from pipesim.topology import Dim


class FailMode(enum.Enum):
    """How ``--fail-at`` breaks a rank: raise at the instruction, or die at once as if killed (SIGKILL)."""

    RAISE = "raise"
    KILL = "kill"


class RecvPolicy(enum.Enum):
    """When point-to-point operations are issued.

    EAGER (gloo): all of a step's irecvs at its start, so data lands while the rank computes; gloo keeps
    a FIFO of pending receives per peer, which is exactly the validator's BUFFERED link model.
    AT_USE: each irecv and isend on its own, at its instruction.
    GROUPED (NCCL): each run of consecutive SEND/RECV instructions as one ``batch_isend_irecv`` group. NCCL
    runs a pair's operations in issue order on one stream and a large send waits for its receive, so
    ungrouped 1F1B can hang (rank 0 sends F while rank 1 sends B); a group posts its receives together
    with its sends, as Megatron's ``send_forward_recv_backward`` does. The validator's GROUPED semantics
    say which Programs are safe this way.
    """

    EAGER = "eager"
    AT_USE = "at-use"
    GROUPED = "grouped"


# Compute ops that may consume a received tensor: F (an activation), B and I (a gradient).
_CONSUMERS = frozenset({Op.F, Op.B, Op.I})


class InstructionError(RuntimeError):
    """An instruction raised; the message names the rank and the instruction."""


@dataclass
class _Pending:
    """What one forward left for its backward."""

    inputs: torch.Tensor
    output: torch.Tensor
    grad_output: torch.Tensor | None = None


@dataclass
class StepResult:
    loss: float | None  # this rank's sum of scaled microbatch losses (last stage only), else None
    sends: int = 0


class Interpreter:
    """Runs ``program.ranks[pp_rank]`` over this rank's stage modules (one per local chunk)."""

    def __init__(
        self,
        program: Program,
        ctx: ParallelContext,
        stages: dict[int, nn.Module],
        optimizer: torch.optim.Optimizer,
        act_shape: tuple[int, ...],
        recorder: TimelineRecorder,
        meter: ActivationMeter,
        *,
        device: torch.device | None = None,
        fail_at: Instruction | None = None,
        fail_mode: FailMode = FailMode.RAISE,
        recv_policy: RecvPolicy = RecvPolicy.EAGER,
    ):
        self.program, self.ctx, self.stages = program, ctx, stages
        self.shape = program.shape
        self.code = program.ranks[ctx.pp_rank]
        self.optimizer, self.act_shape = optimizer, act_shape
        self.recorder, self.meter = recorder, meter
        self.device = device or torch.device("cpu")
        self.fail_at, self.fail_mode = fail_at, fail_mode
        self.recv_policy = recv_policy
        self.microbatches = self.shape.microbatches
        self.last_stage = self.shape.num_stages - 1
        self._chunk_params = {c: [p for p in m.parameters()] for c, m in stages.items()}
        rank = ctx.pp_rank
        self._stages_by_seq = [-1 if i.chunk is None else self.shape.stage(rank, i.chunk) for i in self.code]

    def _fail(self) -> None:
        if self.fail_mode is FailMode.KILL:
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("failure injected by --fail-at")

    # --- one optimizer step ---------------------------------------------------------------------------
    def run_step(self, step: int, tokens: list[torch.Tensor], targets: list[torch.Tensor]) -> StepResult:
        """Execute the whole program once; ``tokens[mb]``/``targets[mb]`` are this data-parallel rank's."""
        self.optimizer.zero_grad(set_to_none=True)
        rank = self.ctx.pp_rank
        self._tokens, self._targets = tokens, targets
        self._pending: dict[tuple[int, int], _Pending] = {}
        self._acts: dict[tuple[int, int], torch.Tensor] = {}  # (mb, stage) → output of that stage
        self._grads: dict[tuple[int, int], torch.Tensor] = {}  # (mb, stage) → grad of that stage's output
        self._sends: list[tuple[dist.Work, torch.Tensor]] = []
        self._reduces: list[tuple[dist.Work | None, torch.Tensor, list[nn.Parameter]]] = []
        self._losses: list[torch.Tensor] = []
        recvs: dict[int, tuple[dist.Work, torch.Tensor]] = {}
        self._recvs = recvs
        if self.recv_policy is RecvPolicy.EAGER:
            # Post every receive now, in program order: per link that is the FIFO order the validator proved.
            for seq, ins in enumerate(self.code):
                if ins.op.is_recv:
                    recvs[seq] = self._post_recv(ins)
        self._incoming: dict[tuple[bool, int, int], tuple[int, float, dist.Work, torch.Tensor]] = {}
        stamp, record, sample = self.recorder.clock.stamp, self.recorder.record, self.meter.sample
        issued_until = 0  # GROUPED: instructions before this one were issued with their group
        for seq, ins in enumerate(self.code):
            stage = self._stages_by_seq[seq]
            try:
                if ins == self.fail_at:
                    self._fail()
                if ins.op.is_comm and self.recv_policy is RecvPolicy.GROUPED:
                    if seq >= issued_until:
                        issued_until = self._issue_group(step, seq)
                    continue
                if ins.op.is_recv:
                    self._arrive(seq, ins, stage, stamp())
                    continue
                if ins.op in _CONSUMERS:
                    self._await_input(step, ins, stage)
                t0 = stamp()
                nbytes = self._execute(seq, ins, stage)
            except Exception as err:
                raise InstructionError(
                    f"rank {self.ctx.rank} (pp rank {rank}) failed at {ins} (step {step}, #{seq}): "
                    f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
                ) from err
            t1 = stamp()
            record(step, seq, t0, t1, nbytes)
            if ins.op.is_compute:
                sample(t1)
        for work, _ in self._sends:
            work.wait()
        self.recorder.flush()
        loss = float(torch.stack(self._losses).sum()) if self._losses else None
        return StepResult(loss, sends=len(self._sends))

    # --- instructions ---------------------------------------------------------------------------------
    def _execute(self, seq: int, ins: Instruction, stage: int) -> float:
        op = ins.op
        if op is Op.F:
            self._forward(ins.mb, ins.chunk, stage)
        elif op is Op.B:
            self._backward_input(ins.mb, ins.chunk, stage, fused=True)
        elif op is Op.I:
            self._backward_input(ins.mb, ins.chunk, stage, fused=False)
        elif op is Op.W:
            self._backward_weight(ins.mb, ins.chunk, stage)
        elif op.is_send:
            return self._send(self._outgoing(ins, stage), ins.peer)
        elif op is Op.REDUCE_GRAD:
            self._reduce_grad(ins.chunk)
        elif op is Op.STEP:
            self._step()
        else:  # pragma: no cover - the IR has no other ops
            raise ValueError(f"unknown op {op}")
        return 0.0

    def _send(self, tensor: torch.Tensor, peer: int) -> float:
        tensor = tensor.contiguous()
        self._sends.append((dist.isend(tensor, dst=self.ctx.peer(peer)), tensor))
        return tensor.numel() * tensor.element_size()

    def _post_recv(self, ins: Instruction) -> tuple[dist.Work, torch.Tensor]:
        buf = torch.empty(self.act_shape, device=self.device)
        return dist.irecv(buf, src=self.ctx.peer(ins.peer)), buf

    def _arrive(self, seq: int, ins: Instruction, stage: int, reached) -> None:
        """A RECV posts its transfer (unless posted at step start); the consuming compute will wait."""
        pending = self._recvs.pop(seq, None)
        work, buf = pending if pending is not None else self._post_recv(ins)
        self._incoming[_incoming_key(ins.op is Op.RECV_B, ins.mb, stage)] = (seq, reached, work, buf)

    def _issue_group(self, step: int, start: int) -> int:
        """Issue the run of SEND/RECV instructions from ``start`` as one group; return where it ends."""
        end = start
        while end < len(self.code) and self.code[end].op.is_comm:
            end += 1
        t0 = self.recorder.clock.stamp()
        ops, sends, recvs = [], [], []
        for seq in range(start, end):
            ins, stage = self.code[seq], self._stages_by_seq[seq]
            peer = self.ctx.peer(ins.peer)
            if ins.op.is_send:
                tensor = self._outgoing(ins, stage).contiguous()
                ops.append(dist.P2POp(dist.isend, tensor, peer))
                sends.append((seq, tensor))
            else:
                buf = torch.empty(self.act_shape, device=self.device)
                ops.append(dist.P2POp(dist.irecv, buf, peer))
                recvs.append((seq, ins, stage, buf))
        works = dist.batch_isend_irecv(ops)
        t1 = self.recorder.clock.stamp()
        # gloo returns one work per operation, in issue order; NCCL one work for the whole coalesced group.
        if len(works) == 1:
            works = works * len(ops)
        by_seq = dict(zip(range(start, end), works, strict=True))
        for seq, tensor in sends:
            self._sends.append((by_seq[seq], tensor))
            self.recorder.record(step, seq, t0, t1, tensor.numel() * tensor.element_size())
        for seq, ins, stage, buf in recvs:
            self._incoming[_incoming_key(ins.op is Op.RECV_B, ins.mb, stage)] = (seq, t0, by_seq[seq], buf)
        return end

    def _outgoing(self, ins: Instruction, stage: int) -> torch.Tensor:
        """The tensor a SEND carries: this stage's activation, or the gradient of its input."""
        if ins.op is Op.SEND_F:
            return self._acts.pop((ins.mb, stage))
        return self._grads.pop((ins.mb, stage - 1))

    def _await_input(self, step: int, ins: Instruction, stage: int) -> None:
        """Wait for the received tensor ``ins`` consumes, if any; its RECV row spans post → data here."""
        gradient = ins.op is not Op.F
        arrival = self._incoming.pop(_incoming_key(gradient, ins.mb, stage), None)
        if arrival is None:
            return  # first or last stage, or handed over on this rank (V placement fold)
        seq, reached, work, buf = arrival
        work.wait()
        self.recorder.record(step, seq, reached, self.recorder.clock.stamp(), buf.numel() * buf.element_size())
        if gradient:
            self._grads[(ins.mb, stage)] = buf
        else:
            self._acts[(ins.mb, stage - 1)] = buf

    def _forward(self, mb: int, chunk: int, stage: int) -> None:
        module = self.stages[chunk]
        # Stage 0 reads tokens; others take the previous stage's output, received from another rank or
        # handed over locally (V placement fold), as a fresh leaf so backward stops at this stage.
        inputs = self._tokens[mb] if stage == 0 else self._acts.pop((mb, stage - 1)).detach().requires_grad_()
        with self.meter.owning((mb, stage)):
            if stage == self.last_stage:
                # Scale so the microbatch losses sum to the batch mean (equal tokens per microbatch).
                output = module(inputs, self._targets[mb]) / self.microbatches
                self._losses.append(output.detach())
            else:
                output = module(inputs)
                self._acts[(mb, stage)] = output.detach()
        self._pending[(mb, stage)] = _Pending(inputs, output)

    def _backward_input(self, mb: int, chunk: int, stage: int, fused: bool) -> None:
        pending = self._pending[(mb, stage)]
        grad_out = None if stage == self.last_stage else self._grads.pop((mb, stage))
        if fused:
            torch.autograd.backward(pending.output, grad_out)
            del self._pending[(mb, stage)]
            self.meter.release((mb, stage))
            if stage > 0:
                self._grads[(mb, stage - 1)] = pending.inputs.grad
            return
        pending.grad_output = grad_out
        if stage > 0:
            (grad_in,) = torch.autograd.grad(pending.output, [pending.inputs], grad_out, retain_graph=True)
            self._grads[(mb, stage - 1)] = grad_in

    def _backward_weight(self, mb: int, chunk: int, stage: int) -> None:
        pending = self._pending.pop((mb, stage))
        params = [p for p in self._chunk_params[chunk] if p.requires_grad]
        torch.autograd.backward(pending.output, pending.grad_output, inputs=params)
        self.meter.release((mb, stage))

    def _reduce_grad(self, chunk: int) -> None:
        params = [p for p in self._chunk_params[chunk] if p.grad is not None]
        # Sequence-parallel LayerNorm weights: each TP rank saw a slice of the sequence; sum the partials.
        partial = [p for p in params if shard_spec(p).partial_grad_over is Dim.TP]
        if partial and self.ctx.tp > 1:
            flat = torch.cat([p.grad.reshape(-1) for p in partial])
            dist.all_reduce(flat, group=self.ctx.tp_group)
            _unflatten_into(flat, partial)
        if self.ctx.dp_cp == 1:
            return
        # One coalesced buffer per chunk, reduced asynchronously; STEP waits for it.
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        work = dist.all_reduce(flat, group=self.ctx.dp_cp_group, async_op=True)
        self._reduces.append((work, flat, params))

    def _step(self) -> None:
        for work, flat, params in self._reduces:
            work.wait()
            _unflatten_into(flat.div_(self.ctx.dp_cp), params)
        self._reduces = []
        self.optimizer.step()


def _incoming_key(gradient: bool, mb: int, stage: int) -> tuple[bool, int, int]:
    """What a received tensor is, from the receiving stage: the gradient from stage+1 or the activation
    of stage−1 — the same for the RECV that posts it and the compute that consumes it."""
    return gradient, mb, stage + 1 if gradient else stage - 1


def _unflatten_into(flat: torch.Tensor, params: list[nn.Parameter]) -> None:
    offset = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
        offset += n
