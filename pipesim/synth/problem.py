"""What schedule synthesis is given: the pipeline's shape, what each pass costs, and the memory each rank may hold.

The model is Zero Bubble's (Qi et al., ICLR 2024, §3 and Appendix G): every stage runs, per microbatch, a
forward ``F``, an input-gradient backward ``I`` (the paper's ``B``) and a weight-gradient backward ``W``.
``F`` on stage s waits for ``F`` on stage s−1, ``I`` on stage s for ``I`` on stage s+1 (or for the last stage's
own ``F``), each plus ``T_comm`` when the two stages live on different ranks; ``W`` waits for its ``I``.
Memory (Table 1): ``F`` holds ``M_B`` from its start, ``I`` releases ``M_B − M_W`` at its end, ``W`` releases
``M_W`` at its end; the activations a rank holds must never exceed the limit.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from pipesim.errors import PipesimError
from pipesim.program.ir import PipelineShape, Placement
from pipesim.sim.costs import CostModel

# Floating-point slack when comparing memory against the limit (levels are sums of a few floats).
MEMORY_EPS = 1e-9


class Pass(enum.IntEnum):
    """The three passes of one microbatch on one stage, in dependency order."""

    F = 0
    I = 1  # noqa: E741 — the paper's B: the input gradient
    W = 2


class Task(NamedTuple):
    """One pass of one microbatch on one (global) stage. A named tuple, not a dataclass: the synthesis looks tasks
    up in dicts millions of times, and a tuple's hash and equality run in C (a frozen dataclass's are Python
    methods: 2.6 s → 1.8 s for ``pipesim synthesize`` on a 32-stage, 144-microbatch problem)."""

    kind: Pass
    stage: int
    mb: int


@dataclass(frozen=True)
class SynthesisProblem:
    """Shape, per-stage costs and the per-rank activation limit (units of ``StageCosts.activation``)."""

    shape: PipelineShape
    forward: tuple[float, ...]  # per global stage
    backward_input: tuple[float, ...]
    backward_weight: tuple[float, ...]
    transfer: tuple[float, ...]  # time to move stage s's output (or input gradient) to its neighbour
    activation: tuple[float, ...]  # M_B per stage
    weight_grad_activation: tuple[float, ...]  # M_W per stage
    memory_limit: float | None  # per rank; None: unlimited

    @classmethod
    def from_costs(cls, shape: PipelineShape, costs: CostModel, memory_limit: float | None) -> SynthesisProblem:
        stages = [costs.chunk_costs(s, shape.chunks) for s in range(shape.num_stages)]  # a chunk: 1/v of a rank
        if memory_limit is not None and memory_limit <= 0:
            raise PipesimError(f"--memory-limit {memory_limit} must be positive")
        return cls(
            shape=shape,
            forward=tuple(c.forward for c in stages),
            backward_input=tuple(c.backward_input for c in stages),
            backward_weight=tuple(c.backward_weight for c in stages),
            transfer=tuple(costs.transfer_time(s) for s in range(shape.num_stages)),
            activation=tuple(c.activation for c in stages),
            weight_grad_activation=tuple(min(c.weight_grad_activation, c.activation) for c in stages),
            memory_limit=memory_limit,
        )

    # --- structure ------------------------------------------------------------------------------------
    @property
    def pp(self) -> int:
        return self.shape.pp

    @property
    def microbatches(self) -> int:
        return self.shape.microbatches

    @property
    def num_stages(self) -> int:
        return self.shape.num_stages

    def rank_of(self, stage: int) -> int:
        ranks = self._stage_ranks
        return ranks[stage] if 0 <= stage < len(ranks) else self.shape.rank_of(stage)

    # The structure below is asked for millions of times per synthesis (every evaluation walks every task), so
    # it is tabulated once per problem; cached_property stores it beside the frozen fields, outside eq/hash.
    @cached_property
    def _stage_ranks(self) -> tuple[int, ...]:
        return tuple(self.shape.rank_of(s) for s in range(self.num_stages))

    @cached_property
    def _links(self) -> dict[Task, tuple[tuple[Task, float] | None, tuple[Task, float] | None]]:
        return {
            task: (self._predecessor(task), self._consumer(task))
            for kind in Pass
            for stage in range(self.num_stages)
            for mb in range(self.microbatches)
            for task in [Task(kind, stage, mb)]
        }

    @cached_property
    def pass_table(self) -> dict[Task, tuple]:
        """Per task, what scoring an order reads of it, in one tuple (:func:`pipesim.synth.evaluate.evaluate`
        walks every task of every candidate): :meth:`pass_info` of every task of the problem."""
        return {task: self.pass_info(task) for task in self._links}

    def pass_info(self, task: Task) -> tuple:
        """(its input's pass or None, whether that input comes with a delay, the input's rank, the duration,
        the rank of the pass that waits for its output or None, that transfer's time, the memory delta)."""
        dep, out = self.predecessor(task), self.consumer(task)
        pred, delay = dep if dep is not None else (None, 0.0)
        return (
            pred,
            bool(delay),
            None if pred is None else self.rank_of(pred.stage),
            self.duration(task),
            None if out is None else self.rank_of(out[0].stage),
            0.0 if out is None else out[1],
            self.memory_delta(task),
        )

    def duration(self, task: Task) -> float:
        table = (self.forward, self.backward_input, self.backward_weight)[task.kind]
        return table[task.stage]

    def memory_delta(self, task: Task) -> float:
        """Change in held activations the task causes (at its start for F, at its end for I and W)."""
        m_b, m_w = self.activation[task.stage], self.weight_grad_activation[task.stage]
        return (m_b, -(m_b - m_w), -m_w)[task.kind]

    def predecessor(self, task: Task) -> tuple[Task, float] | None:
        """The cross-stage (or same-task-chain) dependency of ``task`` and the delay after its end."""
        links = self._links.get(task)
        return self._predecessor(task) if links is None else links[0]

    def consumer(self, task: Task) -> tuple[Task, float] | None:
        """The pass on the next stage that waits for ``task``'s output (F→F, last F→I, I→I), and the transfer
        time were it on another rank; None for W and the first stage's I."""
        links = self._links.get(task)
        return self._consumer(task) if links is None else links[1]

    def _predecessor(self, task: Task) -> tuple[Task, float] | None:
        last = self.num_stages - 1
        if task.kind is Pass.F:
            if task.stage == 0:
                return None
            pred = Task(Pass.F, task.stage - 1, task.mb)
        elif task.kind is Pass.I:
            pred = Task(Pass.F, last, task.mb) if task.stage == last else Task(Pass.I, task.stage + 1, task.mb)
        else:
            return Task(Pass.I, task.stage, task.mb), 0.0
        delay = 0.0 if self.rank_of(pred.stage) == self.rank_of(task.stage) else self._link_delay(pred, task)
        return pred, delay

    def _consumer(self, task: Task) -> tuple[Task, float] | None:
        last = self.num_stages - 1
        if task.kind is Pass.F:
            succ = Task(Pass.I, last, task.mb) if task.stage == last else Task(Pass.F, task.stage + 1, task.mb)
        elif task.kind is Pass.I and task.stage > 0:
            succ = Task(Pass.I, task.stage - 1, task.mb)
        else:
            return None
        return succ, self._link_delay(task, succ)

    def _link_delay(self, pred: Task, task: Task) -> float:
        # F crosses the boundary after the sending stage (its output); I crosses after the receiving stage.
        boundary = pred.stage if task.kind is Pass.F else task.stage
        return self.transfer[boundary]

    def stages_of(self, rank: int) -> list[int]:
        return [self.shape.stage(rank, chunk) for chunk in range(self.shape.chunks)]

    def fits(self, level: float) -> bool:
        return self.memory_limit is None or level <= self.memory_limit + MEMORY_EPS

    def describe(self) -> str:
        s = self.shape
        limit = "unlimited" if self.memory_limit is None else f"{self.memory_limit:g}"
        return (
            f"pp={s.pp} microbatches={s.microbatches} chunks={s.chunks} ({s.placement.value} placement), "
            f"memory limit {limit} per rank"
        )


def lower_bound(problem: SynthesisProblem) -> float:
    """No schedule's longest stage span is below the busiest rank's compute (the paper's m·(T_F+T_B+T_W))."""
    busiest = 0.0
    for rank in range(problem.pp):
        work = sum(
            problem.forward[s] + problem.backward_input[s] + problem.backward_weight[s] for s in problem.stages_of(rank)
        )
        busiest = max(busiest, work * problem.microbatches)
    return busiest


__all__ = ["MEMORY_EPS", "Pass", "Placement", "SynthesisProblem", "Task", "lower_bound"]


def key_floor(problem: SynthesisProblem) -> tuple[float, float, float] | None:
    """A floor under every complete order's :attr:`~pipesim.synth.evaluate.Evaluation.key`, or None where it
    could not be compared exactly.

    - longest span ≥ the busiest rank's compute (:func:`lower_bound`), Σ spans ≥ every rank's compute: a rank
      runs its passes one at a time;
    - makespan ≥ max over ranks r of (earliest start on r + r's compute). Every pass on stage s, of any
      microbatch, waits (transitively) for that microbatch's F on s, which cannot start before F has gone
      through stages 0…s−1 and crossed their rank boundaries; rank 0 starts at 0 (its first pass must be a
      stage-0 F, the only pass with no input, or the order deadlocks), so the makespan is the latest end.

    An order whose key equals the floor cannot be beaten, so the search may stop there (:func:`.search.
    synthesize`): it keeps the first best and replaces it only by a strictly smaller key, so stopping gives
    the very result the full search gives. That holds only where the evaluation's sums are exact in floating
    point (:func:`_sums_are_exact`: unit costs, what the planner synthesises for, and their halves on the V
    placement). Elsewhere a value mathematically at the floor could round a hair below it, so None.
    """
    if not _sums_are_exact(problem):
        return None
    m = problem.microbatches
    earliest = [0.0] * problem.num_stages  # F on stage s starts no sooner
    for s in range(1, problem.num_stages):
        crossing = problem.transfer[s - 1] if problem.rank_of(s - 1) != problem.rank_of(s) else 0.0
        earliest[s] = earliest[s - 1] + problem.forward[s - 1] + crossing
    busy, ends = [], []
    for rank in range(problem.pp):
        stages = problem.stages_of(rank)
        work = m * sum(problem.forward[s] + problem.backward_input[s] + problem.backward_weight[s] for s in stages)
        busy.append(work)
        ends.append(min(earliest[s] for s in stages) + work)
    return (round(max(busy), 9), round(max(ends), 9), round(sum(busy), 9))


def _sums_are_exact(problem: SynthesisProblem) -> bool:
    """Whether every time an evaluation computes is exact: all durations and transfers are whole multiples of
    one power of two 2^-k, and even the sum of every pass and every crossing, in those units, stays below
    2^53 (the doubles' integers), so each partial sum, max and difference of them is exact too."""
    values = (*problem.forward, *problem.backward_input, *problem.backward_weight, *problem.transfer)
    if not all(v >= 0 and math.isfinite(v) for v in values):
        return False
    scale = next((2.0**k for k in range(31) if all((v * 2.0**k).is_integer() for v in values)), None)
    if scale is None:
        return False
    passes = sum(problem.forward) + sum(problem.backward_input) + sum(problem.backward_weight)
    total = problem.microbatches * (passes + 2 * sum(problem.transfer))  # each boundary: an F and an I across
    return total * scale < 2.0**53
