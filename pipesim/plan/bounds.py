"""Cheap lower bounds on a configuration's step time and peak memory, computed without building its schedule.

Time: no schedule finishes before its busiest rank has done its own work, and rank ``r`` cannot start before
the first microbatch has gone forward through stages ``0…r−1`` (both placements put stage ``r`` first on
rank ``r``) and crossed their boundaries. So ``T ≥ max_r (Σ_{s<r} (F_s + transfer_s) + busy_r)`` with
``busy_r = m · Σ_{stages of r} (F + B − a2a) + Σ REDUCE_GRAD + STEP`` (an overlapped pair can hide its
all-to-all ``a2a``, 0 for dense models) — the busy-rank bound of Narayanan et al. 2021
§2.2 with the unavoidable warm-up of the first microbatch added — plus the global barrier before the
optimizer, for schedules run with a synchronized step boundary (:mod:`pipesim.analytic.steady_state`). With
post-validation (the zero-bubble schedules) the next step's warm-up overlaps this step's cool-down, so only
``T ≥ max_r busy_r`` holds: every step, every rank does its own work one instruction at a time (whatever
communication the cost model overlaps is already inside the durations).

A mixture-of-experts pass holds its all-to-all (``a2a_forward``/``a2a_backward``), which a schedule that
overlaps one microbatch's forward with another's backward may hide: that part is left out of ``busy``, so
the bound stays below what such a schedule can reach.

Memory: the weights, gradients and optimizer state a rank holds, plus at least one microbatch of activations
of one of its stages (every rank runs a forward and keeps its activations until the backward). Before a time
bound is made, the search tightens it by the schedule's order (:func:`held_microbatches`): the most
stage-microbatches a rank holds at once, each at least its smallest stage's activations (1F1B's first rank
holds pp of them, GPipe's every microbatch), which needs the Program (milliseconds, shared with the
evaluation's) but no cost model.

A floor under the time bound needs no cost model (:func:`time_floor`): the same sum over each stage's layers
alone, their compute and exposed communication (:func:`~pipesim.analytic.to_costs.stage_pass_floors`), with
none of what the cost model adds on top. The search orders candidates by their floors and makes a time bound
only for a candidate the floor cannot rule out, where building its cost model was most of the cost.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from operator import attrgetter

from pipesim.analytic.memory_gib import GIB, static_bytes
from pipesim.analytic.pipeline_buffers import check_runtime_buffers
from pipesim.analytic.steady_state import StepBoundary, sync_latency
from pipesim.analytic.to_costs import (
    check_layout,
    rank_end_params,
    rank_expert_params,
    rank_params,
    stage_breakdowns,
    stage_pass_floors,
)
from pipesim.errors import PipesimError
from pipesim.plan.evaluate import cost_model, schedule_traits
from pipesim.plan.space import Candidate, PlanRequest
from pipesim.program.build import build_program
from pipesim.program.ir import PipelineShape
from pipesim.program.loader import load_schedule
from pipesim.program.table import table_of
from pipesim.sim.memory import peak_held_counts


@dataclass(frozen=True)
class Bounds:
    time_s: float
    memory_gib: float
    # whether time_s is the floor under the time bound (time_floor), where that alone ruled the candidate out
    time_is_floor: bool = False


def bounds_keys(request: PlanRequest, candidate: Candidate) -> tuple[tuple, tuple]:
    """(floor key, bound key). Candidates with equal bound keys have equal bounds: the bounds see the schedule only
    through its traits and the layout fields the training code sets by schedule
    (:meth:`~pipesim.plan.space.PlanRequest.schedule_settings`: Megatron overlaps the sends of its interleaved
    schedule, not of looped BFS, whose traits are the same). The memory bound and the time floor do not see
    whether the sends overlap (nor how blocking calls are made), so candidates with equal floor keys share those.
    (Plain tuples of every other field: the search makes them per candidate, tens of thousands.)"""
    traits = schedule_traits(candidate.schedule, candidate.chunks)
    overlap_p2p, pipeline_buffers = request.schedule_settings(candidate)
    floor = (traits.placement, traits.boundary, pipeline_buffers, _BUT_SCHEDULE(candidate))
    return floor, (floor, overlap_p2p)


_BUT_SCHEDULE = attrgetter(*(f.name for f in fields(Candidate) if f.name != "schedule"))


@dataclass(frozen=True)
class RankMemory:
    """What the memory bound knows of each rank, in bytes: the weights, gradients and optimizer state it holds,
    and the activations of one microbatch through the smallest of its stages."""

    static: tuple[float, ...]
    one_microbatch: tuple[float, ...]

    def bound_gib(self, held: tuple[int, ...] | None = None) -> float:
        """The bound with ``held[r]`` such microbatches on rank r (:func:`held_microbatches`; None: one each)."""
        if held is None:
            return max(s + a for s, a in zip(self.static, self.one_microbatch, strict=True)) / GIB
        return max(s + k * a for s, k, a in zip(self.static, held, self.one_microbatch, strict=True)) / GIB


def memory_bound(request: PlanRequest, candidate: Candidate) -> float:
    """The memory bound in GiB, from the stage breakdowns alone: no cost model is built, so the search can drop
    a candidate that cannot fit before paying for its time bound. Raises PipesimError for a layout the cost
    model refuses (:func:`~pipesim.analytic.to_costs.check_layout`), as :func:`time_bound` would."""
    return rank_memory(request, candidate).bound_gib()


def rank_memory(request: PlanRequest, candidate: Candidate) -> RankMemory:
    """Each rank's terms of :func:`memory_bound` (which raises as this does)."""
    layout, model = request.layout_of(candidate), request.model_of(candidate)
    check_layout(model, layout, request.chip)
    traits = schedule_traits(candidate.schedule, candidate.chunks)
    shape = PipelineShape(candidate.pp, candidate.microbatches, candidate.chunks, traits.placement)
    v = shape.chunk_share  # DualPipe: a microbatch passes one chunk per rank, a whole rank's share
    # One chunk-stage's activations as CostModel.chunk_costs gives them, the same floats in the same order:
    # a stage's StageCosts has activation 1 and activation_bytes v·(its bytes); a chunk of v > 1 takes 1/v of
    # the activation units and keeps the bytes per unit. Indexed by model slice (the dual placement's stage
    # pp + s is a copy of slice s).
    units = 1.0 if v == 1 else 1.0 / v
    per_slice = [units * ((v * part.activation_bytes) or 0.0) for part in stage_breakdowns(model, layout)]
    params = rank_params(model, layout, shape)
    experts = rank_expert_params(model, layout, shape)
    ends = rank_end_params(model, layout, shape)
    static: dict[tuple[float, float, float], float] = {}  # most ranks hold the same parameters (an even split)
    held, one_microbatch = [], []
    for r, slices in enumerate(shape.slices_by_rank):
        one_microbatch.append(min(per_slice[s] for s in slices))
        key = (params[r], experts[r], ends[r])
        if key not in static:
            static[key] = sum(static_bytes(params[r], layout, model, experts[r], ends[r],
                                           request.chip.fp8_weight_transpose))
        held.append(static[key])
    return RankMemory(tuple(held), tuple(one_microbatch))


