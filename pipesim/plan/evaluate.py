"""The one narrow interface between the planner and the models: a configuration → what it costs.

:func:`evaluate` takes a model, a chip, a :class:`~pipesim.analytic.layout.Layout` and a schedule name and
returns the steady-state step time, tokens/s per GPU, MFU, peak GiB and the rank that holds it, and the
bubble — by building the schedule's real Program, timing it with the analytic cost model (:func:`build_cost_model`) and
simulating it. Everything the planner knows about costs and memory comes through this module, so the
cost/memory model and the simulator can change underneath without the search noticing.

:func:`peak_memory` is the adapter that gives a configuration's exact per-rank memory *without* simulating:
activation memory depends only on each rank's instruction order (F stores, B/I/W free; Qi et al. 2024), never
on timing, so :func:`pipesim.analytic.memory_gib.memory_report` is handed a result whose times are all zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.layout import Layout
from pipesim.analytic.memory_gib import GIB, MemoryReport, memory_report
from pipesim.analytic.model_spec import ModelSpec
from pipesim.analytic.steady_state import StepBoundary, default_boundary, steady_state_step_time, sync_latency
from pipesim.analytic.step_report import step_report
from pipesim.analytic.to_costs import build_cost_model
from pipesim.program.build import build_program
from pipesim.program.ir import PipelineShape, Placement, Program
from pipesim.program.table import first_step_rows, table_of
from pipesim.sim.costs import CostModel
from pipesim.sim.graph_engine import warm_up
from pipesim.sim.memory import MemoryProfile
from pipesim.sim.simulator import SimulationResult, async_tails_of, durations_of, simulate


@dataclass(frozen=True)
class Evaluation:
    """What one configuration costs per training step (the planner's ranking inputs)."""

    step_time: float  # s
    tokens_per_s_per_gpu: float
    mfu: float  # model FLOPs utilization (PaLM convention; no recomputation counted)
    peak_gib: float  # the most memory any GPU needs
    peak_rank: int  # the pipeline rank that needs it
    bubble_fraction: float  # 1 − Σ busy / (pp · T)

    def to_dict(self) -> dict:
        return {
            "step_time_s": self.step_time,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "mfu": self.mfu,
            "peak_gib": self.peak_gib,
            "peak_rank": self.peak_rank,
            "bubble_fraction": self.bubble_fraction,
        }


@dataclass(frozen=True)
class ScheduleTraits:
    """What the bounds need to know of a schedule without building it at full size."""

    placement: Placement
    boundary: StepBoundary  # how it runs steps back to back (as ``pipesim simulate --model`` does)


@lru_cache(maxsize=128)
def schedule_traits(schedule: str, chunks: int) -> ScheduleTraits:
    """Placement and step boundary, read from a small build (neither depends on pp or microbatches)."""
    program = build_program(schedule, 2, 4, chunks, semantics=None).program
    return ScheduleTraits(program.shape.placement, default_boundary(program))


@dataclass(frozen=True)
class Prepared:
    """A configuration's Program and CostModel, built once and used by the memory check and the simulation."""

    program: Program
    costs: CostModel


# Cost models by (chip, model, layout, shape): a cost model sees the schedule only through its placement, so
# the bound of a candidate and the simulation of every schedule with that placement share one. Bounded,
# oldest dropped first; the chip is kept in the value, so its id in the key cannot be reused while it is.
_COST_MODELS: dict[tuple, tuple[ChipSpec, CostModel]] = {}
_COST_MODELS_KEPT = 1 << 15


def cost_model(model: ModelSpec, chip: ChipSpec, layout: Layout, shape: PipelineShape) -> CostModel:
    """:func:`build_cost_model`, cached (all four are frozen values; the chip, which may hold tables, by id)."""
    key = (id(chip), model, layout, shape)
    hit = _COST_MODELS.get(key)
    if hit is not None:
        return hit[1]
    costs = build_cost_model(model, chip, layout, shape)
    if len(_COST_MODELS) >= _COST_MODELS_KEPT:
        del _COST_MODELS[next(iter(_COST_MODELS))]
    _COST_MODELS[key] = (chip, costs)
    return costs


def prepare(model: ModelSpec, chip: ChipSpec, layout: Layout, schedule: str) -> Prepared:
    """Build (statically validate, cached per shape) the schedule and its cost model in seconds."""
    # The schedule's chunks per rank: the layout's v, times DualPipe's two copies (each chunk one slice).
    chunks = layout.chunks * layout.model_copies
    built = build_program(schedule, layout.pp, layout.microbatches, chunks, semantics=None)
    shape = built.program.shape
    return Prepared(built.program, cost_model(model, chip, layout, shape))


def exact_memory(model: ModelSpec, chip: ChipSpec, layout: Layout, prepared: Prepared) -> MemoryReport:
    """Every rank's exact memory, from the instruction order alone (no simulation): the very report a
    simulation of this configuration gives, so :func:`evaluate_prepared` takes it instead of making it again."""
    program, costs = prepared.program, prepared.costs
    table = table_of(program)
    zeros = np.zeros(table.num_rows)
    result = SimulationResult(table, costs, zeros, zeros, zeros)
    # The activation profile follows from the order and each stage's activation values (and what its runtime holds
    # to the step's end) alone, so candidates
    # sharing both (e.g. ZeRO stages, which change only the static bytes) share one; it is handed to the
    # result as its own cached `memory` would be.
    stages = [costs.chunk_costs(s, program.shape.chunks) for s in range(program.shape.num_stages)]
    key = (id(program), tuple((c.activation, c.weight_grad_activation, c.activation_bytes, c.held_to_step_end)
                              for c in stages))
    hit = _PROFILES.get(key)
    if hit is None:
        if len(_PROFILES) >= _PROFILES_KEPT:
            del _PROFILES[next(iter(_PROFILES))]
        hit = _PROFILES[key] = (program, result.memory)
    result.__dict__["memory"] = hit[1]
    return memory_report(model, chip, layout, result)


# Activation profiles by (Program, per-stage activation values); the Program is kept in the value, so its id
# in the key cannot be reused while the entry lives. Bounded, oldest dropped first.
_PROFILES: dict[tuple, tuple[Program, MemoryProfile]] = {}
_PROFILES_KEPT = 1024


def peak_memory(model: ModelSpec, chip: ChipSpec, layout: Layout, prepared: Prepared) -> tuple[float, int]:
    """Exact peak GiB and its pipeline rank, from the instruction order alone (no simulation)."""
    peak = exact_memory(model, chip, layout, prepared).peak
    return peak.total / GIB, peak.rank


# Timelines by (Program, every instruction's duration): configurations that differ only in what does not
# change a duration (e.g. sequence parallelism's memory, or ZeRO-3's optimizer sharding under a pipeline) get
# the very same timeline and steady-state period, so they are simulated once. Bounded, oldest dropped first.
_TIMELINES: dict[tuple, tuple[SimulationResult, float]] = {}
_TIMELINES_KEPT = 256


_ENGINE_WARM: list[bool] = []
STEADY_STEPS = 3  # steps simulated back to back for the steady state (steady_state_step_time's default)


def warm_engine() -> None:
    """A search simulates thousands of Programs: load the compiled engine once per process (workers too)."""
    if not _ENGINE_WARM:
        warm_up()
        _ENGINE_WARM.append(True)


def _timed(prepared: Prepared, layout: Layout, chip: ChipSpec) -> tuple[SimulationResult, float, StepBoundary]:
    """One step's simulation (timeline, bubble, memory) and the steady-state seconds per step."""
    warm_engine()
    program, costs = prepared.program, prepared.costs
    boundary = default_boundary(program)
    table = table_of(program)
    durations = durations_of(table, costs)
    tails = async_tails_of(table, costs)
    barrier = sync_latency(layout, chip)
    key = (program.name, program.shape, boundary, barrier, durations.tobytes(),
           None if tails is None else tails.tobytes())
    hit = _TIMELINES.get(key)
    if hit is not None:
        first, period = hit
        result = SimulationResult(table, costs, first.start, first.end, durations, waited=first.waited)
        # The same timeline has the same metrics (they read the table, starts and ends alone): computed once,
        # handed over as the result's own cached `metrics`.
        result.__dict__["metrics"] = first.metrics
        return result, period, boundary
    # The deadlock proof is the simulation itself; build_program already ran the static checks.
    if boundary is StepBoundary.POST_VALIDATION:
        # Nothing crosses steps but each rank's own order and links (no barrier), so the first of the
        # back-to-back steps is timed exactly as the lone step: one simulation gives both.
        steps = simulate(program, costs, check=False, steps=STEADY_STEPS, boundary=boundary)
        first = first_step_rows(table, STEADY_STEPS)
        waited = None if steps.waited is None else steps.waited[first]
        result = SimulationResult(table, costs, steps.start[first], steps.end[first], durations, waited=waited)
        period = steps.step_time
    else:
        result = simulate(program, costs, check=False)
        period = steady_state_step_time(result, boundary, barrier, STEADY_STEPS)
    if len(_TIMELINES) >= _TIMELINES_KEPT:
        del _TIMELINES[next(iter(_TIMELINES))]
    _TIMELINES[key] = (result, period)
    return result, period, boundary


def evaluate_prepared(
    model: ModelSpec, chip: ChipSpec, layout: Layout, prepared: Prepared, memory: MemoryReport | None = None
) -> Evaluation:
    """``memory``: :func:`exact_memory` of this configuration, when the caller made it already."""
    # Steps back to back, each schedule with its own boundary, as `pipesim simulate --model` reports.
    result, period, boundary = _timed(prepared, layout, chip)
    report = step_report(model, chip, layout, result, period, boundary, memory)
    peak = report.memory.peak
    return Evaluation(
        report.step_time,
        report.tokens_per_second / layout.world_size,
        report.mfu,
        peak.total / GIB,
        peak.rank,
        report.bubble_fraction,
    )


def communication_share(model: ModelSpec, chip: ChipSpec, layout: Layout, schedule: str) -> float:
    """The share of the steady step its busiest rank waits on communication
    (:attr:`~pipesim.analytic.time_breakdown.RankTime.communication_share`). Not part of the search, which never
    splits a step into its parts: asked for the few configurations a plan lists (their builds and timelines are
    cached by then)."""
    prepared = prepare(model, chip, layout, schedule)
    result, period, boundary = _timed(prepared, layout, chip)
    busiest = step_report(model, chip, layout, result, period, boundary).busiest
    return 0.0 if busiest is None else busiest.communication_share


def evaluate(model: ModelSpec, chip: ChipSpec, layout: Layout, schedule: str) -> Evaluation:
    """Simulate one step of ``schedule`` for ``model`` on ``chip`` split as ``layout``."""
    return evaluate_prepared(model, chip, layout, prepare(model, chip, layout, schedule))
