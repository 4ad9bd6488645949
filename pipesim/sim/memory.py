"""Activation memory over time, per rank, from the executed compute instructions.

Zero Bubble's accounting (Qi et al. 2024, §2): ``F`` stores M_B (``StageCosts.activation``) when it starts; a
fused ``B`` frees M_B when it ends; a split backward's ``I`` frees ``M_B − M_W`` and ``W`` frees the M_W it
kept. The unit is one microbatch through one rank's share of the model (``costs.ACTIVATION_UNIT``), for every
schedule: a chunk of v holds 1/v of it, so 1F1B and ZB-V peaks compare directly. Bytes follow when the cost
model gives ``activation_bytes`` per unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from pipesim.program.ir import IS_COMPUTE, OP_CODE, Op
from pipesim.program.table import ProgramTable
from pipesim.sim.costs import CostModel

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class MemoryProfile:
    """Peak activations per rank and the step function of held activations over time."""

    peak_activations: tuple[float, ...]  # in microbatches through one rank's share of the model
    peak_bytes: tuple[float, ...] | None  # when every stage's activation_bytes is known
    curve_columns: dict[str, np.ndarray] = field(repr=False, compare=False)
    # What each rank's pipeline runtime held until the step's end (StageCosts.held_to_step_end) at the moment its
    # activations and those held bytes peaked together; ``peak_bytes`` is then the activations at that moment.
    # None: nothing was held.
    peak_held_bytes: tuple[float, ...] | None = None

    @cached_property
    def curve(self) -> pd.DataFrame:
        """rank, time, activations, bytes (value after the event at that time); a DataFrame only when asked
        for, since sweeps read the peaks alone."""
        import pandas as pd  # only for the curve: a summary of peaks needs no frame

        return pd.DataFrame(self.curve_columns)


def memory_profile(table: ProgramTable, costs: CostModel, start: np.ndarray, end: np.ndarray) -> MemoryProfile:
    shape = table.program.shape
    stage_costs = costs.shape_costs(shape)
    known_bytes = all(c.activation_bytes is not None for c in stage_costs)
    f, b, i, w = (OP_CODE[op] for op in (Op.F, Op.B, Op.I, Op.W))
    rows = np.flatnonzero(IS_COMPUTE[table.op])
    ops, stages = table.op[rows], table.stage[rows]
    m_b = np.array([c.activation for c in stage_costs])[stages]
    m_w = np.array([c.weight_grad_activation for c in stage_costs])[stages]
    unit_bytes = np.array([c.activation_bytes or 0.0 for c in stage_costs])[stages]
    delta = np.select([ops == f, ops == b, ops == i, ops == w], [m_b, -m_b, -(m_b - m_w), -m_w])
    when = np.where(ops == f, start[rows], end[rows])
    ranks = table.rank[rows]
    pp = len(table.rank_bounds)
    # Per rank, compute instructions run one after another, so program order is time order.
    order = np.lexsort((rows, ranks))
    ranks, when, delta, delta_bytes = ranks[order], when[order], delta[order], (delta * unit_bytes)[order]
    # Running sum within each rank: a global cumsum minus the total of the ranks before.
    counts = np.bincount(ranks, minlength=pp)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    held = _cumsum_by_group(delta, starts, counts)
    held_bytes = _cumsum_by_group(delta_bytes, starts, counts)
    nonempty = counts > 0
    peaks = np.zeros(pp)
    peak_bytes = np.zeros(pp)
    peaks[nonempty] = np.maximum.reduceat(held, starts[nonempty]).clip(min=0.0)
    peak_bytes[nonempty] = np.maximum.reduceat(held_bytes, starts[nonempty]).clip(min=0.0)
    peaks, peak_bytes = peaks.tolist(), peak_bytes.tolist()
    curve = {"rank": ranks, "time": when, "activations": held, "bytes": held_bytes}
    held_after = np.array([c.held_to_step_end for c in stage_costs])[stages]
    kept = np.where((ops == b) | (ops == i), held_after, 0.0)[order]
    if not known_bytes or not kept.any():
        return MemoryProfile(tuple(peaks), tuple(peak_bytes) if known_bytes else None, curve)
    kept_bytes, peak_bytes, peak_kept = _joint_peaks(kept, held_bytes, ranks, table.step_of_rows[rows][order],
                                                     starts, counts)
    curve["held_to_step_end"] = kept_bytes
    return MemoryProfile(tuple(peaks), peak_bytes, curve, peak_kept)


def peak_held_counts(table: ProgramTable) -> tuple[int, ...]:
    """Per rank, the most stage-microbatches whose activations it holds at once, a forward's counted from its
    start until its backward ends (a split backward's ``I``, which frees all but M_W: counted as freeing all).
    From the instruction order alone, as :func:`memory_profile`: at that moment a rank holds at least this many
    of its stages' smallest activations, whatever the costs, so the planner bounds memory by it before any cost
    model is built."""
    f, b, i = (OP_CODE[op] for op in (Op.F, Op.B, Op.I))
    rows = np.flatnonzero(IS_COMPUTE[table.op])
    ops, ranks = table.op[rows], table.rank[rows]
    delta = np.select([ops == f, (ops == b) | (ops == i)], [1, -1], 0)
    order = np.lexsort((rows, ranks))
    ranks, delta = ranks[order], delta[order]
    pp = len(table.rank_bounds)
    counts = np.bincount(ranks, minlength=pp)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    held = _cumsum_by_group(delta, starts, counts)
    peaks = np.zeros(pp, dtype=np.int64)
    nonempty = counts > 0
    peaks[nonempty] = np.maximum.reduceat(held, starts[nonempty]).clip(min=0)
    return tuple(int(p) for p in peaks)


def _joint_peaks(kept: np.ndarray, held_bytes: np.ndarray, ranks: np.ndarray, steps: np.ndarray,
                 starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, tuple[float, ...], tuple[float, ...]]:
    """The bytes a runtime holds until each step's end after each event (``kept`` added at backwards, freed
    when the step ends), and per rank the activations and those held bytes at the event where their sum
    peaks. Rows are in (rank, program) order, rank r's ``counts[r]`` rows from ``starts[r]``, its steps one
    after another."""
    segment = np.flatnonzero(np.r_[True, (ranks[1:] != ranks[:-1]) | (steps[1:] != steps[:-1])])
    kept_bytes = _cumsum_by_group(kept, segment, np.diff(np.r_[segment, len(kept)]))
    total = held_bytes + kept_bytes
    at = [start + int(np.argmax(total[start:start + count])) if count else -1
          for start, count in zip(starts, counts, strict=True)]
    activations = tuple(max(0.0, float(held_bytes[i])) if i >= 0 else 0.0 for i in at)
    return kept_bytes, activations, tuple(float(kept_bytes[i]) if i >= 0 else 0.0 for i in at)


def _cumsum_by_group(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    total = np.cumsum(values)
    before = np.concatenate(([0.0], total))[starts]
    return total - np.repeat(before, counts)
