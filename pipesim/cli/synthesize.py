"""``--memory-limit`` for every schedule command, the costs a cost-aware schedule is built for, and
``pipesim synthesize``: the best compute order for the costs and the limit, written as a PyTorch action CSV or
Program text that ``simulate``, ``validate``, ``export`` and ``torchrun -m executors.run`` read back.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipesim.cli.arg_types import positive_float
from pipesim.errors import PipesimError
from pipesim.program.build import DEFAULT_MICROBATCHES, DEFAULT_PP
from pipesim.program.ir import PipelineShape, Placement
from pipesim.program.loader import ScheduleSource
from pipesim.sim.costs import CostModel

GIB = 2.0**30


def add_memory_limit_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory-limit", type=positive_float, default=None, metavar="M",
                        help="activation memory per rank for schedules that synthesise their order (zb-auto): in "
                        "units of one microbatch-stage's activations (M_B; 2·pp is ZB-2p), or GiB of "
                        "activations with --model (default: 2·pp units)")


def planned_shape(args: argparse.Namespace, source: ScheduleSource) -> PipelineShape:
    """The shape a build will have, known before building (cost-aware schedules need costs for it first)."""
    fixed = source.fixed_shape
    if fixed is not None:
        return fixed
    chunks = args.chunks or source.default_chunks
    return PipelineShape(args.pp or DEFAULT_PP, args.mb or DEFAULT_MICROBATCHES, chunks,
                         Placement.LOOP if chunks == 1 else Placement.V)


def memory_limit_units(args: argparse.Namespace, costs: CostModel, shape: PipelineShape, with_model: bool):
    """``--memory-limit`` in activation units; with ``--model`` it was GiB and each unit has known bytes."""
    limit = getattr(args, "memory_limit", None)
    if limit is None or not with_model:
        return limit
    unit_bytes = max(costs.stage(s).activation_bytes or 0.0 for s in range(shape.num_stages))
    if unit_bytes <= 0:
        raise PipesimError("--memory-limit in GiB needs the activation bytes of a stage, which this model lacks")
    return limit * GIB / unit_bytes


def add_synthesize_command(sub, add_schedule_args, add_cost_args, add_model_args) -> None:
    syn = sub.add_parser(
        "synthesize", help="find the best compute order for the costs and a memory limit (zb-auto) and write it",
        description="Synthesise a split-backward schedule (Zero Bubble's automatic ZB-1p/ZB-2p; --chunks 2: the "
        "V placement) for the given costs and per-rank activation limit. The order is written as a PyTorch "
        "action CSV (.csv) or Program text (other names) that simulate, validate, export and "
        "torchrun -m executors.run accept.")
    add_schedule_args(syn, with_schedule=False)
    add_cost_args(syn)
    add_model_args(syn)
    add_memory_limit_arg(syn)
    syn.add_argument("--method", choices=["greedy", "local", "exact"], default="local",
                     help="greedy: the heuristic's policies and the built-ins; local: then local search (default); "
                     "exact: then CP-SAT (ortools) for problems of up to --exact-max-tasks passes")
    syn.add_argument("--exact-seconds", type=positive_float, default=30.0, help="CP-SAT time limit (default 30)")
    syn.add_argument("--exact-max-tasks", type=int, default=300,
                     help="skip CP-SAT above this many F/I/W passes (3·stages·microbatches; default 300)")
    syn.add_argument("--json", action="store_true", help="print the summary as JSON")
    syn.add_argument("--output", "-o", metavar="FILE",
                     help="order.csv (PyTorch action CSV) or order.txt (Program text)")
    syn.set_defaults(func=cmd_synthesize)


def cmd_synthesize(args: argparse.Namespace) -> int:
    from pipesim.cli.analytic_args import model_setup_from_args
    from pipesim.cli.shared_args import cost_model_from_args
    from pipesim.io.atomic import check_output_path, write_text_atomic
    from pipesim.io.torch_csv import export_rows, rows_to_text
    from pipesim.program.lowering import lower
    from pipesim.program.validate import CommSemantics, validate
    from pipesim.sim.simulator import simulate
    from pipesim.synth.problem import SynthesisProblem
    from pipesim.synth.search import Method, default_memory_limit, synthesis_shape, synthesize

    if args.output:
        check_output_path(args.output, "-o")
    shape = synthesis_shape(args.pp or DEFAULT_PP, args.mb or DEFAULT_MICROBATCHES, args.chunks or 1)
    setup = model_setup_from_args(args, shape)
    costs = setup.costs if setup else cost_model_from_args(args, shape.num_stages)
    limit = memory_limit_units(args, costs, shape, setup is not None)
    limit = default_memory_limit(shape) if limit is None else limit
    problem = SynthesisProblem.from_costs(shape, costs, limit)
    result = synthesize(problem, Method(args.method), exact_seconds=args.exact_seconds,
                        exact_max_tasks=args.exact_max_tasks)
    program = lower(result.schedule("zb-auto"))
    validate(program, CommSemantics.BUFFERED)  # valid by construction; proven anyway
    simulated = simulate(program, costs, check=False)
    peaks = simulated.memory.peak_activations
    if max(peaks) > limit + 1e-9:  # the evaluator and the simulator share one memory model: a bug if reached
        raise PipesimError(f"internal: synthesised order peaks at {max(peaks):g} > limit {limit:g}")
    summary = {
        "shape": {"pp": shape.pp, "microbatches": shape.microbatches, "chunks": shape.chunks,
                  "placement": shape.placement.value},
        "memory_limit": limit,
        "method": args.method,
        "origin": result.origin,
        "max_stage_span": result.evaluation.max_span,
        "bubble_rate": result.bubble_rate,
        "makespan": simulated.metrics.makespan,
        "peak_activations": list(peaks),
        "proven_optimal": result.optimal,
        "solver_bound": result.solver_bound,
        "seconds": result.timings,
        "notes": list(result.notes),
    }
    if args.output:
        text = (rows_to_text(export_rows(program)) if Path(args.output).suffix.lower() == ".csv"
                else program.to_text())
        write_text_atomic(args.output, text)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    unit = costs.time_unit
    print(f"zb-auto: {problem.describe()}")
    print(f"best: {result.origin}")
    print(f"longest stage span {result.evaluation.max_span:.6g} {unit}   bubble rate {result.bubble_rate:.4f} "
          "(Qi et al. 2024: (span − m·(F+B+W)) / span)   makespan "
          f"{simulated.metrics.makespan:.6g} {unit}")
    print("peak activations per rank: " + " ".join(f"{p:g}" for p in peaks) + f"  (limit {limit:g})")
    if result.solver_bound is not None:
        state = "optimal" if result.optimal else f"solver bound {result.solver_bound:.6g}"
        print(f"cp-sat: {state}")
    print("time: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()))
    for note in result.notes:
        print(f"note: {note}")
    if args.output:
        print(f"wrote {args.output}")
    return 0
