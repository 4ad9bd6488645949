"""ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, §3.1, Figure 3 bottom): zero bubble for memory.

Rank r runs ``2(p−r−1)`` warmup forwards — ``p−r−1`` more than 1F1B, filling the bubble before the first
input gradient arrives — then steady ``F I W`` with its W passes ``2r`` input-gradient passes late, and a
cooldown of ``I W`` pairs followed by the W passes still owed, which fill the tail: the layout becomes the
paper's parallelogram. (The paper also moves the optimizer step off the critical path — "post-validation";
pipesim's span convention leaves the step out of the bubble, which is the same accounting.)

Closed forms (uniform stages, no communication; span convention ``max_r span_r − busy_r``): bubble
``(p−1)(T_F + T_B − 2·T_W)`` — zero when ``T_F = T_B = T_W`` — exact for ``m ≥ 2p−1``, ``T_W ≤ T_F`` and
``2·T_W ≤ T_F + T_B``. Rank r peaks at ``(2p−2r−1)·M_B + 2r·M_W``: ``(2p−1)·M_B`` on the first rank.
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
        raise ScheduleError(f"zb-h2 runs one chunk per rank (--chunks {chunks}); use --schedule zb-v for two")
    ranks = [
        split_backward_order(microbatches, warmup=2 * (pp - rank - 1), w_delay=2 * rank) for rank in range(pp)
    ]
    return Schedule.from_blocks("zb-h2", ranks, microbatches=microbatches)


def analytic_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble | None:
    return zero_bubble_bubble(pp, microbatches, costs, weight_passes_moved=2)
