"""Emulated costs: run a schedule for real at the durations of a costs file (``executors.run --emulate``).

Each compute instruction sleeps its cost, taken from the simulator's own per-row durations
(:func:`pipesim.sim.simulator.durations_of`, so a costs file means exactly what ``pipesim simulate --costs``
makes of it), while tensors of the real activation size cross the real P2P path and the real TP/DP
collectives run on real-size buffers. Ranks sleep rather than spin, so many ranks share a few cores.

Transfers follow the simulator's link model: a message on the directed link (sender, receiver) starts
when it is issued or when the link's previous message has arrived, whichever is later, and arrives
``p2p_latency + bytes/bandwidth`` later. The sender, the only one that issues on its link, computes that
arrival time and sends it in a header in front of the data; the receiver, once the real bytes are
there, sleeps until it. The ranks share one clock (``CLOCK_MONOTONIC`` on one host), so emulation is for
one machine; a transfer whose real path takes longer than its cost shows up as such.

Emulated time runs on a device stream, as on a GPU (:class:`EmulatedStream`). A GPU kernel starts when
the stream is free and its inputs are there, not when the host thread got round to launching it: the host
runs ahead and its own time per instruction (Python, gloo ``isend``, waking from a sleep) is hidden. The
emulation keeps that: an instruction ends at ``max(stream free, inputs arrived) + cost``, and a message's
arrival is counted from the end of the compute that produced it, not from when the host issued it. The
host cannot run further ahead than the instruction it is in (it sleeps through it), so host lateness is
hidden up to one instruction's cost and shows beyond that — as a GPU starves when its host falls behind.
Everything real stays real: a receive whose bytes come later than their cost says, a collective slower
than its instruction, a wait on a receive posted too late all delay the stream.

Sleeping is deadline-based (``sleep(deadline − now)``, no accumulation of overshoot), learns the kernel's
wake-up lateness and asks to wake that much earlier; the thread's timer slack is set to 1 µs and, where
permitted, the process's threads get nice −10 (see :func:`raise_priority`); cyclic garbage collection
waits for the end of the step.

The timeline is stamped in stream time (:class:`StreamClock`), as a GPU run stamps CUDA events.

Measured with ``python experiments/emulated_vs_predicted.py`` (pp=4, m ∈ {8, 16}, every built-in
schedule, a 2-core machine): anchoring compute on the host clock gave makespans 0.9–4.3% long and median
start errors of 2–21 ms, growing with the instruction count; on the stream, makespans within 0.7% and
median start errors under 0.35 ms, the rest being transfers that really came late (a receiver blocked in
gloo's wait getting its bytes up to a few ms late on two shared cores).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from executors import collectives as C
from executors.compute import Compute
from executors.parallel_context import ParallelContext
from executors.tp_layers import TPMode
from executors.transport import P2P, Transfer, Transport
from pipesim.errors import PipesimError
from pipesim.program.ir import PipelineShape, Program
from pipesim.program.table import table_of
from pipesim.sim.costs import CostModel, TimeUnit

_HEADER = 16  # bytes: two float64, the arrival time and the sending host's lag behind its stream
_LONGEST_RUN_S = 3600.0  # refuse emulations predicted to take longer than this per step
_MAX_EARLY = 0.2e-3  # a sleep never asks to wake more than this before its deadline
_BLOCKED = 0.3e-3  # a receive's wait longer than this found its bytes missing
_MIN_LEAD = 2e-3  # a step starts at least this long after the ranks agree on when
_HOST_LAG = 0.5e-3  # host lateness always hidden, even behind an instruction of no cost


def check_emulation_costs(costs: CostModel, program: Program) -> None:
    """Refuse a costs file that cannot drive an emulation of ``program`` (one line, before any work)."""
    from pipesim.sim.simulator import simulate

    if costs.time_unit is not TimeUnit.SECONDS:
        raise PipesimError(
            f"--emulate: the costs file is in {costs.time_unit.value!r} time units; emulation sleeps real time, "
            "so give durations in seconds (time_unit: s), e.g. forward: 0.018"
        )
    num_stages = program.shape.num_slices  # the cost model's stages (DualPipe: one per slice, not per copy)
    bad = [s for s in costs.overrides if s >= num_stages]
    if bad:
        raise PipesimError(
            f"--emulate: the costs file overrides stage {bad[0]}, but this pipeline has stages "
            f"0..{num_stages - 1}; use a costs file for {num_stages} stages"
        )
    makespan = simulate(program, costs, check=False).metrics.makespan
    if makespan > _LONGEST_RUN_S:
        raise PipesimError(
            f"--emulate: one step would take {makespan:.0f} s by the costs file (limit {_LONGEST_RUN_S:.0f} s);"
            " check its durations are in seconds"
        )


def row_durations(program: Program, costs: CostModel, pp_rank: int) -> list[float]:
    """Seconds of each instruction of ``pp_rank``, as the simulator times it (a SEND: its transfer)."""
    from pipesim.sim.simulator import durations_of

    table = table_of(program)
    begin, end = table.rank_bounds[pp_rank]
    return durations_of(table, costs)[begin:end].tolist()


def fine_timer_slack() -> None:
    """Ask Linux for 1 µs timer slack on this thread (prctl PR_SET_TIMERSLACK); elsewhere do nothing."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # no libc symbol: keep the default slack
        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK = 29, in ns


