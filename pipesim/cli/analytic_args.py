"""The CLI's model/chip side of ``simulate --model … --hardware …``: the arguments and the report printing.

Kept out of :mod:`pipesim.cli.commands.simulate` so that module only calls in here: :func:`add_model_args`,
:func:`model_setup_from_args`, :func:`model_report_dict` and :func:`model_report_text`. The ``models`` and
``chips`` listings are commands of their own (:mod:`pipesim.cli.commands`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from pipesim.analytic.chip_spec import ChipSpec, load_chip
from pipesim.analytic.layout import AttentionKernel, Layout, OptimizerBytes, Precision, Recompute, ZeroStage
from pipesim.analytic.model_spec import ModelSpec, load_model
from pipesim.analytic.stage_split import StageSplitRequest, resolve_stage_layers
from pipesim.analytic.steady_state import StepBoundary, default_boundary, steady_state_step_time, sync_latency
from pipesim.analytic.step_report import report_text, step_report
from pipesim.analytic.to_costs import build_cost_model
from pipesim.cli.arg_types import fraction, positive_int
from pipesim.errors import PipesimError
from pipesim.sim.costs import CostModel

_PARAM_BYTES = {"18": OptimizerBytes(), "16": OptimizerBytes(grads=2.0)}
# Flags of the unit-cost model that --model replaces: giving both is a mistake worth naming.
_COST_FLAGS = ("costs", "forward", "backward", "backward_input", "backward_weight", "comm", "activation_bytes")
_MODEL_ONLY = ("tp", "dp", "recompute", "sequence_parallel", "distributed_optimizer", "attention",
               "halve_causal_attention", "achievable_fraction", "seq_len", "micro_batch_size", "param_bytes",
               "first_stage_layers", "last_stage_layers", "stage_layers", "zero", "cp", "fp8", "async_tp",
               "step_boundary", "steps", "overlap_p2p", "ep", "moe_imbalance", "expert_tp")


def layer_list(text: str) -> tuple[int, ...]:
    """``--stage-layers 7,8,8,7``: one non-negative layer count per stage."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers, e.g. 7,8,8,7") from None
    if any(c < 0 for c in counts):
        raise argparse.ArgumentTypeError(f"{text}: layer counts must be ≥ 0")
    return counts


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be ≥ 0")
    return value


def at_least_two(text: str) -> int:
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text} must be ≥ 2 (a steady state needs two steps)")
    return value


