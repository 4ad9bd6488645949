"""Sweeps: simulate a grid of configurations and collect their metrics in one DataFrame.

A Program is built (and validated) once per (schedule, pp, microbatches, chunks) and simulated under each
cost setting. Grid points a schedule rejects (interleaved with m not a multiple of p, chunks on 1F1B) are
skipped and counted, not fatal: a grid naturally contains them. ``jobs > 1`` spreads points over processes.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

import pandas as pd

from pipesim.errors import PipesimError, ScheduleError
from pipesim.program.build import build_program
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate

RESULT_COLUMNS = [
    "schedule", "pp", "microbatches", "chunks", "forward", "backward", "backward_input", "backward_weight",
    "p2p_latency", "makespan", "ideal", "bubble_fraction", "bubble_overhead", "peak_activations_max",
    "peak_activations_min", "peak_rank",
]


@dataclass(frozen=True)
class SweepPoint:
    schedule: str
    pp: int
    microbatches: int
    chunks: int | None = None
    costs: CostModel = field(default_factory=CostModel)


@dataclass(frozen=True)
class SweepGrid:
    """Every combination of the listed values."""

    schedules: Sequence[str]
    pp: Sequence[int]
    microbatches: Sequence[int]
    chunks: Sequence[int | None] = (None,)
    forward: Sequence[float] = (1.0,)
    backward: Sequence[float] = (2.0,)
    p2p_latency: Sequence[float] = (0.0,)
    base: CostModel = field(default_factory=CostModel)

    def points(self) -> list[SweepPoint]:
        points = []
        for schedule, pp, mb, chunks, f, b, lat in itertools.product(
            self.schedules, self.pp, self.microbatches, self.chunks, self.forward, self.backward, self.p2p_latency
        ):
            costs = replace(self.base, default=replace(self.base.default, forward=f, backward=b), p2p_latency=lat)
            points.append(SweepPoint(schedule, pp, mb, chunks, costs))
        return points


def simulate_point(point: SweepPoint) -> dict:
    # The simulation proves deadlock freedom itself (and names the cycle), so only static checks here.
    built = build_program(point.schedule, point.pp, point.microbatches, point.chunks, semantics=None)
    result = simulate(built.program, point.costs, check=False)
    metrics = result.metrics
    shape = built.program.shape
    peaks = result.memory.peak_activations
    default: StageCosts = point.costs.default
    return {
        "schedule": built.name, "pp": shape.pp, "microbatches": shape.microbatches, "chunks": shape.chunks,
        "forward": default.forward, "backward": default.backward, "backward_input": default.backward_input,
        "backward_weight": default.backward_weight, "p2p_latency": point.costs.p2p_latency,
        "makespan": metrics.makespan, "ideal": metrics.ideal, "bubble_fraction": metrics.bubble_fraction,
        "bubble_overhead": metrics.bubble_overhead, "peak_activations_max": max(peaks),
        "peak_activations_min": min(peaks), "peak_rank": peaks.index(max(peaks)),
    }


def _try_point(point: SweepPoint) -> dict | str:
    """A row, or the reason the schedule rejected this point."""
    try:
        return simulate_point(point)
    except ScheduleError as err:
        return str(err)


@dataclass(frozen=True)
class SweepResult:
    frame: pd.DataFrame
    skipped: int
    first_skip_reason: str | None


def run_sweep(
    points: Iterable[SweepPoint], *, jobs: int = 1, progress: Callable[[int], None] | None = None
) -> SweepResult:
    """Simulate every point; ``jobs`` processes (0 = all cores); ``progress(n)`` after each n points."""
    points = list(points)
    if not points:
        raise PipesimError("the sweep grid is empty; give at least one value for every axis")
    jobs = os.cpu_count() or 1 if jobs == 0 else jobs
    outcomes: list[dict | str] = []
    if jobs == 1:
        for point in points:
            outcomes.append(_try_point(point))
            if progress:
                progress(1)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            chunk = max(1, len(points) // (jobs * 8))
            for outcome in pool.map(_try_point, points, chunksize=chunk):
                outcomes.append(outcome)
                if progress:
                    progress(1)
    rows = [o for o in outcomes if isinstance(o, dict)]
    reasons = [o for o in outcomes if isinstance(o, str)]
    if not rows:
        raise PipesimError(f"every point of the sweep was rejected, e.g.: {reasons[0]}")
    return SweepResult(pd.DataFrame(rows, columns=RESULT_COLUMNS), len(reasons), reasons[0] if reasons else None)