def raise_priority(niceness: int = -10) -> bool:
    """Give every thread of this process (gloo's included) a higher CPU priority, where permitted.

    Emulated ranks sleep almost all the time, so this takes little CPU from anyone; what it buys is waking
    on time on a busy machine: on two shared cores at load ≈ 11, the 90th percentile of a 3.6 ms sleep's
    lateness falls from 2.8 ms to 0.08 ms with nice −10. Linux sets niceness per thread, hence the loop.
    Without the privilege (CAP_SYS_NICE) nothing changes and this returns False.
    """
    tasks = Path("/proc/self/task")
    if not hasattr(os, "setpriority") or not tasks.is_dir():
        return False
    raised = False
    for task in tasks.iterdir():
        with contextlib.suppress(OSError, ValueError):
            os.setpriority(os.PRIO_PROCESS, int(task.name), niceness)
            raised = True
    return raised


class Sleeper:
    """Sleeps until a deadline on ``time.perf_counter`` (CLOCK_MONOTONIC on Linux), never spinning.

    A sleep wakes late by the scheduler's latency (tens of µs, more on a loaded machine); the sleeper
    learns that lateness (a running median-like estimate) and asks the kernel to wake it that much
    earlier, so the error of a sleep is centred on zero instead of always positive.
    """

    def __init__(self) -> None:
        self.lateness = 0.0  # seconds the kernel wakes us after the time asked for, estimated

    def until(self, deadline: float) -> None:
        remaining = deadline - time.perf_counter() - self.lateness
        if remaining <= 0:
            return
        asked = time.perf_counter() + remaining
        time.sleep(remaining)
        late = time.perf_counter() - asked
        # Move the estimate a small step toward each observation: converges to the median, ignores spikes.
        step = 2e-6
        self.lateness += step if late > self.lateness else -step
        self.lateness = min(max(self.lateness, 0.0), _MAX_EARLY)


class EmulatedStream:
    """The emulated device's time on the shared host clock (see the module docstring).

    ``free_at`` is when the stream finishes its last instruction; ``inputs_at`` when the data of the next
    one is there (the latest arrival waited for since). :meth:`deadline` gives an instruction its end,
    :meth:`finish` sleeps until it.
    """

    def __init__(self, sleeper: Sleeper):
        self.sleeper = sleeper
        self.free_at = 0.0
        self.inputs_at = 0.0
        self._lead = _MIN_LEAD
        self.last_stamp: list[float] | None = None  # the latest timeline stamp (see StreamClock)

    def position(self) -> float:
        """Where the stream is: when the next instruction could start, by what it has run and received."""
        return max(self.free_at, self.inputs_at)

    def start_step(self) -> None:
        """All ranks start the step at one instant: the latest rank's now + a lead, on the shared clock.

        The simulator starts every rank at time 0; ranks leaving the previous step's collectives a fraction
        of a millisecond apart would otherwise add that skew to every step. The lead is a few times what
        the agreement itself last took, so every rank has the answer before the instant it names (a loaded
        host can take several ms over a 4-rank all-reduce).
        """
        asked = time.perf_counter()
        start = torch.tensor([asked + self._lead], dtype=torch.float64)
        dist.all_reduce(start, op=dist.ReduceOp.MAX)
        self._lead = max(_MIN_LEAD, 3 * (time.perf_counter() - asked))
        self.free_at = self.inputs_at = float(start)
        self.sleeper.until(self.free_at)

    def arrived(self, when: float) -> None:
        """Data the next instruction consumes is there at ``when`` (sleeps until then: the host waits too)."""
        self.inputs_at = max(self.inputs_at, when)
        self.sleeper.until(when)

    def deadline(self, duration: float) -> float:
        """When an instruction of ``duration`` issued now ends on the stream: started when the stream is free
        and its inputs are there, or when the host issues it if the host fell further behind than that."""
        start = self.position()
        now = time.perf_counter()
        if now > start + max(duration, _HOST_LAG):  # later than one instruction can hide: the stream starved
            start = now
        if self.last_stamp is not None:  # the instruction's start stamp, taken just before it was issued
            self.last_stamp[0] = start
        return start + duration

    def finish(self, deadline: float) -> None:
        """Sleep out an instruction; real work (a collective) that overran its deadline ends it later."""
        overran = time.perf_counter() > deadline
        self.sleeper.until(deadline)
        self.free_at = time.perf_counter() if overran else deadline


