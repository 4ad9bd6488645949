"""Schedule synthesis end to end: greedy policies and built-in schedules → best feasible → local search →
(small problems) CP-SAT, warm-started → a :class:`~pipesim.program.ir.Schedule` every pipesim path accepts.
"""

from __future__ import annotations

import enum
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

from pipesim.errors import PipesimError
from pipesim.program.ir import F, I, Instruction, PipelineShape, Placement, Schedule, W
from pipesim.sim.costs import CostModel
from pipesim.synth import store
from pipesim.synth.candidates import builtin_candidates, sequential_orders
from pipesim.synth.evaluate import Evaluation, Orders, evaluate
from pipesim.synth.exact import solve_exact
from pipesim.synth.greedy import Infeasible, greedy_orders, policy_grid
from pipesim.synth.local_search import improve
from pipesim.synth.lockstep import lockstep_orders, lockstep_policies
from pipesim.synth.problem import Pass, SynthesisProblem, key_floor, lower_bound

#: The local search's work budget: moves evaluated (about as long as the 3 s deadline it replaces allowed on a
#: pp 8 · mb 32 problem here, far less on small ones), the same on every machine. One evaluation simulates the
#: whole order, so its cost grows with the passes to place: larger problems get proportionally fewer moves
#: (:func:`local_budget`), which keeps a search's time near that of the reference problem, as the deadline did.
LOCAL_EVALUATIONS = 300
_REFERENCE_TASKS = 8 * 32  # pp · microbatches · chunks of the problem LOCAL_EVALUATIONS was sized on
_MIN_LOCAL_EVALUATIONS = 2
#: An outer safety net only (a huge problem on a slow machine); reported in the result's notes when it is hit.
LOCAL_SAFETY_SECONDS = 120.0


def local_budget(problem: SynthesisProblem) -> int:
    """Moves the local search evaluates: ``LOCAL_EVALUATIONS`` up to the reference size, fewer beyond it in
    proportion to the passes (never under ``_MIN_LOCAL_EVALUATIONS``)."""
    shape = problem.shape
    tasks = shape.pp * shape.microbatches * shape.chunks
    return max(_MIN_LOCAL_EVALUATIONS, min(LOCAL_EVALUATIONS, round(LOCAL_EVALUATIONS * _REFERENCE_TASKS / tasks)))


class Method(enum.Enum):
    """How hard to search: the heuristic alone, plus local search, plus the exact solver."""

    GREEDY = "greedy"
    LOCAL = "local"
    EXACT = "exact"


@dataclass(frozen=True)
class SynthesisResult:
    problem: SynthesisProblem
    orders: Orders
    evaluation: Evaluation
    origin: str  # which candidate won: a greedy policy, a built-in, "local search" or "cp-sat"
    optimal: bool = False  # proven by the exact solver
    solver_bound: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what a reader must know: the safety time limit stopped the local search

    @property
    def bubble_rate(self) -> float:
        """The paper's bubble rate: (longest stage span − busiest rank's compute) / longest span."""
        span = self.evaluation.max_span
        return (span - lower_bound(self.problem)) / span if span > 0 else 0.0

    def schedule(self, name: str = "zb-auto") -> Schedule:
        return to_schedule(self.problem, self.orders, name)


