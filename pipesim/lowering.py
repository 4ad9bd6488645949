"""Lowering: derive a Program (P2P, gradient reduction, optimizer step) from a Schedule's compute order.

Rules, identical for the simulator and the executor:

- before ``F`` of stage s>0 whose previous stage lives on another rank: ``RECV_F`` from that rank;
  after it, if stage s+1 lives elsewhere: ``SEND_F`` to that rank;
- before ``B``/``I`` of stage s<S−1 whose next stage lives elsewhere: ``RECV_B``; after it, if stage s−1
  lives elsewhere: ``SEND_B``. ``W`` needs no communication;
- stages that hand off to the same rank (V placement at the fold) exchange nothing: the data stays local;
- ``REDUCE_GRAD(chunk)`` right after the last instruction that accumulates that chunk's weight gradient
  (its last ``B`` or ``W``), so DP sync of early-finished chunks overlaps the rest of the backward;
- ``STEP`` last.
"""

from __future__ import annotations

from pipesim.errors import ScheduleError
from pipesim.ir import Instruction, Op, Program, Schedule, instruction

# Ops after which a chunk's weight gradient is final for that microbatch.
_WEIGHT_GRAD_OPS = (Op.B, Op.W)


def lower(schedule: Schedule) -> Program:
    """Insert communication, gradient reduction and the optimizer step into each rank's compute order."""
    shape = schedule.shape
    if len(schedule.orders) != shape.pp:
        raise ScheduleError(
            f"schedule {schedule.name!r} has {len(schedule.orders)} rank orders but pp={shape.pp}"
        )
    last_stage = shape.num_stages - 1
    ranks: list[tuple[Instruction, ...]] = []
    for rank, order in enumerate(schedule.orders):
        last_grad_index = _last_weight_grad_index(schedule.name, rank, order, shape.chunks)
        # Per chunk: the rank of the previous and next stage, or None where it is local or absent.
        prev_peer, next_peer = [], []
        for chunk in range(shape.chunks):
            stage = shape.stage(rank, chunk)
            before = shape.rank_of(stage - 1) if stage > 0 else rank
            after = shape.rank_of(stage + 1) if stage < last_stage else rank
            prev_peer.append(None if before == rank else before)
            next_peer.append(None if after == rank else after)
        out: list[Instruction] = []
        append = out.append
        for index, ins in enumerate(order):
            op, mb, chunk = ins.op, ins.mb, ins.chunk
            if not op.is_compute:
                raise ScheduleError(
                    f"schedule {schedule.name!r} rank {rank} lists {ins}: a schedule holds only F, B, I, W;"
                    " communication, REDUCE_GRAD and STEP are derived by lower()"
                )
            if op is Op.F:
                if prev_peer[chunk] is not None:
                    append(instruction(Op.RECV_F, mb, chunk, prev_peer[chunk]))
                append(ins)
                if next_peer[chunk] is not None:
                    append(instruction(Op.SEND_F, mb, chunk, next_peer[chunk]))
            elif op is Op.W:
                append(ins)
            else:  # B or I: needs the next stage's gradient, produces this stage's input gradient
                if next_peer[chunk] is not None:
                    append(instruction(Op.RECV_B, mb, chunk, next_peer[chunk]))
                append(ins)
                if prev_peer[chunk] is not None:
                    append(instruction(Op.SEND_B, mb, chunk, prev_peer[chunk]))
            for reduced_chunk in last_grad_index.get(index, ()):
                append(instruction(Op.REDUCE_GRAD, chunk=reduced_chunk))
        append(instruction(Op.STEP))
        ranks.append(tuple(out))
    return Program(schedule.name, shape, tuple(ranks))


def _last_weight_grad_index(name: str, rank: int, order, chunks: int) -> dict[int, list[int]]:
    """Map position in ``order`` → chunks whose last weight-gradient op sits there."""
    last: dict[int, int] = {}
    for index, ins in enumerate(order):
        if ins.chunk is None or not 0 <= ins.chunk < chunks:
            raise ScheduleError(
                f"schedule {name!r} rank {rank} lists {ins}: chunk must be in 0..{chunks - 1}"
            )
        if ins.op in _WEIGHT_GRAD_OPS:
            last[ins.chunk] = index
    by_index: dict[int, list[int]] = {}
    for chunk in sorted(last):
        by_index.setdefault(last[chunk], []).append(chunk)
    return by_index
