"""A CostModel in seconds from a model, a chip and a layout: every schedule gets real-unit timelines.

Per stage of ``L/(pp·v)`` layers (the first adds the embedding, the last the LM head and loss):

- ``forward``, ``backward_input``, ``backward_weight`` = FLOPs (:mod:`.flops`) / (tp · peak · achievable
  fraction) + the exposed TP collectives (:mod:`.comm`); recomputation runs inside the input backward;
  ``backward = backward_input + backward_weight``;
- values per rank's share of the model, pipesim's one convention: a stage of ``L/(pp·v)`` layers is one of
  v chunks, so its times and ``activation_bytes`` are multiplied by v and the simulator divides them back;
- ``activation = 1`` (one microbatch through a rank's share) and ``activation_bytes`` from :mod:`.activations`, so the
  simulator's memory profile is in bytes; ``weight_grad_activation`` is the share of linear-layer inputs
  (what the zero-bubble W pass keeps);
- ``reduce_grad``: DP gradient sync of the stage's weights; ``optimizer_step``: Adam on the rank with the
  most parameters plus the distributed optimizer's parameter all-gather;
- ``p2p_bytes`` per tp rank, with the P2P link's latency and bandwidth.

Assumptions that move the result: ``achievable_fraction`` (see :mod:`.chip_spec`); no overlap of TP or DP
communication with compute; element-wise kernels only through the achievable fraction; no data-loading,
kernel-launch or straggler time; layers split evenly (an uneven split is refused, not approximated).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.activations import (
    embedding_activation_bytes,
    layer_activation_bytes,
    linear_input_bytes,
    output_activation_bytes,
)
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.comm import dp_grad_sync, optimizer_step_time, p2p_bandwidth, p2p_bytes, tp_layer_comm
from pipesim.analytic.flops import layer_flops, lm_head_flops
from pipesim.analytic.layout import Layout
from pipesim.analytic.model_spec import ModelSpec
from pipesim.analytic.params import stage_params
from pipesim.errors import PipesimError
from pipesim.sim.costs import CostModel, StageCosts


def check_layout(model: ModelSpec, layout: Layout) -> None:
    """Refuse splits the model cannot take, naming what would work."""
    stages = layout.num_stages
    if model.layers % stages:
        raise PipesimError(_uneven_message(model, layout))
    t = layout.tp
    if model.heads % t:
        options = [d for d in range(1, model.heads + 1) if model.heads % d == 0 and d <= 64]
        raise PipesimError(f"model {model.name} has {model.heads} attention heads, which --tp {t} does not divide; "
                           f"use --tp in {options}")
    if model.kv_heads % t:
        options = [d for d in range(1, model.kv_heads + 1) if model.kv_heads % d == 0]
        raise PipesimError(f"model {model.name} has {model.kv_heads} KV heads (GQA), which --tp {t} does not "
                           f"divide (each tp rank needs whole KV groups); use --tp in {options}")
    if model.ffn_hidden % t:
        raise PipesimError(f"model {model.name}: ffn_hidden={model.ffn_hidden} is not divisible by --tp {t}")


def _uneven_message(model: ModelSpec, layout: Layout) -> str:
    n, p, v = model.layers, layout.pp, layout.chunks
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    pps = [q for q in range(1, 2 * p + 2) if n % (q * v) == 0 and q != p]
    near = sorted(pps, key=lambda q: abs(q - p))[:2]
    hint = f"; with --chunks {v}: " + " or ".join(f"--pp {q}" for q in sorted(near)) if near else ""
    return (f"model {model.name} has {n} layers, which do not split evenly over pp·v = {p}·{v} = {p * v} stages; "
            f"pp·v must divide {n}: {', '.join(map(str, divisors))}{hint}")


@dataclass(frozen=True)
class StageBreakdown:
    """Per-stage quantities the report and memory model reuse."""

    layers: int
    params: float  # per tp rank
    activation_bytes: float  # per microbatch, per tp rank


def stage_breakdown(model: ModelSpec, layout: Layout, stage: int) -> StageBreakdown:
    stages = layout.num_stages
    layers = model.layers // stages
    act = layers * layer_activation_bytes(model, layout)
    if stage == 0:
        act += embedding_activation_bytes(model, layout)
    if stage == stages - 1:
        act += output_activation_bytes(model, layout)
    # Every parameter, embeddings and norms included, is counted as sharded by tp (Megatron-LM's formula
    # does the same; replicated norm weights are < 0.01 % of a layer).
    return StageBreakdown(layers, stage_params(model, stage, stages) / layout.tp, act)


def _stage_costs(model: ModelSpec, chip: ChipSpec, layout: Layout, stage: int) -> StageCosts:
    stages = layout.num_stages
    rate = chip.achievable_flops * layout.tp
    part = stage_breakdown(model, layout, stage)
    layer = layer_flops(model, layout)
    comm = tp_layer_comm(model, layout, chip)
    n = part.layers
    forward = n * (layer.forward / rate + comm.forward)
    backward_input = n * ((layer.backward_input + layer.recompute) / rate + comm.backward)
    backward_weight = n * layer.backward_weight / rate
    if stage == stages - 1:
        head = lm_head_flops(model)
        forward += head.forward / rate
        backward_input += head.backward_input / rate
        backward_weight += head.backward_weight / rate
    kept_for_w = n * linear_input_bytes(model, layout)
    # Costs files describe a rank's share of the model (pipesim.sim.costs): this stage is one of v chunks, so
    # its values are scaled up by v here and the simulator takes 1/v of them back for the chunk.
    v = layout.chunks
    return StageCosts(
        forward=v * forward,
        backward=v * (backward_input + backward_weight),
        backward_input=v * backward_input,
        backward_weight=v * backward_weight,
        reduce_grad=v * dp_grad_sync(part.params, layout, chip).reduce,
        activation=1.0,
        weight_grad_activation=min(1.0, kept_for_w / part.activation_bytes) if part.activation_bytes else 0.0,
        activation_bytes=v * part.activation_bytes,
        p2p_bytes=p2p_bytes(model, layout),
    )


def rank_params(model: ModelSpec, layout: Layout, shape) -> list[float]:
    """Parameters per tp rank held by each pipeline rank (the sum over its chunks' stages)."""
    return [sum(stage_breakdown(model, layout, shape.stage(r, c)).params for c in range(shape.chunks))
            for r in range(shape.pp)]


def build_cost_model(model: ModelSpec, chip: ChipSpec, layout: Layout, shape=None) -> CostModel:
    """The CostModel (time unit "s") of ``model`` on ``chip`` under ``layout``.

    ``shape`` (a :class:`pipesim.program.ir.PipelineShape`) gives the stage → rank placement used to find the rank with
    the most parameters for the optimizer step; without it the loop placement of ``layout`` is assumed.
    """
    check_layout(model, layout)
    stages = layout.num_stages
    per_stage = [_stage_costs(model, chip, layout, s) for s in range(stages)]
    default = per_stage[1] if stages > 2 else per_stage[0]
    overrides = {}
    for s, costs in enumerate(per_stage):
        diff = {k: v for k, v in vars(costs).items() if getattr(default, k) != v}
        if diff:
            overrides[s] = diff
    if shape is None:
        from pipesim.program.ir import PipelineShape

        shape = PipelineShape(layout.pp, layout.microbatches, layout.chunks)
    step = max(
        optimizer_step_time(p, layout, chip) + dp_grad_sync(p, layout, chip).gather
        for p in rank_params(model, layout, shape)
    )
    return CostModel(default=default, overrides=overrides, p2p_latency=chip.link_latency,
                     p2p_bandwidth=p2p_bandwidth(layout, chip), optimizer_step=step, time_unit="s")
