"""``pipesim synthesize``: the best compute order for the costs and a memory limit (see :mod:`pipesim.synth`)."""

from __future__ import annotations

import argparse

from pipesim.cli.analytic_args import add_model_args
from pipesim.cli.shared_args import add_cost_args, add_schedule_args
from pipesim.cli.synthesize import add_synthesize_command, cmd_synthesize

NAME = "synthesize"


def register(sub) -> None:
    add_synthesize_command(sub, add_schedule_args, add_cost_args, add_model_args)


def run(args: argparse.Namespace) -> int:
    return cmd_synthesize(args)
