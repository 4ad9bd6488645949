"""Step metrics from a timeline's start/end columns, each named by its convention (docs/architecture.md).

With ``busy_r`` the compute time (F, B, I, W) of rank r and ``T`` the makespan:

- ``bubble_fraction = 1 − Σ busy_r / (pp·T)``: idle share of all device-time; GPipe/1F1B ``(p−1)/(m+p−1)``;
- ``bubble_overhead = (T − ideal)/ideal`` with ``ideal = max_r busy_r``: Megatron's ``(p−1)/m``;
- per rank: busy, idle (``T − busy``), span (first compute start → last compute end) and ``span_bubble``
  (``max_r span_r − busy_r``), the zero-bubble paper's convention (Qi et al. 2024, §3: bubbles measured
  against the longest stage).

REDUCE_GRAD and STEP occupy a rank but are not pipeline compute, so they count as idle here. ``busy_r`` is
the length of the union of the rank's compute intervals: the two halves of an overlapped F-and-B pair span
the same interval in a predicted timeline and count once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pipesim.program.ir import COMPUTE_CODES, IS_COMPUTE
from pipesim.program.table import ProgramTable

__all__ = ["COMPUTE_CODES", "Metrics", "RankMetrics", "compute_metrics", "metrics_from_arrays"]


@dataclass(frozen=True)
class RankMetrics:
    rank: int
    busy: float
    idle: float
    span: float
    span_bubble: float


@dataclass(frozen=True)
class Metrics:
    pp: int
    makespan: float
    ideal: float
    bubble_fraction: float
    bubble_overhead: float
    ranks: tuple[RankMetrics, ...]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["conventions"] = {
            "bubble_fraction": "1 - sum(busy_r) / (pp * makespan)",
            "bubble_overhead": "(makespan - ideal) / ideal, ideal = max_r busy_r",
            "span_bubble": "max_r span_r - busy_r (zero-bubble paper)",
        }
        return data


def compute_metrics(table: ProgramTable, start: np.ndarray, end: np.ndarray) -> Metrics:
    return metrics_from_arrays(table.rank, table.op, start, end, len(table.rank_bounds))


def metrics_from_arrays(
    rank: np.ndarray, op_code: np.ndarray, start: np.ndarray, end: np.ndarray, pp: int
) -> Metrics:
    """Metrics from parallel arrays (also used for measured timelines)."""
    makespan = float(end.max() - start.min()) if len(end) else 0.0
    compute = IS_COMPUTE[op_code]
    busy = _busy(rank[compute], start[compute], end[compute], pp)
    first = np.full(pp, np.inf)
    last = np.full(pp, -np.inf)
    np.minimum.at(first, rank[compute], start[compute])
    np.maximum.at(last, rank[compute], end[compute])
    span = np.where(np.isfinite(first), last - first, 0.0)
    ideal = float(busy.max()) if pp else 0.0
    total = pp * makespan
    ranks = tuple(
        RankMetrics(r, float(busy[r]), makespan - float(busy[r]), float(span[r]), float(span.max() - busy[r]))
        for r in range(pp)
    )
    return Metrics(
        pp=pp,
        makespan=makespan,
        ideal=ideal,
        bubble_fraction=1.0 - float(busy.sum()) / total if total > 0 else 0.0,
        bubble_overhead=(makespan - ideal) / ideal if ideal > 0 else 0.0,
        ranks=ranks,
    )


def _busy(rank: np.ndarray, start: np.ndarray, end: np.ndarray, pp: int) -> np.ndarray:
    """Per rank, the length of the union of its compute intervals (their sum when none overlap)."""
    same = rank[1:] == rank[:-1]
    # A simulated table holds each rank's rows together and in program order, which a rank runs in order: then
    # the rows are sorted already, and sorting them again was most of this function's time in a plan.
    if not ((rank[1:] >= rank[:-1]).all() and (~same | (start[1:] >= start[:-1])).all()):
        order = np.lexsort((start, rank))
        rank, start, end = rank[order], start[order], end[order]
        same = rank[1:] == rank[:-1]
    if not (same & (start[1:] < end[:-1])).any():  # the usual case: one instruction at a time
        return np.bincount(rank, weights=end - start, minlength=pp)
    busy = np.zeros(pp)
    reach = -np.inf
    for i, (r, s, e) in enumerate(zip(rank.tolist(), start.tolist(), end.tolist(), strict=True)):
        if i == 0 or rank[i - 1] != r:
            reach = -np.inf
        if e > reach:
            busy[r] += e - max(s, reach)
            reach = e
    return busy
