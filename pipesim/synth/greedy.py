"""Greedy list scheduling of F, I and W under a memory limit: the idea of Zero Bubble's heuristic (Qi et al.,
ICLR 2024, §3.1), written as an event-driven simulation so that it adapts to real costs and to any placement.

Every rank, whenever it is free, picks its next pass from what has arrived:

- an input gradient ``I`` first — it is on the critical path back to the first stage;
- else a forward ``F`` while the memory limit (and an optional cap on forwards in flight) allows — the
  warm-up fills as many F passes as memory holds, which is what removes the bubble before the first ``I``;
- ``W`` passes fill the gaps: one runs when nothing else can, when memory must be recycled, or when the
  policy prefers it; with ``lookahead`` a rank does not start an ``F`` that would delay an ``I`` already on
  its way, and fills that gap with a ``W`` instead;
- when the forwards and input gradients are used up, the remaining ``W`` passes run one after another.

Several binary/small knobs (:class:`GreedyPolicy`) change those choices; :func:`policy_grid` enumerates
them and the search keeps the best result — the paper's grid search over its hyperparameters.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass

from pipesim.synth.problem import Pass, SynthesisProblem, Task


class Infeasible(Exception):
    """This policy cannot finish within the memory limit (every rank waits)."""


@dataclass(frozen=True)
class GreedyPolicy:
    """The knobs of the greedy scheduler.

    ``forward_cap``: forwards in flight per rank are at most ``forward_cap·(pp − rank)·chunks + cap_extra``
    (None: the memory limit alone decides). ``w_lag``: a pending ``W`` runs before a ready ``F`` once more than
    ``w_lag·rank`` of them are pending (None: F first, W only fills gaps or recycles memory).
    ``lookahead``: do not start an ``F`` that ends after an ``I`` arrives (by more than ``f_overrun`` of
    ``T_F``); fill the gap with a ``W``. ``fill_partial``: run a ``W`` in a gap shorter than ``T_W`` rather
    than idle. ``deep_first``: among ready forwards (and input gradients) of several chunks, prefer the
    later stage.
    """

    forward_cap: float | None = None
    cap_extra: int = 0
    w_lag: float | None = None
    lookahead: bool = True
    f_overrun: float = 0.0
    fill_partial: bool = False
    deep_first: bool = True

    def __str__(self) -> str:
        cap = "memory" if self.forward_cap is None else f"{self.forward_cap:g}·(pp−r)+{self.cap_extra}"
        lag = "fill" if self.w_lag is None else f"{self.w_lag:g}·r"
        look = f"{self.f_overrun:g}" if self.lookahead else "off"
        return (f"policy(forward cap {cap}, W lag {lag}, lookahead {look}, partial fill "
                f"{'on' if self.fill_partial else 'off'}{', deep first' if self.deep_first else ''})")


def policy_grid(problem: SynthesisProblem) -> list[GreedyPolicy]:
    """The knob combinations worth trying. One chunk per rank: a few (the lock-step heuristic covers that case
    well); V placement: the full grid, since it is the only heuristic there."""
    if problem.shape.chunks == 1:
        return [GreedyPolicy(forward_cap=cap, lookahead=False, fill_partial=partial)
                for cap, partial in itertools.product((None, 1.5, 2.0), (False, True))]
    caps: tuple[float | None, ...] = (None, 1.0, 2.0)
    lags: tuple[float | None, ...] = (None, 0.0)
    return [
        GreedyPolicy(forward_cap=cap, w_lag=lag, lookahead=lookahead, f_overrun=overrun, fill_partial=partial,
                     deep_first=deep_first)
        for cap, lag, (lookahead, overrun), partial, deep_first in itertools.product(
            caps, lags, ((False, 0.0), (True, 0.5)), (False, True), (True, False))
    ]


def greedy_orders(problem: SynthesisProblem, policy: GreedyPolicy) -> list[list[Task]]:
    """One compute order per rank, built by simulating the ranks under ``policy``; raises Infeasible."""
    return _Greedy(problem, policy).run()


class _Greedy:
    def __init__(self, problem: SynthesisProblem, policy: GreedyPolicy) -> None:
        self.p = problem
        self.policy = policy
        pp, m = problem.pp, problem.microbatches
        self.stages = [problem.stages_of(r) for r in range(pp)]
        if policy.deep_first:
            self.stages = [sorted(s, reverse=True) for s in self.stages]
        self.next_f = [0] * problem.num_stages
        self.next_i = [0] * problem.num_stages
        self.pending_w: list[deque[Task]] = [deque() for _ in range(pp)]
        self.memory = [0.0] * pp
        self.in_flight = [0] * pp  # forwards whose input gradient has not run
        self.clock = [0.0] * pp
        self.end: dict[Task, float] = {}
        self.orders: list[list[Task]] = [[] for _ in range(pp)]
        self.remaining = 3 * problem.num_stages * m
        cap = policy.forward_cap
        chunks = problem.shape.chunks
        self.cap = [math.inf if cap is None else max(1, math.ceil(cap * (pp - r) * chunks) + policy.cap_extra)
                    for r in range(pp)]
        self.lag = [math.inf if policy.w_lag is None else policy.w_lag * r * chunks for r in range(pp)]
        self.events: list[tuple[float, int]] = [(0.0, r) for r in range(pp)]
        self.sleeping = [False] * pp

    # --- readiness --------------------------------------------------------------------------------------
    def _arrival(self, task: Task) -> float | None:
        """When ``task``'s input is available, or None while its producer has not run."""
        dep = self.p.predecessor(task)
        if dep is None:
            return 0.0
        pred, delay = dep
        pred_end = self.end.get(pred)
        return None if pred_end is None else pred_end + delay

    def _candidates(self, rank: int, kind: Pass) -> list[tuple[Task, float | None]]:
        nxt = self.next_f if kind is Pass.F else self.next_i
        out = []
        for stage in self.stages[rank]:
            mb = nxt[stage]
            if mb < self.p.microbatches:
                task = Task(kind, stage, mb)
                out.append((task, self._arrival(task)))
        return out

    # --- the loop ---------------------------------------------------------------------------------------
    def run(self) -> list[list[Task]]:
        while self.remaining:
            if not self.events:
                raise Infeasible("every rank waits: the memory limit is too small for this policy")
            now, rank = heapq.heappop(self.events)
            if now < self.clock[rank]:
                continue  # stale: the rank is busy until later and has its own event then
            self.sleeping[rank] = False
            self._decide(rank, now)
        return self.orders

    def _decide(self, rank: int, now: float) -> None:
        p, policy = self.p, self.policy
        inputs = self._candidates(rank, Pass.I)
        ready_i = [t for t, a in inputs if a is not None and a <= now]
        if ready_i:
            self._commit(rank, ready_i[0], now)
            return
        upcoming_i = [a for _, a in inputs if a is not None]
        next_i_at = min(upcoming_i) if upcoming_i else None
        pending = self.pending_w[rank]
        forwards = [(t, a) for t, a in self._candidates(rank, Pass.F) if a is not None]
        ready_f = [t for t, a in forwards if a <= now]
        f = ready_f[0] if ready_f else None
        blocked_by_memory = f is not None and not p.fits(self.memory[rank] + p.memory_delta(f))
        if f is not None and (blocked_by_memory or self.in_flight[rank] >= self.cap[rank]):
            if blocked_by_memory and pending:
                self._commit(rank, pending[0], now)  # recycle memory: W frees M_W
                return
            f = None
        if f is not None and pending and len(pending) > self.lag[rank]:
            self._commit(rank, pending[0], now)
            return
        if f is not None:
            overrun = now + p.duration(f) - next_i_at if next_i_at is not None else -1.0
            if not policy.lookahead or overrun <= policy.f_overrun * p.duration(f):
                self._commit(rank, f, now)
                return
        # Nothing urgent: fill the gap before the next arrival with a W, or wait for it.
        arrivals = [a for a in (next_i_at, *(a for _, a in forwards if a > now)) if a is not None]
        next_event = min(arrivals) if arrivals else None
        if f is not None and next_i_at is not None:
            next_event = next_i_at if next_event is None else min(next_event, next_i_at)
        if pending:
            w = pending[0]
            gap = math.inf if next_event is None else next_event - now
            if gap >= p.duration(w) or policy.fill_partial or next_event is None:
                self._commit(rank, w, now)
                return
        if f is not None:
            wake = next_i_at  # lookahead chose to leave the F for after the I
            if wake is None or wake <= now:
                self._commit(rank, f, now)
                return
            heapq.heappush(self.events, (wake, rank))
            return
        if next_event is not None and next_event > now:
            heapq.heappush(self.events, (next_event, rank))
        else:
            self.sleeping[rank] = True

    def _commit(self, rank: int, task: Task, now: float) -> None:
        p = self.p
        if task.kind is Pass.F:
            self.next_f[task.stage] += 1
            self.in_flight[rank] += 1
        elif task.kind is Pass.I:
            self.next_i[task.stage] += 1
            self.in_flight[rank] -= 1
            self.pending_w[rank].append(Task(Pass.W, task.stage, task.mb))
        else:
            self.pending_w[rank].popleft()
        self.memory[rank] += p.memory_delta(task)
        finish = now + p.duration(task)
        self.end[task] = finish
        self.clock[rank] = finish
        self.orders[rank].append(task)
        self.remaining -= 1
        heapq.heappush(self.events, (finish, rank))
        for succ in self._successors(task):
            succ_rank = p.rank_of(succ.stage)
            if succ_rank != rank:
                dep = p.predecessor(succ)
                arrival = finish + (dep[1] if dep else 0.0)
                heapq.heappush(self.events, (max(arrival, self.clock[succ_rank]), succ_rank))

    def _successors(self, task: Task) -> list[Task]:
        last = self.p.num_stages - 1
        if task.kind is Pass.F:
            return [Task(Pass.I, last, task.mb)] if task.stage == last else [Task(Pass.F, task.stage + 1, task.mb)]
        if task.kind is Pass.I and task.stage > 0:
            return [Task(Pass.I, task.stage - 1, task.mb)]
        return []
