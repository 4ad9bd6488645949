"""GPipe (Huang et al., 2019): every microbatch forward, then every microbatch backward.

Each rank holds all ``m`` microbatches' activations at the turn; with uniform costs the bubble fraction is
``(p−1)/(m+p−1)``.
"""

from pipesim.errors import ScheduleError
from pipesim.program.blocks import backwards, forwards
from pipesim.program.ir import Schedule
from pipesim.program.limits import ScheduleLimits
from pipesim.sim.closed_forms import AnalyticBubble, uniform_pipeline_bubble
from pipesim.sim.costs import StageCosts

DEFAULT_CHUNKS = 1
LIMITS = ScheduleLimits(chunks=(1,))


def build(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    if chunks != 1:
        raise ScheduleError(f"gpipe runs one chunk per rank (--chunks {chunks}); use --chunks 1 or interleaved")
    forward_phase = forwards(range(microbatches))
    # Backward in reverse so the last microbatch, whose activations are freshest, goes first (as GPipe).
    backward_phase = backwards(reversed(range(microbatches)))
    return Schedule.from_blocks("gpipe", [[forward_phase, backward_phase]] * pp, microbatches=microbatches)


def analytic_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble:
    return uniform_pipeline_bubble(pp, microbatches, costs)
