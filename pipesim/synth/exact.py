"""The exact model (Qi et al. 2024, Appendix G, as CP-SAT instead of their ILP): order, end times and per-rank
memory of every pass, minimising the longest stage span, warm-started from the heuristic's order.

Times are integers (costs scaled by ``resolution`` per time unit and rounded up, so a solution is feasible
for the true costs too: the final order is re-timed exactly by the evaluator). Per rank, passes are
intervals under one NoOverlap; F→F and I→I across stages wait for the transfer; W after its I; same-kind
passes of one stage keep microbatch order (the paper's graph does the same). Memory is a reservoir per rank:
``+M_B`` at an F's start, ``−(M_B−M_W)`` at an I's end, ``−M_W`` at a W's end, never above the limit. Each
rank's first forward starts as soon as its input arrives, so the solver cannot shorten a span by starting
late — the evaluator, which times a given order as soon as possible, agrees with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipesim.synth.evaluate import Evaluation, Orders, evaluate
from pipesim.synth.problem import Pass, SynthesisProblem, Task

MEMORY_SCALE = 1000  # reservoir levels are integers: memory in thousandths of M_B (rounded so the limit is kept)


@dataclass(frozen=True)
class ExactResult:
    orders: Orders
    evaluation: Evaluation
    optimal: bool  # the solver proved no order is better (for the scaled integer costs)
    lower_bound: float  # the solver's bound on the longest span, in time units
    status: str


def solve_exact(
    problem: SynthesisProblem, hint: Orders | None = None, *, seconds: float = 10.0, workers: int = 2,
    resolution: float | None = None,
) -> ExactResult | None:
    """Solve with CP-SAT within ``seconds``; None when it finds no solution in time (or ortools is missing)."""
    try:
        from ortools.sat.python import cp_model
    except ImportError:  # optional dependency: the heuristic works without it
        return None
    p = problem
    scale = resolution or _resolution(p)
    dur = {}
    tasks = [Task(kind, s, mb) for kind in Pass for s in range(p.num_stages) for mb in range(p.microbatches)]
    for t in tasks:
        dur[t] = math.ceil(p.duration(t) * scale - 1e-9)
    horizon = sum(dur.values()) + sum(math.ceil(x * scale) for x in p.transfer) * p.microbatches * 2 + 1
    model = cp_model.CpModel()
    start = {t: model.NewIntVar(0, horizon, f"s{t.kind.name}{t.stage}_{t.mb}") for t in tasks}
    end = {t: model.NewIntVar(0, horizon, f"e{t.kind.name}{t.stage}_{t.mb}") for t in tasks}
    per_rank: list[list] = [[] for _ in range(p.pp)]
    rank_tasks: list[list[Task]] = [[] for _ in range(p.pp)]
    for t in tasks:
        interval = model.NewIntervalVar(start[t], dur[t], end[t], f"i{t}")
        per_rank[p.rank_of(t.stage)].append(interval)
        rank_tasks[p.rank_of(t.stage)].append(t)
        dep = p.predecessor(t)
        if dep is not None:
            pred, delay = dep
            model.Add(start[t] >= end[pred] + math.ceil(delay * scale - 1e-9))
        if t.mb > 0:
            model.Add(start[t] >= end[Task(t.kind, t.stage, t.mb - 1)])
    for intervals in per_rank:
        model.AddNoOverlap(intervals)
    if p.memory_limit is not None:
        limit = math.floor(p.memory_limit * MEMORY_SCALE + 1e-6)
        for rank in range(p.pp):
            times, changes = [], []
            for t in rank_tasks[rank]:
                delta = round(p.memory_delta(t) * MEMORY_SCALE)
                times.append(start[t] if t.kind is Pass.F else end[t])
                changes.append(delta)
            model.AddReservoirConstraint(times, changes, 0, limit)
    spans = []
    for rank in range(p.pp):
        first = [Task(Pass.F, s, 0) for s in p.stages_of(rank)]
        first_stage = min(s for s in p.stages_of(rank))
        f0 = Task(Pass.F, first_stage, 0)
        dep = p.predecessor(f0)
        if dep is not None:  # ASAP start of the rank's first forward
            model.Add(start[f0] == end[dep[0]] + math.ceil(dep[1] * scale - 1e-9))
        else:
            model.Add(start[f0] == 0)
        for t in first:
            model.Add(start[t] >= start[f0])
        last = model.NewIntVar(0, horizon, f"last{rank}")
        model.AddMaxEquality(last, [end[t] for t in rank_tasks[rank]])
        span = model.NewIntVar(0, horizon, f"span{rank}")
        model.Add(span == last - start[f0])
        spans.append(span)
    objective = model.NewIntVar(0, horizon, "max_span")
    model.AddMaxEquality(objective, spans)
    model.Minimize(objective)
    if hint is not None:
        hinted = evaluate(problem, hint)
        if hinted.completes:
            for t in tasks:
                model.AddHint(start[t], math.ceil(hinted.start[t] * scale - 1e-9))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = workers
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    orders: Orders = []
    for rank in range(p.pp):
        ordered = sorted(rank_tasks[rank], key=lambda t: (solver.Value(start[t]), solver.Value(end[t]), t.kind))
        orders.append(ordered)
    evaluation = evaluate(problem, orders)
    return ExactResult(
        orders=orders,
        evaluation=evaluation,
        optimal=status == cp_model.OPTIMAL,
        lower_bound=solver.BestObjectiveBound() / scale,
        status=solver.StatusName(status),
    )


def _resolution(problem: SynthesisProblem) -> float:
    """Integer ticks per time unit: about 1/1000 of the shortest nonzero pass."""
    durations = [d for d in (*problem.forward, *problem.backward_input, *problem.backward_weight) if d > 0]
    shortest = min(durations) if durations else 1.0
    return 1000.0 / shortest
