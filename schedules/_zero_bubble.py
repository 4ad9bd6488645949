"""Shared phase builder of the handcrafted zero-bubble schedules (Qi et al., ICLR 2024, §3.1): warmup F's, then
steady ``F I W`` with the W passes delayed, then a cooldown of ``I W`` pairs and the W passes still owed.

Both ZB-H1 and ZB-H2 are this shape on one chunk per rank; they differ only in how many forwards a rank runs
before its first ``I`` (the warmup) and by how many ``I`` passes its ``W`` passes trail (the W delay).
"""

from __future__ import annotations

from collections import deque

from pipesim.program.ir import F, I, Instruction, W


def split_backward_order(microbatches: int, warmup: int, w_delay: int) -> list[Instruction]:
    """One rank's compute order: ``warmup`` forwards, steady ``F I [W]``, cooldown ``I [W]``, then the W's left.

    A W joins the steady state or cooldown only once ``w_delay`` input-gradient passes are pending a W: those
    pending W passes are the slack the schedule spends to fill bubbles, at M_W of memory each.
    """
    warmup = min(warmup, microbatches)
    order = [F(mb) for mb in range(warmup)]
    pending: deque[int] = deque()  # microbatches whose I ran but whose W has not

    def backward_input(mb: int) -> None:
        order.append(I(mb))
        pending.append(mb)
        if len(pending) > w_delay:
            order.append(W(pending.popleft()))

    # Steady state: one forward, then the input gradient of the oldest microbatch in flight.
    for oldest in range(microbatches - warmup):
        order.append(F(warmup + oldest))
        backward_input(oldest)
    # Cooldown: the input gradients of the warmup microbatches, then the weight gradients still owed.
    for mb in range(microbatches - warmup, microbatches):
        backward_input(mb)
    order.extend(W(mb) for mb in pending)
    return order
