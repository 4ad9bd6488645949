"""Lowering: derive a Program (P2P, gradient reduction, optimizer step) from a Schedule's compute order.

Rules, identical for the simulator and the executor:

- after ``F`` of stage s, if stage s+1 lives on another rank: ``SEND_F`` to that rank; after ``B``/``I`` of
  stage s, if stage s−1 lives elsewhere: ``SEND_B``. ``W`` needs no communication;
- ``F`` of stage s>0 whose previous stage lives elsewhere consumes a ``RECV_F`` from that rank, and
  ``B``/``I`` of stage s<S−1 whose next stage lives elsewhere a ``RECV_B``. A receive *posts* the transfer
  (``irecv``); the compute that consumes it waits for the data. Each directed link is one FIFO channel
  (NCCL matches point-to-point operations by order), so a link's receives are posted in the order its
  sender sends. Each receive sits as late as that allows: right before its consumer when the receiver
  consumes in the sender's order (1F1B, interleaved), earlier when it does not — e.g. on a V placement,
  where one link carries chunk-0 activations and chunk-1 gradients that the two ranks order differently;
- stages that hand off to the same rank (V placement at the fold) exchange nothing: the data stays local;
- ``REDUCE_GRAD(chunk)`` right after the last instruction that accumulates that chunk's weight gradient
  (its last ``B`` or ``W``), so DP sync of early-finished chunks overlaps the rest of the backward;
- ``STEP`` last.
"""

from __future__ import annotations

from pipesim.errors import ScheduleError
from pipesim.ir import Instruction, Op, PipelineShape, Program, Schedule, instruction

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
    ranks: list[list[Instruction]] = []
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
        ranks.append(out)
    _post_receives_in_send_order(shape, ranks)
    return Program(schedule.name, shape, tuple(tuple(code) for code in ranks))


def message_label(shape: PipelineShape, rank: int, ins: Instruction) -> tuple[bool, int, int]:
    """What a SEND/RECV carries: (is gradient, microbatch, stage the tensor leaves)."""
    stage = shape.stage(rank, ins.chunk)
    if ins.op is Op.SEND_F or ins.op is Op.SEND_B:
        return ins.op is Op.SEND_B, ins.mb, stage
    return ins.op is Op.RECV_B, ins.mb, stage + 1 if ins.op is Op.RECV_B else stage - 1


def _post_receives_in_send_order(shape: PipelineShape, ranks: list[list[Instruction]]) -> None:
    """Move receives earlier where needed so every link's receives are posted in its sender's order.

    Message k is posted at the earliest consumer among messages k, k+1, … (a suffix minimum): no later than
    its own consumer, and not after a message the sender sent later. Links whose receives do not pair up
    with the sends are left alone for the validator to report.
    """
    sends: dict[tuple[int, int], list[tuple]] = {}
    for rank, code in enumerate(ranks):
        for ins in code:
            if ins.op is Op.SEND_F or ins.op is Op.SEND_B:
                sends.setdefault((rank, ins.peer), []).append(message_label(shape, rank, ins))
    for rank, code in enumerate(ranks):
        receives = [(i, ins) for i, ins in enumerate(code) if ins.op is Op.RECV_F or ins.op is Op.RECV_B]
        by_link: dict[int, list[tuple[int, Instruction]]] = {}
        for i, ins in receives:
            by_link.setdefault(ins.peer, []).append((i, ins))
        moved = False
        post_at: dict[int, list[Instruction]] = {}  # index of the consumer → receives posted right before it
        for peer, items in by_link.items():
            labels = [message_label(shape, rank, ins) for _, ins in items]
            sent = sends.get((peer, rank), [])
            if labels == sent or sorted(labels) != sorted(sent) or len(set(sent)) != len(sent):
                for i, ins in items:
                    post_at.setdefault(i + 1, []).append(ins)
                continue
            moved = True
            consumer = {label: i + 1 for label, (i, _) in zip(labels, items, strict=True)}
            earliest = len(code)
            positions = []
            for label in reversed(sent):
                earliest = min(earliest, consumer[label])
                positions.append(earliest)
            for label, position in zip(sent, reversed(positions), strict=True):
                post_at.setdefault(position, []).append(_receive_of(items, labels, label))
        if not moved:
            continue
        rebuilt: list[Instruction] = []
        for i, ins in enumerate(code):
            rebuilt.extend(post_at.get(i, ()))
            if not (ins.op is Op.RECV_F or ins.op is Op.RECV_B):
                rebuilt.append(ins)
        code[:] = rebuilt


def _receive_of(items, labels, label) -> Instruction:
    return items[labels.index(label)][1]


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
