"""``pipesim plot``: one metric of a sweep against one axis, as a figure."""

from __future__ import annotations

import argparse

from pipesim.cli.arg_types import output_file
from pipesim.plots.gantt import FIGURE_SUFFIXES

NAME = "plot"


def register(sub) -> None:
    plo = sub.add_parser(NAME, help="draw a figure from sweep results",
                         description="Plot one metric of a sweep against one axis, a line per --hue, a panel "
                         "per --facet value.")
    plo.add_argument("results", help="sweep results (.csv or .parquet) from 'pipesim sweep'")
    plo.add_argument("--x", default="microbatches", help="x axis column (default microbatches)")
    plo.add_argument("--y", default="bubble_fraction", help="y axis column, numeric (default bubble_fraction)")
    plo.add_argument("--hue", default="schedule", help="one line per value of this column (default schedule)")
    plo.add_argument("--facet", default="pp", help="one panel per value of this column ('' for one panel)")
    plo.add_argument("--logx", action="store_true", help="log2 x axis")
    plo.add_argument("--output", "-o", required=True, metavar="FILE", type=output_file(*FIGURE_SUFFIXES,
                                                                                       what="figure"),
                     help="figure (.png, .pdf or .svg)")
    plo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.plots.sweep_plot import plot_sweep, read_results

    frame = read_results(args.results)
    plot_sweep(frame, args.output, x=args.x, y=args.y, hue=args.hue, facet=args.facet or None, logx=args.logx)
    print(f"wrote {args.output}")
    return 0