class StreamClock:
    """The measured timeline's clock under emulation: stamps in emulated-stream time.

    A GPU run stamps its timeline with CUDA events on the compute stream (:class:`executors.recorder.CudaClock`):
    device time, in which the host's own time per instruction does not appear. An emulated run's device is
    :class:`EmulatedStream`, so its stamps are the stream's position; host time would measure the emulation's
    inability to run ahead of its device, not the schedule. A stamp is a one-element list, resolved at the
    step's end like a CUDA event: the start stamp of an instruction that starves the stream is moved to when
    the stream really started it.
    """

    def __init__(self, stream: EmulatedStream, origin: float):
        self.stream, self.origin = stream, origin

    def stamp(self) -> list[float]:
        token = [self.stream.position()]
        self.stream.last_stamp = token
        return token

    def resolve(self, stamps: list) -> list[float]:
        return [s[0] - self.origin for s in stamps]


class _FramedTransfer(Transfer):
    """A received frame: wait for the bytes, then for the arrival time in its header; yield the data.

    The data is there at the header's arrival time, unless the real path was slower than the link's cost:
    if the wait found the bytes missing (it blocked), they are there when they came less the sending
    host's lag behind its stream (the header's second field), which a GPU's launch queue hides (see
    :class:`EmulatedStream`). gloo's ``is_completed`` stays false until ``wait``, so blocking is told by the
    wait's own duration."""

    def __init__(self, inner: Transfer, shape: tuple[int, ...], dtype: torch.dtype, stream: EmulatedStream):
        self._inner, self._shape, self._dtype, self._stream = inner, shape, dtype, stream
        self.tensor = inner.tensor

    def wait(self) -> torch.Tensor:
        asked = time.perf_counter()
        frame = self._inner.wait()
        came = time.perf_counter()
        arrival, sender_lag = frame[:_HEADER].view(torch.float64).tolist()
        blocked = came - asked > _BLOCKED
        self._stream.arrived(max(arrival, came - sender_lag) if blocked else arrival)
        return frame[_HEADER:].view(self._dtype).view(self._shape)


class EmulatedTransport(Transport):
    """Wraps a real transport; every message takes at least its link time from the costs file."""

    def __init__(self, inner: Transport, durations: list[float], stream: EmulatedStream):
        super().__init__(inner.shape, inner.device, inner.dtype)
        self.inner, self.policy, self._durations, self._stream = inner, inner.policy, durations, stream
        self._link_free: dict[int, float] = {}  # peer → when this rank's last message to it arrives
        self._frames: dict[int, torch.Tensor] = {}  # SEND seq → its frame
        self._headers: dict[int, torch.Tensor] = {}  # SEND seq → the frame's float64 header

    def receive_buffer(self) -> torch.Tensor:
        data = math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()
        return torch.empty(_HEADER + data, dtype=torch.uint8, device=self.device)

    def _frame(self, op: P2P) -> P2P:
        """The message of ``op``: a frame of the real size whose header says when it may arrive.

        The simulator's link model: the transfer starts when issued (on the stream: when the compute that
        produced it ended) or when the link's previous message has arrived, and takes the link time.
        Emulated compute's tensors are stand-ins (zeros), so the payload is not copied: each SEND
        instruction owns one zeroed frame, reused every step (a step's sends have all completed before the
        next step starts), and only its header is written.
        """
        issued = self._stream.free_at
        arrival = max(issued, self._link_free.get(op.peer, 0.0)) + self._durations[op.seq]
        self._link_free[op.peer] = arrival
        frame = self._frames.get(op.seq)
        if frame is None:
            frame = self._frames[op.seq] = self.receive_buffer().zero_()
            self._headers[op.seq] = frame[:_HEADER].view(torch.float64)
        header = self._headers[op.seq]
        header[0] = arrival
        header[1] = time.perf_counter() - issued  # the host's lag behind the stream, which a GPU hides
        return P2P(op.seq, op.peer, frame, send=True)

    def _start(self, ops: Sequence[P2P]) -> list[Transfer]:
        framed = [self._frame(op) if op.send else op for op in ops]
        transfers = self.inner._start(framed)
        return [
            t if op.send else _FramedTransfer(t, self.shape, self.dtype, self._stream)
            for op, t in zip(ops, transfers, strict=True)
        ]


