"""Improve a feasible order by local moves: hill climbing with the exact evaluator as the judge.

First, targeted sweeps: wherever an input gradient ``I`` had arrived but waited for the pass before it (a ``W``
or an ``F`` its rank chose to run), try running the ``I`` first — the ``I`` passes are the critical chain back to
the first stage, and a rank's last passes in particular decide the longest span. Then random moves: a move
takes one pass on one rank and puts it ``k`` places earlier or later in that rank's order (W passes
slide freely within their rank; an F or I move changes which microbatch's pass comes first). A move is kept
when the candidate stays feasible (completes, within the memory limit) and its objective — longest stage span,
then makespan — is no worse; equal moves are kept too so the search can cross plateaus. Seeded and
bounded by a number of evaluations (a work budget, never the clock), so a run gives the same order on any
machine under any load. ``seconds`` is only an outer safety net: when it stops the search, ``stats`` says so,
and the caller reports that this order depends on the machine.
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
    stats: dict | None = None,
) -> tuple[Orders, Evaluation]:
    """Hill-climb from ``orders`` (assumed feasible); returns the best orders found and their evaluation.

    ``stats``, when given, receives ``evaluations`` (moves tried) and ``safety_stop`` (True when ``seconds``
    ended the search before its budget: the only way a result can depend on the machine).
    """
    stats = {} if stats is None else stats
    stats.update(evaluations=0, safety_stop=False)
    rng = random.Random(seed)
    best = [list(o) for o in orders]
    best_eval = evaluate(problem, best)
    if not best_eval.feasible:
        return best, best_eval
    deadline = None if seconds is None else time.monotonic() + seconds
    budget = evaluations
    while budget > 0:
        moved = False
        for rank, i, j in _targeted_moves(problem, best, best_eval):
            if budget <= 0:
                break
            if deadline is not None and time.monotonic() > deadline:
                stats["safety_stop"] = True
                break
            candidate = list(best[rank])
            candidate.insert(j, candidate.pop(i))
            trial = [*best[:rank], candidate, *best[rank + 1:]]
            result = evaluate(problem, trial)
            budget -= 1
            stats["evaluations"] += 1
            if result.feasible and result.key < best_eval.key:
                best, best_eval, moved = trial, result, True
                break  # positions shift: recompute the moves for the new order
        if not moved or stats["safety_stop"]:
            break
    evaluations = budget
    ranks = [r for r in range(problem.pp) if len(best[r]) > 1]
    for _ in range(evaluations if not stats["safety_stop"] else 0):
        if deadline is not None and time.monotonic() > deadline:
            stats["safety_stop"] = True
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
        stats["evaluations"] += 1
        if result.feasible and result.key <= best_eval.key:
            best, best_eval = trial, result
    return best, best_eval


def _targeted_moves(problem: SynthesisProblem, orders: Orders, evaluation: Evaluation) -> list[tuple[int, int, int]]:
    """(rank, from, to) moves, most promising first: an I that had arrived but waited behind the pass before it
    moves ahead of that pass; an idle gap before a pass gets the rank's next W moved into it."""
    found = []
    for rank, order in enumerate(orders):
        for i in range(len(order) - 1):
            nxt = order[i + 1]
            if nxt.kind is Pass.I and order[i].kind is not Pass.I:
                dep = problem.predecessor(nxt)
                arrival = 0.0 if dep is None else evaluation.end[dep[0]] + dep[1]
                if arrival < evaluation.start[nxt] - 1e-9:
                    found.append((evaluation.start[nxt] - arrival, rank, i + 1, i))
            gap = evaluation.start[nxt] - evaluation.end[order[i]]
            if gap > 1e-9:
                later_w = next((k for k in range(i + 2, len(order)) if order[k].kind is Pass.W), None)
                if later_w is not None:
                    found.append((gap, rank, later_w, i + 1))
    found.sort(reverse=True)
    return [(rank, i, j) for _, rank, i, j in found]


def _critical_rank(evaluation: Evaluation, orders: Orders, rng: random.Random) -> int:
    """The rank with the longest span (ties at random): where a better order pays off first."""
    spans = [(evaluation.end[o[-1]] - evaluation.start[o[0]]) if o else 0.0 for o in orders]
    top = max(spans)
    return rng.choice([r for r, s in enumerate(spans) if s >= top - 1e-9])
