"""ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024; the V schedule of the
zero-bubble authors' repository): zero bubble at 1F1B's activation memory, two chunks per rank in V placement.

Rank r holds stages r (chunk 0) and 2p−1−r (chunk 1), so a microbatch runs down the ranks on chunk 0, turns
on the last rank without any transfer and comes back up on chunk 1; the backward does the reverse. With
the split backward, every rank runs, in phases (the paper's figure; PyTorch's ``ScheduleZBVZeroBubble``):

1. warmup: ``2(p−r)−1`` chunk-0 forwards, then r pairs (chunk-1 F, chunk-0 F) as chunk-1 inputs return,
   then ``p−r`` chunk-1 ``F I W`` triples — the first input gradients start on the turn of the V;
2. steady: ``F I W`` on chunk 0, then ``F I W`` on chunk 1, until every forward ran;
3. cooldown: r pairs of input gradients (chunk 0, chunk 1) with their W passes held back, ``p−r`` chunk-0
   ``I W`` pairs, then the held-back W passes fill the tail.

The paper's claim: with ``T_F = T_B = T_W`` and enough microbatches the bubble is nearly zero and the peak
activation memory equals 1F1B's (each chunk holds half a 1F1B stage). For fewer than ``2p−1`` microbatches
the order is built for ``2p−1`` and the missing microbatches dropped, as PyTorch does.

On a V placement one link carries chunk-0 activations one way and chunk-1 gradients the same way, in an
order the receiver does not consume them in; ``lower()`` posts those receives in the sender's order (as
PyTorch's runtime and NCCL's FIFO matching require) and each compute waits for its own data.
"""

from __future__ import annotations

from pipesim.errors import ScheduleError
from pipesim.program.ir import F, I, Instruction, Placement, Schedule, W
from pipesim.program.limits import ScheduleLimits

DEFAULT_CHUNKS = 2
LIMITS = ScheduleLimits(chunks=(2,))  # fewer than 2p−1 microbatches are padded, then dropped


class _RankOrder:
    """One rank's order under construction, with the next microbatch of each (pass, chunk) counted."""

    def __init__(self, microbatches: int) -> None:
        self.microbatches = microbatches
        self.order: list[Instruction] = []
        self.next = {(kind, chunk): 0 for kind in (F, I, W) for chunk in (0, 1)}

    def run(self, *passes: tuple) -> None:
        for kind, chunk in passes:
            mb = self.next[kind, chunk]
            self.next[kind, chunk] = mb + 1
            if mb < self.microbatches:  # padded microbatches (m < 2p−1) are dropped
                self.order.append(kind(mb, chunk))

    def count(self, kind, chunk: int) -> int:
        return self.next[kind, chunk]


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS) -> Schedule:
    if chunks != 2:
        raise ScheduleError(f"zb-v runs exactly two chunks per rank in V placement (got --chunks {chunks}); "
                            "use --chunks 2")
    padded = max(microbatches, 2 * pp - 1)  # the warmup below needs 2p−1 microbatches in flight
    orders = []
    for rank in range(pp):
        r = _RankOrder(microbatches)
        # Warmup: fill chunk 0, then interleave chunk-1 forwards as the V turns back up, then start backwards.
        for _ in range(2 * (pp - rank) - 1):
            r.run((F, 0))
        for _ in range(rank):
            r.run((F, 1), (F, 0))
        for _ in range(pp - rank):
            r.run((F, 1), (I, 1), (W, 1))
        # Steady state: one full F-I-W round on each chunk.
        while r.count(F, 0) < padded or r.count(F, 1) < r.count(F, 0):
            if r.count(F, 0) < padded:
                r.run((F, 0))
            r.run((I, 0), (W, 0), (F, 1), (I, 1), (W, 1))
        # Cooldown: input gradients first (they are on the critical path), weight gradients fill the tail.
        held_w1 = []
        for _ in range(rank):
            r.run((I, 0), (I, 1))
            held_w1.append((W, 1))
        for _ in range(pp - rank):
            r.run((I, 0), (W, 0))
        r.run(*held_w1)
        while r.count(W, 0) < r.count(I, 0):
            r.run((W, 0))
        orders.append(r.order)
    return Schedule.from_orders("zb-v", orders, microbatches=microbatches, chunks=2, placement=Placement.V)
