"""``pipesim validate``: a schedule or a program text file is complete, ordered and deadlock-free."""

from __future__ import annotations

import argparse

from pipesim.cli.shared_args import add_p2p_arg, add_schedule_args
from pipesim.program.validate import CommSemantics

NAME = "validate"


def register(sub) -> None:
    val = sub.add_parser(NAME, help="check a schedule or program text: complete, ordered, deadlock-free",
                         description="Validate a schedule (or a program text file) under the executor's "
                         "communication semantics; on failure name the problem or the cycle of waits.")
    add_schedule_args(val, csv=True)
    val.add_argument("--program", metavar="FILE", help="validate a program text file (from 'pipesim lower')")
    val.add_argument("--semantics", choices=[s.value for s in CommSemantics], default="buffered",
                     help="buffered: sends return at once (gloo isend, the executor on CPU); rendezvous: a send "
                     "waits until its receive is posted (NCCL P2P one op at a time); grouped: rendezvous, with "
                     "each run of SEND/RECV instructions issued as one NCCL group (the executor on GPU). "
                     "Default: buffered")
    add_p2p_arg(val)
    val.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.programs import validate

    result = validate(args.schedule, args.pp, args.mb, args.chunks, program=args.program,
                      semantics=args.semantics, p2p=args.p2p, memory_limit=args.memory_limit)
    print(result.text())
    return 0
