"""``pipesim sweep``: simulate a grid of configurations into one table of metrics (:func:`pipesim.api.sweep`)."""

from __future__ import annotations

import argparse

from pipesim.api.defaults import SWEEP_DEFAULTS
from pipesim.cli.arg_types import cost_value_list, output_file, positive_int_list

NAME = "sweep"
RESULT_SUFFIXES = (".csv", ".parquet")


def _listing(values) -> str:
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def register(sub) -> None:
    d = SWEEP_DEFAULTS
    swp = sub.add_parser(NAME, help="simulate a grid of configurations into a CSV/Parquet table",
                         description="Simulate every combination of the listed values (comma-separated) and "
                         "write one row of metrics per configuration. Points a schedule rejects are skipped.")
    # --schedules as plan spells it: one list of names either way
    swp.add_argument("--schedule", "--schedules", "-s", dest="schedule", default=_listing(d.schedules),
                     help=f"schedules, comma-separated (default: {_listing(d.schedules)})")
    swp.add_argument("--pp", type=positive_int_list, default=list(d.pp),
                     help=f"pipeline ranks (default {_listing(d.pp)})")
    swp.add_argument("--mb", type=positive_int_list, default=list(d.microbatches),
                     help=f"microbatches (default {_listing(d.microbatches)})")
    swp.add_argument("--chunks", "-v", type=positive_int_list, default=None,
                     help="chunks per rank (default: each schedule's)")
    swp.add_argument("--forward", "-F", type=cost_value_list, default=list(d.forward),
                     help=f"forward costs (default {_listing(d.forward)})")
    swp.add_argument("--backward", "-B", type=cost_value_list, default=list(d.backward),
                     help=f"fused backward costs, of the schedules that run B (default {_listing(d.backward)})")
    swp.add_argument("--backward-input", type=cost_value_list, default=None,
                     help="split backward I costs, of the split-backward schedules (zb-*), which run I and W "
                     "instead of B (default: the costs file's, else 1)")
    swp.add_argument("--backward-weight", type=cost_value_list, default=None,
                     help="split backward W costs (default: the costs file's, else 1)")
    swp.add_argument("--comm", type=cost_value_list, default=list(d.comm),
                     help=f"P2P latencies (default {_listing(d.comm)})")
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
    from pipesim.analysis.sweep import stop_on_signals
    from pipesim.api.sweeping import grid_size, sweep
    from pipesim.cli.progress import progress_bar
    from pipesim.io.atomic import write_table

    kwargs = dict(schedule=args.schedule, pp=args.pp, mb=args.mb, chunks=args.chunks, forward=args.forward,
                  backward=args.backward, backward_input=args.backward_input,
                  backward_weight=args.backward_weight, comm=args.comm, costs=args.costs)
    total = grid_size(**kwargs, jobs=args.jobs)  # names and --jobs checked before the bar appears
    where = f" on {args.cluster}" if args.cluster else ""
    with stop_on_signals(), progress_bar(args.quiet) as bar:
        task = bar.add_task(f"simulating {total} configurations{where}", total=total)
        frame = sweep(**kwargs, jobs=args.jobs, cluster=args.cluster, progress=lambda n: bar.advance(task, n))
    write_table(frame, args.output)
    print(f"wrote {len(frame)} configurations to {args.output}")
    if frame.attrs["skipped"]:
        print(f"skipped {frame.attrs['skipped']} grid point(s) the schedule rejects, e.g.: "
              f"{frame.attrs['first_skip_reason']}")
    return 0
