"""Interleaved 1F1B (Narayanan et al. 2021, §2.2.2; Megatron-LM's virtual pipeline).

Each rank holds ``v`` chunks in loop placement (stage = chunk·p + rank). Microbatches move through the
chunks in groups of p: forward k is microbatch ``(k // (p·v))·p + k % p`` on chunk ``(k // p) % v``; backward
k visits the chunks in reverse. Rank r warms up with ``2(p−r−1) + (v−1)·p`` forwards (capped at m·v), then
alternates, then drains. The bubble overhead shrinks to ``(p−1)/(v·m)``. When p does not divide m the groups
are Megatron-Core's larger ones (``schedules/_interleaved_order.py``: the smallest group size N it accepts, and
``(v−1)·N`` in the warm-up), so any m ≥ p runs.
"""

from pipesim.program.blocks import alternate
from pipesim.program.ir import Placement, Schedule
from pipesim.program.limits import ScheduleLimits
from pipesim.sim.closed_forms import AnalyticBubble, interleaved_bubble
from pipesim.sim.costs import StageCosts
from schedules._interleaved_order import interleaved_runs, warmup_forwards

DEFAULT_CHUNKS = 2
LIMITS = ScheduleLimits(chunks=None, min_microbatches_per_pp=1)


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS) -> Schedule:
    fwd, bwd = interleaved_runs("interleaved 1F1B", pp, microbatches, chunks)
    total = len(fwd)
    ranks = []
    for rank in range(pp):
        warmup = min(warmup_forwards(pp, rank, chunks, microbatches), total)
        steady = total - warmup
        ranks.append([
            fwd[:warmup],                           # warmup: forwards only
            alternate(fwd[warmup:], bwd[:steady]),  # steady state: the next forward, then the oldest backward
            bwd[steady:],                           # cooldown: drain the backwards still owed
        ])
    return Schedule.from_blocks(
        "interleaved", ranks, microbatches=microbatches, chunks=chunks, placement=Placement.LOOP
    )


def analytic_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble:
    return interleaved_bubble(pp, microbatches, chunks, costs)