def held_microbatches(request: PlanRequest, candidate: Candidate) -> tuple[int, ...] | None:
    """Per rank, the most stage-microbatches the candidate's schedule keeps activations of at once
    (:func:`~pipesim.sim.memory.peak_held_counts`), from its Program, built as its evaluation builds it (and
    shared through the same cache); None for a schedule synthesised per cost model, whose order is not known
    before one is built, or a shape the schedule refuses (its evaluation says so). The memory bound times this
    count per rank is still a bound: at that moment the rank holds at least this many of its smallest stage's
    activations."""
    if synthesised(candidate.schedule):
        return None
    # the shape evaluate.prepare builds: the layout's chunks times its model copies are the candidate's chunks
    # (read from the candidate: making its layout costs more than the lookup)
    return _held_microbatches(candidate.schedule, candidate.pp, candidate.microbatches, candidate.chunks)


@lru_cache(maxsize=4096)
def synthesised(schedule: str) -> bool:
    """Whether ``schedule`` is built per cost model (``zb-auto``): seconds to build, and no order without costs."""
    return bool(load_schedule(schedule).build_options)


@lru_cache(maxsize=4096)
def _held_microbatches(schedule: str, pp: int, microbatches: int, chunks: int) -> tuple[int, ...] | None:
    try:
        program = build_program(schedule, pp, microbatches, chunks, semantics=None).program
    except PipesimError:
        return None
    return peak_held_counts(table_of(program))


