"""``pipesim sweep``: simulate a grid of configurations into one table of metrics."""

from __future__ import annotations

import argparse

from pipesim.cli.arg_types import cost_value_list, output_file, positive_int_list

NAME = "sweep"
RESULT_SUFFIXES = (".csv", ".parquet")


def register(sub) -> None:
    swp = sub.add_parser(NAME, help="simulate a grid of configurations into a CSV/Parquet table",
                         description="Simulate every combination of the listed values (comma-separated) and "
                         "write one row of metrics per configuration. Points a schedule rejects are skipped.")
    swp.add_argument("--schedule", "-s", default="gpipe,1f1b,interleaved", help="schedules (default: all three)")
    swp.add_argument("--pp", type=positive_int_list, default=[2, 4, 8], help="pipeline ranks (default 2,4,8)")
    swp.add_argument("--mb", type=positive_int_list, default=[8, 16, 32, 64], help="microbatches (default 8,16,32,64)")
    swp.add_argument("--chunks", "-v", type=positive_int_list, default=None,
                     help="chunks per rank (default: each schedule's)")
    swp.add_argument("--forward", "-F", type=cost_value_list, default=[1.0], help="forward costs (default 1)")
    swp.add_argument("--backward", "-B", type=cost_value_list, default=[2.0], help="backward costs (default 2)")
    swp.add_argument("--comm", type=cost_value_list, default=[0.0], help="P2P latencies (default 0)")
    swp.add_argument("--costs", metavar="FILE", help="base costs file; the lists above override its defaults")
    swp.add_argument("--jobs", "-j", type=int, default=1,
                     help="local processes (0 = all cores; capped at the cores and the work; default 1)")
    swp.add_argument("--cluster", metavar="tcp://HOST:8786", default=None,
                     help="run on an existing Dask distributed scheduler instead of local processes")
    swp.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    swp.add_argument("--output", "-o", required=True, metavar="FILE", type=output_file(*RESULT_SUFFIXES,
                                                                                       what="sweep results"),
                     help="results (.csv or .parquet)")
    swp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from pipesim.analysis.sweep import SweepGrid, run_sweep, stop_on_signals, worker_count
    from pipesim.io.atomic import write_with
    from pipesim.program.loader import load_schedule
    from pipesim.sim.costs import CostModel

    base = CostModel.load(args.costs) if args.costs else CostModel()
    grid = SweepGrid(
        schedules=[s.strip() for s in args.schedule.split(",") if s.strip()], pp=args.pp, microbatches=args.mb,
        chunks=args.chunks or [None], forward=args.forward, backward=args.backward, p2p_latency=args.comm, base=base,
    )
    for name in grid.schedules:
        load_schedule(name)  # an unknown name is an error up front, not a skipped point
    points = grid.points()
    worker_count(args.jobs, len(points))  # a bad --jobs is an error before any work
    where = f" on {args.cluster}" if args.cluster else ""
    with stop_on_signals(), Progress(transient=True, disable=args.quiet) as bar:
        task = bar.add_task(f"simulating {len(points)} configurations{where}", total=len(points))
        result = run_sweep(points, jobs=args.jobs, progress=lambda n: bar.advance(task, n), cluster=args.cluster)
    path = args.output
    if path.suffix.lower() == ".csv":
        write_with(path, lambda tmp: result.frame.to_csv(tmp, index=False))
    else:
        write_with(path, lambda tmp: result.frame.to_parquet(tmp, index=False))
    print(f"wrote {len(result.frame)} configurations to {path}")
    if result.skipped:
        print(f"skipped {result.skipped} grid point(s) the schedule rejects, e.g.: {result.first_skip_reason}")
    return 0
