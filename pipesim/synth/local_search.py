"""Improve a feasible order by local moves: hill climbing with the exact evaluator as the judge.

A move takes one pass on one rank and puts it ``k`` places earlier or later in that rank's order (W passes
slide freely within their rank; an F or I move changes which microbatch's pass comes first). A move is kept
when the candidate stays feasible (completes, within the memory limit) and its objective — longest stage span,
then makespan — is no worse; equal moves are kept too so the search can cross plateaus. Seeded and
bounded by a number of evaluations, so a run is reproducible.
"""

from __future__ import annotations

import random
import time

from pipesim.synth.evaluate import Evaluation, Orders, evaluate
from pipesim.synth.problem import Pass, SynthesisProblem


def improve(
    problem: SynthesisProblem,
    orders: Orders,
    *,
    evaluations: int = 2000,
    seconds: float | None = None,
    seed: int = 0,
) -> tuple[Orders, Evaluation]:
    """Hill-climb from ``orders`` (assumed feasible); returns the best orders found and their evaluation."""
    rng = random.Random(seed)
    best = [list(o) for o in orders]
    best_eval = evaluate(problem, best)
    if not best_eval.feasible:
        return best, best_eval
    deadline = None if seconds is None else time.monotonic() + seconds
    ranks = [r for r in range(problem.pp) if len(best[r]) > 1]
    for _ in range(evaluations):
        if deadline is not None and time.monotonic() > deadline:
            break
        rank = _critical_rank(best_eval, best, rng) if rng.random() < 0.7 else rng.choice(ranks)
        order = best[rank]
        i = rng.randrange(len(order))
        # W passes move farther; F/I moves are swaps with a neighbour (their chains are tight).
        reach = 6 if order[i].kind is Pass.W else 1
        j = min(len(order) - 1, max(0, i + rng.choice([d for d in range(-reach, reach + 1) if d])))
        if i == j or (order[i].kind is order[j].kind and order[i].kind is not Pass.W):
            continue
        candidate = list(order)
        candidate.insert(j, candidate.pop(i))
        trial = [*best[:rank], candidate, *best[rank + 1:]]
        result = evaluate(problem, trial)
        if result.feasible and result.key <= best_eval.key:
            best, best_eval = trial, result
    return best, best_eval


def _critical_rank(evaluation: Evaluation, orders: Orders, rng: random.Random) -> int:
    """The rank with the longest span (ties at random): where a better order pays off first."""
    spans = [(evaluation.end[o[-1]] - evaluation.start[o[0]]) if o else 0.0 for o in orders]
    top = max(spans)
    return rng.choice([r for r, s in enumerate(spans) if s >= top - 1e-9])
