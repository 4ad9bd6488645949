"""The ``pipesim`` command line: simulate, validate, lower, sweep, plot, calibrate, overlay, topology.

Every user error ends as one line on stderr (``pipesim: error: ...``) and exit status 2; files are written
atomically, so a failed run leaves none half-written.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

from pipesim import __version__
from pipesim.cli.analytic_args import (
    add_model_args,
    add_preset_commands,
    model_report_dict,
    model_report_text,
    model_setup_from_args,
)
from pipesim.cli.arg_types import non_negative_float, positive_int
from pipesim.cli.plan import add_plan_command
from pipesim.cli.report import summary_dict, summary_text
from pipesim.errors import PipesimError
from pipesim.io.atomic import write_or_print
from pipesim.io.timeline import TimelineFormat, write_timeline
from pipesim.io.torch_csv import add_export_command
from pipesim.plots.paths import check_figure_path
from pipesim.plots.terminal import render
from pipesim.program.build import build_program
from pipesim.program.grouped import P2PLowering, grouped_program
from pipesim.program.ir import Program
from pipesim.program.loader import builtin_names, load_schedule
from pipesim.program.validate import CommSemantics, validate
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import Engine, simulate
from pipesim.topology import Topology

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors on one line, naming the subcommand."""

    def error(self, message: str):  # type: ignore[override]
        raise PipesimError(f"{message} (see {self.prog} --help)")


def stage_override(text: str) -> tuple[int, dict[str, float]]:
    """``STAGE:field=value[,field=value]``, e.g. ``0:forward=1.5,backward=3``."""
    stage_text, sep, assignments = text.partition(":")
    try:
        stage = int(stage_text)
        if not sep or stage < 0:
            raise ValueError
        values = {}
        for item in assignments.split(","):
            key, eq, value = item.partition("=")
            if not eq:
                raise ValueError
            values[key.strip()] = non_negative_float(value)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not STAGE:field=value[,field=value], e.g. 0:forward=1.5,backward=3"
        ) from None
    return stage, values


def _add_schedule_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schedule", "-s", default="1f1b",
                        help=f"built-in name ({', '.join(builtin_names())}) or path to a schedule .py file "
                        "(default: 1f1b)")
    parser.add_argument("--pp", type=positive_int, default=None,
                        help="pipeline ranks (default: 4; a torch .csv fixes it)")
    parser.add_argument("--mb", type=positive_int, default=None,
                        help="microbatches per step (default: 8; a torch .csv fixes it)")
    parser.add_argument("--chunks", "-v", type=positive_int, default=None,
                        help="model chunks per rank, v (default: the schedule's own, 2 for interleaved)")


def _add_p2p_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--p2p", choices=[p.value for p in P2PLowering], default=P2PLowering.EAGER.value,
                        help="eager: receives just before their consumers (the executor on gloo); grouped: "
                        "transfers ordered by one global logical clock so the Program is proven deadlock-free "
                        "under NCCL's grouped semantics (the executor on NCCL). Default: eager")


def _add_cost_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "costs (durations in cost units, or seconds with a calibrated --costs file; every value is per microbatch "
        "through one rank's share of the model, and each of v chunks takes 1/v)")
    group.add_argument("--costs", metavar="FILE", help="costs file (.json/.yaml); the flags below override it")
    group.add_argument("--forward", "-F", type=non_negative_float,
                       help="forward time per microbatch through a rank's share of the model (default 1)")
    group.add_argument("--backward", "-B", type=non_negative_float, help="full backward time (default 2)")
    group.add_argument("--backward-input", type=non_negative_float, help="split backward I time (default 1)")
    group.add_argument("--backward-weight", type=non_negative_float, help="split backward W time (default 1)")
    group.add_argument("--comm", type=non_negative_float, help="P2P latency per transfer (default 0)")
    group.add_argument("--activation-bytes", type=non_negative_float,
                       help="bytes of one microbatch's activations through a rank's share of the model; adds peak "
                       "memory in bytes")
    group.add_argument("--stage-cost", type=stage_override, action="append", default=[], metavar="S:k=v,...",
                       help="override stage S, e.g. 0:forward=1.5 (repeatable; fields as in costs files)")