def time_bound(request: PlanRequest, candidate: Candidate) -> float:
    """The step-time bound in seconds (module docstring); builds (and caches) the candidate's cost model."""
    layout, model, chip = request.layout_of(candidate), request.model_of(candidate), request.chip
    traits = schedule_traits(candidate.schedule, candidate.chunks)
    shape = PipelineShape(candidate.pp, candidate.microbatches, candidate.chunks, traits.placement)
    costs = cost_model(model, chip, layout, shape)
    # One chunk-stage's costs (a CostModel holds a rank's share of the model; a chunk of v takes 1/v of it).
    stages = costs.shape_costs(shape)
    m = shape.microbatches_per_stage  # DualPipe: half the microbatches pass each stage
    synchronized = traits.boundary is StepBoundary.SYNC
    barrier = sync_latency(layout, chip) if synchronized else 0.0  # the all-reduce before the optimizer
    time = 0.0
    head = 0.0  # Σ_{s<r} (F_s + transfer_s): when rank r can start at the earliest
    for r in range(shape.pp):
        own = [shape.stage(r, c) for c in range(shape.chunks)]
        # An overlapped F-and-B pair may hide its all-to-all (docs/overlap.md): it lasts at least its compute,
        # F + B − a2a, so that is what a bound may count (F + B exactly when there is no all-to-all).
        busy = sum(
            m * (stages[s].forward + stages[s].backward - stages[s].a2a_forward - stages[s].a2a_backward)
            + stages[s].reduce_grad
            for s in own
        )
        time = max(time, (head if synchronized else 0.0) + busy + barrier + costs.optimizer_step)
        head += stages[r].forward - stages[r].a2a_forward + costs.transfer_time(r)
    return time


# The floor sums what the time bound sums, in another order and without the terms that only add: a rounding
# could still put it an ulp above the bound where nothing else differs (pp = 1, no head), so it is shrunk by
# far more than that and far less than any difference that matters.
_FLOOR_MARGIN = 1 - 1e-9


def time_floor(request: PlanRequest, candidate: Candidate) -> float:
    """At most :func:`time_bound` (module docstring), from the stages' pass floors alone: no cost model is built.
    Leaves out the LM head and embedding, the host's issue floor, the sends, the gradient sync, the barrier and
    the optimizer step, each of which only adds to the bound."""
    layout, model = request.layout_of(candidate), request.model_of(candidate)
    traits = schedule_traits(candidate.schedule, candidate.chunks)
    shape = PipelineShape(candidate.pp, candidate.microbatches, candidate.chunks, traits.placement)
    check_runtime_buffers(layout, shape)  # the cost model's one refusal that memory_bound's checks do not make
    floors = stage_pass_floors(model, request.chip, layout)
    m = shape.microbatches_per_stage
    synchronized = traits.boundary is StepBoundary.SYNC
    time = head = 0.0
    for r, slices in enumerate(shape.slices_by_rank):  # rank r's chunks' model slices, as time_bound's stages
        busy = 0.0
        for s in slices:
            busy += m * (floors[s].forward + floors[s].backward)
        time = max(time, (head if synchronized else 0.0) + busy)
        head += floors[shape.slice_of(r)].forward
    return time * _FLOOR_MARGIN
