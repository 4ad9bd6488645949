"""The CLI's model/chip side of ``simulate --model … --hardware …``: the arguments and the report printing.

Kept out of :mod:`pipesim.cli.commands.simulate` so that module only calls in here: :func:`add_model_args`,
:func:`model_setup_from_args`, :func:`model_report_dict` and :func:`model_report_text`. The ``models`` and
``chips`` listings are commands of their own (:mod:`pipesim.cli.commands`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from pipesim.analytic.chip_spec import ChipSpec, load_chip
from pipesim.analytic.layout import AttentionKernel, Layout, OptimizerBytes, Recompute
from pipesim.analytic.model_spec import ModelSpec, load_model
from pipesim.analytic.step_report import report_text, step_report
from pipesim.analytic.to_costs import build_cost_model
from pipesim.cli.arg_types import fraction, positive_int
from pipesim.errors import PipesimError
from pipesim.sim.costs import CostModel

_PARAM_BYTES = {"18": OptimizerBytes(), "16": OptimizerBytes(grads=2.0)}
# Flags of the unit-cost model that --model replaces: giving both is a mistake worth naming.
_COST_FLAGS = ("costs", "forward", "backward", "backward_input", "backward_weight", "comm", "activation_bytes")
_MODEL_ONLY = ("tp", "dp", "recompute", "sequence_parallel", "distributed_optimizer", "attention",
               "halve_causal_attention", "achievable_fraction", "seq_len", "micro_batch_size", "param_bytes")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("real model on real chips (costs in seconds, memory in GiB)")
    group.add_argument("--model", metavar="NAME|FILE", help="model preset (pipesim models) or .yaml/.json file")
    group.add_argument("--hardware", metavar="NAME|FILE", default=None,
                       help="chip preset (pipesim chips) or .yaml/.json file (default h100-sxm)")
    group.add_argument("--tp", type=positive_int, default=None, help="tensor-parallel degree (default 1)")
    group.add_argument("--dp", type=positive_int, default=None, help="data-parallel degree (default 1)")
    group.add_argument("--recompute", choices=[r.value for r in Recompute], default=None,
                       help="activation recomputation (default none)")
    group.add_argument("--sequence-parallel", action="store_true", default=None,
                       help="shard norms/dropout along the sequence (Korthikanti et al. 2023)")
    group.add_argument("--distributed-optimizer", action="store_true", default=None,
                       help="shard optimizer state over dp (ZeRO-1); reduce-scatter + all-gather")
    group.add_argument("--attention", choices=[a.value for a in AttentionKernel], default=None,
                       help="fused (FlashAttention: no s² scores stored, default) or unfused (5as²b stored)")
    group.add_argument("--halve-causal-attention", action="store_true", default=None,
                       help="count half of QKᵀ and ·V FLOPs (causal kernels skip them); default counts all")
    group.add_argument("--achievable-fraction", type=fraction, default=None,
                       help="fraction of peak FLOP/s the layers reach (default: the chip's, 0.6 for presets)")
    group.add_argument("--seq-len", type=positive_int, default=None, help="override the model's sequence length")
    group.add_argument("--micro-batch-size", type=positive_int, default=None,
                       help="sequences per microbatch (default: the model's, 1 for presets)")
    group.add_argument("--param-bytes", choices=sorted(_PARAM_BYTES), default=None,
                       help="bytes per parameter for weights+grads+Adam: 18 (Megatron, FP32 grads; default) "
                       "or 16 (ZeRO paper, 16-bit grads)")


@dataclass(frozen=True)
class ModelSetup:
    """Everything ``--model`` implies for one simulate run."""

    model: ModelSpec
    chip: ChipSpec
    layout: Layout
    costs: CostModel


def model_setup_from_args(args: argparse.Namespace, shape) -> ModelSetup | None:
    """None without ``--model``; otherwise the model, chip, layout and the CostModel in seconds for ``shape``."""
    if not args.model:
        given = [f"--{k.replace('_', '-')}" for k in (*_MODEL_ONLY, "hardware") if getattr(args, k) is not None]
        if given:
            raise PipesimError(f"{given[0]} describes a real model; add --model NAME (see 'pipesim models')")
        return None
    clash = [f"--{k.replace('_', '-')}" for k in _COST_FLAGS if getattr(args, k, None) is not None]
    if clash or getattr(args, "stage_cost", None):
        flag = clash[0] if clash else "--stage-cost"
        raise PipesimError(f"{flag} sets unit costs, but --model derives the costs from FLOPs and bytes; drop one")
    model = load_model(args.model).with_shape(args.seq_len, args.micro_batch_size)
    chip = load_chip(args.hardware or "h100-sxm")
    if args.achievable_fraction is not None:
        chip = replace(chip, achievable_fraction=args.achievable_fraction)
    layout = Layout(
        tp=args.tp or 1, dp=args.dp or 1, pp=shape.pp, chunks=shape.chunks, microbatches=shape.microbatches,
        recompute=Recompute(args.recompute or "none"), sequence_parallel=bool(args.sequence_parallel),
        distributed_optimizer=bool(args.distributed_optimizer),
        attention=AttentionKernel(args.attention or "fused"),
        halve_causal_attention=bool(args.halve_causal_attention),
        param_bytes=_PARAM_BYTES[args.param_bytes or "18"],
    )
    if layout.sequence_parallel and layout.tp == 1:
        raise PipesimError("--sequence-parallel shards along tp, but --tp is 1; add --tp N (N > 1) or drop it")
    return ModelSetup(model, chip, layout, build_cost_model(model, chip, layout, shape))


def model_report_dict(setup: ModelSetup, result) -> dict:
    """Step time, tokens/s, MFU, bubble and per-rank GiB for ``--json`` (key ``model_report``)."""
    return step_report(setup.model, setup.chip, setup.layout, result).to_dict()


def model_report_text(setup: ModelSetup, result) -> str:
    """The same as text, printed after the simulator's summary."""
    return report_text(step_report(setup.model, setup.chip, setup.layout, result))
