"""``pipesim schedules``: the built-in schedules, one line each."""

from __future__ import annotations

import argparse

NAME = "schedules"


def register(sub) -> None:
    lst = sub.add_parser(NAME, help="list built-in schedules", description="List built-in schedules.")
    lst.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.program.loader import builtin_names, load_schedule

    for name in builtin_names():
        print(f"{name:<14} {load_schedule(name).summary}")
    return 0
