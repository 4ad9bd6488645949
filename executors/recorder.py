"""Measurement: per-instruction start/end stamps (one clock origin for all ranks) and saved-activation bytes.

Clocks: on CPU ``time.perf_counter`` (CLOCK_MONOTONIC on Linux, one clock per host, so ranks on one host
share it exactly; across hosts each rank's origin is its own barrier exit); on GPU CUDA events, resolved
once per step so recording never synchronises the device mid-step.

Activation memory is what autograd really saves for backward, observed with
``torch.autograd.graph.saved_tensors_hooks``: each saved tensor's storage is counted once while any
forward that saved it is alive; parameters (saved by every linear) are not activations and are skipped.
"""

from __future__ import annotations

import contextlib
import time
from typing import Protocol

import pandas as pd
import torch
import torch.distributed as dist

from pipesim.io.timeline import RING_OP, Source, make_frame
from pipesim.program.ir import Program


class Clock(Protocol):
    """What the recorder stamps instructions with: ``stamp()`` now, ``resolve(stamps)`` to seconds since
    ``origin`` (stamps may resolve late: CUDA events, emulated-stream stamps)."""

    origin: object

    def stamp(self): ...

    def resolve(self, stamps: list) -> list[float]: ...


class CpuClock:
    """Seconds since a shared origin: the earliest barrier exit of all ranks on this host."""

    def __init__(self, group: dist.ProcessGroup | None = None):
        dist.barrier(group=group)
        local = time.perf_counter()
        hosts: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(hosts, _hostname(), group=group)
        if len(set(hosts)) == 1:
            # One host: CLOCK_MONOTONIC is the same clock for every process, so a common origin is exact.
            t = torch.tensor([local], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
            local = float(t.item())
        self.origin = local

    def stamp(self):
        return time.perf_counter()

    def resolve(self, stamps: list) -> list[float]:
        return [s - self.origin for s in stamps]


class CudaClock:
    """CUDA events on the current stream; an origin event after the barrier gives every rank time zero."""

    def __init__(self, group: dist.ProcessGroup | None = None):
        dist.barrier(group=group)
        torch.cuda.synchronize()
        self.origin = torch.cuda.Event(enable_timing=True)
        self.origin.record()

    def stamp(self):
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def resolve(self, stamps: list) -> list[float]:
        torch.cuda.synchronize()
        return [self.origin.elapsed_time(e) / 1e3 for e in stamps]


def _hostname() -> str:
    import socket

    return socket.gethostname()


class TimelineRecorder:
    """Rows of the measured Timeline for one pipeline rank (``rank`` = pp coordinate, as in the schema).

    The hot path, :meth:`record`, appends one small tuple; the columns are built once, in :meth:`frame`,
    from the rank's program, so bookkeeping between two instructions stays a few microseconds.
    """

    def __init__(self, program: Program, rank: int, clock: Clock):
        self.program, self.rank, self.clock = program, rank, clock
        self._raw: list[tuple] = []  # (step, seq, start stamp, end stamp, bytes, ring peer) of this step
        self._rows: list[tuple] = []  # the same with stamps resolved to seconds
        self.current: tuple[int, int] = (0, 0)  # (step, seq) of the instruction running; the interpreter sets it

    def record(self, step: int, seq: int, t0, t1, nbytes: float = 0.0) -> None:
        self._raw.append((step, seq, t0, t1, nbytes, None))

    # The ring-attention TransferLog (executors.ring_attention): each hop is a CP_RING row of the running
    # instruction (its F, B or I), so overlay can draw it beside the compute that hides it.
    def stamp(self):
        return self.clock.stamp()

    def ring_transfer(self, t0, t1, nbytes: int, peer: int) -> None:
        self._raw.append((*self.current, t0, t1, nbytes, peer))

    def flush(self) -> None:
        """Turn this step's stamps into seconds (one device sync on CUDA, none on CPU)."""
        if not self._raw:
            return
        starts = self.clock.resolve([r[2] for r in self._raw])
        ends = self.clock.resolve([r[3] for r in self._raw])
        self._rows += [(r[0], r[1], t0, t1, r[4], r[5]) for r, t0, t1 in zip(self._raw, starts, ends, strict=True)]
        self._raw = []

    def frame(self) -> pd.DataFrame:
        self.flush()
        code, shape = self.program.ranks[self.rank], self.program.shape
        cols: dict[str, list] = {
            k: []
            for k in (
                "step",
                "rank",
                "stage",
                "chunk",
                "op",
                "microbatch",
                "peer",
                "seq",
                "start",
                "end",
                "bytes",
            )
        }
        # A RECV row is recorded when its data is consumed, after later instructions: restore program order
        # (a compute's ring hops follow its own row, in the order they ran).
        rows = sorted(self._rows, key=lambda row: (row[0], row[1], row[5] is not None))
        for step, seq, t0, t1, nbytes, ring_peer in rows:
            ins = code[seq]
            chunk = -1 if ins.chunk is None else ins.chunk
            ring = ring_peer is not None
            for key, value in (
                ("step", step),
                ("rank", self.rank),
                ("stage", shape.stage(self.rank, chunk) if chunk >= 0 else -1),
                ("chunk", chunk),
                ("op", RING_OP if ring else ins.op.value),
                ("microbatch", -1 if ins.mb is None else ins.mb),
                ("peer", ring_peer if ring else (-1 if ins.peer is None else ins.peer)),
                ("seq", seq),
                ("start", t0),
                ("end", t1),
                ("bytes", float(nbytes)),
            ):
                cols[key].append(value)
        return make_frame({**cols, "source": Source.MEASURED.value})


class ActivationMeter:
    """Bytes of activations autograd holds for pending backwards, per owner ``(mb, stage)``, over time."""

    def __init__(self, params):
        self._param_storages = {p.untyped_storage().data_ptr() for p in params}
        self._refs: dict[int, list] = {}  # storage ptr → [nbytes, refcount]
        self._owned: dict[tuple[int, int], set[int]] = {}
        self._owner: tuple[int, int] | None = None
        self.held = 0
        self.peak = 0
        self.curve: list[tuple[float, int]] = []  # (clock stamp, bytes held) after each compute op
        self.per_forward: dict[tuple[int, int], int] = {}  # (mb, stage) → bytes its forward saved
        self.per_weight: dict[tuple[int, int], int] = {}  # (mb, stage) → bytes its I kept for W

    def _pack(self, tensor):
        if self._owner is not None:
            self._count(self._owner, tensor)
        return tensor

    def _count(self, owner: tuple[int, int], tensor: torch.Tensor) -> None:
        """Charge ``tensor``'s storage to ``owner`` (once per owner; shared storages counted once in all)."""
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self._param_storages:
            return
        owned = self._owned.setdefault(owner, set())
        if ptr in owned:
            return
        owned.add(ptr)
        ref = self._refs.get(ptr)
        if ref is None:
            self._refs[ptr] = [storage.nbytes(), 1]
            self.held += storage.nbytes()
        else:
            ref[1] += 1
        self.peak = max(self.peak, self.held)

    def hold(self, owner: tuple[int, int], tensors) -> None:
        """``owner`` keeps ``tensors`` alive past its backward (split backward's M_W, until W)."""
        before = self.held
        for tensor in tensors:
            self._count(owner, tensor)
        self.per_weight[owner] = self.held - before

    @contextlib.contextmanager
    def owning(self, owner: tuple[int, int]):
        """Attribute everything autograd saves inside the block to ``owner`` (a forward)."""
        self._owner = owner
        before = self.held
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
                yield
        finally:
            self._owner = None
            self.per_forward[owner] = self.held - before

    def release(self, owner: tuple[int, int]) -> None:
        """The backward of ``owner`` ran: autograd has dropped what it saved."""
        for ptr in self._owned.pop(owner, ()):
            ref = self._refs[ptr]
            ref[1] -= 1
            if ref[1] == 0:
                self.held -= ref[0]
                del self._refs[ptr]

    def sample(self, stamp) -> None:
        self.curve.append((stamp, self.held))
