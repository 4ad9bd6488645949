"""``pipesim synthesize``: its arguments, and printing the order found (the search is :mod:`pipesim.api.synthesis`
over :mod:`pipesim.synth`)."""

from __future__ import annotations

import argparse
import json

from pipesim.api.defaults import SYNTH_DEFAULTS
from pipesim.cli.analytic_args import add_model_args, model_options_from_args
from pipesim.cli.arg_types import positive_float
from pipesim.cli.megatron_args import add_megatron_aliases
from pipesim.cli.shared_args import add_cost_args, add_memory_limit_arg, add_schedule_args, cost_values_from_args

NAME = "synthesize"


def register(sub) -> None:
    syn = sub.add_parser(
        NAME, help="find the best compute order for the costs and a memory limit (zb-auto) and write it",
        description="Synthesise a split-backward schedule (Zero Bubble's automatic ZB-1p/ZB-2p; --chunks 2: the "
        "V placement) for the given costs and per-rank activation limit. The order is written as a PyTorch "
        "action CSV (.csv) or Program text (other names) that simulate, validate, export and "
        "torchrun -m executors.run accept.")
    add_schedule_args(syn, with_schedule=False)
    add_cost_args(syn)
    add_model_args(syn)
    add_memory_limit_arg(syn, with_model=True)
    syn.add_argument("--method", choices=["greedy", "local", "exact"], default=SYNTH_DEFAULTS.method,
                     help="greedy: the heuristic's policies and the built-ins; local: then local search (default); "
                     "exact: then CP-SAT (ortools) for problems of up to --exact-max-tasks passes")
    syn.add_argument("--exact-seconds", type=positive_float, default=SYNTH_DEFAULTS.exact_seconds,
                     help=f"CP-SAT time limit (default {SYNTH_DEFAULTS.exact_seconds:g})")
    syn.add_argument("--exact-max-tasks", type=int, default=SYNTH_DEFAULTS.exact_max_tasks,
                     help="skip CP-SAT above this many F/I/W passes (3·stages·microbatches; default "
                     f"{SYNTH_DEFAULTS.exact_max_tasks})")
    syn.add_argument("--json", action="store_true", help="print the summary as JSON")
    syn.add_argument("--output", "-o", metavar="FILE",
                     help="order.csv (PyTorch action CSV) or order.txt (Program text)")
    add_megatron_aliases(syn)
    syn.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.synthesis import synthesize
    from pipesim.io.atomic import check_output_path

    if args.output:
        check_output_path(args.output, "-o")
    outcome = synthesize(args.pp, args.mb, args.chunks, **cost_values_from_args(args), model=args.model,
                         hardware=args.hardware, memory_limit=args.memory_limit, method=args.method,
                         exact_seconds=args.exact_seconds, exact_max_tasks=args.exact_max_tasks,
                         **vars(model_options_from_args(args)))
    if args.output:
        outcome.write(args.output)
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
        return 0
    print(outcome.text())
    if args.output:
        print(f"wrote {args.output}")
    return 0
