"""``pipesim overlay``: predicted against measured timelines — errors, and both on one time axis
(:func:`pipesim.api.overlay`)."""

from __future__ import annotations

import argparse
import json

from pipesim.cli.arg_types import non_negative_int, output_file
from pipesim.plots.paths import FIGURE_SUFFIXES

NAME = "overlay"


def register(sub) -> None:
    ovl = sub.add_parser(NAME, help="predicted vs measured timelines: errors and a two-panel Gantt chart",
                         description="Match two timelines of the same Program instruction by instruction; print "
                         "the measured step compared, the makespan error and per-instruction start-time errors "
                         "in the timelines' unit; draw both on one time axis.")
    ovl.add_argument("predicted", help="predicted timeline (.csv/.parquet, from 'pipesim simulate --timeline')")
    ovl.add_argument("measured", help="measured timeline (.csv/.parquet, from the executor)")
    ovl.add_argument("--step", type=non_negative_int, default=None,
                     help="measured step to compare (default: the last)")
    ovl.add_argument("--title", default="predicted vs measured", help="figure title")
    ovl.add_argument("--time-unit", default="s",
                     help="unit of both timelines, printed with the errors and on the axis (default s: the "
                     "executor's, and simulate's with --model or calibrated costs)")
    ovl.add_argument("--json", action="store_true", help="print the errors as JSON")
    ovl.add_argument("--output", "-o", metavar="FILE", type=output_file(*FIGURE_SUFFIXES, what="figure"),
                     help="figure (.png, .pdf or .svg)")
    ovl.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.timelines import overlay

    result = overlay(args.predicted, args.measured, step=args.step, time_unit=args.time_unit)
    if args.output:
        result.plot(args.output, title=args.title)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.text())
        if args.output:
            print(f"wrote {args.output}")
    return 0
