"""Shared phase builder of the handcrafted zero-bubble schedules (Qi et al., ICLR 2024, §3.1): warmup F's, then
steady ``F I W`` with the W passes delayed, then a cooldown of ``I W`` pairs and the W passes still owed.

Both ZB-H1 and ZB-H2 are this shape on one chunk per rank; they differ only in how many forwards a rank runs
before its first ``I`` (the warmup) and by how many ``I`` passes its ``W`` passes trail (the W delay).
"""

from __future__ import annotations

from pipesim.program.blocks import Passes, alternate, forwards, input_grads, weight_grads


def split_backward_order(microbatches: int, warmup: int, w_delay: int) -> list[Passes]:
    """One rank's compute order: ``warmup`` forwards, steady ``F I [W]``, cooldown ``I [W]``, then the W's left.

    The W of a microbatch runs ``w_delay`` input-gradient passes after its I: those pending W passes are the
    slack the schedule spends to fill bubbles, at M_W of memory each.
    """
    warmup = min(warmup, microbatches)
    mbs = range(microbatches)
    fwd = forwards(mbs)
    return [
        fwd[:warmup],  # warmup: forwards only
        # Steady state: the next forward (while any are left), the input gradient of the oldest microbatch in
        # flight, and the weight gradient of the microbatch w_delay input gradients back; once the I passes are
        # done, the W passes still owed follow one after another.
        alternate(fwd[warmup:], input_grads(mbs), weight_grads(mbs), delays=(0, 0, w_delay)),
    ]
