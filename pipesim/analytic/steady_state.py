"""Steady-state step time: training runs steps back to back, and what separates them decides the period.

Two boundaries (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", §4 "Bypassing optimizer
synchronizations"):

- ``SYNC``: before the optimizer step every rank joins a global all-reduce (gradient norm for clipping,
  NaN/inf check), so step ``k+1`` starts on every rank only after the slowest rank has finished step ``k``.
  The period is one isolated step: the last rank's end of compute, the all-reduce, the optimizer step.
- ``POST_VALIDATION``: each rank runs its optimizer step as soon as its own work is done and validates the
  global condition afterwards (rolling back in the rare case it fails), so a rank whose last step ended early
  starts the next one early: warm-up forwards of step ``k+1`` fill the cool-down of step ``k``. The period is
  measured on ``steps`` consecutive steps simulated as one program (each step's microbatches renumbered):
  the time between the last two steps' ends.

:func:`steady_state_step_time` is the one entry point the report calls; when the simulator grows its own
multi-step engine this module is where it plugs in.
"""

from __future__ import annotations

import enum
from dataclasses import replace

import numpy as np

from pipesim.program.ir import Op, Program
from pipesim.program.table import OP_CODE
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import SimulationResult, simulate


class StepBoundary(enum.Enum):
    SYNC = "sync"
    POST_VALIDATION = "post-validation"


def sync_latency(layout, chip) -> float:
    """A scalar all-reduce over the world (NCCL's tree for small messages): ``2·⌈log2 n⌉`` link latencies."""
    n = layout.world_size
    return 2 * max(0, (n - 1).bit_length()) * chip.link_latency


def repeat_program(program: Program, steps: int) -> Program:
    """``steps`` copies of ``program`` back to back on each rank, step k's microbatch i renamed k·m + i."""
    m = program.shape.microbatches
    ranks = []
    for order in program.ranks:
        seq = []
        for k in range(steps):
            seq += [ins if ins.mb is None else replace(ins, mb=ins.mb + k * m) for ins in order]
        ranks.append(tuple(seq))
    return Program(f"{program.name}×{steps}", replace(program.shape, microbatches=m * steps), tuple(ranks))


def sync_step_time(result: SimulationResult, sync_latency: float) -> float:
    """One isolated step with a barrier before the optimizer: the last rank's compute end + barrier + step."""
    table = result.table
    not_step = table.op != OP_CODE[Op.STEP]
    end_of_work = float(result.end[not_step].max()) if not_step.any() else 0.0
    return end_of_work + sync_latency + result.costs.optimizer_step


def post_validation_step_time(program: Program, costs: CostModel, steps: int = 3) -> float:
    """The period of ``steps`` back-to-back steps without a global barrier (time between the last two)."""
    if steps < 2:
        raise ValueError("a steady state needs at least 2 steps")
    result = simulate(repeat_program(program, steps), costs, check=False)
    step_rows = np.flatnonzero(result.table.op == OP_CODE[Op.STEP])
    ends_by_rank: dict[int, list[float]] = {}
    for row in step_rows:
        ends_by_rank.setdefault(int(result.table.rank[row]), []).append(float(result.end[row]))
    last = max(ends[-1] for ends in ends_by_rank.values())
    previous = max(ends[-2] for ends in ends_by_rank.values())
    return last - previous


def steady_state_step_time(result: SimulationResult, boundary: StepBoundary, sync_latency: float,
                           steps: int = 3) -> float:
    """Seconds per step once training runs steps back to back, under ``boundary``."""
    if boundary is StepBoundary.SYNC:
        return sync_step_time(result, sync_latency)
    return post_validation_step_time(result.program, result.costs, steps)
