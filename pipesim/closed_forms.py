"""Reference closed forms (DESIGN.md, "Reference results"): what a schedule's bubble should be on uniform costs.

Schedules return one of these from their optional ``analytic_bubble`` hook so the CLI can print the analytic
value beside the simulated one; tests assert the simulator matches them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.costs import StageCosts


@dataclass(frozen=True)
class AnalyticBubble:
    """Closed-form bubble of a schedule on uniform costs, with the paper it comes from."""

    bubble_fraction: float | None
    bubble_overhead: float | None
    source: str


def uniform_pipeline_bubble(pp: int, microbatches: int, costs: StageCosts) -> AnalyticBubble:
    """GPipe / 1F1B: ``bubble_fraction = (p−1)/(m+p−1)`` and ``overhead = (p−1)/m``.

    Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters"), section 2.2;
    holds for any F and B as long as every stage costs the same.
    """
    p, m = pp, microbatches
    return AnalyticBubble((p - 1) / (m + p - 1), (p - 1) / m, "Narayanan et al. 2021, §2.2")


def interleaved_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble:
    """Interleaved 1F1B: ``overhead = (p−1)/(v·m)``, hence ``fraction = (p−1)/(v·m+p−1)``.

    Narayanan et al. 2021, §2.2.2; exact when m is a multiple of p.
    """
    p, m, v = pp, microbatches, chunks
    return AnalyticBubble((p - 1) / (v * m + p - 1), (p - 1) / (v * m), "Narayanan et al. 2021, §2.2.2")
