"""``pipesim plan``: its arguments, and printing the search's outcome (the search itself is :mod:`pipesim.plan`)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from pipesim.analytic.chip_spec import load_chip
from pipesim.analytic.layout import Precision, Recompute, ZeroStage
from pipesim.analytic.model_spec import load_model
from pipesim.analytic.params import total_params
from pipesim.analytic.step_report import MFU_PEAK_NOTE
from pipesim.cli.analytic_args import _PARAM_BYTES
from pipesim.cli.arg_types import fraction, output_file, positive_int
from pipesim.errors import PipesimError
from pipesim.plots.paths import FIGURE_SUFFIXES
from pipesim.program.loader import builtin_names

DESCRIPTION = (
    "Find the parallel configuration (tp, cp, pp, dp, micro-batch size, schedule and chunks, recomputation, "
    "sequence parallelism, ZeRO stage, FP8) that trains fastest within the memory cap, by simulating "
    "each candidate's real schedule with per-rank memory. Candidates are pruned by lower bounds first "
    "(memory that cannot fit, a step time that cannot reach the top); the top list and the Pareto front are "
    "those of simulating everything."
)


def _names(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _choices(enum_type, what: str, parse=str):
    """A comma-separated list of ``enum_type`` values (``parse`` turns each word into the value's type)."""
    allowed = [str(e.value) for e in enum_type]

    def convert(text: str) -> tuple:
        out = []
        for v in _names(text):
            if v not in allowed:
                raise argparse.ArgumentTypeError(f"{v!r} is not {what}; choose from {', '.join(allowed)}")
            out.append(enum_type(parse(v)))
        return tuple(out)

    return convert


def _ints(text: str) -> tuple[int, ...]:
    return tuple(positive_int(v) for v in _names(text))


def _memory(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of GiB") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0 GiB")
    return value


NAME = "plan"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="find the fastest parallel configuration that fits, by simulation",
                       description=DESCRIPTION)
    p.add_argument("--model", required=True, metavar="NAME|FILE", help="model preset (pipesim models) or file")
    p.add_argument("--hardware", default="h100-sxm", metavar="NAME|FILE",
                   help="chip preset (pipesim chips) or file (default h100-sxm)")
    p.add_argument("--gpus", type=positive_int, required=True, help="GPUs in the job")
    p.add_argument("--global-batch", type=positive_int, required=True, help="sequences per optimizer step")
    p.add_argument("--gpus-per-node", type=positive_int, default=None,
                   help="GPUs sharing the fast intra-node link; tp stays within one (default: the chip's, 8)")
    p.add_argument("--memory-cap", type=_memory, default=None, metavar="GiB",
                   help="usable memory per GPU (default: the chip's HBM)")
    p.add_argument("--schedules", type=_names, default=tuple(builtin_names()),
                   help="comma-separated schedules to consider (default: every built-in)")
    p.add_argument("--recompute", type=_choices(Recompute, "a recomputation"), default=tuple(Recompute),
                   help="recomputation options to consider (default none,selective,full)")
    p.add_argument("--zero", type=_choices(ZeroStage, "a ZeRO stage", int), default=tuple(ZeroStage),
                   help="ZeRO stages to consider (default 0,1,2,3; 1 = Megatron's distributed optimizer)")
    p.add_argument("--precision", type=_choices(Precision, "a precision"), default=tuple(Precision),
                   help="GEMM precisions to consider (default bf16,fp8; fp8 only on chips that have it)")
    p.add_argument("--cp", type=_ints, default=(1, 2, 4, 8),
                   help="context-parallel degrees to consider (default 1,2,4,8; only where each rank keeps "
                   "≥ --min-cp-tokens tokens)")
    p.add_argument("--ep", type=_ints, default=None,
                   help="expert-parallel degrees to consider, MoE models only (default: every one dividing dp·cp "
                   "and the experts)")
    p.add_argument("--min-cp-tokens", type=positive_int, default=2048,
                   help="least sequence tokens per context-parallel rank (default 2048)")
    p.add_argument("--micro-batch-sizes", type=_ints, default=(1, 2, 4, 8),
                   help="sequences per microbatch to consider (default 1,2,4,8)")
    p.add_argument("--max-chunks", type=positive_int, default=4,
                   help="most chunks per rank for interleaved/looped-bfs (default 4)")
    p.add_argument("--seq-len", type=positive_int, default=None, help="override the model's sequence length")
    p.add_argument("--achievable-fraction", type=fraction, default=None,
                   help="fraction of peak FLOP/s the layers reach (default: the chip's)")
    p.add_argument("--param-bytes", choices=sorted(_PARAM_BYTES), default="18",
                   help="bytes per parameter for weights+grads+Adam (default 18, Megatron's count)")
    p.add_argument("--blocking-p2p", action="store_true",
                   help="interleaved candidates block on their pipeline sends too (default: overlapped, as "
                   "Megatron-LM's --overlap-p2p-communication does; the other schedules always block)")
    p.add_argument("--top", type=positive_int, default=10, help="configurations to print (default 10)")
    p.add_argument("--output", "-o", metavar="FILE", type=output_file(".csv", ".parquet", what="plan results"),
                   help="every candidate and its outcome (.parquet or .csv)")
    p.add_argument("--plot", metavar="FILE", type=output_file(*FIGURE_SUFFIXES, what="figure"),
                   help="Pareto front of step time vs peak memory (.png/.pdf/.svg)")
    p.add_argument("--cluster", metavar="tcp://HOST:8786", help="evaluate on a running Dask scheduler")
    p.add_argument("--jobs", "-j", type=int, default=1, help="local processes (0 = all cores; default 1)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def request_from_args(args: argparse.Namespace):
    from pipesim.plan.space import PlanRequest

    model = load_model(args.model).with_shape(seq_len=args.seq_len)
    chip = load_chip(args.hardware)
    if args.achievable_fraction is not None:
        chip = replace(chip, achievable_fraction=args.achievable_fraction)
    return PlanRequest(model, chip, args.gpus, args.global_batch, gpus_per_node=args.gpus_per_node or chip.node_size,
                       memory_cap_gib=args.memory_cap, schedules=args.schedules, recompute=args.recompute,
                       zero=args.zero, precision=args.precision, context_parallel=args.cp,
                       min_cp_tokens=args.min_cp_tokens, micro_batch_sizes=args.micro_batch_sizes,
                       max_chunks=args.max_chunks, param_bytes=_PARAM_BYTES[args.param_bytes],
                       overlap_p2p=not args.blocking_p2p, expert_parallel=args.ep)


def run(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from pipesim.io.atomic import write_with
    from pipesim.plan.advice import nothing_fits_message
    from pipesim.plan.search import run_plan
    from pipesim.plan.workers import Workers

    # -o and --plot were checked as the flags were parsed (folder, suffix, writable): before any work.
    request = request_from_args(args)
    with Workers(args.jobs, args.cluster) as workers, Progress(transient=True, disable=args.quiet) as bar:
        task = bar.add_task("planning", total=None)
        result = run_plan(request, top=args.top, workers=workers,
                          progress=lambda n: bar.advance(task, n),
                          on_queue=lambda n: bar.update(task, total=n, description=f"deciding {n} candidates"))
    print(header(request))
    print(counts_line(result))
    ranked = result.fitting()
    if not ranked:
        raise PipesimError(nothing_fits_message(request))
    if args.output:
        frame = result.frame()
        path = Path(args.output)
        if path.suffix.lower() == ".csv":
            write_with(path, lambda tmp: frame.to_csv(tmp, index=False))
        else:
            write_with(path, lambda tmp: frame.to_parquet(tmp, index=False))
    shown, hidden = distinct_top(ranked, args.top)
    print(ranking_text(request, shown))
    if hidden:
        print(f"({hidden} configuration(s) tying with a listed one on step time but needing more memory not listed)")
    if args.output:
        print(f"wrote {len(result.outcomes)} candidates to {args.output}")
    if args.plot:
        from pipesim.plots.pareto_plot import plot_pareto

        labelled = [o.candidate.label() for o in shown[:5]]
        plot_pareto(result.frame(), args.plot, cap_gib=request.cap_gib, labelled=labelled,
                    title=f"{request.model.name} on {request.gpus}× {request.chip.name}, "
                    f"global batch {request.global_batch}")
        print(f"wrote {args.plot}")
    return 0


def header(request) -> str:
    m = request.model
    return (f"plan: {m.name} ({total_params(m) / 1e9:.1f}B params, seq {m.seq_len}) on {request.gpus}× "
            f"{request.chip.name} ({request.gpus_per_node} per node), global batch {request.global_batch} sequences, "
            f"memory cap {request.cap_gib:g} GiB")


def counts_line(result) -> str:
    from pipesim.plan.search import Status

    c = result.count
    return (f"considered {result.considered}, pruned {result.pruned} ({c(Status.PRUNED_MEMORY)} by the memory "
            f"bound, {c(Status.OVER_MEMORY)} over the cap in their schedule, {c(Status.PRUNED_TIME)} unable to "
            f"win), rejected by their schedule {c(Status.REJECTED)}, simulated {c(Status.SIMULATED)}")


def distinct_top(ranked: list, top: int) -> tuple[list, int]:
    """The first ``top`` of ``ranked`` (fastest, then leanest), skipping exact step-time ties that need more
    memory: with equal speed the leaner configuration is strictly better, so the others only crowd the list."""
    shown, hidden = [], 0
    for outcome in ranked:
        if shown and outcome.evaluation.step_time == shown[-1].evaluation.step_time:
            hidden += 1
            continue
        if len(shown) == top:
            break
        shown.append(outcome)
    return shown, hidden


def ranking_text(request, shown: list) -> str:
    from pipesim.plan.launch import executor_gaps, executor_line, megatron_line
    from pipesim.plan.uncertainty import band_of, overlaps_best

    close = overlaps_best(shown, request.chip)
    lines = [f"{'#':>2} {'step s':>8} {'± band':>6} {'tok/s/GPU':>10} {'MFU':>6} {'peak GiB':>9} {'rank':>4} "
             f"{'bubble':>7}  configuration"]
    for i, o in enumerate(shown, 1):
        e, c = o.evaluation, o.candidate
        band = band_of(o, request.chip)
        mark = " ≈#1" if i > 1 and close[i - 1] else ""
        lines.append(f"{i:>2} {e.step_time:>8.4g} {f'{band:.0%}' if band else '–':>6} "
                     f"{e.tokens_per_s_per_gpu:>10,.0f} {e.mfu:>6.1%} "
                     f"{e.peak_gib:>9.1f} {e.peak_rank:>4} {e.bubble_fraction:>7.1%}  {c.label()}{mark}")
        lines.append(f"   executor: {executor_line(c, request.model, request.gpus_per_node)}")
        gaps = executor_gaps(c, request.model)
        if gaps:
            lines.append(f"             (executor model: {'; '.join(gaps)})")
        lines.append(f"   megatron: {megatron_line(c, request.model, request.global_batch, request.overlap_p2p)}")
    if any(o.candidate.precision is Precision.FP8 for o in shown):
        lines.append(f"MFU: {MFU_PEAK_NOTE} (an FP8 candidate's MFU can pass what BF16 could reach)")
    tied = sum(close[1:])
    if tied:
        lines.append(f"≈#1: {tied} of the listed configurations lie within the error band of #1 (validation's "
                     "left-out error for this kind of run): the model cannot tell them from the best")
    return "\n".join(lines)