class EmulatedCompute(Compute):
    """Each compute instruction sleeps its cost; tensors of the real sizes flow and collectives run.

    Per forward or backward of a stage with L transformer blocks, the tensor-parallel group runs the
    collectives the real blocks would (Megatron: 2·L all-reduces of one activation; sequence parallel:
    2·L all-gathers and 2·L reduce-scatters), inside the instruction's time. REDUCE_GRAD all-reduces a
    buffer of the chunk's parameter count over dp×cp, asynchronously; STEP waits for it.
    """

    def __init__(
        self,
        ctx: ParallelContext,
        stages: dict[int, nn.Module],
        durations: list[float],
        act_shape: tuple[int, ...],
        stream: EmulatedStream,
        *,
        device: torch.device,
        shape: PipelineShape,
        tp_mode: TPMode,
    ):
        fine_timer_slack()
        raise_priority()
        self.ctx, self.durations, self.tp_mode, self.stream = ctx, durations, tp_mode, stream
        self.shape = shape
        self._blocks = {chunk: len(getattr(module, "blocks", ())) for chunk, module in stages.items()}
        self._params = {chunk: sum(p.numel() for p in module.parameters()) for chunk, module in stages.items()}
        # One read-only tensor of the real size stands for every output and gradient.
        self._activation = torch.zeros(act_shape, device=device)
        self._device = device
        # The run's long-lived heap (torch, the model, the Program) leaves the collector's view once, so the
        # collection before each step scans only what steps made (a full pass costs ~0.1 s).
        gc.collect()
        gc.freeze()

    def begin_step(self, tokens, targets) -> None:
        self._reduces: list[dist.Work] = []
        self._forwards_on_last = 0
        # No cyclic garbage collection inside a step (Megatron's --manual-gc does the same): a collection
        # pause of several ms, on the host, would reach the stream as a late transfer.
        gc.collect()
        gc.disable()
        self.stream.start_step()

    def _busy(self, seq: int, chunk: int | None = None, backward: bool = False) -> None:
        """Run the instruction's TP collectives, then sleep out the rest of its cost."""
        deadline = self.stream.deadline(self.durations[seq])
        if chunk is not None and self.ctx.tp > 1:
            self._tp_collectives(self._blocks[chunk], backward)
        self.stream.finish(deadline)

    def _tp_collectives(self, blocks: int, backward: bool) -> None:
        """The collectives ``blocks`` real blocks run in one pass, on tensors of the real size: in a backward
        under sequence parallelism also the column-parallel inputs gathered again (the real layers' kept
        shards, :class:`executors.tp_layers.ColumnParallelLinear`)."""
        group, x = self.ctx.tp_group, self._activation
        for _ in range(2 * blocks):  # attention and MLP
            if self.tp_mode is TPMode.ALL_REDUCE:
                C.all_reduce_copy(x, group)
            else:
                C.reduce_scatter_along_sequence(C.all_gather_along_sequence(x, group), group)
                if backward:
                    C.all_gather_along_sequence(x, group)

    def forward(self, seq, mb, chunk, stage, inputs):
        self._busy(seq, chunk)
        if self.shape.is_last_stage(stage):
            self._forwards_on_last += 1
            return None
        return self._activation

    def backward_input(self, seq, mb, chunk, stage, grad_output, *, split):
        self._busy(seq, chunk, backward=True)
        return None if self.shape.is_first_stage(stage) else self._activation

    def backward_weight(self, seq, mb, chunk, stage) -> None:
        self._busy(seq)

    def reduce_grad(self, seq, chunk) -> None:
        deadline = self.stream.deadline(self.durations[seq])
        if self.ctx.dp_cp > 1:
            flat = torch.zeros(self._params[chunk], device=self._device)
            self._reduces.append(dist.all_reduce(flat, group=self.ctx.dp_cp_group, async_op=True))
        self.stream.finish(deadline)

    def step(self, seq) -> None:
        deadline = self.stream.deadline(self.durations[seq])
        for work in self._reduces:
            work.wait()
        self._reduces = []
        self.stream.finish(deadline)

    def end_step(self) -> float | None:
        gc.enable()
        return 0.0 if self._forwards_on_last else None
