"""Simulator benchmarks (pytest-benchmark; skipped in the normal run, see README for how to run them).

Side by side in one run: pipesim's simulator and the naive SimPy model (tests/naive_simpy.py) on the same
Programs, and a 1,000-configuration sweep. Ratios, not absolute times, are what we report.
"""

from __future__ import annotations

import random

import pytest

from pipesim.analysis.sweep import SweepPoint, run_sweep
from pipesim.program.build import build_program
from pipesim.program.table import forget_table
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate
from tests.naive_simpy import naive_simulate

CASES = {"1f1b-pp64-m1024": ("1f1b", 64, 1024, 1), "interleaved-pp16-v4-m256": ("interleaved", 16, 256, 4)}


def _fresh_simulate(program):
    forget_table(program)  # count the flattening of the Program, as a one-off simulation pays it
    return simulate(program, check=False)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("engine", ["pipesim", "naive"])
def test_bench_simulate(benchmark, case, engine):
    program = build_program(*CASES[case]).program
    benchmark.group = case
    if engine == "pipesim":
        result = benchmark.pedantic(_fresh_simulate, args=(program,), rounds=5, iterations=1)
        assert result.metrics.makespan > 0
    else:
        times = benchmark.pedantic(naive_simulate, args=(program, CostModel()), rounds=3, iterations=1)
        assert times[0][0] == (0.0, 1.0)


def sweep_points(count: int = 1000, seed: int = 0) -> list[SweepPoint]:
    """Random configurations: gpipe / 1f1b / interleaved (v=2), pp in 2..16, microbatches in 1..128."""
    rng = random.Random(seed)
    points = []
    for _ in range(count):
        schedule = rng.choice(["gpipe", "1f1b", "interleaved"])
        pp, mb = rng.randint(2, 16), rng.randint(1, 128)
        if schedule == "interleaved":
            mb = max(pp, mb // pp * pp)
        costs = CostModel(StageCosts(forward=1.0, backward=rng.choice([1.0, 2.0, 3.0])))
        points.append(SweepPoint(schedule, pp, mb, None, costs))
    return points


def _fresh_sweep(points):
    from pipesim.program.build import _build_cached

    _build_cached.cache_clear()  # fresh Programs, hence fresh tables
    return run_sweep(points)


def test_bench_sweep_1000(benchmark):
    points = sweep_points()
    benchmark.group = "sweep"
    result = benchmark.pedantic(_fresh_sweep, args=(points,), rounds=3, iterations=1)
    assert len(result.frame) == 1000 and result.skipped == 0
