"""``pipesim export``: a schedule as a PyTorch ``torch.distributed.pipelining`` action CSV, or program text."""

from __future__ import annotations

import argparse

from pipesim.api.programs import ExportFormat
from pipesim.cli.arg_types import output_file
from pipesim.cli.shared_args import add_schedule_args

NAME = "export"


def register(sub) -> None:
    exp = sub.add_parser(NAME, help="write a schedule as a PyTorch action CSV (or program text)",
                         description="Export a schedule's per-rank actions as a torch.distributed.pipelining CSV "
                         "(cells like 0F0, 1I3, 3SEND_F2; global stage indices).")
    add_schedule_args(exp, csv=True)
    exp.add_argument("--format", choices=[f.value for f in ExportFormat], default=ExportFormat.TORCH_CSV.value,
                     help="torch-csv (default) or program (the text of 'pipesim lower')")
    exp.add_argument("--with-comms", action="store_true",
                     help="include SEND/RECV and REDUCE_GRAD cells (PyTorch's compute_comms format)")
    exp.add_argument("--output", "-o", metavar="FILE", type=output_file(what="export"),
                     help="write to FILE instead of stdout")
    exp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.programs import export
    from pipesim.io.atomic import write_or_print

    text = export(args.schedule, args.pp, args.mb, args.chunks, format=args.format, with_comms=args.with_comms,
                  memory_limit=args.memory_limit)
    write_or_print(text, args.output)
    if args.output and ExportFormat(args.format) is ExportFormat.TORCH_CSV:
        # Where the file goes next (torchtitan, torch's runtime): the settings that run it, one line on stderr.
        import sys
        from pathlib import Path

        from pipesim.api.programs import load_program
        from pipesim.io.torch_csv import CsvFormat
        from pipesim.io.torch_runtime_rules import torchtitan_note

        program = load_program(args.schedule, args.pp, args.mb, args.chunks, memory_limit=args.memory_limit)
        fmt = CsvFormat.COMPUTE_COMMS if args.with_comms else CsvFormat.COMPUTE_ONLY
        print(torchtitan_note(program.shape, fmt, Path(args.output).name), file=sys.stderr)
    return 0
