"""``pipesim.sweep``: simulate every combination of the listed values into one table of metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from pipesim.api.defaults import SWEEP_DEFAULTS
from pipesim.errors import PipesimError
from pipesim.sim.costs import CostModel

__all__ = ["sweep"]


def _listed(values) -> list:
    if values is None or isinstance(values, (int, float, str)):
        return [values]
    return list(values)


def _schedules(schedule, schedules) -> str | Sequence[str]:
    """The one list of schedule names, given as ``schedule`` or, as :func:`pipesim.plan` spells it, ``schedules``."""
    if schedule is not None and schedules is not None:
        raise PipesimError("sweep() got both schedule= and schedules=, which name the same list; keep one")
    given = schedule if schedule is not None else schedules
    return SWEEP_DEFAULTS.schedules if given is None else given


def sweep(
    schedule: str | Sequence[str] | None = None,
    pp: int | Sequence[int] = SWEEP_DEFAULTS.pp,
    mb: int | Sequence[int] = SWEEP_DEFAULTS.microbatches,
    chunks: int | Sequence[int] | None = None,
    *,
    forward: float | Sequence[float] = SWEEP_DEFAULTS.forward,
    backward: float | Sequence[float] = SWEEP_DEFAULTS.backward,
    backward_input: float | Sequence[float] | None = None,
    backward_weight: float | Sequence[float] | None = None,
    comm: float | Sequence[float] = SWEEP_DEFAULTS.comm,
    costs: str | Path | CostModel | None = None,
    jobs: int = 1,
    cluster: str | None = None,
    progress: Callable[[int], None] | None = None,
    schedules: str | Sequence[str] | None = None,
) -> pd.DataFrame:
    """Simulate the grid (``pipesim sweep``): one row of metrics per configuration, in grid order.

    Args:
        schedule: schedule names or files (default gpipe, 1f1b, interleaved); a comma-separated string works.
            ``schedules=`` (the spelling of :func:`pipesim.plan`) is taken for it; not both.
        pp: pipeline ranks (default 2, 4, 8).
        mb: microbatches (default 8, 16, 32, 64).
        chunks: chunks per rank (default: each schedule's own).
        forward: forward costs F (default 1).
        backward: fused-backward costs B, of the schedules that run B (default 2).
        backward_input: the split backward's I costs, which split-backward schedules (zb-*) run instead of B
            (default: the base costs', 1 for unit costs).
        backward_weight: the split backward's W costs (default: the base costs', 1 for unit costs).
        comm: P2P latencies (default 0).
        costs: a base costs file or CostModel; the lists override its defaults.
        jobs: local processes (0 = all cores; capped at the cores and the work; default 1).
        cluster: a Dask scheduler address to run on instead.
        progress: called with the number of points just finished.

    Returns:
        A DataFrame with the columns of :data:`pipesim.analysis.sweep.RESULT_COLUMNS`; grid points a schedule
        rejects are left out, counted in ``attrs["skipped"]`` with ``attrs["first_skip_reason"]``.
    """
    from pipesim.analysis.sweep import run_sweep

    points = _points(_schedules(schedule, schedules), pp, mb, chunks, forward, backward, backward_input,
                     backward_weight, comm, costs, jobs)
    result = run_sweep(points, jobs=jobs, progress=progress, cluster=cluster)
    frame = result.frame
    frame.attrs.update(skipped=result.skipped, first_skip_reason=result.first_skip_reason)
    return frame


def _points(schedule, pp, mb, chunks, forward, backward, backward_input, backward_weight, comm, costs, jobs):
    from pipesim.analysis.sweep import SweepGrid, worker_count
    from pipesim.program.loader import load_schedule

    if isinstance(schedule, str):
        schedule = [s.strip() for s in schedule.split(",") if s.strip()]
    base = costs if isinstance(costs, CostModel) else (CostModel.load(costs) if costs else CostModel())
    grid = SweepGrid(schedules=list(schedule), pp=_listed(pp), microbatches=_listed(mb), chunks=_listed(chunks),
                     forward=_listed(forward), backward=_listed(backward), p2p_latency=_listed(comm), base=base,
                     backward_input=_listed(backward_input), backward_weight=_listed(backward_weight))
    for name in grid.schedules:
        load_schedule(name)  # an unknown name is an error up front, not a skipped point
    points = grid.points()
    worker_count(jobs, len(points))  # a bad jobs value is an error before any work
    return points


def grid_size(schedule=None, pp=SWEEP_DEFAULTS.pp, mb=SWEEP_DEFAULTS.microbatches, chunks=None,
              *, forward=SWEEP_DEFAULTS.forward, backward=SWEEP_DEFAULTS.backward, backward_input=None,
              backward_weight=None, comm=SWEEP_DEFAULTS.comm, costs=None, jobs: int = 1, schedules=None) -> int:
    """How many configurations :func:`sweep` would simulate (checking the names and ``jobs`` on the way)."""
    return len(_points(_schedules(schedule, schedules), pp, mb, chunks, forward, backward, backward_input,
                       backward_weight, comm, costs, jobs))
