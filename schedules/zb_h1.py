"""ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, §3.1, Figure 3 top): 1F1B with split backward.

The backward is split into ``I`` (input gradient, on the critical path) and ``W`` (weight gradient, free to
move). Rank r (worker i = r+1 in the paper) keeps 1F1B's warmup of ``p−r−1`` forwards, then runs ``F I W``,
but starts its W passes ``r`` input-gradient passes late; the cooldown is ``I W`` pairs, then the r W passes
still owed. The late W passes fill the bubbles that 1F1B leaves before the first and after the last backward.

Closed forms (uniform stages, no communication; span convention ``max_r span_r − busy_r``): bubble
``(p−1)(T_F + T_B − T_W)`` against 1F1B's ``(p−1)(T_F + T_B + T_W)``, exact for ``m ≥ p`` and ``T_W ≤ T_F``;
worker i (from 1) peaks at ``(p−i+1)·M_B + (i−1)·M_W`` activations, ``p·M_B`` on the first, as in 1F1B.
"""

from pipesim.errors import ScheduleError
from pipesim.program.ir import Schedule
from pipesim.program.limits import ScheduleLimits
from pipesim.sim.closed_forms import AnalyticBubble, zero_bubble_bubble
from pipesim.sim.costs import StageCosts
from schedules._zero_bubble import split_backward_order

DEFAULT_CHUNKS = 1
LIMITS = ScheduleLimits(chunks=(1,))


def build(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    if chunks != 1:
        raise ScheduleError(f"zb-h1 runs one chunk per rank (--chunks {chunks}); use --schedule zb-v for two")
    ranks = [
        split_backward_order(microbatches, warmup=pp - rank - 1, w_delay=rank) for rank in range(pp)
    ]
    return Schedule.from_blocks("zb-h1", ranks, microbatches=microbatches)


def analytic_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble | None:
    return zero_bubble_bubble(pp, microbatches, costs, weight_passes_moved=1)
