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
"""

from __future__ import annotations

import numpy as np

from pipesim.program.ir import OP_CODE, Op, Program
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import SimulationResult, StepBoundary, simulate

__all__ = ["StepBoundary", "default_boundary", "steady_state_step_time", "sync_latency"]


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


def steady_state_step_time(
    result: SimulationResult, boundary: StepBoundary, sync_latency: float, steps: int = 3
) -> float:
    """Seconds per step once training runs steps back to back, under ``boundary``."""
    period = multi_step_time(result.program, result.costs, boundary, steps)
    return period + (sync_latency if boundary is StepBoundary.SYNC else 0.0)
