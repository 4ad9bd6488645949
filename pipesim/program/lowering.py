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
  a pipeline's first stage receives no activation and its last no gradient (the dual placement's two
  pipelines are not joined at their ends);
- ``REDUCE_GRAD(chunk)`` right after the last instruction that accumulates that chunk's weight gradient
  (its last ``B`` or ``W``), so DP sync of early-finished chunks overlaps the rest of the backward;
- ``STEP`` last;
- an overlapped pair (``F`` then a ``B``/``I`` flagged :attr:`~pipesim.program.ir.Instruction.overlap`) is one
  unit: both halves' receives come before the pair, the two computes stay adjacent, and both halves' sends
  (then the backward's ``REDUCE_GRAD``) follow it — the pair starts once both inputs are there, and neither
  half's output leaves before the pair is done.

The whole pass is vectorised over the compute instructions (numpy columns in, :class:`ProgramColumns` out):
no Instruction object is created, so lowering a 3-million-instruction Program costs array operations, not
millions of constructor calls. A schedule built from blocks (:mod:`pipesim.program.blocks`) arrives as columns;
only reading a schedule's own Instruction lists is one step per compute op.
"""

from __future__ import annotations

import numpy as np

from pipesim.errors import ScheduleError
from pipesim.program.ir import (
    IS_COMPUTE,
    OP_CODE,
    WEIGHT_GRAD_OPS,
    Op,
    Payload,
    PipelineShape,
    Program,
    ProgramColumns,
    Schedule,
    leaving_stage,
)
from pipesim.program.table import ranks_of, stages_of

_F, _B, _I, _W = (OP_CODE[o] for o in (Op.F, Op.B, Op.I, Op.W))
_SEND_F, _SEND_B, _RECV_F, _RECV_B = (OP_CODE[o] for o in (Op.SEND_F, Op.SEND_B, Op.RECV_F, Op.RECV_B))
_GRADIENT, _ACTIVATION = int(Payload.GRADIENT), int(Payload.ACTIVATION)  # plain ints for numpy
_WEIGHT_GRAD_CODES = np.array([OP_CODE[o] for o in WEIGHT_GRAD_OPS])


def lower(schedule: Schedule) -> Program:
    """Insert communication, gradient reduction and the optimizer step into each rank's compute order."""
    shape = schedule.shape
    if schedule.num_ranks != shape.pp:
        raise ScheduleError(
            f"schedule {schedule.name!r} has {schedule.num_ranks} rank orders but pp={shape.pp}"
        )
    rank, op, mb, chunk, tail = _compute_columns(schedule)
    _check_compute(schedule, rank, op, chunk)
    _check_pairs(schedule, rank, op, mb, chunk, tail)
    columns = _lower_columns(shape, rank, op, mb, chunk, tail)
    return Program(schedule.name, shape, columns=columns)


def _compute_columns(schedule: Schedule) -> tuple[np.ndarray, ...]:
    """rank, op code, microbatch, chunk and the overlap flag of every compute instruction, ranks in order."""
    columns = schedule.columns
    rank = np.repeat(np.arange(len(columns.rank_lengths), dtype=np.int64), columns.rank_lengths)
    return rank, columns.op, columns.microbatch, columns.chunk, columns.overlap_mask


def _check_compute(schedule: Schedule, rank: np.ndarray, op: np.ndarray, chunk: np.ndarray) -> None:
    """A schedule lists only compute ops on existing chunks; the first offence (rank by rank) is named."""
    bad_chunk = (chunk < 0) | (chunk >= schedule.shape.chunks)
    bad_op = ~IS_COMPUTE[op]
    if not (bad_chunk.any() or bad_op.any()):
        return
    # Within a rank the chunk check comes first (it reads the whole order), as the rank-by-rank pass did.
    first_rank = int(rank[bad_chunk | bad_op].min())
    in_rank = rank == first_rank
    begin = int(np.flatnonzero(in_rank)[0])
    if (bad_chunk & in_rank).any():
        row = int(np.flatnonzero(bad_chunk & in_rank)[0])
        ins = schedule.orders[first_rank][row - begin]
        raise ScheduleError(
            f"schedule {schedule.name!r} rank {first_rank} lists {ins}: chunk must be in 0..{schedule.shape.chunks - 1}"
        )
    row = int(np.flatnonzero(bad_op & in_rank)[0])
    ins = schedule.orders[first_rank][row - begin]
    raise ScheduleError(
        f"schedule {schedule.name!r} rank {first_rank} lists {ins}: a schedule holds only F, B, I, W;"
        " communication, REDUCE_GRAD and STEP are derived by lower()"
    )


def _check_pairs(schedule: Schedule, rank, op, mb, chunk, tail) -> None:
    """Each overlapped half (a B or I flagged overlap) directly follows an F of another (microbatch, chunk) on
    its rank: the pair the flag names. The first offence is named."""
    rows = np.flatnonzero(tail)
    if not len(rows):
        return
    head = rows - 1
    ok = (head >= 0) & ((op[rows] == _B) | (op[rows] == _I))
    safe = np.maximum(head, 0)
    ok &= (rank[safe] == rank[rows]) & (op[safe] == _F) & ~tail[safe]
    ok &= (mb[safe] != mb[rows]) | (chunk[safe] != chunk[rows])
    if ok.all():
        return
    row = int(rows[np.flatnonzero(~ok)[0]])
    r = int(rank[row])
    begin = int(np.flatnonzero(rank == r)[0])
    ins = schedule.orders[r][row - begin]
    raise ScheduleError(
        f"schedule {schedule.name!r} rank {r} lists {ins} as the second half of an overlapped pair, but the "
        "instruction before it is not an F of another microbatch or chunk; build pairs with overlap(F(..), B(..))"
    )


def _lower_columns(shape: PipelineShape, rank, op, mb, chunk, tail=None) -> ProgramColumns:
    pp, last_stage = shape.pp, shape.num_stages - 1
    n = len(op)
    stage = stages_of(shape, rank, chunk)
    # A pipeline's first stage reads the batch and its last computes the loss (DUAL has two pipelines).
    prev_rank = np.where(~shape.is_first_stage(stage), ranks_of(shape, np.maximum(stage - 1, 0)), rank)
    next_rank = np.where(~shape.is_last_stage(stage), ranks_of(shape, np.minimum(stage + 1, last_stage)), rank)
    is_f = op == _F
    is_bwd = (op == _B) | (op == _I)
    # The receive before a compute op and the send after it, with their peers (-1: none).
    recv_peer = np.where(is_f, prev_rank, np.where(is_bwd, next_rank, rank))
    send_peer = np.where(is_f, next_rank, np.where(is_bwd, prev_rank, rank))
    has_recv = recv_peer != rank
    has_send = send_peer != rank
    # REDUCE_GRAD(chunk) after the last B/W of that chunk on its rank.
    has_reduce = np.zeros(n, dtype=bool)
    grad_rows = np.flatnonzero(np.isin(op, _WEIGHT_GRAD_CODES))
    if len(grad_rows):
        key = rank[grad_rows] * shape.chunks + chunk[grad_rows]
        # the last row of each key: unique on the reversed array finds first occurrences from the end
        _, last_from_end = np.unique(key[::-1], return_index=True)
        has_reduce[grad_rows[len(grad_rows) - 1 - last_from_end]] = True

    counts = has_recv.astype(np.int64) + 1 + has_send + has_reduce
    # Output position of each compute row's first instruction; every earlier rank adds its STEP.
    first = np.cumsum(counts) - counts + rank
    total = int(counts.sum()) + pp
    out_op = np.empty(total, dtype=np.int64)
    out_mb = np.empty(total, dtype=np.int64)
    out_chunk = np.empty(total, dtype=np.int64)
    out_peer = np.full(total, -1, dtype=np.int64)

    def place(where: np.ndarray, mask: np.ndarray, codes, mbs, peers) -> None:
        rows = where[mask]
        out_op[rows] = codes[mask] if isinstance(codes, np.ndarray) else codes
        out_mb[rows] = mbs[mask] if isinstance(mbs, np.ndarray) else mbs
        out_chunk[rows] = chunk[mask]
        if peers is not None:
            out_peer[rows] = peers[mask]

    everything = np.ones(n, dtype=bool)
    recv_code = np.where(is_f, OP_CODE[Op.RECV_F], OP_CODE[Op.RECV_B])
    send_code = np.where(is_f, OP_CODE[Op.SEND_F], OP_CODE[Op.SEND_B])
    recv_at = first.copy()
    compute_at = first + has_recv
    send_at = compute_at + 1
    reduce_at = compute_at + 1 + has_send
    pairs = tail is not None and bool(np.any(tail))
    if pairs:
        # A pair (head h, tail t = h+1) fills the rows of both: recv_h, recv_t, F, B/I, send_h, send_t, reduce_t.
        t = np.flatnonzero(tail)
        h = t - 1
        base = first[h]
        recv_at[t] = base + has_recv[h]
        compute_at[h] = base + has_recv[h] + has_recv[t]
        compute_at[t] = compute_at[h] + 1
        send_at[h] = compute_at[t] + 1
        send_at[t] = send_at[h] + has_send[h]
        reduce_at[t] = send_at[t] + has_send[t]
    place(recv_at, has_recv, recv_code, mb, recv_peer)
    place(compute_at, everything, op, mb, None)
    place(send_at, has_send, send_code, mb, send_peer)
    place(reduce_at, has_reduce, OP_CODE[Op.REDUCE_GRAD], -1, None)
    lengths = np.bincount(rank, weights=counts, minlength=pp).astype(np.int64) + 1
    step_rows = np.cumsum(lengths) - 1
    out_op[step_rows] = OP_CODE[Op.STEP]
    out_mb[step_rows] = -1
    out_chunk[step_rows] = -1
    out_overlap = None
    if pairs:
        out_overlap = np.zeros(total, dtype=bool)
        out_overlap[compute_at[tail]] = True

    columns = ProgramColumns(out_op, out_mb, out_chunk, out_peer, lengths, out_overlap)
    if _received_in_send_order(pp, rank, mb, stage, is_bwd, has_recv, recv_peer, has_send, send_peer):
        return columns  # every link is received in its send order (1F1B, interleaved, ...): nothing moves
    return _post_receives_in_send_order(shape, columns)


def _received_in_send_order(pp, rank, mb, stage, is_bwd, has_recv, recv_peer, has_send, send_peer) -> bool:
    """Whether every link's receivers consume its messages in the order its sender sends them, judged on the
    compute instructions (each sends and receives at most one message, in program order)."""
    if has_recv.sum() != has_send.sum():
        return False
    recv_link = (recv_peer * pp + rank)[has_recv]
    send_link = (rank * pp + send_peer)[has_send]
    r_order = np.argsort(recv_link, kind="stable")
    s_order = np.argsort(send_link, kind="stable")
    if not np.array_equal(recv_link[r_order], send_link[s_order]):
        return False
    payload = is_bwd.astype(np.int64)
    recv_stage = np.where(is_bwd, stage + 1, stage - 1)  # the stage the received tensor leaves
    return all(np.array_equal(column[has_recv][r_order], sent[has_send][s_order])
               for column, sent in ((payload, payload), (mb, mb), (recv_stage, stage)))


def _post_receives_in_send_order(shape: PipelineShape, columns: ProgramColumns) -> ProgramColumns:
    """Move receives earlier where needed so every link's receives are posted in its sender's order.

    Message k is posted at the earliest consumer among messages k, k+1, … (a suffix minimum): no later than
    its own consumer, and not after a message the sender sent later. Links whose receives do not pair up
    with the sends are left alone for the validator to report. Receives moved before the same instruction
    keep the order (link, message), links numbered as ranks and their chunks first meet them.
    """
    op, mb_all, chunk_all, peer_all = columns.op, columns.microbatch, columns.chunk, columns.peer
    pp = shape.pp
    n = len(op)
    rank_all = np.repeat(np.arange(pp, dtype=np.int64), columns.rank_lengths)
    seq = np.arange(n) - np.repeat(np.cumsum(columns.rank_lengths) - columns.rank_lengths, columns.rank_lengths)
    # Work on the communication rows only; `rows` maps them back.
    is_send_all = (op == _SEND_F) | (op == _SEND_B)
    is_recv_all = (op == _RECV_F) | (op == _RECV_B)
    if not is_recv_all.any():
        return columns
    rows = np.flatnonzero(is_send_all | is_recv_all)
    comm_op, rank, mb, chunk, peer = op[rows], rank_all[rows], mb_all[rows], chunk_all[rows], peer_all[rows]
    is_send = is_send_all[rows]
    stage = stages_of(shape, rank, chunk)
    payload = np.where((comm_op == _SEND_B) | (comm_op == _RECV_B), _GRADIENT, _ACTIVATION)
    label_stage = np.where(is_send, stage, leaving_stage(payload, stage))
    sender = np.where(is_send, rank, peer)
    receiver = np.where(is_send, peer, rank)
    link_key = sender * pp + receiver
    link_number = _link_numbering(shape)

    send_rows = np.flatnonzero(is_send)  # positions among the communication rows
    recv_rows = np.flatnonzero(~is_send)
    send_rows = send_rows[np.argsort(link_key[send_rows], kind="stable")]
    recv_rows = recv_rows[np.argsort(link_key[recv_rows], kind="stable")]
    send_keys, send_starts = np.unique(link_key[send_rows], return_index=True)
    recv_keys, recv_starts = np.unique(link_key[recv_rows], return_index=True)
    send_span = dict(zip(send_keys.tolist(), zip(send_starts.tolist(),
                                                  [*send_starts[1:].tolist(), len(send_rows)], strict=True),
                         strict=True))
    recv_bounds = [*recv_starts[1:].tolist(), len(recv_rows)]

    moved_rows, targets, links, ks = [], [], [], []
    for key, begin, end in zip(recv_keys.tolist(), recv_starts.tolist(), recv_bounds, strict=True):
        r_rows = recv_rows[begin:end]
        s_begin, s_end = send_span.get(key, (0, 0))
        s_rows = send_rows[s_begin:s_end]
        r_label = np.stack([payload[r_rows], mb[r_rows], label_stage[r_rows]], axis=1)
        s_label = np.stack([payload[s_rows], mb[s_rows], label_stage[s_rows]], axis=1)
        if len(r_label) != len(s_label) or np.array_equal(r_label, s_label):
            continue
        r_order = np.lexsort(r_label.T[::-1])
        s_order = np.lexsort(s_label.T[::-1])
        if not np.array_equal(r_label[r_order], s_label[s_order]):
            continue  # not the same messages: the validator names the mismatch
        sorted_labels = s_label[s_order]
        if len(sorted_labels) > 1 and (sorted_labels[1:] == sorted_labels[:-1]).all(axis=1).any():
            continue  # a message sent twice: ambiguous, left to the validator
        # The receive of the k-th sent message (each receive sits right before its consumer so far).
        recv_of_message = np.empty(len(s_rows), dtype=np.int64)
        recv_of_message[s_order] = r_rows[r_order]
        where = seq[rows[recv_of_message]]
        target = np.minimum.accumulate(where[::-1])[::-1]
        moved_rows.append(rows[recv_of_message])
        targets.append(target)
        links.append(np.full(len(target), link_number[key]))
        ks.append(np.arange(len(target)))
    if not moved_rows:
        return columns
    moved = np.concatenate(moved_rows)
    # Sort key within each rank: (position it goes before, moved first, link, k); staying rows keep their place.
    position = seq.copy()
    after_moved = np.ones(n, dtype=np.int64)
    link_sort = np.zeros(n, dtype=np.int64)
    k_sort = np.zeros(n, dtype=np.int64)
    position[moved] = np.concatenate(targets)
    after_moved[moved] = 0
    link_sort[moved] = np.concatenate(links)
    k_sort[moved] = np.concatenate(ks)
    order = np.lexsort((k_sort, link_sort, after_moved, position, rank_all))
    overlapped = None if columns.overlap is None else columns.overlap_mask[order]
    return ProgramColumns(op[order], mb_all[order], chunk_all[order], peer_all[order], columns.rank_lengths,
                          overlapped)


def _link_numbering(shape: PipelineShape) -> dict[int, int]:
    """Number each directed link (key sender·pp + receiver) as the receiving ranks and their chunks meet it."""
    numbers: dict[int, int] = {}
    for rank in range(shape.pp):
        for chunk in range(shape.chunks):
            stage = shape.stage(rank, chunk)
            before = rank if shape.is_first_stage(stage) else shape.rank_of(stage - 1)
            after = rank if shape.is_last_stage(stage) else shape.rank_of(stage + 1)
            for sender in (before, after):
                numbers.setdefault(sender * shape.pp + rank, len(numbers))
    return numbers
