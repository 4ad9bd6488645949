"""Arguments several commands share: which schedule to build, the memory limit of a memory-aware schedule, and
the unit-cost model with its overrides (turned into a CostModel by :func:`pipesim.api.unit_costs.unit_cost_model`).
"""

from __future__ import annotations

import argparse

from pipesim.api.defaults import (
    DEFAULT_CHUNKED_SCHEDULE,
    DEFAULT_MICROBATCHES,
    DEFAULT_PP,
    DEFAULT_SCHEDULE,
    UNIT_COSTS,
)
from pipesim.api.unit_costs import unit_cost_model
from pipesim.cli.arg_types import cost_value, positive_float, positive_int, stage_override, token_count
from pipesim.program.loader import builtin_names
from pipesim.sim.costs import CostModel


def add_memory_limit_arg(parser: argparse.ArgumentParser, *, with_model: bool = False) -> None:
    gib = ", or GiB of activations with --model" if with_model else ""
    parser.add_argument("--memory-limit", type=positive_float, default=None, metavar="M",
                        help="activation memory per rank for schedules that synthesise their order (zb-auto): in "
                        f"units of one microbatch-stage's activations (M_B; 2·pp is ZB-2p){gib} "
                        "(default: 2·pp units)")


def add_train_tokens_arg(parser: argparse.ArgumentParser) -> None:
    """``--train-tokens``, for the commands that time a real model's step (simulate, plan)."""
    parser.add_argument("--train-tokens", type=token_count, default=None, metavar="TOKENS",
                        help="with --model: a training run's token budget (2T, 300B, 1.5e12): also print its steps, "
                        "days and GPU-hours at the simulated step time, and the days the step's error band allows "
                        "(the steps alone: no checkpoints, evaluations or restarts)")


def add_schedule_args(parser: argparse.ArgumentParser, *, csv: bool = False, with_schedule: bool = True,
                      with_model: bool = False) -> None:
    """``--schedule``, ``--pp``, ``--mb``, ``--chunks``; ``with_model`` (simulate): the schedule inferred from the
    chunks where none is named."""
    extra = ", a PyTorch action .csv, program text (pipesim synthesize/lower -o)" if csv else ""
    if with_schedule:
        parser.add_argument("--schedule", "-s", default=None if with_model else DEFAULT_SCHEDULE,
                            help=f"built-in name ({', '.join(builtin_names())}){extra} or path to a schedule .py "
                            f"file (default: {DEFAULT_SCHEDULE}"
                            + (f", or {DEFAULT_CHUNKED_SCHEDULE} with --chunks above 1)" if with_model else ")"))
        add_memory_limit_arg(parser, with_model=with_model)
    parser.add_argument("--pp", type=positive_int, default=None,
                        help=f"pipeline ranks (default: {DEFAULT_PP}; a torch .csv or program text fixes it)")
    parser.add_argument("--mb", type=positive_int, default=None,
                        help=f"microbatches per step (default: {DEFAULT_MICROBATCHES}; a torch .csv or program "
                        "text fixes it)")
    parser.add_argument("--chunks", "-v", type=positive_int, default=None,
                        help="model chunks per rank, v (default: the schedule's own, 2 for interleaved)")


def add_p2p_arg(parser: argparse.ArgumentParser) -> None:
    from pipesim.program.grouped import P2PLowering

    parser.add_argument("--p2p", choices=[p.value for p in P2PLowering], default=P2PLowering.EAGER.value,
                        help="eager: lower()'s Program, receives posted in each link's send order, just before "
                        "their consumers where both ranks agree on that order and earlier where not (safe with "
                        "buffered sends: the executor on gloo); grouped: transfers ordered by one global logical "
                        "clock so the Program is proven deadlock-free under NCCL's grouped semantics (the "
                        "executor on NCCL). Default: eager")


def add_cost_args(parser: argparse.ArgumentParser) -> None:
    d = UNIT_COSTS
    group = parser.add_argument_group(
        "costs (durations in cost units, or seconds with a calibrated --costs file; every value is per microbatch "
        "through one rank's share of the model, and each of v chunks takes 1/v)")
    group.add_argument("--costs", metavar="FILE", help="costs file (.json/.yaml); the flags below override it")
    group.add_argument("--forward", "-F", type=cost_value,
                       help=f"forward time per microbatch through a rank's share of the model (default {d.forward:g})")
    group.add_argument("--backward", "-B", type=cost_value, help=f"full backward time (default {d.backward:g})")
    group.add_argument("--backward-input", type=cost_value,
                       help=f"split backward I time (default {d.backward_input:g})")
    group.add_argument("--backward-weight", type=cost_value,
                       help=f"split backward W time (default {d.backward_weight:g})")
    group.add_argument("--comm", type=cost_value, help="P2P latency per transfer (default 0)")
    group.add_argument("--activation-bytes", type=cost_value,
                       help="bytes of one microbatch's activations through a rank's share of the model; adds peak "
                       "memory in bytes")
    group.add_argument("--stage-cost", type=stage_override, action="append", default=[], metavar="S:k=v,...",
                       help="override stage S, e.g. 0:forward=1.5 (repeatable; fields as in costs files)")


def cost_values_from_args(args: argparse.Namespace) -> dict:
    """The unit-cost flags as keyword arguments of the library's ``simulate``/``unit_cost_model``."""
    return {"costs": args.costs, "forward": args.forward, "backward": args.backward,
            "backward_input": args.backward_input, "backward_weight": args.backward_weight, "comm": args.comm,
            "activation_bytes": args.activation_bytes, "stage_cost": list(args.stage_cost)}


def cost_model_from_args(args: argparse.Namespace, num_stages: int) -> CostModel:
    """The costs file (or the unit defaults; checked against the pipeline's pp·v stages) with the flags on top."""
    values = cost_values_from_args(args)
    return unit_cost_model(num_stages, values.pop("costs"), **values)
