"""1F1B (PipeDream-Flush; Narayanan et al. 2021, §2.2.1; Megatron-LM's non-interleaved schedule).

Rank r runs ``min(p−r−1, m)`` warmup forwards, then alternates one forward with one backward, then drains
the remaining backwards. It holds at most ``min(p−r, m)`` microbatches' activations, against GPipe's m,
with the same bubble ``(p−1)/(m+p−1)``.
"""

from pipesim.errors import ScheduleError
from pipesim.program.blocks import alternate, backwards, forwards
from pipesim.program.ir import Schedule
from pipesim.program.limits import ScheduleLimits
from pipesim.sim.closed_forms import AnalyticBubble, uniform_pipeline_bubble
from pipesim.sim.costs import StageCosts

DEFAULT_CHUNKS = 1
LIMITS = ScheduleLimits(chunks=(1,))


def build(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    if chunks != 1:
        raise ScheduleError(f"1f1b runs one chunk per rank (--chunks {chunks}); use --schedule interleaved")
    fwd, bwd = forwards(range(microbatches)), backwards(range(microbatches))
    ranks = []
    for rank in range(pp):
        warmup = min(pp - rank - 1, microbatches)
        steady = microbatches - warmup
        ranks.append([
            fwd[:warmup],                           # warmup: forwards only
            alternate(fwd[warmup:], bwd[:steady]),  # steady state: the next forward, then the oldest backward
            bwd[steady:],                           # cooldown: drain the warmup microbatches' backwards
        ])
    return Schedule.from_blocks("1f1b", ranks, microbatches=microbatches)


def analytic_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble:
    return uniform_pipeline_bubble(pp, microbatches, costs)
