"""Benchmarks (pytest-benchmark; skipped in the normal run, see README "Simulator speed" for how to run them).

Side by side in one run:

- the whole job as a user runs it — ``pipesim simulate --json`` in-process: schedule build → lower → validate →
  simulate → metrics → memory → JSON summary — against a naive SimPy model that builds and simulates the same
  schedule itself (tests/naive_simpy.py: one process per rank, one Store per link, one timeout per compute op);
- both engines on a pre-built Program;
- a sweep of 1,000 random configurations over every built-in schedule.

Ratios, not absolute times, are what we report.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from pipesim.analysis.sweep import random_points, run_sweep
from pipesim.cli.main import main
from pipesim.program.build import _build_cached, build_program
from pipesim.program.table import forget_table
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import Engine, simulate
from tests.naive_simpy import naive_whole_job

WHOLE_JOB = {"1f1b-pp64-m8192": ("1f1b", 64, 8192, 1), "interleaved-pp32-v4-m1024": ("interleaved", 32, 1024, 4)}


def _pipesim_job(name: str, pp: int, mb: int, chunks: int) -> dict:
    _build_cached.cache_clear()  # a fresh build each round, as a new process pays it
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["simulate", "-s", name, "--pp", str(pp), "--mb", str(mb), "-v", str(chunks), "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("case", list(WHOLE_JOB))
@pytest.mark.parametrize("engine", ["pipesim", "naive"])
def test_bench_whole_job(benchmark, case, engine):
    benchmark.group = f"whole job {case}"
    name, pp, mb, chunks = WHOLE_JOB[case]
    if engine == "pipesim":
        summary = benchmark.pedantic(_pipesim_job, args=WHOLE_JOB[case], rounds=3, iterations=1)
        makespan = summary["metrics"]["makespan"]
    else:
        summary = json.loads(benchmark.pedantic(naive_whole_job, args=(name, pp, mb, chunks, CostModel()),
                                                rounds=1, iterations=1))
        makespan = summary["makespan"]
    assert makespan > 0


KERNEL = {"1f1b-pp64-m1024": ("1f1b", 64, 1024, 1), "interleaved-pp16-v4-m256": ("interleaved", 16, 256, 4)}


def _fresh_simulate(program, engine):
    forget_table(program)  # count the flattening of the Program, as a one-off simulation pays it
    return simulate(program, check=False, engine=engine)


@pytest.mark.parametrize("case", list(KERNEL))
@pytest.mark.parametrize("engine", [Engine.GRAPH, Engine.SIMPY])
def test_bench_engines(benchmark, case, engine):
    program = build_program(*KERNEL[case]).program
    benchmark.group = f"engine {case}"
    result = benchmark.pedantic(_fresh_simulate, args=(program, engine), rounds=3, iterations=1,
                                warmup_rounds=1)
    assert result.metrics.makespan > 0


def _fresh_sweep(points, jobs=1):
    _build_cached.cache_clear()  # fresh Programs, hence fresh tables
    return run_sweep(points, jobs=jobs)


def test_bench_sweep_1000(benchmark):
    points = random_points()
    benchmark.group = "sweep"
    result = benchmark.pedantic(_fresh_sweep, args=(points,), rounds=2, iterations=1)
    assert len(result.frame) == 1000 and result.skipped == 0


BUILD = {"1f1b-pp64-m8192": ("1f1b", 64, 8192, 1), "interleaved-pp32-v4-m1024": ("interleaved", 32, 1024, 4),
         "zb-h1-pp64-m8192": ("zb-h1", 64, 8192, 1)}


def _build_and_lower(form: str, name: str, pp: int, mb: int, chunks: int):
    from pipesim.program.loader import _check_built, load_schedule
    from pipesim.program.lowering import lower
    from tests.list_schedules import LIST_FORMS

    source = load_schedule(name)
    schedule = (source.module.build if form == "blocks" else LIST_FORMS[name])(pp, mb, chunks)
    _check_built(source, schedule, pp, mb, chunks)
    return lower(schedule)


@pytest.mark.parametrize("case", list(BUILD))
@pytest.mark.parametrize("form", ["blocks", "lists"])
def test_bench_schedule_build(benchmark, case, form):
    """A built-in written with building blocks (the schedule file) against the same order written as per-rank
    Instruction lists (tests/list_schedules.py, the file before blocks), each built, checked and lowered."""
    benchmark.group = f"schedule build + lower {case}"
    program = benchmark.pedantic(_build_and_lower, args=(form, *BUILD[case]), rounds=3, iterations=1,
                                 warmup_rounds=1)
    assert program.num_instructions > 0