def imbalance(text: str) -> float:
    """``--moe-imbalance 1.3``: a finite number ≥ 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (the most-loaded rank's tokens over the mean, "
                                         "e.g. 1.2)") from None
    if not (1.0 <= value < 1e6):
        raise argparse.ArgumentTypeError(f"{text} must be ≥ 1 (1: perfectly balanced routing)")
    return value


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
    group.add_argument("--first-stage-layers", type=non_negative_int, default=None, metavar="N",
                       help="layers on stage 0 (it also holds the embedding); the rest split evenly")
    group.add_argument("--last-stage-layers", type=non_negative_int, default=None, metavar="N",
                       help="layers on the last stage (it also holds the LM head and loss)")
    group.add_argument("--stage-layers", type=layer_list, default=None, metavar="N,N,...",
                       help="layers on every stage, stage 0 first (pp·v counts summing to the model's layers)")
    group.add_argument("--zero", type=int, choices=[1, 2, 3], default=None,
                       help="ZeRO stage over the dp·cp ranks: 1 optimizer state (= --distributed-optimizer), "
                       "2 + gradients, 3 + weights (FSDP); with dp·cp = 1 nothing is sharded (a note says so)")
    group.add_argument("--cp", type=positive_int, default=None,
                       help="context-parallel degree: sequence split over cp ranks, ring attention (default 1)")
    group.add_argument("--fp8", action="store_true", default=None,
                       help="FP8 GEMMs at the chip's FP8 peak, plus an FP8 copy of the weights")
    group.add_argument("--async-tp", action="store_true", default=None,
                       help="overlap tensor-parallel collectives with the GEMMs they feed")
    group.add_argument("--overlap-p2p", action="store_true", default=None,
                       help="pipeline sends overlap compute (Megatron's --overlap-p2p-communication); default: "
                       "blocking sends, the sender waits for its transfer")
    group.add_argument("--ep", type=positive_int, default=None,
                       help="expert-parallel degree for mixture-of-experts models: routed experts sharded over ep "
                       "ranks carved out of dp·cp (ep divides dp·cp and the experts; default 1)")
    group.add_argument("--expert-tp", type=positive_int, default=None, metavar="N",
                       help="expert tensor-parallel degree (Megatron's --expert-tensor-parallel-size): only --tp "
                       "itself, the default, is modelled")
    group.add_argument("--moe-imbalance", type=imbalance, default=None, metavar="X",
                       help="most-loaded expert-parallel rank's routed tokens over the mean (≥ 1; default 1: "
                       "balanced); scales expert compute, all-to-all and routed activations")
    group.add_argument("--step-boundary", choices=[b.value for b in StepBoundary], default=None,
                       help="what separates training steps: sync (global all-reduce before the optimizer) or "
                       "post-validation (zero-bubble's optimizer bypass); default: post-validation for "
                       "split-backward schedules (zb-*), sync for the others")
    group.add_argument("--steps", type=at_least_two, default=None,
                       help="steps simulated back to back for the post-validation steady state (default 3)")


@dataclass(frozen=True)
class ModelSetup:
    """Everything ``--model`` implies for one simulate run."""

    model: ModelSpec
    chip: ChipSpec
    layout: Layout
    costs: CostModel
    boundary: StepBoundary | None = None  # None: default_boundary of the schedule
    steps: int = 3


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
    if args.distributed_optimizer and args.zero is not None and args.zero != 1:
        raise PipesimError(f"--distributed-optimizer is ZeRO-1, but --zero {args.zero} is given; keep one")
    split = StageSplitRequest(args.first_stage_layers, args.last_stage_layers, args.stage_layers)
    stage_layers = None if split.is_default else resolve_stage_layers(
        model.layers, shape.num_stages, split, model_name=f"model {model.name}")
    boundary = StepBoundary(args.step_boundary) if args.step_boundary else None
    if args.steps is not None and boundary is StepBoundary.SYNC:
        raise PipesimError("--steps sets how many steps the post-validation steady state simulates, but "
                           "--step-boundary is sync; drop one")
    layout = Layout(
        tp=args.tp or 1, dp=args.dp or 1, pp=shape.pp, chunks=shape.chunks, microbatches=shape.microbatches,
        recompute=Recompute(args.recompute or "none"), sequence_parallel=bool(args.sequence_parallel),
        distributed_optimizer=bool(args.distributed_optimizer),
        attention=AttentionKernel(args.attention or "fused"),
        halve_causal_attention=bool(args.halve_causal_attention),
        param_bytes=_PARAM_BYTES[args.param_bytes or "18"],
        stage_layers=stage_layers, zero=ZeroStage(args.zero or 0), cp=args.cp or 1,
        precision=Precision.FP8 if args.fp8 else Precision.BF16, async_tp=bool(args.async_tp),
        overlap_p2p=bool(args.overlap_p2p), ep=args.ep or 1, moe_imbalance=args.moe_imbalance or 1.0,
    )
    if args.expert_tp is not None and args.expert_tp != layout.tp:
        raise PipesimError(f"--expert-tp {args.expert_tp}: pipesim splits experts over tp like the dense MLP (expert "
                           f"tensor parallelism = --tp {layout.tp}, Megatron's default); a separate expert-tp degree "
                           "(MoE parallel folding) is not modelled: drop --expert-tp or set it to --tp")
    if layout.sequence_parallel and layout.tp == 1:
        raise PipesimError("--sequence-parallel shards along tp, but --tp is 1; add --tp N (N > 1) or drop it")
    return ModelSetup(model, chip, layout, build_cost_model(model, chip, layout, shape), boundary,
                      args.steps or 3)


def _boundary(setup: ModelSetup, result) -> StepBoundary:
    return setup.boundary or default_boundary(result.program)


def steady_step_time(setup: ModelSetup, result) -> float:
    """Seconds per step with steps back to back (:mod:`pipesim.analytic.steady_state`)."""
    return steady_state_step_time(result, _boundary(setup, result), sync_latency(setup.layout, setup.chip),
                                  setup.steps)


def model_report_dict(setup: ModelSetup, result) -> dict:
    """Step time, tokens/s, MFU, bubble and per-rank GiB for ``--json`` (key ``model_report``)."""
    return step_report(setup.model, setup.chip, setup.layout, result, steady_step_time(setup, result),
                       _boundary(setup, result)).to_dict()


def model_report_text(setup: ModelSetup, result) -> str:
    """The same as text, printed after the simulator's summary."""
    return report_text(step_report(setup.model, setup.chip, setup.layout, result, steady_step_time(setup, result),
                                   _boundary(setup, result)))

