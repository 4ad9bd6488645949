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
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from pipesim.ir import Instruction, PipelineShape
from pipesim.timeline import Source, make_frame


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


@dataclass
class TimelineRecorder:
    """Rows of the measured Timeline for one pipeline rank (``rank`` = pp coordinate, as in the schema)."""

    shape: PipelineShape
    rank: int
    clock: CpuClock | CudaClock
    rows: dict[str, list] = field(
        default_factory=lambda: {
            k: [] for k in ("step", "rank", "stage", "chunk", "op", "microbatch", "peer", "seq", "bytes")
        }
    )
    _starts: list = field(default_factory=list)
    _ends: list = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)

    def record(self, step: int, seq: int, ins: Instruction, t0, t1, nbytes: float = 0.0) -> None:
        r = self.rows
        chunk = -1 if ins.chunk is None else ins.chunk
        r["step"].append(step)
        r["rank"].append(self.rank)
        r["stage"].append(self.shape.stage(self.rank, chunk) if chunk >= 0 else -1)
        r["chunk"].append(chunk)
        r["op"].append(ins.op.value)
        r["microbatch"].append(-1 if ins.mb is None else ins.mb)
        r["peer"].append(-1 if ins.peer is None else ins.peer)
        r["seq"].append(seq)
        r["bytes"].append(float(nbytes))
        self._starts.append(t0)
        self._ends.append(t1)

    def flush(self) -> None:
        """Turn this step's stamps into seconds (one device sync on CUDA, none on CPU)."""
        self.start += self.clock.resolve(self._starts)
        self.end += self.clock.resolve(self._ends)
        self._starts, self._ends = [], []

    def frame(self):
        self.flush()
        return make_frame(
            {**self.rows, "start": self.start, "end": self.end, "source": Source.MEASURED.value}
        )


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
        self.per_forward: dict[tuple[int, int], int] = {}

    def _pack(self, tensor):
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if self._owner is not None and ptr not in self._param_storages:
            owned = self._owned.setdefault(self._owner, set())
            if ptr not in owned:
                owned.add(ptr)
                ref = self._refs.get(ptr)
                if ref is None:
                    self._refs[ptr] = [storage.nbytes(), 1]
                    self.held += storage.nbytes()
                else:
                    ref[1] += 1
                self.peak = max(self.peak, self.held)
        return tensor

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
