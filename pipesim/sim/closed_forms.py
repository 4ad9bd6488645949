"""Reference closed forms: what a schedule's bubble should be on uniform costs (docs/architecture.md).

Schedules return one of these from their optional ``analytic_bubble`` hook so the CLI can print the analytic
value beside the simulated one; tests assert the simulator matches them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.sim.costs import StageCosts


@dataclass(frozen=True)
class AnalyticBubble:
    """Closed-form bubble of a schedule on uniform costs, with the paper it comes from."""

    bubble_fraction: float | None
    bubble_overhead: float | None
    source: str
    span_bubble: float | None = None  # bubble *time* per rank, max_r span_r − busy_r (zero-bubble paper)


def uniform_pipeline_bubble(pp: int, microbatches: int, costs: StageCosts) -> AnalyticBubble:
    """GPipe / 1F1B: ``bubble_fraction = (p−1)/(m+p−1)`` and ``overhead = (p−1)/m``.

    Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters"), section 2.2;
    holds for any F and B as long as every stage costs the same.
    """
    p, m = pp, microbatches
    return AnalyticBubble((p - 1) / (m + p - 1), (p - 1) / m, "Narayanan et al. 2021, §2.2")


def interleaved_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble:
    """Interleaved 1F1B: ``overhead = (p−1)/(v·m)``, hence ``fraction = (p−1)/(v·m+p−1)``.

    Narayanan et al. 2021, §2.2.2; exact when m is a multiple of p, and for any m ≥ p under Megatron-Core's
    larger microbatch groups (``schedules/_interleaved_order.py``; tests/test_closed_forms.py).
    """
    p, m, v = pp, microbatches, chunks
    return AnalyticBubble((p - 1) / (v * m + p - 1), (p - 1) / (v * m), "Narayanan et al. 2021, §2.2.2")


def zero_bubble_bubble(
    pp: int, microbatches: int, costs: StageCosts, *, weight_passes_moved: int
) -> AnalyticBubble | None:
    """Handcrafted zero-bubble schedules: bubble time ``(p−1)(T_F + T_B − k·T_W)`` on every rank.

    Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), §3.1: k = 1 for ZB-H1, k = 2 for ZB-H2. The
    time is the paper's convention, measured against the longest span: ``max_r span_r − busy_r``. The
    simulator reproduces it exactly where the schedules take the paper's shapes — ZB-H1: ``m ≥ p`` and
    ``T_W ≤ T_F``; ZB-H2: ``m ≥ 2p−1``, ``T_W ≤ T_F`` and ``2·T_W ≤ T_F + T_B`` — and this returns None
    outside, so no wrong value is printed. The fractions are left out: the ranks' spans are staggered (the
    last rank starts and ends late), so the makespan exceeds the longest span and no closed form is claimed.
    """
    p, m, k = pp, microbatches, weight_passes_moved
    t_f, t_b, t_w = costs.forward, costs.backward_input, costs.backward_weight
    if k == 1:
        claimed = m >= p and t_w <= t_f
    elif k == 2:
        claimed = m >= 2 * p - 1 and t_w <= t_f and 2 * t_w <= t_f + t_b
    else:
        claimed = False
    if not claimed:
        return None
    source = f"Qi et al. 2024 §3.1, bubble time (p−1)(T_F+T_B−{k}·T_W)"
    return AnalyticBubble(None, None, source, (p - 1) * (t_f + t_b - k * t_w))
