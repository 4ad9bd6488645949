"""``pipesim simulate``: one training step of a schedule — summary, terminal timeline, optional files.

Parse → :func:`pipesim.api.simulate` → print its :class:`~pipesim.api.results.SimResult` and write the files.
"""

from __future__ import annotations

import argparse
import json
import sys

from pipesim.api.defaults import DEFAULT_PP
from pipesim.cli.analytic_args import add_model_args, model_options_from_args
from pipesim.cli.arg_types import output_file, positive_int
from pipesim.cli.megatron_args import (
    MEGATRON_DEFAULT_MICROBATCHES,
    MEGATRON_DEFAULT_PP,
    add_megatron_aliases,
    add_megatron_model_args,
    megatron_model_args,
    pasted_megatron_line,
    schedule_of,
)
from pipesim.cli.shared_args import add_cost_args, add_schedule_args, add_train_tokens_arg, cost_values_from_args
from pipesim.errors import PipesimError
from pipesim.io.timeline_format import TimelineFormat
from pipesim.plots.paths import FIGURE_SUFFIXES
from pipesim.program.loader import builtin_names
from pipesim.sim.simulator import Engine

NAME = "simulate"


def register(sub) -> None:
    sim = sub.add_parser(NAME, help="simulate one step and print its timeline, bubble and memory",
                         description="Simulate one training step of a schedule: makespan, bubble (both "
                         "conventions, beside the closed form), per-rank busy/idle/peak activations.")
    add_schedule_args(sim, csv=True, with_model=True)
    add_cost_args(sim)
    add_model_args(sim)
    sim.add_argument("--global-batch", type=positive_int, default=None, metavar="N",
                     help="with --model: sequences per optimizer step, as a recipe states it; sets --mb to "
                     "N / (micro-batch size × dp)")
    sim.add_argument("--microbatch-group-size-per-virtual-pipeline-stage", type=positive_int, default=None,
                     metavar="N", dest="microbatch_group",
                     help="Megatron-LM's, as a launch line states it: checked against the group pipesim's "
                     "interleaved schedule runs (pp, or where pp does not divide --mb the least Megatron-Core "
                     "accepts)")
    sim.add_argument("--config", metavar="FILE",
                     help="a training framework's run configuration (nanotron's .yaml, torchtitan's .toml): its model, "
                     "layout, schedule and batch, under that --framework; flags given beside it win")
    sim.add_argument("--ignore-unknown", action="store_true",
                     help="flags pipesim does not know are listed in a note and ignored instead of refused: for a "
                     "pasted launch line's training flags (--lr, --train-iters, --data-path, ...); check that none "
                     "of them changes the layout or the kernels")
    add_train_tokens_arg(sim)
    sim.add_argument("--json", action="store_true", help="print the summary as JSON instead of text")
    sim.add_argument("--sensitivity", action="store_true",
                     help="with --model: also flip each setting a published run often leaves unstated (the "
                     "data-parallel sync's and TP's overlaps, the sends' overlap, the gradients' precision, the "
                     "optimizer's sharding, the attention kernel, K and V repeated to the query heads, selective "
                     "recomputation, FP8 weights) alone, and "
                     "print the step and peak each gives and the range they span")
    sim.add_argument("--engine", choices=[e.value for e in Engine], default=Engine.AUTO.value,
                     help="graph: longest path over the dependency graph (compiled); simpy: the discrete-event "
                     "reference; both give the same timeline. auto (default): graph for large programs")
    sim.add_argument("--timeline", metavar="FILE", type=output_file(*(f.value for f in TimelineFormat),
                                                                    what="timeline"),
                     help="write the timeline (.csv or .parquet, or .json for a Chrome trace; times in cost "
                     "units, or seconds with --model or a calibrated --costs file)")
    sim.add_argument("--trace", metavar="FILE.json", type=output_file(".json", what="trace"),
                     help="write a Chrome trace (Perfetto; 1 cost unit = 1 s)")
    sim.add_argument("--plot", metavar="FILE", type=output_file(*FIGURE_SUFFIXES, what="figure"), action="append",
                     default=[], help="write a Gantt chart (.png, .pdf or .svg; repeat for several formats)")
    sim.add_argument("--plot-memory", metavar="FILE", type=output_file(*FIGURE_SUFFIXES, what="figure"),
                     action="append", default=[],
                     help="write activation memory over time, a step line per rank (.png, .pdf or .svg; in "
                     "microbatch units, or GiB when the costs give activation bytes)")
    sim.add_argument("--overlap-moe-expert-parallel-comm", action="store_true", default=None,
                     help="Megatron-Core's combined 1F1B: each steady-state forward paired with another microbatch's "
                     "backward, so one's all-to-all hides behind the other's compute: -s interleaved-overlap")
    add_megatron_model_args(sim)
    add_megatron_aliases(sim)
    sim.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Output paths were checked as the flags were parsed: nothing below can fail on them half-way.
    from pipesim.api.simulation import simulate

    defaulted = _megatron_defaults(args)
    model = args.model
    flags = megatron_model_args(args)
    if flags.given():  # a Megatron-LM launch line's model (the analytic model loads only for one)
        from pipesim.analytic.megatron_model import resolve_model

        model = resolve_model(args.model, flags, args.tp or 1, args.seq_len)
    shape = (schedule_of(args), args.pp, args.mb, args.chunks)
    call = dict(**cost_values_from_args(args), model=model, hardware=args.hardware, memory_limit=args.memory_limit,
                engine=args.engine, global_batch=args.global_batch, microbatch_group=args.microbatch_group,
                config=args.config, **vars(model_options_from_args(args)))
    result = simulate(*shape, **call)
    training = None if args.train_tokens is None else result.training(args.train_tokens)
    flips = None
    if args.sensitivity:
        from pipesim.api.sensitivity import sensitivity

        flips = sensitivity(*shape, base=result, **call)
    _note_default_pipeline(args, result)  # after the run: a refused one keeps its one-line error
    _note_default_microbatches(args, result)
    _note_megatron_defaults(defaulted, result)
    written = []
    if args.timeline or args.trace:
        from pipesim.io.timeline import write_timeline  # pandas: only when a timeline file is asked for
    if args.timeline:
        write_timeline(result.timeline, args.timeline)
        written.append(("timeline", args.timeline))
    if args.trace:
        write_timeline(result.timeline, args.trace, flag="--trace")
        written.append(("trace", args.trace))
    for path in args.plot:
        result.plot(path)
        written.append(("plot", path))
    for path in args.plot_memory:
        result.memory.plot(path, title=f"activation memory per rank, {result.title}")
        written.append(("memory plot", path))
    if args.json:
        extra = ({"training": training.to_dict()} if training else {}) | (
            {"sensitivity": flips.to_dict()} if flips else {})
        print(json.dumps(result.to_dict() | extra, indent=2))
        return 0
    print(result.text())
    if training:
        print(training.text())
    if flips:
        print(flips.text())
    for flag, path in written:
        print(f"wrote {flag} {path}")
    return 0


