"""The plain-list form of the built-in schedules that are written with building blocks
(:mod:`pipesim.program.blocks`): each rank's compute order as a Python list of ``F(..)``/``B(..)``/``I(..)``/
``W(..)``, exactly as the schedule files built it before they used blocks (commit 07bae8b).

``tests/test_blocks.py`` holds each built-in's block form to its list form here, Program column for column, so
a change to a schedule file or to the blocks that alters an order fails there. Keep these as they are: they are
the reference, not a second copy to keep in step.
"""

from __future__ import annotations

from collections import deque

from pipesim.program.ir import B, F, I, Instruction, Placement, Schedule, W, overlap


def one_f_one_b(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    orders = []
    for rank in range(pp):
        warmup = min(pp - rank - 1, microbatches)
        order = [F(mb) for mb in range(warmup)]
        for oldest in range(microbatches - warmup):
            order += [F(warmup + oldest), B(oldest)]
        order += [B(mb) for mb in range(microbatches - warmup, microbatches)]
        orders.append(order)
    return Schedule.from_orders("1f1b", orders, microbatches=microbatches)


def gpipe(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    orders = []
    for _rank in range(pp):
        forward_phase = [F(mb) for mb in range(microbatches)]
        backward_phase = [B(mb) for mb in reversed(range(microbatches))]
        orders.append(forward_phase + backward_phase)
    return Schedule.from_orders("gpipe", orders, microbatches=microbatches)


def looped_bfs(pp: int, microbatches: int, chunks: int = 2) -> Schedule:
    orders = []
    for _rank in range(pp):
        order = [F(mb, chunk) for chunk in range(chunks) for mb in range(microbatches)]
        order += [B(mb, chunk) for chunk in reversed(range(chunks)) for mb in range(microbatches)]
        orders.append(order)
    return Schedule.from_orders("looped-bfs", orders, microbatches=microbatches, chunks=chunks,
                                placement=Placement.LOOP)


def _interleaved_orders(pp: int, microbatches: int, chunks: int, extra_warmup: int, steady) -> list[list]:
    """Megatron's interleaved order per rank (the two interleaved files shared it as _interleaved_order.py):
    ``steady(f, b)`` gives the steady state's passes for one forward and one backward."""
    def forward(k: int) -> Instruction:
        return F((k // (pp * chunks)) * pp + k % pp, (k // pp) % chunks)

    def backward(k: int) -> Instruction:
        return B((k // (pp * chunks)) * pp + k % pp, chunks - 1 - (k // pp) % chunks)

    total = microbatches * chunks
    orders = []
    for rank in range(pp):
        warmup = min(2 * (pp - rank - 1) + (chunks - 1) * pp + extra_warmup, total)
        order = [forward(k) for k in range(warmup)]
        for k in range(total - warmup):
            order += steady(forward(warmup + k), backward(k))
        order += [backward(k) for k in range(total - warmup, total)]
        orders.append(order)
    return orders


def interleaved(pp: int, microbatches: int, chunks: int = 2) -> Schedule:
    orders = _interleaved_orders(pp, microbatches, chunks, 0, lambda f, b: [f, b])
    return Schedule.from_orders("interleaved", orders, microbatches=microbatches, chunks=chunks,
                                placement=Placement.LOOP)


def interleaved_overlap(pp: int, microbatches: int, chunks: int = 2) -> Schedule:
    def steady(f: Instruction, b: Instruction) -> list[Instruction]:
        return overlap(f, b) if (f.mb, f.chunk) != (b.mb, b.chunk) else [f, b]

    orders = _interleaved_orders(pp, microbatches, chunks, 1, steady)
    return Schedule.from_orders("interleaved-overlap", orders, microbatches=microbatches, chunks=chunks,
                                placement=Placement.LOOP)


def split_backward_order(microbatches: int, warmup: int, w_delay: int) -> list[Instruction]:
    warmup = min(warmup, microbatches)
    order = [F(mb) for mb in range(warmup)]
    pending: deque[int] = deque()

    def backward_input(mb: int) -> None:
        order.append(I(mb))
        pending.append(mb)
        if len(pending) > w_delay:
            order.append(W(pending.popleft()))

    for oldest in range(microbatches - warmup):
        order.append(F(warmup + oldest))
        backward_input(oldest)
    for mb in range(microbatches - warmup, microbatches):
        backward_input(mb)
    order.extend(W(mb) for mb in pending)
    return order


def zb_h1(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    orders = [split_backward_order(microbatches, warmup=pp - rank - 1, w_delay=rank) for rank in range(pp)]
    return Schedule.from_orders("zb-h1", orders, microbatches=microbatches)


def zb_h2(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    orders = [split_backward_order(microbatches, warmup=2 * (pp - rank - 1), w_delay=2 * rank) for rank in range(pp)]
    return Schedule.from_orders("zb-h2", orders, microbatches=microbatches)


#: Built-in name → its list form.
LIST_FORMS = {
    "1f1b": one_f_one_b,
    "gpipe": gpipe,
    "looped-bfs": looped_bfs,
    "interleaved": interleaved,
    "interleaved-overlap": interleaved_overlap,
    "zb-h1": zb_h1,
    "zb-h2": zb_h2,
}
