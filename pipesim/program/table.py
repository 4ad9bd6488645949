"""A Program flattened into columns (numpy arrays), computed once and shared by simulations and timelines.

Sweeps simulate one Program under many cost models; everything here depends on the Program alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipesim.jit import Kernel
from pipesim.program.ir import OP_CODE, OP_ORDER, Op, Payload, PipelineShape, Placement, Program, leaving_stage

__all__ = ["OP_CODE", "OP_NAMES", "OP_ORDER", "ProgramTable", "forget_table", "ranks_of", "stages_of", "table_of"]

OP_NAMES = np.array([op.value for op in OP_ORDER], dtype=object)

# Instruction kinds as the simulator sees them.
KIND_BUSY, KIND_SEND, KIND_RECV = 0, 1, 2


@dataclass(frozen=True, eq=False)
class ProgramTable:
    """Column view of a Program: one entry per instruction, ranks concatenated in order."""

    program: Program
    op: np.ndarray  # op code (index into OP_ORDER)
    rank: np.ndarray
    stage: np.ndarray
    chunk: np.ndarray
    microbatch: np.ndarray
    peer: np.ndarray
    seq: np.ndarray  # position within the rank's program
    kind: np.ndarray  # KIND_*
    link: np.ndarray  # directed link index for SEND/RECV, else -1
    message: np.ndarray  # FIFO position of the message on its link, else -1
    rank_bounds: tuple[tuple[int, int], ...]  # [begin, end) rows of each rank
    num_links: int
    boundary_stage: np.ndarray  # stage whose output boundary a transfer crosses, else -1
    input_recv: np.ndarray  # for a compute op, the row of the receive that delivers its input, else -1
    step: np.ndarray | None = None  # training step of each row when the program repeats (repeat_steps)
    steps: int = 1
    # Overlapped pairs (Instruction.overlap): ``overlap`` marks each pair's second half (None: no pairs), and
    # ``partner_recv`` gives a pair's first half (its F) the receive its second half consumes, else -1: the
    # pair starts when both inputs are there, so whoever runs the F waits for both.
    overlap: np.ndarray | None = None
    partner_recv: np.ndarray | None = None

    @property
    def num_rows(self) -> int:
        return len(self.op)

    @property
    def has_pairs(self) -> bool:
        return self.overlap is not None

    @property
    def overlap_mask(self) -> np.ndarray:
        return self.overlap if self.overlap is not None else np.zeros(self.num_rows, dtype=bool)

    @property
    def partner_inputs(self) -> np.ndarray:
        """:attr:`partner_recv`, all -1 without pairs (what the engines and the validator read)."""
        if self.partner_recv is not None:
            return self.partner_recv
        return np.full(self.num_rows, -1, dtype=np.int64)

    @property
    def step_of_rows(self) -> np.ndarray:
        return self.step if self.step is not None else np.zeros(self.num_rows, dtype=np.int64)


def repeat_steps(table: ProgramTable, steps: int) -> ProgramTable:
    """The table of ``steps`` training steps back to back: each rank runs its program ``steps`` times.

    Rows stay grouped by rank (rank r's step 0, step 1, …); ``seq`` restarts each step, as in a measured
    timeline, and microbatch ids are those of the step (column ``step`` tells steps apart). Every link's
    messages of step s follow those of step s−1, and a consumer reads the receive of its own step.
    """
    if steps == 1:
        return table
    lengths = np.array([e - b for b, e in table.rank_bounds], dtype=np.int64)
    old_begin = np.array([b for b, _ in table.rank_bounds], dtype=np.int64)
    new_begin = old_begin * steps
    rank = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths * steps)
    # Each rank's rows are its one-step rows ``steps`` times over: copied block by block (np.tile, repeat_rows)
    # rather than gathered through a computed row index (a sixth faster on a zb-v table of 110k rows).
    step = np.concatenate([np.repeat(np.arange(steps, dtype=np.int64), n_r) for n_r in lengths.tolist()]) \
        if len(lengths) else np.zeros(0, dtype=np.int64)

    def take(column: np.ndarray) -> np.ndarray:
        return repeat_rows(column, table, steps)

    is_send, is_recv = table.kind == KIND_SEND, table.kind == KIND_RECV
    sends_per_link = np.bincount(table.link[is_send], minlength=max(table.num_links, 1))
    recvs_per_link = np.bincount(table.link[is_recv], minlength=max(table.num_links, 1))
    message = take(table.message)
    link = take(table.link)
    comm = link >= 0
    per_link = np.where(take(is_send), sends_per_link[np.maximum(link, 0)], recvs_per_link[np.maximum(link, 0)])
    message = np.where(comm, message + step * per_link, -1)
    old_input = take(table.input_recv)
    has_input = old_input >= 0
    input_rank = table.rank[np.maximum(old_input, 0)]
    input_recv = np.where(
        has_input,
        new_begin[input_rank] + step * lengths[input_rank] + (old_input - old_begin[input_rank]),
        -1,
    )
    bounds = tuple((int(b), int(b + n_r * steps)) for b, n_r in zip(new_begin.tolist(), lengths.tolist(), strict=True))
    overlap = None if table.overlap is None else take(table.overlap)
    return ProgramTable(
        program=table.program,
        op=take(table.op),
        rank=rank,
        stage=take(table.stage),
        chunk=take(table.chunk),
        microbatch=take(table.microbatch),
        peer=take(table.peer),
        seq=take(table.seq),
        kind=take(table.kind),
        link=link,
        message=message,
        rank_bounds=bounds,
        num_links=table.num_links,
        boundary_stage=take(table.boundary_stage),
        input_recv=input_recv,
        step=step,
        steps=steps,
        overlap=overlap,
        partner_recv=None if overlap is None else partner_receives(overlap, input_recv),
    )


def partner_receives(overlap: np.ndarray, input_recv: np.ndarray) -> np.ndarray:
    """For the first half of each overlapped pair (the row before a flagged one), the second half's input
    receive; -1 elsewhere."""
    partner = np.full(len(overlap), -1, dtype=np.int64)
    tails = np.flatnonzero(overlap)
    tails = tails[tails > 0]
    partner[tails - 1] = input_recv[tails]
    return partner


def stages_of(shape: PipelineShape, rank: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """:meth:`PipelineShape.stage` over arrays."""
    loop = chunk * shape.pp + rank
    if shape.placement is not Placement.LOOP:  # V and DUAL number stages alike
        return np.where(chunk % 2 == 1, (chunk + 1) * shape.pp - 1 - rank, loop)
    return loop


def ranks_of(shape: PipelineShape, stage: np.ndarray) -> np.ndarray:
    """:meth:`PipelineShape.rank_of` over arrays."""
    chunk, offset = np.divmod(stage, shape.pp)
    if shape.placement is not Placement.LOOP:
        return np.where(chunk % 2 == 1, shape.pp - 1 - offset, offset)
    return offset


def table_of(program: Program) -> ProgramTable:
    """The column table of ``program``, built once and kept on the (immutable) Program itself.

    Not an lru_cache: looking a Program up would hash its every instruction, which costs about as much as
    simulating a sweep point; stored beside the fields, the table lives and dies with its Program.
    """
    table = program.__dict__.get("_table")
    if table is None:
        table = _build_table(program)
        program.__dict__["_table"] = table  # frozen dataclass: a cache outside its fields (not in __eq__)
    return table


#: Rows up to which :func:`steps_table` keeps a repeated table on its Program: the planner re-times thousands of
#: small Programs for several steps each, while a one-off multi-million-row job should not hold a second copy.
KEEP_REPEATED_ROWS = 200_000


def steps_table(program: Program, steps: int) -> ProgramTable:
    """:func:`repeat_steps` of the Program's table, kept beside it (like :func:`table_of`) for small Programs."""
    single = table_of(program)
    if steps == 1 or single.num_rows * steps > KEEP_REPEATED_ROWS:
        return repeat_steps(single, steps)
    kept = program.__dict__.setdefault("_repeated_tables", {})
    table = kept.get(steps)
    if table is None:
        table = kept[steps] = repeat_steps(single, steps)
    return table


def repeat_rows(values: np.ndarray, table: ProgramTable, steps: int) -> np.ndarray:
    """A per-row column of one step's ``table`` laid out as :func:`repeat_steps` lays out its rows (each rank's
    rows ``steps`` times over, rank after rank)."""
    if steps == 1:
        return values
    return np.concatenate([np.tile(values[begin:end], steps) for begin, end in table.rank_bounds])


def first_step_rows(table: ProgramTable, steps: int) -> np.ndarray:
    """Where one step's ``table`` rows sit in :func:`repeat_steps` of it (each rank's first block)."""
    return np.concatenate([np.arange(begin * steps, begin * steps + end - begin) for begin, end in table.rank_bounds])


def forget_table(program: Program) -> None:
    """Drop the cached tables (benchmarks measure a cold start)."""
    program.__dict__.pop("_table", None)
    program.__dict__.pop("_repeated_tables", None)


def _build_table(program: Program) -> ProgramTable:
    """Flatten ``program`` into columns; vectorised where it can be, since sweeps build thousands."""
    shape = program.shape
    pp = shape.pp
    columns = program.columns
    op, microbatch, chunk, peer = columns.op, columns.microbatch, columns.chunk, columns.peer
    lengths = columns.rank_lengths
    num_rows = len(op)
    rank = np.repeat(np.arange(pp, dtype=np.int64), lengths)
    ends = np.cumsum(lengths)
    seq = np.arange(num_rows, dtype=np.int64) - np.repeat(ends - lengths, lengths)

    stage = np.where(chunk >= 0, stages_of(shape, rank, chunk), -1)

    kind = _KIND_BY_CODE[op]
    is_send, is_recv = kind == KIND_SEND, kind == KIND_RECV
    comm = is_send | is_recv
    link, message, num_links, input_recv = _links_and_inputs(op, kind, rank, peer, microbatch, chunk, pp)
    # The tensor crossing the boundary between stage s and s+1 is sized by stage s's output: a forward
    # message leaves its sender's stage; a backward one crosses the boundary below its sender's stage.
    forward = (op == OP_CODE[Op.SEND_F]) | (op == OP_CODE[Op.RECV_F])
    payload = np.where(forward, Payload.ACTIVATION, Payload.GRADIENT)
    sender_stage = np.where(is_send, stage, leaving_stage(payload, stage))
    boundary = np.where(comm, np.where(forward, sender_stage, sender_stage - 1), -1)
    bounds = tuple((int(e - n), int(e)) for e, n in zip(ends.tolist(), lengths.tolist(), strict=True))
    overlap = columns.overlap_mask if columns.has_pairs else None
    return ProgramTable(
        program=program,
        op=op,
        rank=rank,
        stage=stage,
        chunk=chunk,
        microbatch=microbatch,
        peer=peer,
        seq=seq,
        kind=kind,
        link=link,
        message=message,
        rank_bounds=bounds,
        num_links=num_links,
        boundary_stage=boundary,
        input_recv=input_recv,
        overlap=overlap,
        partner_recv=None if overlap is None else partner_receives(overlap, input_recv),
    )


def _links_and_inputs(op, kind, rank, peer, microbatch, chunk, pp):
    """``link``, ``message``, ``num_links`` and ``input_recv`` columns: by the compiled kernel where it is worth
    loading and the fields are in its dense range, else by the numpy passes (identical results, tested)."""
    if _LINKS_KERNEL.worth_compiling(len(op)) and (kernel := _LINKS_KERNEL.compiled()) is not None:
        n = len(op)
        link, message, input_recv = (np.empty(n, dtype=np.int64) for _ in range(3))
        num_links = kernel(op, kind, rank, peer, microbatch, chunk, pp, link, message, input_recv)
        if num_links >= 0:
            return link, message, int(num_links), input_recv
    link, message, num_links = _links_numpy(kind, rank, peer, pp)
    return link, message, num_links, _input_receives(op, rank, microbatch, chunk)


def _links_numpy(kind, rank, peer, pp):
    num_rows = len(kind)
    is_send, is_recv = kind == KIND_SEND, kind == KIND_RECV
    comm = is_send | is_recv
    # A directed link is (sender, receiver); both ends number its messages 0, 1, 2, ... in program order.
    sender = np.where(is_send, rank, peer)
    receiver = np.where(is_send, peer, rank)
    link_key = np.where(comm, sender * pp + receiver, -1)
    link = np.full(num_rows, -1, dtype=np.int64)
    message = np.full(num_rows, -1, dtype=np.int64)
    num_links = 0
    if comm.any():
        comm_keys = link_key[comm]
        if comm_keys.min() >= 0 and comm_keys.max() < pp * pp:  # links numbered densely, in key order
            used = np.zeros(pp * pp, dtype=bool)
            used[comm_keys] = True
            dense = (np.cumsum(used) - 1)[comm_keys]
            num_links = int(used.sum())
        else:  # a peer out of range: the validator reports it; number what is there
            keys, dense = np.unique(comm_keys, return_inverse=True)
            num_links = len(keys)
        link[comm] = dense
        group = dense * 2 + is_send[comm]  # sends and receives of a link are counted separately
        # Small integer types make numpy's stable sort a radix sort: linear in the rows.
        narrow = np.int16 if 2 * num_links < np.iinfo(np.int16).max else np.int32
        order = np.argsort(group.astype(narrow), kind="stable")
        counts = np.bincount(group, minlength=2 * num_links)
        first = np.repeat(np.cumsum(counts) - counts, counts)  # where each group starts in sorted order
        position = np.empty_like(order)
        position[order] = np.arange(len(order)) - first
        message[comm] = position
    return link, message, num_links


def _links_kernel(
    op, kind, rank, peer, microbatch, chunk, pp, link, message, input_recv
):  # pragma: no cover - numba compiles it; tests run both forms
    """Fill ``link``, ``message`` and ``input_recv`` as :func:`_links_numpy` and :func:`_input_receives` do, in
    a few linear passes; return the number of links, or -1 where a field is outside the dense range (a peer
    that is no rank, ids below −1, a (mb, chunk) space far beyond the rows) for the numpy passes to handle."""
    n = len(op)
    comm_count = 0
    top_mb = 0
    top_chunk = 0
    for row in range(n):
        if microbatch[row] < -1 or chunk[row] < -1:
            return -1
        top_mb = max(top_mb, microbatch[row])
        top_chunk = max(top_chunk, chunk[row])
        if kind[row] != KIND_BUSY:
            if peer[row] < 0 or peer[row] >= pp:
                return -1
            comm_count += 1
    # Links: the used (sender, receiver) keys, numbered in key order.
    keys = np.empty(comm_count, dtype=np.int64)
    at = 0
    for row in range(n):
        if kind[row] != KIND_BUSY:
            send = kind[row] == KIND_SEND
            keys[at] = (rank[row] * pp + peer[row]) if send else (peer[row] * pp + rank[row])
            at += 1
    distinct = np.unique(keys)
    counters = np.zeros(2 * len(distinct), dtype=np.int64)
    at = 0
    for row in range(n):
        link[row] = -1
        message[row] = -1
        if kind[row] != KIND_BUSY:
            number = np.searchsorted(distinct, keys[at])
            at += 1
            link[row] = number
            group = 2 * number + (1 if kind[row] == KIND_SEND else 0)
            message[row] = counters[group]
            counters[group] += 1
    # Inputs: each F (B, I) reads the first RECV_F (RECV_B) of its rank, microbatch and chunk.
    mb_span = top_mb + 2
    chunk_span = top_chunk + 2
    space = (rank[n - 1] + 1) * 2 * mb_span * chunk_span if n else 0
    if space > 4 * n + 1024:
        return -1
    first_recv = np.full(space, -1, dtype=np.int64)
    for row in range(n):
        o = op[row]
        gradient = 1 if (o in (_RECV_B_CODE, _B_CODE, _I_CODE)) else 0
        slot = ((rank[row] * 2 + gradient) * mb_span + microbatch[row] + 1) * chunk_span + chunk[row] + 1
        if (o in (_RECV_F_CODE, _RECV_B_CODE)) and first_recv[slot] < 0:
            first_recv[slot] = row
    for row in range(n):
        o = op[row]
        input_recv[row] = -1
        if o in (_F_CODE, _B_CODE, _I_CODE):
            gradient = 0 if o == _F_CODE else 1
            input_recv[row] = first_recv[
                ((rank[row] * 2 + gradient) * mb_span + microbatch[row] + 1) * chunk_span + chunk[row] + 1
            ]
    return len(distinct)


def _input_receives(op: np.ndarray, rank: np.ndarray, microbatch: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """Match each F to its rank's RECV_F of the same (mb, chunk), each B/I to its RECV_B (first one wins)."""
    rows = np.arange(len(op))
    gradient = (op == OP_CODE[Op.RECV_B]) | (op == OP_CODE[Op.B]) | (op == OP_CODE[Op.I])
    mb_span, chunk_span = microbatch.max(initial=0) + 2, chunk.max(initial=0) + 2
    key = ((rank * 2 + gradient) * mb_span + microbatch + 1) * chunk_span + (chunk + 1)
    is_recv = (op == OP_CODE[Op.RECV_F]) | (op == OP_CODE[Op.RECV_B])
    consumes = (op == OP_CODE[Op.F]) | (op == OP_CODE[Op.B]) | (op == OP_CODE[Op.I])
    result = np.full(len(op), -1, dtype=np.int64)
    if not is_recv.any():
        return result
    recv_rows = rows[is_recv]
    recv_keys = key[is_recv]
    space = int(key.max()) + 1
    if key.min() >= 0 and space <= 4 * len(op) + 1024 and np.bincount(recv_keys, minlength=space).max() == 1:
        # Dense: one slot per (rank, kind, mb, chunk), each received once (as in every valid program).
        slot = np.full(space, -1, dtype=np.int64)
        slot[recv_keys] = recv_rows
        result[consumes] = slot[key[consumes]]
        return result
    unique_keys, first = np.unique(recv_keys, return_index=True)  # sparse keys (out-of-range fields)
    first_rows = recv_rows[first]
    index = np.minimum(np.searchsorted(unique_keys, key[consumes]), len(unique_keys) - 1)
    found = unique_keys[index] == key[consumes]
    result[rows[consumes][found]] = first_rows[index[found]]
    return result


_CODE_BY_OP = OP_CODE
_KIND_BY_CODE = np.array(
    [KIND_SEND if op.is_send else KIND_RECV if op.is_recv else KIND_BUSY for op in OP_ORDER], dtype=np.int64
)
_F_CODE, _B_CODE, _I_CODE = OP_CODE[Op.F], OP_CODE[Op.B], OP_CODE[Op.I]
_RECV_F_CODE, _RECV_B_CODE = OP_CODE[Op.RECV_F], OP_CODE[Op.RECV_B]
_LINKS_KERNEL = Kernel(_links_kernel)


def warm_up() -> None:
    """Compile (or load from numba's cache) the table kernel now; sweeps call this before forking workers."""
    kernel = _LINKS_KERNEL.compiled()
    if kernel is not None:
        one = np.zeros(1, dtype=np.int64)
        kernel(one, one + KIND_BUSY, one, one - 1, one, one, 1, one.copy(), one.copy(), one.copy())