def _builtin(schedule: str | None) -> bool:
    """A built-in schedule (None: the default one), whose shape the flags set rather than a file."""
    return schedule is None or schedule in builtin_names()


def _megatron_defaults(args: argparse.Namespace) -> list[str]:
    """On a pasted Megatron-LM line (:func:`~pipesim.cli.megatron_args.pasted_megatron_line`) with a model and a
    built-in schedule, set the pipeline ranks and the microbatches it leaves out to what Megatron-LM runs without
    them, not pipesim's defaults (four ranks, eight microbatches); returns the flags so set, for the note. Virtual
    stages without a pipeline are refused, as Megatron-LM refuses them (``arguments.py``: "When interleaved schedule
    is used, pipeline-model-parallel size should be greater than 1")."""
    if (args.model is None and not megatron_model_args(args).given()) or args.config is not None \
            or not _builtin(args.schedule) or not pasted_megatron_line(getattr(args, "command_line", ())):
        return []
    defaulted = []
    if args.pp is None:
        args.pp = MEGATRON_DEFAULT_PP
        defaulted.append(f"--pp {MEGATRON_DEFAULT_PP} (no pipeline)")
    virtual = getattr(args, "num_layers_per_virtual_pipeline_stage", None) is not None or (args.chunks or 1) > 1
    if virtual and args.pp == 1:
        given = "--pipeline-model-parallel-size 1" if not defaulted else "no --pipeline-model-parallel-size"
        raise PipesimError(f"virtual pipeline stages with {given}: Megatron-LM interleaves only over more than one "
                           "pipeline rank ('pipeline-model-parallel size should be greater than 1'); give "
                           "--pipeline-model-parallel-size or drop the virtual stages")
    if args.mb is None and args.global_batch is None:
        if virtual:
            raise PipesimError("a Megatron-LM line without --global-batch-size runs one microbatch a step (micro-batch "
                               "size × dp), and its interleaved schedule needs at least --pipeline-model-parallel-size "
                               "of them; give --global-batch-size")
        args.mb = MEGATRON_DEFAULT_MICROBATCHES
        defaulted.append(f"--mb {MEGATRON_DEFAULT_MICROBATCHES} (without --global-batch-size, one micro-batch a "
                         "replica a step)")
    return defaulted


def _note_megatron_defaults(defaulted: list[str], result) -> None:
    """Say on stderr which of Megatron-LM's defaults :func:`_megatron_defaults` took, and the GPUs they make."""
    if defaulted and result.model_report is not None:
        print(f"note: Megatron-LM's defaults for what its line leaves out: {'; '.join(defaulted)}; "
              f"{result.model_report.layout.world_size} GPUs in all", file=sys.stderr)


def _note_default_pipeline(args: argparse.Namespace, result) -> None:
    """With --model, a built-in schedule and no --pp, the run is pipelined over the default ranks: say so, with
    the GPU count it makes, on stderr. Someone converting a published run without pipelining otherwise simulates
    four times the GPUs it used."""
    report = result.model_report
    if report is None or args.pp is not None or args.config is not None or not _builtin(args.schedule):
        return
    print(f"note: --pp not given: {DEFAULT_PP} pipeline ranks (the default), {report.layout.world_size} GPUs in "
          "all; pass --pp 1 for no pipeline", file=sys.stderr)


def _note_default_microbatches(args: argparse.Namespace, result) -> None:
    """With --model, a built-in schedule and neither --mb nor --global-batch, the step holds the default number of
    microbatches: say what global batch that is, on stderr (a published run states its global batch)."""
    report = result.model_report
    if (report is None or args.mb is not None or args.global_batch is not None or args.config is not None
            or not _builtin(args.schedule)):
        return
    layout, micro_batch = report.layout, report.model.micro_batch
    print(f"note: --mb not given: {layout.microbatches} microbatches per pipeline (the default), a global batch of "
          f"{layout.microbatches * micro_batch * layout.dp} sequences; pass --global-batch N for a recipe's",
          file=sys.stderr)
