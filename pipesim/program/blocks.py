"""Building blocks of a schedule: runs of passes that a rank executes, held as numpy columns.

Papers describe a schedule in phases over microbatch ranges — "warm up with p−r−1 forwards, then alternate one
forward and one backward, then drain the backwards" — and a schedule file can say exactly that::

    fwd, bwd = forwards(range(m)), backwards(range(m))
    rank_blocks = [fwd[:warmup],                                  # warmup
                   alternate(fwd[warmup:], bwd[:m - warmup]),     # steady state: 1F1B
                   bwd[m - warmup:]]                              # cooldown
    Schedule.from_blocks("1f1b", [rank_blocks for each rank], microbatches=m)

Why columns: a schedule written as per-rank Python lists makes one call and one list entry per pass (about
230 ns each), and lowering then reads every entry back: at pp=64 and m=8192 (1 M passes) that was 0.3 s of a
1.5–1.9 s ``pipesim simulate`` process (docs/speed.md). A block is
three integer columns (op, microbatch, chunk) and an overlap flag, made by array operations, and
:meth:`~pipesim.program.ir.Schedule.from_blocks` concatenates them into the columns that lowering reads, so
no Instruction object is made. The result is the same Program as the same passes written as ``F(..)``/``B(..)``
lists (``tests/test_blocks.py`` holds every built-in to it); plain lists keep working everywhere.

A :class:`Passes` is immutable and indexed like a sequence: ``run[:k]`` is its first k passes, ``run[k:]``
the rest, ``a + b`` one after the other, ``len(run)`` its length and ``list(run)`` its Instructions (for
reading and debugging).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from pipesim.errors import ScheduleError
from pipesim.program.ir import COMPUTE_OPS, OP_CODE, OP_ORDER, Instruction, Op, instruction

__all__ = ["Passes", "alternate", "backwards", "forwards", "input_grads", "overlapped", "passes", "weight_grads"]


@dataclass(frozen=True, eq=False)
class Passes:
    """A run of compute passes on one rank, in the order it runs them, as equal-length columns.

    ``op`` holds :data:`~pipesim.program.ir.OP_CODE` values (F, B, I or W), ``microbatch`` and ``chunk`` the
    ids of each pass, ``overlap`` (bool, or None when no pass is flagged) marks the second half of an
    overlapped pair, as :attr:`~pipesim.program.ir.Instruction.overlap` does.
    """

    op: np.ndarray
    microbatch: np.ndarray
    chunk: np.ndarray
    overlap: np.ndarray | None = None

    @classmethod
    def of(cls, instructions: Iterable[Instruction]) -> Passes:
        """A run of the given Instructions (``Passes.of([F(0), B(0)])``): a hand-written stretch among blocks."""
        listed = list(instructions)
        if not all(isinstance(ins, Instruction) and ins.op in COMPUTE_OPS for ins in listed):
            raise ScheduleError("Passes.of takes compute Instructions (F, B, I, W), e.g. Passes.of([F(0), B(0)])")
        columns = [np.array([getattr(ins, name) for ins in listed], dtype=np.int64).reshape(-1)
                   for name in ("mb", "chunk")]
        overlap = np.array([ins.overlap for ins in listed], dtype=bool).reshape(-1)
        op = np.array([OP_CODE[ins.op] for ins in listed], dtype=np.int64).reshape(-1)
        return cls(op, *columns, overlap if overlap.any() else None)

    def __len__(self) -> int:
        return len(self.op)

    def __getitem__(self, index: slice) -> Passes:
        if not isinstance(index, slice):
            raise TypeError(f"a run of passes is sliced (run[a:b]), not indexed by {index!r}; list(run)[i] "
                            "gives one Instruction")
        return Passes(self.op[index], self.microbatch[index], self.chunk[index],
                      None if self.overlap is None else self.overlap[index])

    def __add__(self, other: Passes) -> Passes:
        """``a + b``: the passes of ``a``, then those of ``b``."""
        if not isinstance(other, Passes):
            return NotImplemented
        return _concatenate([self, other])

    def __iter__(self) -> Iterator[Instruction]:
        overlap = self.overlap if self.overlap is not None else np.zeros(len(self), dtype=bool)
        for code, mb, chunk, tail in zip(self.op.tolist(), self.microbatch.tolist(), self.chunk.tolist(),
                                         overlap.tolist(), strict=True):
            yield instruction(OP_ORDER[code], mb, chunk, None, tail)

    def __repr__(self) -> str:
        shown = [str(ins) for ins in self[:4]]
        more = f", … ({len(self)} passes)" if len(self) > 4 else ""
        return f"Passes[{'; '.join(shown)}{more}]"


def passes(op: Op, microbatches: Iterable[int] | np.ndarray, chunk: int | Iterable[int] | np.ndarray = 0) -> Passes:
    """One pass of ``op`` per microbatch in ``microbatches`` (a range, a sequence or an integer array), in that
    order, on ``chunk`` (one chunk for all, or one per microbatch). Ids are ints ≥ 0, as ``F(mb, chunk)`` asks."""
    if op not in COMPUTE_OPS:
        raise ScheduleError(f"a run of passes holds F, B, I or W, not {op.value}; communication, REDUCE_GRAD and "
                            "STEP are derived by lower()")
    mb = _ids(microbatches, "microbatch")
    chunks = _ids(chunk, "chunk")
    if chunks.ndim == 0:
        chunks = np.full(len(mb), chunks, dtype=np.int64)
    elif chunks.shape != mb.shape:
        raise ScheduleError(f"{len(chunks)} chunk ids for {len(mb)} microbatches: give one chunk, or one per "
                            "microbatch")
    return Passes(np.full(len(mb), OP_CODE[op], dtype=np.int64), mb, chunks)


def forwards(microbatches, chunk=0) -> Passes:
    """``F(mb, chunk)`` for each microbatch, in order."""
    return passes(Op.F, microbatches, chunk)


def backwards(microbatches, chunk=0) -> Passes:
    """``B(mb, chunk)`` (the fused backward) for each microbatch, in order."""
    return passes(Op.B, microbatches, chunk)


def input_grads(microbatches, chunk=0) -> Passes:
    """``I(mb, chunk)``: the input-gradient half of a split backward, for each microbatch, in order."""
    return passes(Op.I, microbatches, chunk)


def weight_grads(microbatches, chunk=0) -> Passes:
    """``W(mb, chunk)``: the weight-gradient half of a split backward, for each microbatch, in order."""
    return passes(Op.W, microbatches, chunk)


def alternate(*runs: Passes, delays: Iterable[int] | None = None) -> Passes:
    """The runs taken in turn, one pass of each per round: ``alternate(f, b)`` is f₀ b₀ f₁ b₁ …, the steady
    state of 1F1B.

    A run that ends drops out of the rounds that follow, so runs of different lengths are fine:
    ``alternate(fwd[w:], bwd)`` is 1F1B's steady state followed by its cooldown. ``delays[k]`` makes run k
    join that many rounds late — the zero-bubble schedules' weight-gradient passes that trail their input
    gradients: ``alternate(fwd, inputs, weights, delays=(0, 0, d))``.
    """
    delays = [0] * len(runs) if delays is None else [int(d) for d in delays]
    if len(delays) != len(runs) or any(d < 0 for d in delays):
        raise ScheduleError(f"alternate takes one delay ≥ 0 per run ({len(runs)} runs, delays {delays})")
    if not runs:
        return _concatenate([])
    rounds = max(len(run) + delay for run, delay in zip(runs, delays, strict=True))
    # grid[round, k] = the position, in the runs laid end to end, of run k's pass in that round (-1: none).
    grid = np.full((rounds, len(runs)), -1, dtype=np.int64)
    start = 0
    for k, (run, delay) in enumerate(zip(runs, delays, strict=True)):
        grid[delay:delay + len(run), k] = np.arange(start, start + len(run))
        start += len(run)
    picked = grid.ravel()
    picked = picked[picked >= 0]
    whole = _concatenate(list(runs))
    return Passes(whole.op[picked], whole.microbatch[picked], whole.chunk[picked],
                  None if whole.overlap is None else whole.overlap[picked])


def overlapped(forwards: Passes, backwards: Passes) -> Passes:
    """Each forward with the backward beside it as one overlapped pair (:func:`~pipesim.program.ir.overlap`: the
    two run together, one's communication hidden behind the other's compute): f₀ b₀ f₁ b₁ …, each b flagged as
    the pair's second half — the steady state of combined 1F1B and DualPipe.

    A backward of its own forward's microbatch and chunk needs that forward's output, so it cannot run with it:
    such a pair runs one after the other, unflagged (as ``overlap`` refuses it). ``forwards`` holds F passes,
    ``backwards`` B or I passes, one per forward.
    """
    f_code, b_code, i_code = OP_CODE[Op.F], OP_CODE[Op.B], OP_CODE[Op.I]
    if len(forwards) != len(backwards):
        raise ScheduleError(f"overlapped pairs take one backward per forward ({len(forwards)} forwards, "
                            f"{len(backwards)} backwards)")
    if not (np.all(forwards.op == f_code) and np.all((backwards.op == b_code) | (backwards.op == i_code))):
        raise ScheduleError("overlapped pairs join F passes with B or I passes")
    if any(run.overlap is not None and run.overlap.any() for run in (forwards, backwards)):
        raise ScheduleError("overlapped pairs are made of plain passes, none already a pair's second half")
    pairs = alternate(forwards, backwards)
    flag = np.zeros(len(pairs), dtype=bool)
    flag[1::2] = (forwards.microbatch != backwards.microbatch) | (forwards.chunk != backwards.chunk)
    return Passes(pairs.op, pairs.microbatch, pairs.chunk, flag if flag.any() else None)


def _concatenate(runs: list[Passes]) -> Passes:
    if not runs:
        empty = np.zeros(0, dtype=np.int64)
        return Passes(empty, empty, empty)
    flagged = any(run.overlap is not None for run in runs)
    overlap = (np.concatenate([np.zeros(len(r), dtype=bool) if r.overlap is None else r.overlap for r in runs])
               if flagged else None)
    return Passes(*(np.concatenate([getattr(r, name) for r in runs]) for name in ("op", "microbatch", "chunk")),
                  overlap)


def _ids(values, what: str) -> np.ndarray:
    """Integer ids ≥ 0 as an int64 column; a float, bool or negative id is refused (as ``F(0.0)`` is)."""
    if isinstance(values, range):
        column = np.arange(values.start, values.stop, values.step, dtype=np.int64)
    else:
        column = np.asarray(values if isinstance(values, np.ndarray) else list(values) if not np.isscalar(values)
                            else values)
        if column.size and column.dtype.kind not in "iu":
            raise ScheduleError(f"{what} ids must be ints ≥ 0, got {column.dtype} values ({column.ravel()[:3]} …)")
        column = column.astype(np.int64, copy=False)
    if column.ndim > 1:
        raise ScheduleError(f"{what} ids form one run: a 1-d range, sequence or array, not shape {column.shape}")
    if column.size and column.min() < 0:
        raise ScheduleError(f"{what} ids must be ints ≥ 0, got {int(column.min())}")
    return column
