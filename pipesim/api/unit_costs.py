"""Abstract (or calibrated) costs from a costs file and per-field overrides; the shape a build will have; the
activation limit of a memory-aware schedule in activation units."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from pipesim.api.defaults import DEFAULT_MICROBATCHES, DEFAULT_PP
from pipesim.errors import PipesimError
from pipesim.program.ir import PipelineShape, Placement
from pipesim.program.loader import ScheduleSource
from pipesim.sim.costs import CostModel

__all__ = ["GIB", "memory_limit_units", "planned_shape", "unit_cost_model"]

GIB = 2.0**30

#: Argument name → field of ``StageCosts`` that a plain number overrides.
COST_FIELDS = ("forward", "backward", "backward_input", "backward_weight", "activation_bytes")


def unit_cost_model(num_stages: int, costs: str | Path | CostModel | None = None, *,
                    forward: float | None = None, backward: float | None = None,
                    backward_input: float | None = None, backward_weight: float | None = None,
                    comm: float | None = None, activation_bytes: float | None = None,
                    stage_cost: Mapping[int, Mapping[str, float]] | Iterable[tuple[int, Mapping[str, float]]] = (),
                    ) -> CostModel:
    """The costs file (or the unit defaults), checked against the pipeline's ``num_stages``, with the given
    values on top.

    Args:
        num_stages: pp·v of the pipeline the costs are for (a calibrated file must match it).
        costs: a costs file path (.json/.yaml) or a :class:`~pipesim.sim.costs.CostModel`; None: unit costs.
        forward: the default stage's forward time F.
        backward: its fused backward time B.
        backward_input: its split backward's input-gradient time I.
        backward_weight: its split backward's weight-gradient time W.
        comm: P2P latency per transfer.
        activation_bytes: bytes of one microbatch's activations through a rank's share of the model.
        stage_cost: per-stage overrides, ``{stage: {field: value}}`` or ``(stage, {field: value})`` pairs.
    """
    model = CostModel()
    if isinstance(costs, CostModel):
        model = costs
        model.check_pipeline(num_stages, source="costs")
    elif costs:
        model = CostModel.load(costs)
        model.check_pipeline(num_stages, source=f"costs file {costs}")
    values = {"forward": forward, "backward": backward, "backward_input": backward_input,
              "backward_weight": backward_weight, "activation_bytes": activation_bytes}
    values = {k: v for k, v in values.items() if v is not None}
    if values:
        model = replace(model, default=replace(model.default, **values))
    if comm is not None:
        model = replace(model, p2p_latency=comm)
    pairs = stage_cost.items() if isinstance(stage_cost, Mapping) else stage_cost
    overrides: dict[int, dict[str, float]] = {}
    for stage, fields_ in pairs:
        overrides.setdefault(stage, {}).update(fields_)
    if overrides:
        bad = [s for s in overrides if s >= num_stages]
        if bad:
            raise PipesimError(f"--stage-cost names stage {bad[0]}, but this pipeline has stages 0..{num_stages - 1}")
        model = model.with_overrides(overrides, source="--stage-cost")
    return model


def planned_shape(source: ScheduleSource, pp: int | None, mb: int | None, chunks: int | None) -> PipelineShape:
    """The shape a build will have, known before building (cost-aware schedules need costs for it first)."""
    fixed = source.fixed_shape
    if fixed is not None:
        return fixed
    chunks = chunks or source.default_chunks
    return PipelineShape(pp or DEFAULT_PP, mb or DEFAULT_MICROBATCHES, chunks,
                         Placement.LOOP if chunks == 1 else Placement.V)


def memory_limit_units(limit: float | None, costs: CostModel, shape: PipelineShape, with_model: bool):
    """A memory limit in activation units; with a model it was GiB, and each unit has known bytes."""
    if limit is None or not with_model:
        return limit
    unit_bytes = max(costs.stage(s).activation_bytes or 0.0 for s in range(shape.num_slices))
    if unit_bytes <= 0:
        raise PipesimError("--memory-limit in GiB needs the activation bytes of a stage, which this model lacks")
    return limit * GIB / unit_bytes
