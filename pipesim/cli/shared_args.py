"""Arguments several commands share: which schedule to build, and the unit-cost model with its overrides."""

from __future__ import annotations

import argparse
from dataclasses import replace

from pipesim.cli.arg_types import cost_value, positive_int, stage_override
from pipesim.errors import PipesimError
from pipesim.program.loader import builtin_names
from pipesim.sim.costs import CostModel


def add_schedule_args(parser: argparse.ArgumentParser, *, csv: bool = False, with_schedule: bool = True) -> None:
    from pipesim.cli.synthesize import add_memory_limit_arg

    extra = ", a PyTorch action .csv, program text (pipesim synthesize/lower -o)" if csv else ""
    if with_schedule:
        parser.add_argument("--schedule", "-s", default="1f1b",
                            help=f"built-in name ({', '.join(builtin_names())}){extra} or path to a schedule .py "
                            "file (default: 1f1b)")
        add_memory_limit_arg(parser)
    parser.add_argument("--pp", type=positive_int, default=None,
                        help="pipeline ranks (default: 4; a torch .csv or program text fixes it)")
    parser.add_argument("--mb", type=positive_int, default=None,
                        help="microbatches per step (default: 8; a torch .csv or program text fixes it)")
    parser.add_argument("--chunks", "-v", type=positive_int, default=None,
                        help="model chunks per rank, v (default: the schedule's own, 2 for interleaved)")


def add_p2p_arg(parser: argparse.ArgumentParser) -> None:
    from pipesim.program.grouped import P2PLowering

    parser.add_argument("--p2p", choices=[p.value for p in P2PLowering], default=P2PLowering.EAGER.value,
                        help="eager: receives just before their consumers (the executor on gloo); grouped: "
                        "transfers ordered by one global logical clock so the Program is proven deadlock-free "
                        "under NCCL's grouped semantics (the executor on NCCL). Default: eager")


def add_cost_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "costs (durations in cost units, or seconds with a calibrated --costs file; every value is per microbatch "
        "through one rank's share of the model, and each of v chunks takes 1/v)")
    group.add_argument("--costs", metavar="FILE", help="costs file (.json/.yaml); the flags below override it")
    group.add_argument("--forward", "-F", type=cost_value,
                       help="forward time per microbatch through a rank's share of the model (default 1)")
    group.add_argument("--backward", "-B", type=cost_value, help="full backward time (default 2)")
    group.add_argument("--backward-input", type=cost_value, help="split backward I time (default 1)")
    group.add_argument("--backward-weight", type=cost_value, help="split backward W time (default 1)")
    group.add_argument("--comm", type=cost_value, help="P2P latency per transfer (default 0)")
    group.add_argument("--activation-bytes", type=cost_value,
                       help="bytes of one microbatch's activations through a rank's share of the model; adds peak "
                       "memory in bytes")
    group.add_argument("--stage-cost", type=stage_override, action="append", default=[], metavar="S:k=v,...",
                       help="override stage S, e.g. 0:forward=1.5 (repeatable; fields as in costs files)")


def cost_model_from_args(args: argparse.Namespace, num_stages: int) -> CostModel:
    """The costs file (or the unit defaults; checked against the costs schema and the pipeline's pp·v stages)
    with the flags applied on top."""
    costs = CostModel()
    if args.costs:
        costs = CostModel.load(args.costs)
        costs.check_pipeline(num_stages, source=f"costs file {args.costs}")
    defaults = {
        "forward": args.forward, "backward": args.backward, "backward_input": args.backward_input,
        "backward_weight": args.backward_weight, "activation_bytes": args.activation_bytes,
    }
    defaults = {k: v for k, v in defaults.items() if v is not None}
    if defaults:
        costs = replace(costs, default=replace(costs.default, **defaults))
    if args.comm is not None:
        costs = replace(costs, p2p_latency=args.comm)
    if args.stage_cost:
        overrides: dict[int, dict[str, float]] = {}
        for stage, values in args.stage_cost:
            overrides.setdefault(stage, {}).update(values)
        bad = [s for s in overrides if s >= num_stages]
        if bad:
            raise PipesimError(f"--stage-cost names stage {bad[0]}, but this pipeline has stages 0..{num_stages - 1}")
        costs = costs.with_overrides(overrides, source="--stage-cost")
    return costs
