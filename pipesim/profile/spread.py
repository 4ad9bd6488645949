"""The spread of the processes' speeds, measured where a profile runs on several GPUs (or processes) at once.

A synchronous step runs at its slowest GPU's pace (:mod:`pipesim.analytic.slowest_gpu`); the chip field
``gpu_speed_spread`` is the relative standard deviation of the GPUs' speeds. Every process of a profile times
the same GEMM shapes at the same time, so the same table read per process says how fast each one is: a
process's speed is the geometric mean, over the shapes, of its rate over the median process's rate (one shape's
timing noise averages out over tens of shapes; a GPU's own clock does not), and the spread is the standard
deviation of the processes' log speeds. A handful of GPUs measures it only roughly (eight give it to about a
quarter of its value), and what it measures is that node's, not the cluster's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Fewer processes than this leave the fitted default in place: two or three say little about a spread.
MIN_PROCESSES = 4


def process_speeds(rates: Sequence[Sequence[float]]) -> list[float]:
    """Each process's speed relative to the median process: ``rates[p][s]`` is process p's rate on shape s."""
    if not rates or any(len(r) != len(rates[0]) for r in rates) or not rates[0]:
        raise ValueError("every process must report a rate for the same non-empty list of shapes")
    medians = [statistics.median(r[s] for r in rates) for s in range(len(rates[0]))]
    return [math.exp(statistics.fmean(math.log(r[s] / medians[s]) for s in range(len(medians)))) for r in rates]


def speed_spread(rates: Sequence[Sequence[float]]) -> float | None:
    """The relative standard deviation of the processes' speeds, or None for fewer than :data:`MIN_PROCESSES`."""
    if len(rates) < MIN_PROCESSES:
        return None
    return statistics.stdev(math.log(s) for s in process_speeds(rates))
