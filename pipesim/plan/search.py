"""The search: enumerate, prune by lower bounds, simulate the survivors with their real schedules, rank.

Order of work, cheapest first:

1. every candidate gets its memory bound and a floor under its time bound (:mod:`.bounds`, no schedule and
   no cost model built); those whose memory bound exceeds the cap cannot fit and are dropped;
2. the rest are taken in order of their time bound, in batches (of one when the search runs in this process,
   so each candidate meets every result before it). The order is kept lazily: a candidate waits
   by its floor, and only when no other can come before it is its time bound made (its cost model built)
   and the candidate put back by the bound; one the frontier rules out already at its floor is dropped
   without either. Before the time bound is made, the memory bound is tightened by the schedule's order (the
   most microbatches each rank holds at once, :func:`.bounds.held_microbatches`: its Program, built as the
   evaluation builds it, no cost model), which drops most configurations that would not fit before they cost
   a cost model. Since floor ≤ bound, candidates leave in exactly the order of their bounds, and each is
   dropped or kept as the eager order would have. For each kept, the schedule is built and its exact
   per-rank memory read from the instruction order (:func:`.evaluate.exact_memory`); a configuration over the
   cap stops there, and so does one the test below rules out with that exact peak in place of its memory
   bound; the rest are simulated;
3. between batches, a candidate is dropped when it can neither enter the top ``top`` (simulated
   configurations that fit already take ``top`` distinct step times at most its time bound, the ranking
   listing one configuration per step time: a bubble that cannot win) nor the Pareto front (one of them is
   also at most its memory bound). So the top list and the Pareto front are exactly those of a search that
   simulated everything.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from pipesim.analytic.allocator import reserved_peak
from pipesim.analytic.memory_gib import GIB
from pipesim.errors import PipesimError
from pipesim.plan.bounds import (
    Bounds,
    RankMemory,
    bounds_keys,
    held_microbatches,
    rank_memory,
    synthesised,
    time_bound,
    time_floor,
)
from pipesim.plan.evaluate import Evaluation, evaluate_prepared, exact_memory, prepare
from pipesim.plan.pareto import pareto_mask
from pipesim.plan.space import Candidate, PlanRequest, enumerate_candidates
from pipesim.plan.uncertainty import (
    band_of,
    groups_of_candidate,
    held_out_kinds_of_candidate,
    near_cap,
    overlaps_best,
    validated_layout,
)
from pipesim.plan.workers import Workers

if TYPE_CHECKING:
    import pandas as pd


class Status(Enum):
    SIMULATED = "simulated"
    OVER_MEMORY = "over memory"  # exact schedule memory above the cap; not simulated
    REJECTED = "rejected"  # the schedule or the cost model refuses this shape (a one-line reason is kept)
    PRUNED_MEMORY = "pruned: memory bound"
    PRUNED_TIME = "pruned: cannot win"


@dataclass(frozen=True)
class Outcome:
    candidate: Candidate
    bounds: Bounds
    status: Status
    evaluation: Evaluation | None = None
    peak_gib: float | None = None  # exact, when the schedule was built
    peak_rank: int | None = None
    reason: str | None = None

    def row(self, cap_gib: float, capacity_gib: float) -> dict:
        """The -o file's row; ``cap_gib`` the plan's memory cap, ``capacity_gib`` the device's (the reserved peak's
        bound)."""
        row = {
            "label": self.candidate.label(),
            **self.candidate.to_dict(),
            "status": self.status.value,
            "bound_step_time_s": self.bounds.time_s,
            "bound_step_time_is_floor": self.bounds.time_is_floor,  # the floor alone ruled it out (docs/plan.md)
            "bound_peak_gib": self.bounds.memory_gib,
            "step_time_s": None,
            "tokens_per_s_per_gpu": None,
            "mfu": None,
            "peak_gib": self.peak_gib,
            "peak_rank": self.peak_rank,
            "bubble_fraction": None,
        }
        if self.evaluation is not None:
            row.update(self.evaluation.to_dict())
        row["fits"] = row["peak_gib"] is not None and row["peak_gib"] <= cap_gib
        # what the caching allocator would hold at that peak (torch.cuda.max_memory_reserved; analytic.allocator)
        row["peak_reserved_gib"] = (None if row["peak_gib"] is None
                                    else reserved_peak(row["peak_gib"], capacity_gib))
        return row


@dataclass(frozen=True)
class _Job:
    """What a worker needs to evaluate one candidate (picklable, for processes and Dask)."""

    request: PlanRequest
    candidate: Candidate
    bounds: Bounds
    # the simulated configurations as the batch began and the ranking's length: one whose exact peak already
    # rules it out is not simulated (None: every one that fits is)
    frontier: _FrontierView | None = None
    top: int = 0


def _run_job(job: _Job) -> Outcome:
    req, c = job.request, job.candidate
    layout, model = req.layout_of(c), req.model_of(c)
    try:
        prepared = prepare(model, req.chip, layout, c.schedule)
    except PipesimError as err:  # the schedule refuses the shape (e.g. interleaved needs m % pp == 0)
        return Outcome(c, job.bounds, Status.REJECTED, reason=str(err))
    memory = exact_memory(model, req.chip, layout, prepared)
    peak = memory.peak
    if peak.total / GIB > req.cap_gib:
        return Outcome(c, job.bounds, Status.OVER_MEMORY, peak_gib=peak.total / GIB, peak_rank=peak.rank)
    if job.frontier is not None and job.frontier.outranked(job.bounds.time_s, peak.total / GIB, job.top):
        # its memory bound (the smallest stage's activations, as many as the order holds) let it through; its
        # exact peak does not
        return Outcome(c, job.bounds, Status.PRUNED_TIME, peak_gib=peak.total / GIB, peak_rank=peak.rank)
    evaluation = evaluate_prepared(model, req.chip, layout, prepared, memory)
    return Outcome(c, job.bounds, Status.SIMULATED, evaluation, evaluation.peak_gib, evaluation.peak_rank)


@dataclass(frozen=True)
class PlanResult:
    request: PlanRequest
    outcomes: tuple[Outcome, ...]

    def count(self, *statuses: Status) -> int:
        return sum(o.status in statuses for o in self.outcomes)

    @property
    def considered(self) -> int:
        return len(self.outcomes)

    @property
    def pruned(self) -> int:
        return self.count(Status.PRUNED_MEMORY, Status.PRUNED_TIME, Status.OVER_MEMORY)

    def fitting(self) -> list[Outcome]:
        """Simulated configurations within the cap, fastest first (ties: less memory, then the fields)."""
        ok = [o for o in self.outcomes if o.status is Status.SIMULATED]
        return sorted(ok, key=lambda o: (o.evaluation.step_time, o.evaluation.peak_gib, o.candidate.key()))

    def pareto(self) -> list[Outcome]:
        ok = self.fitting()
        if not ok:
            return []
        times = np.array([o.evaluation.step_time for o in ok])
        mask = pareto_mask(times, np.array([o.evaluation.peak_gib for o in ok]))
        return [o for o, keep in zip(ok, mask, strict=True) if keep]

    def frame(self) -> pd.DataFrame:
        """Every candidate, simulated or not, one row each (the -o file)."""
        import pandas as pd  # only for the frame: a plan that prints its ranking never loads pandas

        front = {id(o) for o in self.pareto()}
        ranked = self.fitting()
        close = {id(o) for o, near in zip(ranked, overlaps_best(ranked, self.request.chip), strict=True) if near}
        rows = [
            o.row(self.request.cap_gib, self.request.chip.memory_gib)
            | {
                "pareto": id(o) in front,
                "overlap_p2p": self.request.sends_overlap(o.candidate),
                "overlap_dp_sync": self.request.overlap_dp_sync,
                "fp8_params": self.request.fp8_params_of(o.candidate).value,
                "step_time_band": band_of(o, self.request.chip),
                "within_band_of_best": id(o) in close,
                "may_not_fit": near_cap(o, self.request.cap_gib),
                "validated_layout": validated_layout(o, self.request.model.is_moe),
                "step_groups": ",".join(sorted(g.value for g in groups_of_candidate(o))),
                "held_out_kinds": ",".join(sorted(k.value for k in held_out_kinds_of_candidate(o, self.request))),
            }
            for o in self.outcomes
        ]
        return pd.DataFrame(rows)


class _Frontier:
    """The simulated configurations that fit, for the pruning tests: their distinct step times, sorted, and their
    staircase (the fastest ones whose peak no faster one beats: sorted by step time, peaks falling), which gives
    the least peak of all those at most a given step time. Both grow by a bisection per add; the tests then cost
    a bisection each (where a view of every configuration's running minimum, rebuilt after each add, made a
    search that simulates thousands quadratic)."""

    def __init__(self) -> None:
        self.distinct_times: list[float] = []
        self.stair_times: list[float] = []
        self.stair_peaks: list[float] = []  # strictly falling along stair_times
        self._view: _FrontierView | None = None

    def add(self, time: float, peak: float) -> None:
        i = bisect.bisect_left(self.distinct_times, time)
        if i == len(self.distinct_times) or self.distinct_times[i] != time:
            self.distinct_times.insert(i, time)
        i = bisect.bisect_right(self.stair_times, time)
        if i == 0 or self.stair_peaks[i - 1] > peak:  # no configuration as fast needs as little memory
            end = i
            while end < len(self.stair_peaks) and self.stair_peaks[end] >= peak:  # slower and no leaner
                end += 1
            self.stair_times[i:end] = [time]
            self.stair_peaks[i:end] = [peak]
        self._view = None

    def view(self) -> _FrontierView:
        """The tests' data as of now, made again only when asked after an add: a snapshot a worker process can
        take (the tests run tens of thousands of times between the few thousand adds)."""
        if self._view is None:
            self._view = _FrontierView(tuple(self.distinct_times), tuple(self.stair_times), tuple(self.stair_peaks))
        return self._view

    def cannot_matter(self, bounds: Bounds, top: int) -> bool:
        return self.view().cannot_matter(bounds, top)


@dataclass(frozen=True)
class _FrontierView:
    """The simulated configurations that fit: their distinct step times, sorted, and their staircase of least
    peaks (:class:`_Frontier`)."""

    distinct_times: tuple[float, ...]
    stair_times: tuple[float, ...]
    stair_peaks: tuple[float, ...]

    def _least_peak_if_enough(self, time: float, top: int) -> float | None:
        """The least peak of the configurations at most ``time``, where those hold ``top`` distinct step times;
        else None."""
        fastest = bisect.bisect_right(self.stair_times, time)
        if fastest == 0 or bisect.bisect_right(self.distinct_times, time) < top:
            return None
        return self.stair_peaks[fastest - 1]

    def cannot_matter(self, bounds: Bounds, top: int) -> bool:
        """At least ``top`` distinct step times are no slower than the bound (the ranking lists ``top`` distinct
        ones, an exact tie needing more memory left out: :func:`~pipesim.plan.ranking.distinct_top`), and one of
        the configurations that fast also needs no more memory than the memory bound."""
        least = self._least_peak_if_enough(bounds.time_s, top)
        return least is not None and least <= bounds.memory_gib

    def outranked(self, time_bound: float, peak_gib: float, top: int) -> bool:
        """As :meth:`cannot_matter`, for a configuration whose exact peak is known: one of those as fast as its
        bound needs less memory (strictly: an exact tie on both axes is left to the front, which keeps one)."""
        least = self._least_peak_if_enough(time_bound, top)
        return least is not None and least < peak_gib


def run_plan(
    request: PlanRequest,
    *,
    top: int = 10,
    workers: Workers | None = None,
    progress: Callable[[int], None] | None = None,
    on_queue: Callable[[int], None] | None = None,
) -> PlanResult:
    """Search ``request``'s space. ``on_queue(n)``: how many candidates survived the memory bound (the
    progress total); ``progress(k)``: k more of them were decided (simulated, or pruned on the way)."""
    workers = workers or Workers()
    candidates = list(enumerate_candidates(request))
    outcomes: list[Outcome] = []
    # (candidate, its bound key, memory bound and time floor, the memory bound's terms per rank)
    queue: list[tuple[Candidate, tuple, Bounds, RankMemory]] = []
    floors: dict[tuple, tuple[Bounds, RankMemory] | str] = {}
    for c in candidates:
        floor_key, key = bounds_keys(request, c)
        if floor_key not in floors:
            try:
                # The memory bound needs no cost model, nor does the floor: a candidate the memory bound drops
                # never pays for a time bound (left NaN in its row: not computed).
                ranks = rank_memory(request, c)
                memory = ranks.bound_gib()
                floors[floor_key] = (Bounds(time_floor(request, c) if memory <= request.cap_gib else float("nan"),
                                            memory), ranks)
            except PipesimError as err:  # the cost model refuses the layout: kept, with its reason
                floors[floor_key] = str(err)
        made_floor = floors[floor_key]
        if isinstance(made_floor, str):
            outcomes.append(Outcome(c, Bounds(float("nan"), float("nan")), Status.REJECTED, reason=made_floor))
            continue
        b, ranks = made_floor
        if b.memory_gib > request.cap_gib:
            outcomes.append(Outcome(c, b, Status.PRUNED_MEMORY))
        else:
            queue.append((c, key, b, ranks))
    if on_queue:
        on_queue(len(queue))
    # Schedules synthesised per shape (zb-auto) cost seconds to build where a fixed order costs milliseconds:
    # they go after every other candidate, so they meet the tightest frontier and most are pruned unbuilt.
    # Any order gives the same top list and front; pruning only ever needs `top` simulated configurations.
    # (synthesised last, time, memory, candidate key, enumeration index, whether the time is the bound); the
    # index breaks ties as a stable sort of the enumeration would, and nothing after it is ever compared
    heap = [(synthesised(c.schedule), b.time_s, b.memory_gib, c.key(), i, False)
            for i, (c, _, b, _) in enumerate(queue)]
    heapq.heapify(heap)
    bounds: dict[tuple, float | str] = {}  # time bounds made, by bound key
    frontier = _Frontier()
    batch_size = 1 if workers.width == 1 else max(16, 8 * workers.width)
    while heap:
        batch: list[_Job] = []
        while heap and len(batch) < batch_size:
            last, time, memory, ckey, i, is_bound = heapq.heappop(heap)
            c, key, _, ranks = queue[i]
            if not is_bound and (held := held_microbatches(request, c)) is not None:
                # Before paying for a time bound: the memory bound with the schedule's microbatches in flight
                memory = max(memory, ranks.bound_gib(held))
            b = Bounds(time, memory, time_is_floor=not is_bound)
            if memory > request.cap_gib:  # (only ever after the tightening: the queue held those that fit)
                outcomes.append(Outcome(c, b, Status.PRUNED_MEMORY))
                if progress:
                    progress(1)
            elif frontier.cannot_matter(b, top):  # ruled out at its floor, so at its bound (no lower) too
                outcomes.append(Outcome(c, b, Status.PRUNED_TIME))
                if progress:
                    progress(1)
            elif not is_bound:
                made = bounds.get(key)
                if made is None:
                    try:
                        made = bounds[key] = time_bound(request, c)
                    except PipesimError as err:
                        made = bounds[key] = str(err)
                if isinstance(made, str):
                    outcomes.append(Outcome(c, Bounds(float("nan"), memory), Status.REJECTED, reason=made))
                    if progress:
                        progress(1)
                else:
                    heapq.heappush(heap, (last, made, memory, ckey, i, True))
            else:
                batch.append(_Job(request, c, b, frontier.view(), top))
        for job, outcome in zip(batch, workers.map_in_order(_run_job, batch, progress), strict=True):
            if outcome.candidate is not job.candidate:  # a worker process sent back an equal copy
                outcome = replace(outcome, candidate=job.candidate)
            outcomes.append(outcome)
            if outcome.status is Status.SIMULATED:
                frontier.add(outcome.evaluation.step_time, outcome.evaluation.peak_gib)
    # Back to enumeration order. By identity: every outcome holds one of these very candidates (the copies
    # from workers were swapped back above), and hashing
    # tens of thousands of 13-field dataclasses (enums among them) costs more than the rest of this loop.
    order = {id(c): i for i, c in enumerate(candidates)}
    outcomes.sort(key=lambda o: order[id(o.candidate)])
    return PlanResult(request, tuple(outcomes))
