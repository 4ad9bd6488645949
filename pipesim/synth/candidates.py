"""Built-in schedules as synthesis candidates: the search starts from the best of the greedy policies *and* of
the hand-written schedules that fit the memory limit, so its result is never worse than any of them.
"""

from __future__ import annotations

from pipesim.errors import PipesimError
from pipesim.program.ir import Op, Placement, Schedule
from pipesim.synth.problem import Pass, SynthesisProblem, Task

_KIND = {Op.F: Pass.F, Op.I: Pass.I, Op.W: Pass.W}
# Split-backward built-ins by placement; 1F1B's fused B becomes I then W back to back (same work and memory).
_BUILTINS = {Placement.LOOP: ("zb-h1", "zb-h2", "1f1b"), Placement.V: ("zb-v",)}
BUILTIN_NAMES = frozenset(name for names in _BUILTINS.values() for name in names)


def orders_of(schedule: Schedule) -> list[list[Task]]:
    """A Schedule's per-rank compute order as synthesis tasks (global stages)."""
    shape = schedule.shape
    orders = []
    for rank, order in enumerate(schedule.orders):
        tasks = []
        for ins in order:
            stage = shape.stage(rank, ins.chunk)
            if ins.op is Op.B:
                tasks += [Task(Pass.I, stage, ins.mb), Task(Pass.W, stage, ins.mb)]
            else:
                tasks.append(Task(_KIND[ins.op], stage, ins.mb))
        orders.append(tasks)
    return orders


def sequential_orders(problem: SynthesisProblem) -> list[list[Task]]:
    """One microbatch at a time through every stage and back: slow, but it needs only one microbatch's
    activations per chunk, so it fits every limit that any order fits — the search's guaranteed fallback."""
    orders: list[list[Task]] = [[] for _ in range(problem.pp)]
    for mb in range(problem.microbatches):
        for stage in range(problem.num_stages):
            orders[problem.rank_of(stage)].append(Task(Pass.F, stage, mb))
        for stage in reversed(range(problem.num_stages)):
            orders[problem.rank_of(stage)] += [Task(Pass.I, stage, mb), Task(Pass.W, stage, mb)]
    return orders


def builtin_candidates(problem: SynthesisProblem) -> dict[str, list[list[Task]]]:
    """Orders of the built-in schedules that exist for this shape (memory is checked by the caller)."""
    from pipesim.program.loader import load_schedule

    shape = problem.shape
    placement = shape.placement if shape.chunks > 1 else Placement.LOOP
    names = _BUILTINS[placement] if shape.chunks == (2 if placement is Placement.V else 1) else ()
    found = {}
    for name in names:
        try:
            schedule = load_schedule(name).build(shape.pp, shape.microbatches, shape.chunks)
        except PipesimError:
            continue
        found[name] = orders_of(schedule)
    return found
