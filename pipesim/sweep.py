"""Sweeps: simulate many configurations and collect their metrics in one DataFrame.

A Program is built (and validated) once per (schedule, pp, microbatches, chunks) and simulated under each
cost setting; rows hold the configuration, the metrics, and the peak activations of the worst rank.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from pipesim.costs import CostModel
from pipesim.programs import build_program
from pipesim.simulator import simulate


@dataclass(frozen=True)
class SweepPoint:
    schedule: str
    pp: int
    microbatches: int
    chunks: int | None = None
    costs: CostModel = field(default_factory=CostModel)
    label: str = ""  # names the cost setting in the results


def simulate_point(point: SweepPoint) -> dict:
    built = build_program(point.schedule, point.pp, point.microbatches, point.chunks)
    result = simulate(built.program, point.costs, check=False)
    metrics = result.metrics
    shape = built.program.shape
    peaks = result.memory.peak_activations
    return {
        "schedule": built.source.name,
        "pp": shape.pp,
        "microbatches": shape.microbatches,
        "chunks": shape.chunks,
        "costs": point.label,
        "forward": point.costs.default.forward,
        "backward": point.costs.default.backward,
        "p2p_latency": point.costs.p2p_latency,
        "makespan": metrics.makespan,
        "ideal": metrics.ideal,
        "bubble_fraction": metrics.bubble_fraction,
        "bubble_overhead": metrics.bubble_overhead,
        "peak_activations_max": max(peaks),
        "peak_activations_min": min(peaks),
        "peak_rank": peaks.index(max(peaks)),
    }


def run_sweep(points: Iterable[SweepPoint]) -> pd.DataFrame:
    return pd.DataFrame([simulate_point(p) for p in points])
