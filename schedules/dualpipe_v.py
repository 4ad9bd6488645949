"""DualPipe-V (DeepSeek-V3 technical report, 2024, §3.2.1; the "cut-in-half" DualPipe of the DualPipe repo).

Two chunks per rank in V placement (rank r holds stages r and 2p−1−r), so each rank works on both ends of
the pipeline at once, and some backwards are split into ``I`` with their ``W`` deferred to a FIFO queue
that later ``W`` steps drain (zero-bubble style). Per rank, eight phases:

1. ``2(p−r−1)`` chunk-0 forwards;
2. ``r+1`` pairs: chunk-0 F, chunk-1 F;
3. ``p−r−1`` triples: chunk-1 I, its W at once, chunk-1 F;
4. main, ``m − 2p + r + 1`` rounds: (chunk-0 F with chunk-1 B) then (chunk-1 F with chunk-0 B), each an
   overlapped pair (:func:`~pipesim.program.ir.overlap`, torch's ``OVERLAP_F_B``): DualPipe runs the two
   chunks' attention, MLP and all-to-all interleaved so one's communication hides behind the other's compute
   (timed by :func:`~pipesim.sim.costs.pair_duration`). The last rank's first round is not overlapped, as in
   DualPipe's own code ("to further reduce bubble size"): its F and B run one after the other;
5. ``p−r−1`` rounds: chunk-1 B, then the pair (chunk-1 F with chunk-0 B);
6. ``r+1`` pairs: chunk-1 then chunk-0 backward, switching from full B to I (W deferred) half-way;
7. ``p−r−1`` pairs: a deferred W, then chunk-0 I (W deferred);
8. ``r+1`` deferred W's.

Needs at least ``2p`` microbatches. The order is built by :mod:`schedules._dualpipe_order`, which
bidirectional DualPipe (``schedules/dualpipe.py``) shares.
"""

from pipesim.errors import ScheduleError
from pipesim.program.ir import Instruction, Op, Placement, Schedule, instruction
from pipesim.program.limits import ScheduleLimits
from schedules._dualpipe_order import phase_order

DEFAULT_CHUNKS = 2
LIMITS = ScheduleLimits(chunks=(2,), min_microbatches_per_pp=2)


def _own_phase(op: Op, phase: int, k: int) -> Instruction:
    """DualPipe-V's phases are its chunks, and every microbatch passes both."""
    return instruction(op, k, phase)


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS) -> Schedule:
    if chunks != 2:
        raise ScheduleError(f"dualpipe-v runs exactly two chunks per rank in V placement (got --chunks {chunks})")
    if microbatches < 2 * pp:
        raise ScheduleError(
            f"dualpipe-v needs at least 2·pp microbatches (--mb {microbatches} < {2 * pp}); use --mb {2 * pp}"
        )
    orders = [phase_order(pp, microbatches, rank, _own_phase) for rank in range(pp)]
    return Schedule.from_orders("dualpipe-v", orders, microbatches=microbatches, chunks=2, placement=Placement.V)
