"""``pipesim schedules``: the built-in schedules, one line each."""

from __future__ import annotations

import argparse

NAME = "schedules"


def register(sub) -> None:
    lst = sub.add_parser(NAME, help="list built-in schedules", description="List built-in schedules.")
    lst.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.programs import schedules

    for row in schedules().itertuples(index=False):
        print(f"{row.name:<14} {row.summary}")
    return 0