def _cost_model(args: argparse.Namespace, num_stages: int) -> CostModel:
    """The costs file (checked against the pipeline's pp·v stages) with the flags applied over it."""
    costs = CostModel()
    if args.costs:
        costs = CostModel.load(args.costs)
        costs.check_pipeline(num_stages, source=f"costs file {args.costs}")
    defaults = {
        "forward": args.forward, "backward": args.backward, "backward_input": args.backward_input,
        "backward_weight": args.backward_weight, "activation_bytes": args.activation_bytes,
    }
    defaults = {k: v for k, v in defaults.items() if v is not None}
    if defaults:
        costs = replace(costs, default=replace(costs.default, **defaults))
    if args.comm is not None:
        costs = replace(costs, p2p_latency=args.comm)
    if args.stage_cost:
        overrides: dict[int, dict[str, float]] = {}
        for stage, values in args.stage_cost:
            overrides.setdefault(stage, {}).update(values)
        bad = [s for s in overrides if s >= num_stages]
        if bad:
            raise PipesimError(f"--stage-cost names stage {bad[0]}, but this pipeline has stages 0..{num_stages - 1}")
        costs = costs.with_overrides(overrides)
    return costs


def cmd_simulate(args: argparse.Namespace) -> int:
    # Check every output path before the work, so a typo costs nothing and nothing is half-written.
    if args.timeline:
        TimelineFormat.of(args.timeline)
    if args.trace and Path(args.trace).suffix.lower() != ".json":
        raise PipesimError(f"--trace {args.trace}: Chrome traces are JSON; use a .json file name")
    plots = args.plot or []
    for plot in plots:
        check_figure_path(plot)
    built = build_program(args.schedule, args.pp, args.mb, args.chunks, semantics=None)  # the run proves progress
    setup = model_setup_from_args(args, built.program.shape)
    costs = setup.costs if setup else _cost_model(args, built.program.shape.num_stages)
    result = simulate(built.program, costs, check=False, engine=Engine(args.engine))
    shape = built.program.shape
    analytic = built.source.analytic(shape.pp, shape.microbatches, shape.chunks, costs.default)
    if args.timeline:
        write_timeline(result.timeline, args.timeline)
    if args.trace:
        write_timeline(result.timeline, args.trace, flag="--trace")
    if plots:
        from pipesim.plots.gantt import plot_gantt  # matplotlib only when a figure is drawn

        title = f"{built.name}: pp={shape.pp}, m={shape.microbatches}, v={shape.chunks}"
        for plot in plots:
            plot_gantt(result.timeline, plot, title=title, time_unit=costs.time_unit)
    if args.json:
        data = summary_dict(built, result, analytic)
        if setup:
            data["model_report"] = model_report_dict(setup, result)
        print(json.dumps(data, indent=2))
        return 0
    print(summary_text(built, result, analytic))
    drawing = render(result.timeline)
    if drawing:
        print(drawing)
    if setup:
        print(model_report_text(setup, result))
    for flag, path in (("timeline", args.timeline), ("trace", args.trace), *(("plot", p) for p in plots)):
        if path:
            print(f"wrote {flag} {path}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    semantics, p2p = CommSemantics(args.semantics), P2PLowering(args.p2p)
    if args.program:
        path = Path(args.program)
        if not path.is_file():
            raise PipesimError(f"--program {path} does not exist")
        program = Program.from_text(path.read_text())
        if p2p is P2PLowering.GROUPED:
            program = grouped_program(program)
        validate(program, semantics)
        what = f"program {path}"
    else:
        built = build_program(args.schedule, args.pp, args.mb, args.chunks, semantics, p2p)
        program = built.program
        what = f"schedule {built.name}"
    if p2p is P2PLowering.GROUPED:
        what += " (grouped lowering)"
    shape = program.shape
    print(f"ok: {what} is valid for pp={shape.pp} microbatches={shape.microbatches} chunks={shape.chunks} "
          f"({program.num_instructions} instructions, {semantics.value} sends, no deadlock)")
    return 0


def cmd_lower(args: argparse.Namespace) -> int:
    built = build_program(args.schedule, args.pp, args.mb, args.chunks, p2p=P2PLowering(args.p2p))
    write_or_print(built.program.to_text(), args.output)
    return 0


def cmd_schedules(args: argparse.Namespace) -> int:
    for name in builtin_names():
        source = load_schedule(name)
        print(f"{name:<14} {source.summary}")
    return 0


def cmd_topology(args: argparse.Namespace) -> int:
    print(Topology(args.tp, args.cp, args.dp, args.pp).describe())
    return 0


def _floats(text: str) -> list[float]:
    return [non_negative_float(v) for v in text.split(",") if v.strip()]


def _ints(text: str) -> list[int]:
    return [positive_int(v) for v in text.split(",") if v.strip()]


def _float_pair(flag: str):
    """``A,B`` as two floats, for --size and --ylim."""

    def parse(text: str) -> tuple[float, float]:
        parts = text.split(",")
        try:
            if len(parts) != 2:
                raise ValueError
            return float(parts[0]), float(parts[1])
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: expected two numbers A,B, e.g. 3.5,2.4") from None

    return parse


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from pipesim.analysis.sweep import SweepGrid, run_sweep, stop_on_signals, worker_count

    if Path(args.output).suffix not in (".csv", ".parquet"):
        raise PipesimError(f"-o {args.output}: sweep results are .csv or .parquet")
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
    path = Path(args.output)
    from pipesim.io.atomic import write_with

    if path.suffix == ".csv":
        write_with(path, lambda tmp: result.frame.to_csv(tmp, index=False))
    else:
        write_with(path, lambda tmp: result.frame.to_parquet(tmp, index=False))
    print(f"wrote {len(result.frame)} configurations to {path}")
    if result.skipped:
        print(f"skipped {result.skipped} grid point(s) the schedule rejects, e.g.: {result.first_skip_reason}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from pipesim.plots.sweep_plot import PlotOptions, plot_sweep, read_results

    check_figure_path(args.output, flag="-o")
    frame = read_results(args.results)
    options = PlotOptions(title=args.title, xlabel=args.xlabel, ylabel=args.ylabel, size=args.size, ylim=args.ylim,
                          percent=args.percent, costs_note=not args.no_costs_note)
    plot_sweep(frame, args.output, x=args.x, y=args.y, hue=args.hue, facet=args.facet or None, logx=args.logx,
               options=options)
    print(f"wrote {args.output}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from pipesim.analysis.calibrate import calibrate
    from pipesim.io.timeline import read_timeline

    if Path(args.output).suffix not in (".json", ".yaml", ".yml"):
        raise PipesimError(f"-o {args.output}: costs files are .json or .yaml")
    frame = read_timeline(args.timeline, flag="timeline")
    costs = calibrate(frame, warmup_steps=args.warmup_steps)
    costs.save(args.output)
    d = costs.default
    print(f"wrote {args.output}: F={d.forward:.4g} B={d.backward:.4g} I={d.backward_input:.4g} "
          f"W={d.backward_weight:.4g} p2p latency={costs.p2p_latency:.4g} [{costs.time_unit}], "
          f"{len(costs.overrides)} stage override(s)")
    return 0


def cmd_overlay(args: argparse.Namespace) -> int:
    from pipesim.analysis.overlay import one_step, overlay_errors, plot_overlay
    from pipesim.io.timeline import read_timeline

    if args.output:
        check_figure_path(args.output, flag="-o")
    predicted = one_step(read_timeline(args.predicted, flag="predicted timeline"), 0)
    measured = one_step(read_timeline(args.measured, flag="measured timeline"), args.step)
    errors = overlay_errors(predicted, measured)
    if args.output:
        plot_overlay(predicted, measured, errors, args.output, title=args.title, time_unit=args.time_unit)
    if args.json:
        print(json.dumps(errors.to_dict(), indent=2))
    else:
        print(errors.text())
        if args.output:
            print(f"wrote {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pipesim", description="Simulate pipeline-parallel training schedules.")
    parser.add_argument("--version", action="version", version=f"pipesim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sim = sub.add_parser("simulate", help="simulate one step and print its timeline, bubble and memory",
                         description="Simulate one training step of a schedule: makespan, bubble (both "
                         "conventions, beside the closed form), per-rank busy/idle/peak activations.")
    _add_schedule_args(sim)
    _add_cost_args(sim)
    add_model_args(sim)
    sim.add_argument("--json", action="store_true", help="print the summary as JSON instead of text")
    sim.add_argument("--engine", choices=[e.value for e in Engine], default=Engine.AUTO.value,
                     help="graph: longest path over the dependency graph (compiled); simpy: the discrete-event "
                     "reference; both give the same timeline. auto (default): graph for large programs")
    sim.add_argument("--timeline", metavar="FILE", help="write the timeline (.csv or .parquet; times in cost units)")
    sim.add_argument("--trace", metavar="FILE.json", help="write a Chrome trace (Perfetto; 1 cost unit = 1 s)")
    sim.add_argument("--plot", metavar="FILE", action="append",
                     help="write a Gantt chart (.png, .pdf or .svg); repeat for several files, e.g. a PDF and a PNG")
    sim.set_defaults(func=cmd_simulate)

    val = sub.add_parser("validate", help="check a schedule or program text: complete, ordered, deadlock-free",
                         description="Validate a schedule (or a program text file) under the executor's "
                         "communication semantics; on failure name the problem or the cycle of waits.")
    _add_schedule_args(val)
    val.add_argument("--program", metavar="FILE", help="validate a program text file (from 'pipesim lower')")
    val.add_argument("--semantics", choices=[s.value for s in CommSemantics], default="buffered",
                     help="buffered: sends return at once (gloo isend, the executor on CPU); rendezvous: a send "
                     "waits until its receive is posted (NCCL P2P one op at a time); grouped: rendezvous, with "
                     "each run of SEND/RECV instructions issued as one NCCL group (the executor on GPU). "
                     "Default: buffered")
    _add_p2p_arg(val)
    val.set_defaults(func=cmd_validate)

    low = sub.add_parser("lower", help="print the lowered Program (per-rank instructions) as text",
                         description="Lower a schedule into its Program and print the text form.")
    _add_schedule_args(low)
    low.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    _add_p2p_arg(low)
    low.set_defaults(func=cmd_lower)

    lst = sub.add_parser("schedules", help="list built-in schedules", description="List built-in schedules.")
    lst.set_defaults(func=cmd_schedules)

    add_preset_commands(sub)
    add_export_command(sub)

    topo = sub.add_parser("topology", help="print the process groups of a tp×cp×dp×pp layout",
                          description="Print every process group (tp fastest, then cp, dp, pp).")
    for dim in ("tp", "cp", "dp", "pp"):
        topo.add_argument(f"--{dim}", type=positive_int, default=1, help=f"{dim} degree (default 1)")
    topo.set_defaults(func=cmd_topology)

    swp = sub.add_parser("sweep", help="simulate a grid of configurations into a CSV/Parquet table",
                         description="Simulate every combination of the listed values (comma-separated) and "
                         "write one row of metrics per configuration. Points a schedule rejects are skipped.")
    swp.add_argument("--schedule", "-s", default="gpipe,1f1b,interleaved", help="schedules (default: all three)")
    swp.add_argument("--pp", type=_ints, default=[2, 4, 8], help="pipeline ranks (default 2,4,8)")
    swp.add_argument("--mb", type=_ints, default=[8, 16, 32, 64], help="microbatches (default 8,16,32,64)")
    swp.add_argument("--chunks", "-v", type=_ints, default=None, help="chunks per rank (default: each schedule's)")
    swp.add_argument("--forward", "-F", type=_floats, default=[1.0], help="forward costs (default 1)")
    swp.add_argument("--backward", "-B", type=_floats, default=[2.0], help="backward costs (default 2)")
    swp.add_argument("--comm", type=_floats, default=[0.0], help="P2P latencies (default 0)")
    swp.add_argument("--costs", metavar="FILE", help="base costs file; the lists above override its defaults")
    swp.add_argument("--jobs", "-j", type=int, default=1,
                     help="local processes (0 = all cores; capped at the cores and the work; default 1)")
    swp.add_argument("--cluster", metavar="tcp://HOST:8786", default=None,
                     help="run on an existing Dask distributed scheduler instead of local processes")
    swp.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    swp.add_argument("--output", "-o", required=True, metavar="FILE", help="results (.csv or .parquet)")
    swp.set_defaults(func=cmd_sweep)

    plo = sub.add_parser("plot", help="draw a figure from sweep results",
                         description="Plot one metric of a sweep against one axis, a line per --hue, a panel "
                         "per --facet value.")
    plo.add_argument("results", help="sweep results (.csv or .parquet) from 'pipesim sweep'")
    plo.add_argument("--x", default="microbatches", help="x axis column (default microbatches)")
    plo.add_argument("--y", default="bubble_fraction", help="y axis column (default bubble_fraction)")
    plo.add_argument("--hue", default="schedule", help="one line per value of this column (default schedule)")
    plo.add_argument("--facet", default="pp", help="one panel per value of this column ('' for one panel)")
    plo.add_argument("--logx", action="store_true", help="log2 x axis")
    plo.add_argument("--title", help="figure title (default none)")
    plo.add_argument("--xlabel", help="x axis label (default: a description of --x)")
    plo.add_argument("--ylabel", help="y axis label (default: a description of --y)")
    plo.add_argument("--size", type=_float_pair("--size"), metavar="W,H",
                     help="figure size in inches, e.g. 3.5,2.4 for one column (default 3.3 per panel × 2.8)")
    plo.add_argument("--ylim", type=_float_pair("--ylim"), metavar="LO,HI", help="y axis limits (default: the data's)")
    plo.add_argument("--percent", action="store_true", help="y axis in percent (bubble_fraction, bubble_overhead)")
    plo.add_argument("--no-costs-note", action="store_true",
                     help="leave out the line under the axes that states the costs the sweep assumed")
    plo.add_argument("--output", "-o", required=True, metavar="FILE", help="figure (.png, .pdf or .svg)")
    plo.set_defaults(func=cmd_plot)

    cal = sub.add_parser("calibrate", help="derive a costs file from a measured timeline",
                         description="Per-stage F/B/I/W 10%-trimmed means (warm-up steps dropped) and P2P "
                         "latency from a timeline, written as a costs file for 'pipesim simulate --costs' (per "
                         "rank's share of the model: a run with v chunks has its chunk times multiplied by v).")
    cal.add_argument("timeline", help="measured timeline (.csv or .parquet)")
    cal.add_argument("--warmup-steps", type=int, default=1, help="leading steps to drop when more exist (default 1)")
    cal.add_argument("--output", "-o", required=True, metavar="FILE", help="costs file (.json or .yaml)")
    cal.set_defaults(func=cmd_calibrate)

    ovl = sub.add_parser("overlay", help="predicted vs measured timelines: errors and a two-panel Gantt chart",
                         description="Match two timelines of the same Program instruction by instruction; print "
                         "the makespan error and per-instruction start-time errors; draw both on one time axis.")
    ovl.add_argument("predicted", help="predicted timeline (.csv/.parquet, from 'pipesim simulate --timeline')")
    ovl.add_argument("measured", help="measured timeline (.csv/.parquet, from the executor)")
    ovl.add_argument("--step", type=int, default=None, help="measured step to compare (default: the last)")
    ovl.add_argument("--title", default="predicted vs measured", help="figure title")
    ovl.add_argument("--time-unit", default="s", help="unit of both timelines, for the axis label (default s)")
    ovl.add_argument("--json", action="store_true", help="print the errors as JSON")
    ovl.add_argument("--output", "-o", metavar="FILE", help="figure (.png, .pdf or .svg)")
    ovl.set_defaults(func=cmd_overlay)

    add_plan_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except PipesimError as err:
        print(f"pipesim: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `pipesim lower | head`
        return 0
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM where a command turns it into an interrupt
        signum = getattr(err, "signum", signal.SIGINT)
        print(f"pipesim: interrupted by {signal.Signals(signum).name}; stopped cleanly", file=sys.stderr)
        return 128 + signum
    except Exception as err:  # a bug in pipesim: still one line, with a way to see the traceback
        if os.environ.get("PIPESIM_DEBUG"):
            raise
        print(f"pipesim: internal error: {type(err).__name__}: {err} (rerun with PIPESIM_DEBUG=1 for the "
              "traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
