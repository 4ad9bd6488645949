"""``pipesim simulate``: one training step of a schedule — summary, terminal timeline, optional files."""

from __future__ import annotations

import argparse
import json
import math

from pipesim.cli.analytic_args import add_model_args, model_report_dict, model_report_text, model_setup_from_args
from pipesim.cli.arg_types import output_file
from pipesim.cli.report import summary_dict, summary_text
from pipesim.cli.shared_args import add_cost_args, add_schedule_args, cost_model_from_args
from pipesim.errors import PipesimError
from pipesim.io.timeline import TimelineFormat
from pipesim.plots.paths import FIGURE_SUFFIXES
from pipesim.sim.simulator import Engine, simulate

NAME = "simulate"


def register(sub) -> None:
    sim = sub.add_parser(NAME, help="simulate one step and print its timeline, bubble and memory",
                         description="Simulate one training step of a schedule: makespan, bubble (both "
                         "conventions, beside the closed form), per-rank busy/idle/peak activations.")
    add_schedule_args(sim, csv=True)
    add_cost_args(sim)
    add_model_args(sim)
    sim.add_argument("--json", action="store_true", help="print the summary as JSON instead of text")
    sim.add_argument("--engine", choices=[e.value for e in Engine], default=Engine.AUTO.value,
                     help="graph: longest path over the dependency graph (compiled); simpy: the discrete-event "
                     "reference; both give the same timeline. auto (default): graph for large programs")
    sim.add_argument("--timeline", metavar="FILE", type=output_file(*(f.value for f in TimelineFormat),
                                                                    what="timeline"),
                     help="write the timeline (.csv or .parquet, or .json for a Chrome trace; times in cost units)")
    sim.add_argument("--trace", metavar="FILE.json", type=output_file(".json", what="trace"),
                     help="write a Chrome trace (Perfetto; 1 cost unit = 1 s)")
    sim.add_argument("--plot", metavar="FILE", type=output_file(*FIGURE_SUFFIXES, what="figure"), action="append",
                     default=[], help="write a Gantt chart (.png, .pdf or .svg; repeat for several formats)")
    sim.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Output paths were checked as the flags were parsed: nothing below can fail on them half-way.
    from pipesim.cli.synthesize import memory_limit_units, planned_shape
    from pipesim.io.timeline import write_timeline
    from pipesim.plots.terminal import render
    from pipesim.program.build import build_program
    from pipesim.program.loader import load_schedule

    source = load_schedule(args.schedule)
    limit = None
    if source.build_options:
        # Costs first: a cost-aware schedule (zb-auto) is built for them, on the shape the build will have.
        shape = planned_shape(args, source)
        setup = model_setup_from_args(args, shape)
        costs = setup.costs if setup else cost_model_from_args(args, shape.num_stages)
        limit = memory_limit_units(args, costs, shape, setup is not None)
        built = build_program(args.schedule, args.pp, args.mb, args.chunks, semantics=None,  # the run proves
                              costs=costs, memory_limit=limit)  # progress
    else:
        built = build_program(args.schedule, args.pp, args.mb, args.chunks, semantics=None,
                              memory_limit=args.memory_limit)  # a limit here is an error naming zb-auto
        setup = model_setup_from_args(args, built.program.shape)
        costs = setup.costs if setup else cost_model_from_args(args, built.program.shape.num_stages)
    result = simulate(built.program, costs, check=False, engine=Engine(args.engine))
    if not (math.isfinite(result.metrics.makespan) and math.isfinite(result.metrics.ideal)):
        raise PipesimError("the costs overflow: the makespan is not a finite number; use smaller costs")
    shape = built.program.shape
    analytic = built.source.analytic(shape.pp, shape.microbatches, shape.chunks, costs.default)
    written = []
    if args.timeline:
        write_timeline(result.timeline, args.timeline)
        written.append(("timeline", args.timeline))
    if args.trace:
        write_timeline(result.timeline, args.trace, flag="--trace")
        written.append(("trace", args.trace))
    if args.plot:
        from pipesim.plots.gantt import plot_gantt  # matplotlib only when a figure is drawn
    title = f"{built.name}: pp={shape.pp}, m={shape.microbatches}, v={shape.chunks}"
    for path in args.plot:
        plot_gantt(result.timeline, path, title=title, time_unit=costs.time_unit)
        written.append(("plot", path))
    if args.json:
        data = summary_dict(built, result, analytic)
        if setup:
            data["model_report"] = model_report_dict(setup, result)
        print(json.dumps(data, indent=2))
        return 0
    print(summary_text(built, result, analytic))
    if limit is not None:
        peak = max(result.memory.peak_activations)
        print(f"memory limit {limit:.4g} activation units per rank: peak {peak:.4g} "
              f"({'within' if peak <= limit + 1e-9 else 'OVER'} the limit)")
    drawing = render(result.timeline)
    if drawing:
        print(drawing)
    if setup:
        print(model_report_text(setup, result))
    for flag, path in written:
        print(f"wrote {flag} {path}")
    return 0

