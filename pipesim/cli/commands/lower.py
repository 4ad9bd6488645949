"""``pipesim lower``: the lowered Program (per-rank instructions) as text."""

from __future__ import annotations

import argparse

from pipesim.cli.arg_types import output_file
from pipesim.cli.shared_args import add_p2p_arg, add_schedule_args

NAME = "lower"


def register(sub) -> None:
    low = sub.add_parser(NAME, help="print the lowered Program (per-rank instructions) as text",
                         description="Lower a schedule into its Program and print the text form.")
    add_schedule_args(low, csv=True)
    low.add_argument("--output", "-o", metavar="FILE", type=output_file(what="program text"),
                     help="write to FILE instead of stdout")
    add_p2p_arg(low)
    low.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.programs import load_program
    from pipesim.io.atomic import write_or_print

    program = load_program(args.schedule, args.pp, args.mb, args.chunks, p2p=args.p2p,
                           memory_limit=args.memory_limit)
    write_or_print(program.to_text(), args.output)
    return 0
