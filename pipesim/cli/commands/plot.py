"""``pipesim plot``: one metric of a sweep against one axis, as a figure."""

from __future__ import annotations

import argparse

from pipesim.cli.arg_types import number_pair, output_file, positive_pair
from pipesim.plots.paths import FIGURE_SUFFIXES

NAME = "plot"


def register(sub) -> None:
    plo = sub.add_parser(NAME, help="draw a figure from sweep results",
                         description="Plot one metric of a sweep against one axis, a line per --hue, a panel "
                         "per --facet value. Where the sweep varied a column that is none of --x, --hue and "
                         "--facet, each point is the mean over it: the figure and a note say so.")
    plo.add_argument("results", help="sweep results (.csv or .parquet) from 'pipesim sweep'")
    plo.add_argument("--x", default="microbatches", help="x axis column (default microbatches)")
    plo.add_argument("--y", default="bubble_fraction", help="y axis column, numeric (default bubble_fraction)")
    plo.add_argument("--hue", default="schedule", help="one line per value of this column (default schedule)")
    plo.add_argument("--facet", default="pp", help="one panel per value of this column ('' for one panel)")
    plo.add_argument("--logx", action="store_true", help="log2 x axis")
    plo.add_argument("--title", help="figure title (default none)")
    plo.add_argument("--xlabel", help="x axis label (default: a description of --x)")
    plo.add_argument("--ylabel", help="y axis label (default: a description of --y)")
    plo.add_argument("--size", type=positive_pair, metavar="W,H",
                     help="figure size in inches, e.g. 3.5,2.4 for one column (default 3.3 per panel × 2.8)")
    plo.add_argument("--ylim", type=number_pair, metavar="LO,HI", help="y axis limits (default: the data's)")
    plo.add_argument("--percent", action="store_true", help="y axis in percent (bubble_fraction, bubble_overhead)")
    plo.add_argument("--no-costs-note", action="store_true",
                     help="leave out the line under the axes that states the costs the sweep assumed")
    plo.add_argument("--output", "-o", required=True, metavar="FILE", type=output_file(*FIGURE_SUFFIXES,
                                                                                       what="figure"),
                     help="figure (.png, .pdf or .svg)")
    plo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.plots.sweep_plot import PlotOptions, averaged_note, plot_sweep, read_results

    frame = read_results(args.results)
    options = PlotOptions(title=args.title, xlabel=args.xlabel, ylabel=args.ylabel, size=args.size, ylim=args.ylim,
                          percent=args.percent, costs_note=not args.no_costs_note)
    averaged = plot_sweep(frame, args.output, x=args.x, y=args.y, hue=args.hue, facet=args.facet or None,
                          logx=args.logx, options=options)
    print(f"wrote {args.output}")
    if averaged:
        print(f"note: each point is the {averaged_note(averaged)} (the figure says so under the axes); to see "
              "one value, sweep it alone or make it --hue or --facet")
    return 0
