"""DualPipe, bidirectional (DeepSeek-V3 technical report, 2024, §3.2.1, Figure 5): two model copies, two ways.

The ``DualPipe`` class of the DualPipe repository, as an order of compute instructions.

Two copies of the model run as two pipelines in opposite directions over the same pp ranks (the dual
placement, :attr:`~pipesim.program.ir.Placement.DUAL`): rank r holds stage r of the *down* pipeline
(chunk 0) and stage pp−1−r of the *up* pipeline (chunk 1), so every rank holds the parameters of two stages
(2× parameter memory, DeepSeek-V3 Table 2). Microbatches 0..m/2−1 flow down (rank 0 → pp−1), m/2..m−1 up
(rank pp−1 → 0); each passes only its own pipeline's pp stages, so each chunk costs a whole rank's share of
the model (not 1/2 as on a V). The two copies of each stage are the same layers: their gradients are summed
across the mirror pair of ranks before the optimizer step (the executor does so; the simulator times one
stage's gradient sync per chunk, as for any chunk).

The per-rank order is DualPipe-V's eight phases (:mod:`schedules._dualpipe_order`) over half the ranks and
half the microbatches: rank r and its mirror pp−1−r run the same order with ``half_rank = min(r, pp−1−r)``,
and on the first half of the ranks the order's phase 0 is the down direction, on the second half the up one
(the repository's ``phase ^= is_in_second_half``). Phases 4 and 5 run overlapped F&B pairs (one direction's
forward with the other's backward) that hide the expert all-to-all; phases 3, 6 and 7 split backwards into
I and a deferred W, zero-bubble style.

Needs pp even and m even with m ≥ 2·pp (the repository's asserts).

Bubble: DeepSeek-V3 Table 2 gives ``(PP/2 − 1)(F&B + B − 3W)`` per rank, with F&B the duration of an overlapped
pair. On uniform costs with no all-to-all (F&B = F + B) and F = I = W, B = I + W, pipesim's simulation of this
order gives exactly that on every rank: max_r span_r − busy_r = (pp/2 − 1)(F + 2B − 3W) (``analytic_bubble``,
held by tests/test_dualpipe.py for pp 2..8).
"""

from __future__ import annotations

from pipesim.errors import ScheduleError
from pipesim.program.ir import Instruction, Op, Placement, Schedule, instruction
from pipesim.program.limits import ScheduleLimits
from pipesim.sim.closed_forms import AnalyticBubble
from pipesim.sim.costs import StageCosts
from schedules._dualpipe_order import phase_order

DEFAULT_CHUNKS = 2
LIMITS = ScheduleLimits(chunks=(2,), min_microbatches_per_pp=2, even_pp=True, even_microbatches=True)


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS) -> Schedule:
    if chunks != 2:
        raise ScheduleError(f"dualpipe runs exactly two chunks per rank, one per direction (got --chunks {chunks})")
    if pp % 2:
        raise ScheduleError(f"dualpipe pairs rank r with rank pp−1−r, so pp must be even (got --pp {pp})")
    if microbatches % 2 or microbatches < 2 * pp:
        fixed = max(2 * pp, microbatches + microbatches % 2)
        raise ScheduleError(
            f"dualpipe sends half the microbatches each way and needs at least 2·pp of them, an even "
            f"number (got --mb {microbatches}); use --mb {fixed}"
        )
    half = microbatches // 2
    orders = []
    for rank in range(pp):
        second_half = rank >= pp // 2

        def make(op: Op, phase: int, k: int, second_half: bool = second_half) -> Instruction:
            # The order's phase names a direction (= this rank's chunk) by the half the rank sits in;
            # direction 1's microbatch ids follow direction 0's.
            chunk = phase ^ second_half
            return instruction(op, k + chunk * half, chunk)

        orders.append(phase_order(pp // 2, half, min(rank, pp - 1 - rank), make))
    return Schedule.from_orders("dualpipe", orders, microbatches=microbatches, chunks=2, placement=Placement.DUAL)


def analytic_bubble(pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble | None:
    """DeepSeek-V3 Table 2: bubble time ``(PP/2 − 1)(F&B + B − 3W)``, claimed where pipesim's simulation
    reproduces it exactly (tests/test_dualpipe.py): no all-to-all and no overlap slowdown (F&B = F + B) and
    F = I = W with B = I + W. Elsewhere the simulated bubble differs (e.g. F = 1, B = 3, I = W = 1.5, pp = 4:
    2.0 against the formula's 2.5), so None is returned and no wrong value is printed."""
    t_f, t_b, t_i, t_w = costs.forward, costs.backward, costs.backward_input, costs.backward_weight
    plain_pairs = costs.a2a_forward == 0 and costs.a2a_backward == 0 and costs.overlap_slowdown == 0
    if not (plain_pairs and t_f == t_i == t_w and t_b == t_i + t_w):
        return None
    return AnalyticBubble(
        None, None, "DeepSeek-V3 Table 2, bubble time (PP/2−1)(F&B+B−3W)", (pp // 2 - 1) * (t_f + t_b + t_b - 3 * t_w)
    )
