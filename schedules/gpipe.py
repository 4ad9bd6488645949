"""GPipe (Huang et al., 2019): every microbatch forward, then every microbatch backward.

Each rank holds all ``m`` microbatches' activations at the turn; with uniform costs the bubble fraction is
``(p−1)/(m+p−1)``.
"""

from pipesim.errors import ScheduleError
from pipesim.program.ir import B, F, Schedule
from pipesim.program.limits import ScheduleLimits
from pipesim.sim.closed_forms import AnalyticBubble, uniform_pipeline_bubble
from pipesim.sim.costs import StageCosts

DEFAULT_CHUNKS = 1
LIMITS = ScheduleLimits(chunks=(1,))


def build(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    if chunks != 1:
        raise ScheduleError(f"gpipe runs one chunk per rank (--chunks {chunks}); use --chunks 1 or interleaved")
    orders = []
    for _rank in range(pp):
        forward_phase = [F(mb) for mb in range(microbatches)]
        # Backward in reverse so the last microbatch, whose activations are freshest, goes first (as GPipe).
        backward_phase = [B(mb) for mb in reversed(range(microbatches))]
        orders.append(forward_phase + backward_phase)
    return Schedule.from_orders("gpipe", orders, microbatches=microbatches)


def analytic_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble:
    return uniform_pipeline_bubble(pp, microbatches, costs)