def synthesize(
    problem: SynthesisProblem,
    method: Method = Method.LOCAL,
    *,
    local_evaluations: int | None = None,
    local_seconds: float | None = LOCAL_SAFETY_SECONDS,
    exact_seconds: float = 10.0,
    exact_max_tasks: int = 300,
) -> SynthesisResult:
    """Best order found for ``problem`` by ``method``; raises PipesimError when no candidate fits the limit.

    Deterministic: the local search is bounded by ``local_evaluations`` moves (default :func:`local_budget`, which
    depends only on the problem's size); ``local_seconds`` is only a safety
    net, and when it ends the search the result's ``notes`` say so. (CP-SAT, ``Method.EXACT``, keeps its time
    limit: it is the solver's own.)
    """
    timings: dict[str, float] = {}
    notes: list[str] = []
    if local_evaluations is None:
        local_evaluations = local_budget(problem)
    clock = time.perf_counter()
    best: tuple[Evaluation, Orders, str] | None = None

    floor = key_floor(problem)

    def consider(orders: Orders, origin: str) -> None:
        nonlocal best
        result = evaluate(problem, orders)
        if result.feasible and (best is None or result.key < best[0].key):
            best = (result, orders, origin)

    def unbeatable() -> bool:
        """The best so far sits on the floor: nothing later can replace it (only a smaller key would)."""
        return best is not None and floor is not None and best[0].key == floor

    for make, origin in _heuristic_candidates(problem):
        try:
            orders = make()
        except Infeasible:
            continue
        consider(orders, origin)
        if unbeatable():  # e.g. ZB-H2 at zero bubble for unit costs: the rest of the search cannot change it
            break
    timings["heuristic"] = time.perf_counter() - clock
    if best is None:
        raise PipesimError(
            f"no schedule fits memory limit {problem.memory_limit:g} per rank ({problem.describe()}); "
            f"a rank needs at least one microbatch's activations per chunk it holds: raise --memory-limit"
        )
    evaluation, orders, origin = best
    if method in (Method.LOCAL, Method.EXACT) and local_evaluations > 0 and not unbeatable():
        clock = time.perf_counter()
        stats: dict = {}
        improved, improved_eval = improve(
            problem, orders, evaluations=local_evaluations, seconds=local_seconds, stats=stats
        )
        if stats["safety_stop"]:
            notes.append(
                f"local search hit its {local_seconds:g} s safety limit after {stats['evaluations']} of "
                f"{local_evaluations} evaluations: this order depends on the machine's speed"
            )
        if improved_eval.key < evaluation.key:
            evaluation, orders, origin = improved_eval, improved, "local search"
        timings["local search"] = time.perf_counter() - clock
    optimal, bound = False, None
    num_tasks = 3 * problem.num_stages * problem.microbatches
    if method is Method.EXACT and num_tasks <= exact_max_tasks:
        clock = time.perf_counter()
        exact = solve_exact(problem, orders, seconds=exact_seconds)
        timings["cp-sat"] = time.perf_counter() - clock
        if exact is not None:
            bound = exact.lower_bound
            optimal = exact.optimal
            if exact.evaluation.feasible and exact.evaluation.key < evaluation.key:
                evaluation, orders, origin = exact.evaluation, exact.orders, "cp-sat"
    return SynthesisResult(problem, orders, evaluation, origin, optimal, bound, timings, tuple(notes))


def _heuristic_candidates(problem: SynthesisProblem) -> Iterator[tuple[Callable[[], Orders], str]]:
    """The search's starting points, in the order it takes them (the first best is kept): the built-ins, one
    microbatch at a time, the lockstep policies (one chunk), the greedy grid. Each is made only when asked
    for, so a search that stops early does not pay for the rest; a policy may raise Infeasible."""
    for name, orders in builtin_candidates(problem).items():
        yield (lambda orders=orders: orders), f"built-in {name}"
    yield (lambda: sequential_orders(problem)), "one microbatch at a time"
    if problem.shape.chunks == 1:
        for lockstep in lockstep_policies():
            yield partial(lockstep_orders, problem, lockstep), str(lockstep)
    for policy in policy_grid(problem):
        yield partial(greedy_orders, problem, policy), f"greedy {policy}"


_INSTRUCTION = {Pass.F: F, Pass.I: I, Pass.W: W}


def to_schedule(problem: SynthesisProblem, orders: Orders, name: str = "zb-auto") -> Schedule:
    shape = problem.shape
    rank_orders: list[list[Instruction]] = [
        [_INSTRUCTION[t.kind](t.mb, shape.chunk_of(t.stage)) for t in order] for order in orders
    ]
    return Schedule.from_orders(
        name, rank_orders, microbatches=shape.microbatches, chunks=shape.chunks, placement=shape.placement
    )


def synthesis_shape(pp: int, microbatches: int, chunks: int) -> PipelineShape:
    """One chunk: the classic placement; two or more: the V placement (ZB-V's family)."""
    return PipelineShape(pp, microbatches, chunks, Placement.LOOP if chunks == 1 else Placement.V)


def default_memory_limit(shape: PipelineShape) -> float:
    """2·pp activation units per rank: ZB-2p's limit for one chunk, 1F1B's memory (ZB-V's budget) for V."""
    return 2.0 * shape.pp


def synthesize_schedule(
    pp: int,
    microbatches: int,
    chunks: int,
    costs: CostModel | None,
    memory_limit: float | None,
    method: Method = Method.LOCAL,
    name: str = "zb-auto",
) -> Schedule:
    shape = synthesis_shape(pp, microbatches, chunks)
    limit = default_memory_limit(shape) if memory_limit is None else memory_limit
    problem = SynthesisProblem.from_costs(shape, costs or CostModel(), limit)
    # CP-SAT stops at its own time limit, so only the deterministic methods' orders are kept between runs.
    kept = method is not Method.EXACT
    stored = store.load(problem, method.value) if kept else None
    if stored is not None:
        return to_schedule(problem, stored[0], name)
    result = synthesize(problem, method)
    for note in result.notes:
        print(f"{name}: {note}", file=sys.stderr)
    if kept and not result.notes:  # a safety-time stop depends on the machine: not an answer to keep
        store.save(problem, method.value, result.orders, result.origin)
    return result.schedule(name)
