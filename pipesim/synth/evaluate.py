"""Score a candidate compute order exactly as fast as possible: every pass starts as soon as its rank is free and
its input has arrived (the simulator's semantics for one order), then spans, makespan and peak memory follow.

The objective is the paper's (Qi et al. 2024, Appendix G, Eq. 3): the longest stage span, first ``F`` start to
last pass end on one rank; the makespan breaks ties. A candidate that cannot finish (a rank waits for a pass
that comes later in another rank's order) or that exceeds the memory limit is infeasible.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.synth.problem import SynthesisProblem, Task

Orders = list[list[Task]]


@dataclass(frozen=True)
class Evaluation:
    """The timing of one candidate order."""

    completes: bool
    max_span: float
    makespan: float
    total_span: float  # Σ spans: a tie-breaker that rewards shortening ranks off the critical one
    peaks: tuple[float, ...]  # peak held activations per rank
    within_limit: bool
    start: dict[Task, float]
    end: dict[Task, float]

    @property
    def feasible(self) -> bool:
        return self.completes and self.within_limit

    @property
    def key(self) -> tuple[float, float, float]:
        """Smaller is better; infeasible candidates sort last."""
        if not self.feasible:
            return (float("inf"), float("inf"), float("inf"))
        return (round(self.max_span, 9), round(self.makespan, 9), round(self.total_span, 9))


def evaluate(problem: SynthesisProblem, orders: Orders) -> Evaluation:
    """Times of every task of ``orders`` (one list per rank) when each starts as soon as it can.

    A pass's output crosses to another rank as one transfer on that directed link; transfers on one link run
    one after another in the sender's order (as in the simulator: V placement shares a link between chunk-0
    activations and chunk-1 gradients).
    """
    pp = problem.pp
    end: dict[Task, float] = {}
    arrival: dict[Task, float] = {}  # when a pass's output reaches the rank of its cross-rank consumer
    link_free: dict[tuple[int, int], float] = {}
    start: dict[Task, float] = {}
    position = [0] * pp
    clock = [0.0] * pp
    remaining = sum(len(o) for o in orders)
    passes = problem.pass_table  # one lookup per task instead of several method calls (problem.py)
    while remaining:
        progressed = False
        for rank in range(pp):
            order = orders[rank]
            i, t = position[rank], clock[rank]
            while i < len(order):
                task = order[i]
                info = passes.get(task)
                if info is None:  # not a task of this problem's shape (a malformed order): as it was asked
                    info = problem.pass_info(task)
                pred, delayed, pred_rank, duration, consumer_rank, transfer, _ = info
                if pred is not None:
                    ready = arrival.get(pred) if delayed or pred_rank != rank else end.get(pred)
                    if ready is None:
                        break
                    if ready > t:
                        t = ready
                start[task] = t
                t += duration
                end[task] = t
                if consumer_rank is not None and consumer_rank != rank:
                    link = (rank, consumer_rank)
                    sent = max(t, link_free.get(link, 0.0))
                    arrival[task] = link_free[link] = sent + transfer
                i += 1
            if i != position[rank]:
                progressed = True
                remaining -= i - position[rank]
                position[rank], clock[rank] = i, t
        if not progressed:
            return Evaluation(False, float("inf"), float("inf"), float("inf"), (), False, start, end)
    peaks = tuple(_peak(problem, order, start, end) for order in orders)
    spans = [(end[o[-1]] - start[o[0]]) if o else 0.0 for o in orders]
    makespan = max(clock) - min((start[o[0]] for o in orders if o), default=0.0)
    within = all(problem.fits(p) for p in peaks)
    return Evaluation(True, max(spans), makespan, sum(spans), peaks, within, start, end)


def _peak(problem: SynthesisProblem, order: list[Task], start: dict[Task, float], end: dict[Task, float]) -> float:
    # Passes of one rank run in order, so program order is time order: F adds at its start, I/W free at their end.
    passes = problem.pass_table
    level = peak = 0.0
    for task in order:
        info = passes.get(task)
        level += (info if info is not None else problem.pass_info(task))[6]
        if level > peak:
            peak = level
    return peak


def peak_levels(problem: SynthesisProblem, orders: Orders) -> tuple[float, ...]:
    """Peak held activations per rank of an order (timing-independent)."""
    return tuple(_peak(problem, order, {}, {}) for order in orders)
