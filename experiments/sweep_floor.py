"""How fast a sweep can get while schedules are Python files: the schedule files' own ``build()`` against the
whole sweep, on the benchmark's 1,000 random configurations, one core.

``build()`` is the schedule author's code and nothing of pipesim after it (no checks, lowering, validation or
simulation): one Python call per compute instruction (``F(mb)``, ``B(mb)``, …) into per-rank lists, or, for the
files written with building blocks (``pipesim/program/blocks.py``), a few array operations per phase. Its time
is a floor for any sweep that runs the schedule files. Best of three each, side by side in one run.

Run: ``python experiments/sweep_floor.py [--points N]``.
"""

from __future__ import annotations

import time

from pipesim.analysis.sweep import random_points, run_sweep, warm_up
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.program.build import _build_cached
from pipesim.program.loader import load_schedule


def best_of(runs: int, work) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="50 points instead of --points")
    parser.add_argument("--points", type=int, default=1000, help="random configurations (default 1000)")
    args = parse_experiment_args(parser)
    if args.fast:
        args.points = 50
    record_output(args.out, "sweep_floor.txt")
    points = random_points(args.points)
    sources = {p.schedule: load_schedule(p.schedule) for p in points}
    instructions = 0

    def builds() -> None:
        nonlocal instructions
        instructions = 0
        for p in points:
            source = sources[p.schedule]
            schedule = source.module.build(p.pp, p.microbatches, source.default_chunks)
            instructions += schedule.num_instructions

    def sweep() -> None:
        _build_cached.cache_clear()  # fresh Programs, as the benchmark times them
        run_sweep(points)

    warm_up()
    floor = best_of(3, builds)
    whole = best_of(3, sweep)
    print(f"{args.points} configurations, {instructions / 1e6:.2f} M compute instructions")
    print(f"schedule files' build() alone: {floor:.2f} s ({floor / instructions * 1e9:.0f} ns per instruction)")
    print(f"whole sweep:                   {whole:.2f} s ({whole / floor:.1f}× the floor)")


if __name__ == "__main__":
    main()
