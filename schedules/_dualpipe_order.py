"""The eight-phase per-rank order shared by DualPipe and DualPipe-V (DeepSeek-V3 technical report, 2024,
§3.2.1; the ``step`` of the DualPipe repository's ``DualPipe`` and ``DualPipeV``).

The order is written over two *phases* (0 and 1) of a V of ``ranks`` ranks with ``microbatches`` microbatches
per phase, as DualPipe-V runs it. DualPipe runs the very same order on rank r and on its mirror rank pp−1−r,
with ``ranks = pp/2``, ``microbatches = m/2`` and ``rank = min(r, pp−1−r)`` (the repository's ``half_rank``),
its phases naming the two directions the other way round on the second half of the ranks. So the order is
built here once, and each schedule maps a (phase, k-th microbatch of that phase) to its own instruction.

Per rank, in the phase numbering:

1. ``2(p−r−1)`` phase-0 forwards;
2. ``r+1`` pairs: phase-0 F, phase-1 F;
3. ``p−r−1`` triples: phase-1 I, its W at once, phase-1 F;
4. main, ``m − 2p + r + 1`` rounds: (phase-0 F with phase-1 B) then (phase-1 F with phase-0 B), each an
   overlapped pair (:func:`~pipesim.program.ir.overlap`). The last rank's first round (DualPipe: the middle
   ranks') is not overlapped, as in DualPipe's own code ("to further reduce bubble size");
5. ``p−r−1`` rounds: phase-1 B, then the pair (phase-1 F with phase-0 B);
6. ``r+1`` pairs: phase-1 then phase-0 backward, switching from full B to I (W deferred) half-way;
7. ``p−r−1`` pairs: a deferred W, then phase-0 I (W deferred);
8. ``r+1`` deferred W's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from pipesim.program.ir import Instruction, Op, overlap

#: (op, phase, k) → the instruction of the k-th microbatch of that phase, with that op.
MakeInstruction = Callable[[Op, int, int], Instruction]


class _Rank:
    """One rank's order under construction: next microbatch per (pass, phase), and the deferred W queue."""

    def __init__(self, make: MakeInstruction) -> None:
        self.make = make
        self.order: list[Instruction] = []
        self.next_forward = [0, 0]
        self.next_backward = [0, 0]
        self.deferred: deque[tuple[int, int]] = deque()

    def _forward_of(self, phase: int) -> Instruction:
        made = self.make(Op.F, phase, self.next_forward[phase])
        self.next_forward[phase] += 1
        return made

    def forward(self, phase: int) -> None:
        self.order.append(self._forward_of(phase))

    def backward(self, phase: int, *, split: bool = False) -> None:
        """A full B, or (``split``) an I whose W joins the deferred queue."""
        k = self.next_backward[phase]
        self.next_backward[phase] += 1
        self.order.append(self.make(Op.I if split else Op.B, phase, k))
        if split:
            self.deferred.append((phase, k))

    def pair(self, forward_phase: int, backward_phase: int) -> None:
        """An overlapped pair: F of ``forward_phase`` together with a full B of ``backward_phase``."""
        forward = self._forward_of(forward_phase)
        backward = self.make(Op.B, backward_phase, self.next_backward[backward_phase])
        self.next_backward[backward_phase] += 1
        self.order.extend(overlap(forward, backward))

    def weight(self) -> None:
        phase, k = self.deferred.popleft()
        self.order.append(self.make(Op.W, phase, k))


def phase_order(ranks: int, microbatches: int, rank: int, make: MakeInstruction) -> list[Instruction]:
    """One rank's compute order over a V of ``ranks`` ranks, ``microbatches`` (≥ 2·ranks) per phase."""
    p, r = ranks, rank
    order = _Rank(make)
    for _ in range(2 * (p - r - 1)):  # 1. fill phase 0
        order.forward(0)
    for _ in range(r + 1):  # 2. the V turns: both phases forward
        order.forward(0)
        order.forward(1)
    for _ in range(p - r - 1):  # 3. first phase-1 backwards, weights at once
        order.backward(1, split=True)
        order.weight()
        order.forward(1)
    for i in range(microbatches - 2 * p + r + 1):  # 4. main: the pairs F0+B1, then F1+B0
        if i == 0 and r == p - 1:  # DualPipe runs this rank's first round one after the other
            order.forward(0)
            order.backward(1)
        else:
            order.pair(0, 1)
        order.pair(1, 0)
    for _ in range(p - r - 1):  # 5. phase-1 B, then the pair F1+B0
        order.backward(1)
        order.pair(1, 0)
    split = False
    for i in range(r + 1):  # 6. both phases backward, deferring weights from half-way
        if i == (r + 1) // 2 and r % 2 == 1:
            split = True
        order.backward(1, split=split)
        if i == (r + 1) // 2 and r % 2 == 0:
            split = True
        order.backward(0, split=split)
    for _ in range(p - r - 1):  # 7. a deferred weight, then a phase-0 input gradient
        order.weight()
        order.backward(0, split=True)
    while order.deferred:  # 8. the weights still owed
        order.weight()
    return order.order
