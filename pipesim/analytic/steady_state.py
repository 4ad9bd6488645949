"""Steady-state step time: training runs steps back to back, and what separates them decides the period.

Two boundaries (:class:`pipesim.sim.simulator.StepBoundary`; Qi et al. 2024, "Zero Bubble Pipeline
Parallelism", §4 "Bypassing optimizer synchronizations"):

- ``SYNC``: before the optimizer step every rank joins a global all-reduce (gradient norm for clipping,
  NaN/inf check), so step ``k+1`` starts on every rank only after the slowest rank has finished step ``k``;
  the all-reduce of a scalar adds :func:`sync_latency`.
- ``POST_VALIDATION``: each rank runs its optimizer step as soon as its own work is done and validates the
  global condition afterwards (rolling back in the rare case it fails), so a rank whose last step ended early
  starts the next one early: warm-up forwards of step ``k+1`` fill the cool-down of step ``k``.

The simulator runs ``steps`` steps back to back (``simulate(steps=S, boundary=…)``) and reports the last
step's duration; this module picks the boundary a schedule is run with and adds the synchronisation's cost.

Under ``SYNC`` the lone step already is the steady state, when each rank's program ends with its one STEP and
every message is consumed before its receiver's STEP (what every built Program does): the barrier then leaves
no rank, link or message carrying anything into the next step, and since STEP lasts the same on every rank
(``CostModel.optimizer_step``), every rank starts step ``k+1`` at the same instant, as every rank starts the
lone step at 0. So the period is the lone step's duration, and no repeated table is built or simulated (for a
pp-32 pipeline of a thousand microbatches that was most of a planner's time). Programs of another form are
still simulated for several steps.
"""

from __future__ import annotations

import numpy as np

from pipesim.program.ir import OP_CODE, Op, Program
from pipesim.program.table import KIND_RECV, ProgramTable
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import SimulationResult, StepBoundary, simulate

__all__ = ["StepBoundary", "default_boundary", "lone_step_is_steady", "steady_state_step_time", "sync_latency"]


def default_boundary(program: Program) -> StepBoundary:
    """Post-validation for split-backward (zero-bubble) schedules, whose published implementation ships it
    (Qi et al. 2024, §4 and Table 10: about 8 % of throughput); a synchronized step for the others."""
    # From the op column, not the Instruction view: a Program lowered to columns would build every
    # Instruction object just to be asked this (the planner asks it of thousands of Programs).
    split = bool(np.isin(program.columns.op, (OP_CODE[Op.I], OP_CODE[Op.W])).any())
    return StepBoundary.POST_VALIDATION if split else StepBoundary.SYNC


def sync_latency(layout, chip) -> float:
    """A scalar all-reduce over the world (NCCL's tree for small messages): ``2·⌈log2 n⌉`` link latencies."""
    n = layout.world_size
    return 2 * max(0, (n - 1).bit_length()) * chip.link_latency


def multi_step_time(program: Program, costs: CostModel, boundary: StepBoundary, steps: int = 3) -> float:
    """The last of ``steps`` back-to-back steps' durations under ``boundary`` (the simulator's own)."""
    if steps < 2:
        raise ValueError("a steady state needs at least 2 steps")
    return simulate(program, costs, check=False, steps=steps, boundary=boundary).step_time


def lone_step_is_steady(table: ProgramTable) -> bool:
    """Whether a synchronised boundary makes every step of ``table``'s Program time as its lone step does: each
    rank's program ends with its only STEP, and every receive feeds a compute instruction (so each message has
    arrived before its receiver reaches the barrier, and no transfer runs on into the next step)."""
    steps = table.op == OP_CODE[Op.STEP]
    last = np.array([end - 1 for begin, end in table.rank_bounds if end > begin], dtype=np.int64)
    if len(last) != len(table.rank_bounds) or int(steps.sum()) != len(last) or not steps[last].all():
        return False
    consumed = np.zeros(table.num_rows, dtype=bool)
    for inputs in (table.input_recv, table.partner_inputs):
        consumed[inputs[inputs >= 0]] = True
    return bool(consumed[table.kind == KIND_RECV].all())


def steady_state_step_time(
    result: SimulationResult, boundary: StepBoundary, sync_latency: float, steps: int = 3
) -> float:
    """Seconds per step once training runs steps back to back, under ``boundary``. ``result`` is the lone
    step's simulation (``simulate(program, costs)``); under ``SYNC`` it is the steady state itself for the
    Programs :func:`lone_step_is_steady` accepts (the module's note)."""
    if boundary is StepBoundary.SYNC and result.steps == 1 and result.boundary is None \
            and lone_step_is_steady(result.table):
        return result.step_time + sync_latency
    period = multi_step_time(result.program, result.costs, boundary, steps)
    return period + (sync_latency if boundary is StepBoundary.SYNC else 0.0)
