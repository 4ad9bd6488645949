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
from pipesim.program.ir import Instruction, Op, Program, Schedule, instruction

_COMPUTE = frozenset({Op.F, Op.B, Op.I, Op.W})
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
    # Per directed link: what its sender sends, in order; and where the receiver consumes each message.
    sent: dict[tuple[int, int], list[tuple[bool, int, int]]] = {}
    received: dict[tuple[int, int], list[tuple[int, tuple[bool, int, int]]]] = {}
    for rank, order in enumerate(schedule.orders):
        last_grad_index = _last_weight_grad_index(schedule.name, rank, order, shape.chunks)
        # Per chunk: its stage, the rank of the previous and next stage (None where local or absent), and the
        # label lists of the links to them (resolved once: this loop runs for every instruction of a sweep).
        stages, prev_peer, next_peer, recv_f, send_f, recv_b, send_b = ([] for _ in range(7))
        for chunk in range(shape.chunks):
            stage = shape.stage(rank, chunk)
            before = shape.rank_of(stage - 1) if stage > 0 else rank
            after = shape.rank_of(stage + 1) if stage < last_stage else rank
            stages.append(stage)
            prev_peer.append(None if before == rank else before)
            next_peer.append(None if after == rank else after)
            recv_f.append(received.setdefault((before, rank), []))
            send_f.append(sent.setdefault((rank, after), []))
            recv_b.append(received.setdefault((after, rank), []))
            send_b.append(sent.setdefault((rank, before), []))
        out: list[Instruction] = []
        append = out.append
        for index, ins in enumerate(order):
            op, mb, chunk = ins.op, ins.mb, ins.chunk
            if op not in _COMPUTE:
                raise ScheduleError(
                    f"schedule {schedule.name!r} rank {rank} lists {ins}: a schedule holds only F, B, I, W;"
                    " communication, REDUCE_GRAD and STEP are derived by lower()"
                )
            # Labels say what travels: (is gradient, microbatch, stage the tensor leaves).
            if op is Op.F:
                peer = prev_peer[chunk]
                if peer is not None:
                    recv_f[chunk].append((len(out), (False, mb, stages[chunk] - 1)))
                    append(instruction(Op.RECV_F, mb, chunk, peer))
                append(ins)
                peer = next_peer[chunk]
                if peer is not None:
                    send_f[chunk].append((False, mb, stages[chunk]))
                    append(instruction(Op.SEND_F, mb, chunk, peer))
            elif op is Op.W:
                append(ins)
            else:  # B or I: needs the next stage's gradient, produces this stage's input gradient
                peer = next_peer[chunk]
                if peer is not None:
                    recv_b[chunk].append((len(out), (True, mb, stages[chunk] + 1)))
                    append(instruction(Op.RECV_B, mb, chunk, peer))
                append(ins)
                peer = prev_peer[chunk]
                if peer is not None:
                    send_b[chunk].append((True, mb, stages[chunk]))
                    append(instruction(Op.SEND_B, mb, chunk, peer))
            for reduced_chunk in last_grad_index.get(index, ()):
                append(instruction(Op.REDUCE_GRAD, chunk=reduced_chunk))
        append(instruction(Op.STEP))
        ranks.append(out)
    _post_receives_in_send_order(ranks, sent, received)
    return Program(schedule.name, shape, tuple(tuple(code) for code in ranks))


def _post_receives_in_send_order(
    ranks: list[list[Instruction]],
    sent: dict[tuple[int, int], list[tuple]],
    received: dict[tuple[int, int], list[tuple[int, tuple]]],
) -> None:
    """Move receives earlier where needed so every link's receives are posted in its sender's order.

    Message k is posted at the earliest consumer among messages k, k+1, … (a suffix minimum): no later than
    its own consumer, and not after a message the sender sent later. Links whose receives do not pair up
    with the sends are left alone for the validator to report.
    """
    # rank → [(index it moves before, link, k-th message on the link, index of the receive now)]
    moves: dict[int, list[tuple[int, int, int, int]]] = {}
    for link, ((src, dst), items) in enumerate(received.items()):
        labels = [label for _, label in items]
        order = sent.get((src, dst), [])
        if labels == order or sorted(labels) != sorted(order) or len(set(order)) != len(order):
            continue
        where = {label: index for index, label in items}  # each receive sits right before its consumer
        earliest = len(ranks[dst])
        targets = []
        for label in reversed(order):
            earliest = min(earliest, where[label])
            targets.append(earliest)
        for k, (label, target) in enumerate(zip(order, reversed(targets), strict=True)):
            moves.setdefault(dst, []).append((target, link, k, where[label]))
    for rank, moved in moves.items():
        code = ranks[rank]
        leaving = {source for *_, source in moved}
        before: dict[int, list[Instruction]] = {}
        for target, _, _, source in sorted(moved):  # a link's receives stay in its send order
            before.setdefault(target, []).append(code[source])
        rebuilt: list[Instruction] = []
        for index, ins in enumerate(code):
            rebuilt.extend(before.get(index, ()))
            if index not in leaving:
                rebuilt.append(ins)
        code[:] = rebuilt


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
