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

Needs at least ``2p`` microbatches.
"""

from collections import deque

from pipesim.errors import ScheduleError
from pipesim.program.ir import B, F, I, Instruction, Placement, Schedule, W, overlap
from pipesim.program.limits import ScheduleLimits

DEFAULT_CHUNKS = 2
LIMITS = ScheduleLimits(chunks=(2,), min_microbatches_per_pp=2)


class _Rank:
    """One rank's order under construction: next microbatch per (pass, chunk), and the deferred W queue."""

    def __init__(self) -> None:
        self.order: list[Instruction] = []
        self.next_forward = [0, 0]
        self.next_backward = [0, 0]
        self.deferred: deque[tuple[int, int]] = deque()

    def forward(self, chunk: int) -> None:
        self.order.append(F(self.next_forward[chunk], chunk))
        self.next_forward[chunk] += 1

    def backward(self, chunk: int, *, split: bool = False) -> None:
        """A full B, or (``split``) an I whose W joins the deferred queue."""
        mb = self.next_backward[chunk]
        self.next_backward[chunk] += 1
        if split:
            self.order.append(I(mb, chunk))
            self.deferred.append((mb, chunk))
        else:
            self.order.append(B(mb, chunk))

    def pair(self, forward_chunk: int, backward_chunk: int) -> None:
        """An overlapped pair: F of ``forward_chunk`` together with a full B of ``backward_chunk``."""
        forward = F(self.next_forward[forward_chunk], forward_chunk)
        backward = B(self.next_backward[backward_chunk], backward_chunk)
        self.next_forward[forward_chunk] += 1
        self.next_backward[backward_chunk] += 1
        self.order.extend(overlap(forward, backward))

    def weight(self) -> None:
        mb, chunk = self.deferred.popleft()
        self.order.append(W(mb, chunk))


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS) -> Schedule:
    if chunks != 2:
        raise ScheduleError(f"dualpipe-v runs exactly two chunks per rank in V placement (got --chunks {chunks})")
    if microbatches < 2 * pp:
        raise ScheduleError(
            f"dualpipe-v needs at least 2·pp microbatches (--mb {microbatches} < {2 * pp}); use --mb {2 * pp}"
        )
    orders = []
    for rank in range(pp):
        r = _Rank()
        for _ in range(2 * (pp - rank - 1)):  # 1. fill chunk 0
            r.forward(0)
        for _ in range(rank + 1):  # 2. the V turns: both chunks forward
            r.forward(0)
            r.forward(1)
        for _ in range(pp - rank - 1):  # 3. first chunk-1 backwards, weights at once
            r.backward(1, split=True)
            r.weight()
            r.forward(1)
        for i in range(microbatches - 2 * pp + rank + 1):  # 4. main: the pairs F0+B1, then F1+B0
            if i == 0 and rank == pp - 1:  # DualPipe runs the last rank's first round one after the other
                r.forward(0)
                r.backward(1)
            else:
                r.pair(0, 1)
            r.pair(1, 0)
        for _ in range(pp - rank - 1):  # 5. chunk-1 B, then the pair F1+B0
            r.backward(1)
            r.pair(1, 0)
        split = False
        for i in range(rank + 1):  # 6. both chunks backward, deferring weights from half-way
            if i == (rank + 1) // 2 and rank % 2 == 1:
                split = True
            r.backward(1, split=split)
            if i == (rank + 1) // 2 and rank % 2 == 0:
                split = True
            r.backward(0, split=split)
        for _ in range(pp - rank - 1):  # 7. a deferred weight, then a chunk-0 input gradient
            r.weight()
            r.backward(0, split=True)
        while r.deferred:  # 8. the weights still owed
            r.weight()
        orders.append(r.order)
    return Schedule.from_orders("dualpipe-v", orders, microbatches=microbatches, chunks=2, placement=Placement.V)
