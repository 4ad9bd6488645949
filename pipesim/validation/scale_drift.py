"""Does pipesim's error drift with the GPU count? The evidence for a step's wait on its slowest GPU.

A *scaling group* is a set of published runs of one configuration (source, model, chip, sequence, parallel
degrees, micro-batch size, recomputation, precision, ZeRO stage) measured on different numbers of GPUs. A model
that captured everything that grows with the GPU count would show the same error across a group; the slope
of the error against log₂(GPUs), in points per doubling, says which way it drifts. Issue #24's held-out runs are
too fast most at scale; within our own sources the drift is a median −0.60 points per doubling without
:mod:`pipesim.analytic.slowest_gpu` (23 of 36 groups negative) and −0.31 with it (22 of 36):
``python experiments/scale_drift.py [--gpu-speed-spread 0]``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from pipesim.validation.ranking import group_key
from pipesim.validation.runs import Comparison


def scaling_key(c: Comparison) -> tuple:
    """A ranking group's key (one job on one system) narrowed to one layout, whatever the GPU count."""
    r = c.run
    return (*group_key(c), r.tp, r.pp, r.cp, r.chunks, r.micro_batch, r.recompute.value, r.precision.value,
            r.zero.value, r.sequence_parallel, r.elementwise.value)


@dataclass(frozen=True)
class ScalingGroup:
    key: tuple
    gpus: tuple[int, ...]
    errors: tuple[float, ...]  # signed step-time error of each run, in the order of gpus

    @property
    def slope(self) -> float:
        """The error's least-squares slope against log₂(GPUs): its change per doubling (0.01 = one point)."""
        return float(np.polyfit(np.log2(self.gpus), self.errors, 1)[0])


def scaling_groups(comparisons: list[Comparison]) -> list[ScalingGroup]:
    """The groups with at least two GPU counts, each run's error kept (rows without a published step left out)."""
    groups: dict[tuple, list[Comparison]] = {}
    for c in comparisons:
        if c.step_error is not None:
            groups.setdefault(scaling_key(c), []).append(c)
    result = []
    for key, members in groups.items():
        members.sort(key=lambda c: c.run.gpus)
        if len({c.run.gpus for c in members}) >= 2:
            result.append(ScalingGroup(key, tuple(c.run.gpus for c in members),
                                       tuple(c.step_error for c in members)))
    return result


@dataclass(frozen=True)
class DriftSummary:
    groups: int
    median_slope: float
    mean_slope: float
    negative: int  # groups whose error falls (pipesim grows more optimistic) as GPUs are added


def summarise_drift(groups: list[ScalingGroup]) -> DriftSummary:
    slopes = [g.slope for g in groups]
    return DriftSummary(len(slopes), statistics.median(slopes), statistics.fmean(slopes),
                        sum(s < 0 for s in slopes))
