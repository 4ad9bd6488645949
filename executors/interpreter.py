"""The Program interpreter: replays one pipeline rank's instructions on torch.distributed, one by one.

No schedule is special-cased; GPipe, 1F1B, interleaved and split-backward programs run through the same
loop. The loop owns the order and the bookkeeping (which tensor goes where); what an instruction does is
delegated through two seams: a :class:`~executors.compute.Compute` (real autograd, or an emulated sleep)
and a :class:`~executors.transport.Transport` (gloo eager, NCCL grouped, emulated links). A new backend
is a new Compute or Transport, not an edit of this loop.

Communication follows the validator's BUFFERED semantics (``pipesim.program.validate``): a RECV posts its
receive (under the transport's EAGER policy every RECV of the step is posted up front, in program order,
so each directed link stays one FIFO channel), and the compute that consumes the tensor waits for it —
its RECV row spans from the instruction to the data being there; sends are waited at the end of the step.
``REDUCE_GRAD`` launches the chunk's dp×cp all-reduce asynchronously (it overlaps the remaining
backwards, as lowering intends) and ``STEP`` waits for it before the optimizer.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import torch

from executors.compute import Compute
from executors.config import FailMode
from executors.parallel_context import ParallelContext
from executors.recorder import ActivationMeter, CudaClock, TimelineRecorder
from executors.transport import P2P, RecvPolicy, Transfer, Transport
from pipesim.program.ir import Instruction, Message, Op, Program

__all__ = ["FailMode", "InstructionError", "Interpreter", "RecvPolicy", "StepResult"]


# Compute ops that may consume a received tensor: F (an activation), B and I (a gradient).
_CONSUMERS = frozenset({Op.F, Op.B, Op.I})


class InstructionError(RuntimeError):
    """An instruction raised; the message names the rank and the instruction."""


@dataclass
class StepResult:
    loss: float | None  # this rank's sum of scaled microbatch losses (last stage only), else None
    sends: int = 0


class Interpreter:
    """Runs ``program.ranks[pp_rank]``: compute through ``compute``, messages through ``transport``."""

    def __init__(
        self,
        program: Program,
        ctx: ParallelContext,
        compute: Compute,
        transport: Transport,
        recorder: TimelineRecorder,
        meter: ActivationMeter,
        *,
        fail_at: Instruction | None = None,
        fail_mode: FailMode = FailMode.RAISE,
    ):
        self.program, self.ctx, self.compute, self.transport = program, ctx, compute, transport
        self.shape = program.shape
        self.code = program.ranks[ctx.pp_rank]
        self.recorder, self.meter = recorder, meter
        self.fail_at, self.fail_mode = fail_at, fail_mode
        rank = ctx.pp_rank
        self._stages_by_seq = [-1 if i.chunk is None else self.shape.stage(rank, i.chunk) for i in self.code]
        # Overlapped F-and-B pairs: on CPU (one thread) the two halves run one after the other, F first, each
        # recorded on its own; on CUDA the F runs on a side stream while the B runs on the current one, so the
        # device overlaps them (both recorded over the pair's span). The CUDA path is untested in CI.
        self._side_stream = None
        if torch.cuda.is_available() and isinstance(recorder.clock, CudaClock) and any(
                i.overlap for i in self.code):
            self._side_stream = torch.cuda.Stream()

    def _fail(self) -> None:
        if self.fail_mode is FailMode.KILL:
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("failure injected by --fail-at")

    # --- one optimizer step ---------------------------------------------------------------------------
    def run_step(self, step: int, tokens: list[torch.Tensor], targets: list[torch.Tensor]) -> StepResult:
        """Execute the whole program once; ``tokens[mb]``/``targets[mb]`` are this data-parallel rank's."""
        rank = self.ctx.pp_rank
        self._acts: dict[tuple[int, int], torch.Tensor] = {}  # (mb, stage) → output of that stage
        self._grads: dict[tuple[int, int], torch.Tensor] = {}  # (mb, stage) → grad of that stage's output
        self._posted: dict[int, Transfer] = {}
        policy = self.transport.policy
        if policy is RecvPolicy.EAGER:
            # Post every receive now, in program order: per link that is the FIFO order the validator proved.
            # Before the step begins, so an emulated step's agreed start is not spent allocating buffers.
            recvs = [self._p2p(seq, ins) for seq, ins in enumerate(self.code) if ins.op.is_recv]
            self._posted = {op.seq: t for op, t in zip(recvs, self.transport.issue(recvs), strict=True)}
        self.compute.begin_step(tokens, targets)
        self._incoming: dict[tuple[bool, int, int], tuple[int, float, Transfer]] = {}
        stamp, record, sample = self.recorder.clock.stamp, self.recorder.record, self.meter.sample
        issued_until = 0  # GROUPED: instructions before this one were issued with their group
        ran_with_pair = -1  # CUDA: the second half of the pair just run on two streams
        for seq, ins in enumerate(self.code):
            stage = self._stages_by_seq[seq]
            if seq == ran_with_pair:
                continue
            if self._side_stream is not None and seq + 1 < len(self.code) and self.code[seq + 1].overlap:
                self._run_pair_on_streams(step, seq)
                ran_with_pair = seq + 1
                continue
            try:
                if ins == self.fail_at:
                    self._fail()
                if ins.op.is_comm and policy is RecvPolicy.GROUPED:
                    if seq >= issued_until:
                        issued_until = self._issue_group(step, seq)
                    continue
                if ins.op.is_recv:
                    self._arrive(seq, ins, stage, stamp())
                    continue
                if ins.op in _CONSUMERS:
                    self._await_input(step, ins, stage)
                if seq + 1 < len(self.code) and self.code[seq + 1].overlap:
                    # An overlapped pair starts when both halves' inputs are there, as the simulator says.
                    self._await_input(step, self.code[seq + 1], self._stages_by_seq[seq + 1])
                self.recorder.current = (step, seq)  # ring-attention hops inside it are recorded against it
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
        sends = self.transport.finish_step()
        self.recorder.flush()
        return StepResult(self.compute.end_step(), sends=sends)

    def _run_pair_on_streams(self, step: int, seq: int) -> None:
        """CUDA: an overlapped pair's F on the side stream beside its B on the current stream; both inputs are
        awaited first (the pair starts when both are there), and the current stream waits for the side one
        before anything after the pair."""
        head, tail = self.code[seq], self.code[seq + 1]
        head_stage, tail_stage = self._stages_by_seq[seq], self._stages_by_seq[seq + 1]
        try:
            self._await_input(step, head, head_stage)
            self._await_input(step, tail, tail_stage)
            main, side = torch.cuda.current_stream(), self._side_stream
            self.recorder.current = (step, seq)
            t0 = self.recorder.clock.stamp()
            side.wait_stream(main)
            inputs = self._acts.get((head.mb, head_stage - 1))
            if inputs is not None:
                inputs.record_stream(side)  # allocated on the current stream, read on the side one
            with torch.cuda.stream(side):
                self._execute(seq, head, head_stage)
            self._execute(seq + 1, tail, tail_stage)
            main.wait_stream(side)
        except Exception as err:
            raise InstructionError(
                f"rank {self.ctx.rank} (pp rank {self.ctx.pp_rank}) failed at the pair {head} + {tail} "
                f"(step {step}, #{seq}): {type(err).__name__}: {err}") from err
        t1 = self.recorder.clock.stamp()
        self.recorder.record(step, seq, t0, t1, 0.0)
        self.recorder.record(step, seq + 1, t0, t1, 0.0)
        self.meter.sample(t1)

    # --- instructions ---------------------------------------------------------------------------------
    def _execute(self, seq: int, ins: Instruction, stage: int) -> float:
        op, compute = ins.op, self.compute
        if op is Op.F:
            # A pipeline's first stage reads the batch (DualPipe's two pipelines each have one).
            inputs = None if self.shape.is_first_stage(stage) else self._acts.pop((ins.mb, stage - 1))
            output = compute.forward(seq, ins.mb, ins.chunk, stage, inputs)
            if output is not None:
                self._acts[(ins.mb, stage)] = output
        elif op is Op.B or op is Op.I:
            grad_output = None if self.shape.is_last_stage(stage) else self._grads.pop((ins.mb, stage))
            grad_input = compute.backward_input(seq, ins.mb, ins.chunk, stage, grad_output, split=op is Op.I)
            if not self.shape.is_first_stage(stage):
                self._grads[(ins.mb, stage - 1)] = grad_input
        elif op is Op.W:
            compute.backward_weight(seq, ins.mb, ins.chunk, stage)
        elif op.is_send:
            (transfer,) = self.transport.issue([self._p2p(seq, ins, self._outgoing(ins, stage))])
            return transfer.nbytes
        elif op is Op.REDUCE_GRAD:
            compute.reduce_grad(seq, ins.chunk)
        elif op is Op.STEP:
            compute.step(seq)
        else:  # pragma: no cover - the IR has no other ops
            raise ValueError(f"unknown op {op}")
        return 0.0

    def _p2p(self, seq: int, ins: Instruction, tensor: torch.Tensor | None = None) -> P2P:
        """The operation of a SEND (carrying ``tensor``) or a RECV (into a fresh buffer)."""
        peer = self.ctx.peer(ins.peer)
        if ins.op.is_send:
            return P2P(seq, peer, tensor.contiguous(), send=True)
        return P2P(seq, peer, self.transport.receive_buffer(), send=False)

    def _arrive(self, seq: int, ins: Instruction, stage: int, reached) -> None:
        """A RECV posts its transfer (unless posted at step start); the consuming compute will wait."""
        transfer = self._posted.pop(seq, None)
        if transfer is None:
            (transfer,) = self.transport.issue([self._p2p(seq, ins)])
        self._incoming[_incoming_key(ins.op is Op.RECV_B, ins.mb, stage)] = (seq, reached, transfer)

    def _issue_group(self, step: int, start: int) -> int:
        """Issue the run of SEND/RECV instructions from ``start`` as one group; return where it ends."""
        end = start
        while end < len(self.code) and self.code[end].op.is_comm:
            end += 1
        t0 = self.recorder.clock.stamp()
        ops = [
            self._p2p(seq, ins, self._outgoing(ins, self._stages_by_seq[seq]) if ins.op.is_send else None)
            for seq, ins in enumerate(self.code[start:end], start)
        ]
        transfers = self.transport.issue(ops)
        t1 = self.recorder.clock.stamp()
        for op, transfer in zip(ops, transfers, strict=True):
            ins, stage = self.code[op.seq], self._stages_by_seq[op.seq]
            if op.send:
                self.recorder.record(step, op.seq, t0, t1, transfer.nbytes)
            else:
                self._incoming[_incoming_key(ins.op is Op.RECV_B, ins.mb, stage)] = (op.seq, t0, transfer)
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
        seq, reached, transfer = arrival
        tensor = transfer.wait()
        self.recorder.record(step, seq, reached, self.recorder.clock.stamp(), transfer.nbytes)
        if gradient:
            self._grads[(ins.mb, stage)] = tensor
        else:
            self._acts[(ins.mb, stage - 1)] = tensor


def _incoming_key(gradient: bool, mb: int, stage: int) -> Message:
    """What a received tensor is (pipesim's one :class:`Message` identity), from the receiving stage — the
    same for the RECV that posts it and the compute that consumes it."""
    return Message.received(gradient, mb, stage)
