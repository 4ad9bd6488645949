"""Validation: prove a Program complete, correctly ordered and deadlock-free, or name what is wrong.

The rules are the executor's communication semantics (docs/architecture.md, "Communication semantics"): each directed
link is one FIFO channel, the k-th send on a→b is consumed by the k-th receive on b from a, and both must
agree on what travels; a receive blocks its rank until its message was sent. A send either returns at once
(:attr:`CommSemantics.BUFFERED`, the executor's ``isend`` on gloo) or waits until the peer reaches the
matching receive (:attr:`CommSemantics.RENDEZVOUS`, NCCL point-to-point without grouping).

The checks run on the Program's column table, in this order, and the first failure is reported:

1. fields: chunks, microbatches and peers in range, every send/receive talking to the rank that holds the
   neighbouring stage;
2. local order: on each rank, every instruction's input exists earlier on that rank — an activation or
   gradient computed there or received there, ``F`` before its ``B``, ``I`` before its ``W``, all weight
   gradients before ``REDUCE_GRAD``, ``STEP`` last — and each compute op runs exactly once;
3. pairing: the sends and receives of each link agree message by message;
4. progress: an abstract run in which a receive only posts and the compute consuming it waits for the send
   (rendezvous sends also wait for the receive to be posted); if ranks remain that cannot move, every
   blocked rank waits on exactly one peer, so the waits form a cycle, which the error names.
"""

from __future__ import annotations

import enum
from collections import deque

import numpy as np

from pipesim.errors import DeadlockError, ScheduleError
from pipesim.program import fast_checks
from pipesim.program.ir import IS_COMPUTE, Op, Payload, Program, leaving_stage
from pipesim.program.table import (
    KIND_BUSY,
    KIND_RECV,
    KIND_SEND,
    OP_CODE,
    ProgramTable,
    ranks_of,
    stages_of,
    table_of,
)


class CommSemantics(enum.Enum):
    """When a send returns.

    BUFFERED: at once (gloo ``isend``). RENDEZVOUS: once the peer has posted the matching receive (NCCL
    point-to-point beyond its eager buffer, one op at a time). GROUPED: like RENDEZVOUS, but each run of
    consecutive SEND/RECV instructions is issued as one group (``batch_isend_irecv``, an NCCL group), so the
    group's receives are posted before any of its sends waits — what the executor does on NCCL, and how
    Megatron pairs ``send_forward_recv_backward``; and since a pair's operations run in order on one NCCL
    stream, a group also waits for the rank's earlier receives from the same peers to finish.
    """

    BUFFERED = "buffered"
    RENDEZVOUS = "rendezvous"
    GROUPED = "grouped"


_F, _B, _I, _W = (OP_CODE[o] for o in (Op.F, Op.B, Op.I, Op.W))
_SEND_F, _RECV_F, _SEND_B, _RECV_B = (OP_CODE[o] for o in (Op.SEND_F, Op.RECV_F, Op.SEND_B, Op.RECV_B))
_REDUCE, _STEP = OP_CODE[Op.REDUCE_GRAD], OP_CODE[Op.STEP]
_ACT, _GRAD = Payload.ACTIVATION, Payload.GRADIENT
# The availability index keys both data (a payload) and op slots (an op code) by (rank, what, mb, stage);
# `what` needs room for every op code and payload.
_WHAT_SPAN = 16
assert max(OP_CODE.values()) < _WHAT_SPAN and max(Payload) < _WHAT_SPAN


def validate(program: Program, semantics: CommSemantics = CommSemantics.BUFFERED) -> None:
    """Raise :class:`ScheduleError` (or :class:`DeadlockError`) with a one-line reason, or return None.

    Under BUFFERED sends the progress check is the graph engine's walk (a compute waits only for its input's
    send), so large Programs use its compiled kernel; the stuck positions, hence the cycle named, are the same.
    """
    checker = validate_static(program)
    if semantics is CommSemantics.BUFFERED:
        from pipesim.sim.graph_engine import run_longest_path, worth_compiling

        t = checker.t
        if worth_compiling(t.num_rows):
            no_barrier = np.full(t.num_rows, -1, dtype=np.int64)
            _, _, position = run_longest_path(t.kind, t.link, t.message, t.num_links, t.input_recv,
                                              np.zeros(t.num_rows), t.rank_bounds, no_barrier, 0,
                                              partner_recv=t.partner_recv)
            if any(p < stop for p, (_, stop) in zip(position, t.rank_bounds, strict=True)):
                raise DeadlockError(checker.cycle_message(position))
            return
    checker.check_progress(semantics)


def validate_static(program: Program) -> _Checker:
    """Checks 1–3 only. The simulator runs this and detects deadlock (check 4) itself on the way."""
    if program.num_ranks != program.shape.pp:
        raise ScheduleError(f"program has {program.num_ranks} ranks but pp={program.shape.pp}")
    checker = _Checker(table_of(program))
    if not fast_checks.passes(checker.t):  # the compiled yes/no pass (sweeps, large Programs), when loaded
        checker.check_static()  # finds and names the fault
    if checker.t.has_pairs:
        checker.check_pairs()
    return checker


def describe_deadlock(table: ProgramTable, position: list[int]) -> str:
    """Name the cycle of waits, given the row each rank is stuck at (its end row when finished)."""
    return _Checker(table).cycle_message(position)


def _unfinished(recv_row: int | None, sent: list[int], links: list[int], messages: list[int]) -> bool:
    """A posted receive whose message has not been sent yet."""
    return recv_row is not None and sent[links[recv_row]] <= messages[recv_row]


def _group_ends(kinds: list[int], bounds) -> list[int]:
    """For each SEND/RECV row, the end of the run of consecutive communication rows it belongs to."""
    ends = [0] * len(kinds)
    for begin, stop in bounds:
        end = stop
        for row in range(stop - 1, begin - 1, -1):
            if kinds[row] == KIND_BUSY:
                end = row
            else:
                ends[row] = end
    return ends


def _describe(kind: int, mb: int, stage: int) -> str:
    what = "activation" if kind == _ACT else "input gradient"
    return f"{what} of stage {stage} for mb {mb}"


class _Checker:
    def __init__(self, table: ProgramTable) -> None:
        self.t = table
        self.shape = table.program.shape

    @property
    def code(self):
        """The Instruction view, built only when an error message names an instruction."""
        return self.t.program.ranks

    def ins(self, row: int) -> str:
        """``rank r: <instruction>`` for error messages."""
        rank = int(self.t.rank[row])
        return f"rank {rank}: {self.code[rank][int(self.t.seq[row])]}"

    def check_static(self) -> None:
        """Checks 1–3 with numpy, raising at the first fault."""
        self.check_fields()
        self.check_local_order()
        self.check_pairing()

    # --- 1. fields --------------------------------------------------------------------------------------
    def check_fields(self) -> None:
        t, shape = self.t, self.shape
        op = t.op
        not_step = op != _STEP
        bad = np.flatnonzero(not_step & ((t.chunk < 0) | (t.chunk >= shape.chunks)))
        if len(bad):
            raise ScheduleError(f"{self.ins(bad[0])} names chunk {t.chunk[bad[0]]}; chunks are 0..{shape.chunks - 1}")
        with_mb = not_step & (op != _REDUCE)
        bad = np.flatnonzero(with_mb & ((t.microbatch < 0) | (t.microbatch >= shape.microbatches)))
        if len(bad):
            raise ScheduleError(
                f"{self.ins(bad[0])} names mb {t.microbatch[bad[0]]}; microbatches are 0..{shape.microbatches - 1}"
            )
        if shape.pipelines > 1:
            bad = np.flatnonzero(with_mb & ~shape.visits(t.microbatch, t.stage))
            if len(bad):
                row, half = bad[0], shape.microbatches // 2
                raise ScheduleError(
                    f"{self.ins(row)} runs mb {t.microbatch[row]} on stage {t.stage[row]}, but under the dual "
                    f"placement mbs 0..{half - 1} pass only chunk 0 (the down pipeline) and mbs "
                    f"{half}..{shape.microbatches - 1} only chunk 1 (the up pipeline)")
        comm = t.kind != KIND_BUSY
        towards_next = (op == _SEND_F) | (op == _RECV_B)
        neighbour = np.where(towards_next, t.stage + 1, t.stage - 1)
        outside = (neighbour < 0) | (neighbour >= shape.num_stages)
        outside |= shape.pipeline_of_stage(neighbour) != shape.pipeline_of_stage(t.stage)  # DUAL: not joined
        bad = np.flatnonzero(comm & outside)
        if len(bad):
            row = bad[0]
            raise ScheduleError(f"{self.ins(row)} acts on stage {t.stage[row]}, which has no stage {neighbour[row]}"
                                f"{' in its pipeline' if shape.pipelines > 1 else ''}")
        expected_peer = np.where(comm, ranks_of(shape, np.clip(neighbour, 0, shape.num_stages - 1)), -1)
        bad = np.flatnonzero(comm & (t.peer != expected_peer))
        if len(bad):
            row = bad[0]
            raise ScheduleError(
                f"{self.ins(row)} talks to rank {t.peer[row]}, but stage {neighbour[row]} lives on rank "
                f"{expected_peer[row]}"
            )
        bad = np.flatnonzero(comm & (t.peer == t.rank))
        if len(bad):
            raise ScheduleError(f"{self.ins(bad[0])} talks to its own rank; the neighbouring stage is local, drop it")
        self.neighbour = neighbour

    # --- 2. local order ---------------------------------------------------------------------------------
    def check_local_order(self) -> None:
        t, shape = self.t, self.shape
        m, s_count, pp = shape.microbatches, shape.num_stages, shape.pp
        rows = np.arange(t.num_rows)
        op, mb, stage = t.op, t.microbatch, t.stage

        def key(what: int | np.ndarray, microbatch: np.ndarray, st: np.ndarray, rank: np.ndarray) -> np.ndarray:
            # Unique integer per (rank, what, mb, stage); `what` spans payloads and op codes.
            return ((rank * _WHAT_SPAN + what) * m + microbatch) * (s_count + 2) + (st + 1)

        # Op slots (F done, I-or-B done) are keyed apart from data: past every data key (ranks 0..pp−1).
        op_slot = pp * _WHAT_SPAN * m * (s_count + 2)
        # Each compute op at most once (and B never beside I/W for the same microbatch and stage).
        compute = IS_COMPUTE[op]
        backward_kind = np.where(op == _W, _W, np.where(op == _F, _F, _B))  # I and B share a slot
        compute_keys = key(backward_kind[compute], mb[compute], stage[compute], t.rank[compute])
        sorted_keys = np.sort(compute_keys)
        repeated = sorted_keys[1:] == sorted_keys[:-1]
        if repeated.any():
            dup_key = sorted_keys[1:][repeated][0]  # the smallest repeated key, as np.unique names it
            row = rows[compute][np.flatnonzero(compute_keys == dup_key)[1]]
            raise ScheduleError(f"{self.ins(row)} runs twice for mb {mb[row]} on stage {stage[row]}")

        # Where each piece of data becomes available on a rank (position = row; rows of a rank are ordered).
        produced_kind = np.full(t.num_rows, -1)
        produced_stage = stage.copy()
        produced_kind[(op == _F) | (op == _RECV_F)] = _ACT
        produced_kind[(op == _B) | (op == _I) | (op == _RECV_B)] = _GRAD
        produced_stage[op == _RECV_F] = stage[op == _RECV_F] - 1
        produced_stage[op == _RECV_B] = stage[op == _RECV_B] + 1
        producers = produced_kind >= 0
        all_keys = np.concatenate([
            key(produced_kind[producers], mb[producers], produced_stage[producers], t.rank[producers]),
            compute_keys + op_slot,
        ])
        all_rows = np.concatenate([rows[producers], rows[compute]])
        # Data keys and op-slot keys never meet (op_slot offset), and each part lists its rows ascending, so a
        # stable sort by key alone orders every key's rows: its first entry is the earliest row.
        order = np.argsort(all_keys, kind="stable")
        ordered_keys = all_keys[order]
        first = np.flatnonzero(np.concatenate(([True], ordered_keys[1:] != ordered_keys[:-1])))
        known_keys = ordered_keys[first]
        first_row = all_rows[order][first]  # the earliest row at which each key is available

        def require(consumers: np.ndarray, need_keys: np.ndarray, describe) -> None:
            if not len(consumers):
                return
            index = np.minimum(np.searchsorted(known_keys, need_keys), len(known_keys) - 1)
            ok = (known_keys[index] == need_keys) & (first_row[index] < consumers)
            if not ok.all():
                raise ScheduleError(describe(int(consumers[np.flatnonzero(~ok)[0]])))

        f_rows = np.flatnonzero((op == _F) & ~shape.is_first_stage(stage))
        require(f_rows, key(_ACT, mb[f_rows], stage[f_rows] - 1, t.rank[f_rows]),
                lambda r: self._missing_input(r, _ACT, stage[r] - 1, "RECV_F"))
        back = np.flatnonzero((op == _B) | (op == _I))
        require(back, key(_F, mb[back], stage[back], t.rank[back]) + op_slot,
                lambda r: f"{self.ins(r)} runs before F mb={mb[r]} chunk={t.chunk[r]}")
        back_mid = back[~shape.is_last_stage(stage[back])]
        require(back_mid, key(_GRAD, mb[back_mid], stage[back_mid] + 1, t.rank[back_mid]),
                lambda r: self._missing_input(r, _GRAD, stage[r] + 1, "RECV_B"))
        w_rows = np.flatnonzero(op == _W)
        require(w_rows, key(_B, mb[w_rows], stage[w_rows], t.rank[w_rows]) + op_slot,
                lambda r: f"{self.ins(r)} runs before I mb={mb[r]} chunk={t.chunk[r]}")
        for send_op, kind in ((_SEND_F, _ACT), (_SEND_B, _GRAD)):
            sends = np.flatnonzero(op == send_op)
            require(sends, key(kind, mb[sends], stage[sends], t.rank[sends]),
                    lambda r, kind=kind: f"{self.ins(r)} sends the {_describe(kind, mb[r], stage[r])} before "
                    f"computing it; move it after {'F' if kind == _ACT else 'B/I'} mb={mb[r]} chunk={t.chunk[r]}")
        self._check_reduce_and_step(compute, backward_kind)

        # Every microbatch through every stage (of its pipeline), forward and backward, on the stage's rank.
        present = backward_kind[compute]
        for what, name in ((_F, "F"), (_B, "B (or I)")):
            # Keys are unique and in range (checked above), so a full count means nothing is missing.
            if np.count_nonzero(present == what) == pp * shape.chunks * m // shape.pipelines:
                continue
            grid_rank, grid_chunk, grid_mb = (g.ravel() for g in np.meshgrid(
                np.arange(pp), np.arange(shape.chunks), np.arange(m), indexing="ij"))
            grid_stage = stages_of(shape, grid_rank, grid_chunk)
            passed = shape.visits(grid_mb, grid_stage)
            grid_rank, grid_chunk, grid_mb, grid_stage = (g[passed] for g in (grid_rank, grid_chunk, grid_mb,
                                                                                   grid_stage))
            missing = np.flatnonzero(~np.isin(key(what, grid_mb, grid_stage, grid_rank), compute_keys))
            if len(missing):
                i = missing[0]
                raise ScheduleError(
                    f"rank {grid_rank[i]} never runs {name} mb={grid_mb[i]} chunk={grid_chunk[i]} (stage "
                    f"{grid_stage[i]}); every microbatch must pass every stage once, forward and backward"
                )
        split = compute_keys[op[compute] == _I]
        done_w = compute_keys[op[compute] == _W] - (_W - _B) * m * (s_count + 2)  # as the key of its I
        missing_w = split[~np.isin(split, done_w)] if len(split) else split
        if len(missing_w):
            row = rows[compute][np.flatnonzero(compute_keys == missing_w.min())[0]]
            raise ScheduleError(f"{self.ins(row)} has no W: its weight gradient is never computed")

    def _missing_input(self, row: int, kind: int, needed_stage: int, recv: str) -> str:
        rank = self.t.rank[row]
        return (
            f"{self.ins(row)} runs before its input, the {_describe(kind, self.t.microbatch[row], needed_stage)}, "
            f"was computed on or received by rank {rank}; put a {recv} (or the producing op) before it"
        )

    def _check_reduce_and_step(self, compute: np.ndarray, backward_kind: np.ndarray) -> None:
        t = self.t
        # A microbatch's weight gradient is final after its B, or after its W in a split backward.
        final = compute & ((t.op == _B) | (t.op == _W))
        if not self._reduce_and_step_hold(final):
            self._name_reduce_or_step_fault(final)

    def _reduce_and_step_hold(self, final: np.ndarray) -> bool:
        """All of checks below at once, over the whole table (sweeps validate thousands of Programs)."""
        t, chunks, pp = self.t, self.shape.chunks, self.shape.pp
        ends = np.array([end for _, end in t.rank_bounds], dtype=np.int64)
        is_step = t.op == _STEP
        if np.count_nonzero(is_step) != pp or (ends <= np.array([b for b, _ in t.rank_bounds])).any():
            return False
        if not is_step[ends - 1].all():  # one STEP per rank, and it is the rank's last row
            return False
        reduces = np.flatnonzero(t.op == _REDUCE)
        slot = t.rank[reduces] * chunks + t.chunk[reduces]  # chunks are in range (check_fields)
        if len(reduces) != pp * chunks or (np.bincount(slot, minlength=pp * chunks) != 1).any():
            return False
        reduce_row = np.empty(pp * chunks, dtype=np.int64)
        reduce_row[slot] = reduces
        grads = np.flatnonzero(final)
        return not (grads > reduce_row[t.rank[grads] * chunks + t.chunk[grads]]).any()

    def _name_reduce_or_step_fault(self, final: np.ndarray) -> None:
        t, shape = self.t, self.shape
        for rank, (begin, end) in enumerate(t.rank_bounds):
            ops = t.op[begin:end]
            steps = np.flatnonzero(ops == _STEP)
            if len(steps) == 0:
                raise ScheduleError(f"rank {rank} never runs STEP; it must be its last instruction")
            if len(steps) > 1:
                raise ScheduleError(f"rank {rank}: STEP runs twice")
            if steps[0] != end - begin - 1:
                raise ScheduleError(f"{self.ins(begin + steps[0] + 1)} comes after STEP; STEP must be last")
            reduces = np.flatnonzero(ops == _REDUCE) + begin
            chunks_reduced = t.chunk[reduces]
            for chunk in range(shape.chunks):
                where = reduces[chunks_reduced == chunk]
                if len(where) == 0:
                    raise ScheduleError(f"rank {rank}: STEP runs before REDUCE_GRAD chunk={chunk}")
                if len(where) > 1:
                    raise ScheduleError(f"{self.ins(where[1])} runs twice")
                grads = np.flatnonzero(final[begin:end] & (t.chunk[begin:end] == chunk)) + begin
                late = grads[grads > where[0]]
                if len(late):
                    raise ScheduleError(
                        f"{self.ins(where[0])} runs before {self.code[rank][t.seq[late[0]]]}; gradients would be "
                        "incomplete"
                    )

    # --- 2b. overlapped pairs -------------------------------------------------------------------------
    def check_pairs(self) -> None:
        """Each overlapped half (flagged B or I) directly follows, on its rank, the F it runs with; that F is
        of another microbatch or stage (a backward cannot run beside its own forward). Its input is then
        received before the pair starts (before the half, by the local-order check, so before its F). The
        rest (both inputs sent, no cycle through the pair) is the progress check's, where a pair's F waits
        for both halves' inputs."""
        t = self.t
        tails = np.flatnonzero(t.overlap)
        heads = np.maximum(tails - 1, 0)
        good = (tails > 0) & (t.rank[heads] == t.rank[tails]) & (t.op[heads] == _F) & ~t.overlap[heads]
        good &= (t.op[tails] == _B) | (t.op[tails] == _I)
        if not good.all():
            row = int(tails[np.flatnonzero(~good)[0]])
            raise ScheduleError(f"{self.ins(row)} is the second half of an overlapped pair, but the instruction "
                                "before it is not an F; a pair is an F directly followed by its B or I (move "
                                "its receives before the F and its sends after the pair)")
        own = (t.microbatch[heads] == t.microbatch[tails]) & (t.stage[heads] == t.stage[tails])
        if own.any():
            row = int(tails[np.flatnonzero(own)[0]])
            raise ScheduleError(f"{self.ins(row)} overlaps its own forward; a backward runs after its F, so pair "
                                "it with the F of another microbatch or chunk")

    # --- 3. pairing -------------------------------------------------------------------------------------
    def check_pairing(self) -> None:
        t = self.t
        is_send, is_recv = t.kind == KIND_SEND, t.kind == KIND_RECV
        grad = ((t.op == _SEND_B) | (t.op == _RECV_B)).astype(np.int64)
        # Label of what travels: (payload, mb, stage it leaves). A send leaves its own stage; a receive expects
        # the neighbouring one.
        label_stage = np.where(is_send, t.stage, leaving_stage(grad, t.stage))  # the Message identity
        links = t.num_links
        sends = np.flatnonzero(is_send)
        recvs = np.flatnonzero(is_recv)
        sends = sends[np.lexsort((t.message[sends], t.link[sends]))]  # by link, then FIFO position
        recvs = recvs[np.lexsort((t.message[recvs], t.link[recvs]))]
        n_sends = np.bincount(t.link[sends], minlength=links)
        n_recvs = np.bincount(t.link[recvs], minlength=links)
        send_base = np.cumsum(n_sends) - n_sends
        recv_base = np.cumsum(n_recvs) - n_recvs
        # Pair the k-th send of each link with its k-th receive, where both exist.
        paired = t.message[sends] < n_recvs[t.link[sends]]
        s_rows = sends[paired]
        r_rows = recvs[recv_base[t.link[s_rows]] + t.message[s_rows]]
        s_label = np.stack([grad[s_rows], t.microbatch[s_rows], label_stage[s_rows]], axis=1)
        r_label = np.stack([grad[r_rows], t.microbatch[r_rows], label_stage[r_rows]], axis=1)
        differ = (s_label != r_label).any(axis=1)
        first_differ = np.full(links, np.iinfo(np.int64).max)
        np.minimum.at(first_differ, t.link[s_rows[differ]], t.message[s_rows[differ]])
        bad = (first_differ < np.iinfo(np.int64).max) | (n_sends != n_recvs)
        if not bad.any():
            return
        link = int(np.flatnonzero(bad)[0])  # the first link with a problem, as a link-by-link pass finds it
        n = int(min(n_sends[link], n_recvs[link]))
        if first_differ[link] < np.iinfo(np.int64).max:
            k = int(first_differ[link])
            send_row, recv_row = sends[send_base[link] + k], recvs[recv_base[link] + k]
            sl = [int(grad[send_row]), int(t.microbatch[send_row]), int(label_stage[send_row])]
            rl = [int(grad[recv_row]), int(t.microbatch[recv_row]), int(label_stage[recv_row])]
            src, dst = int(t.rank[send_row]), int(t.rank[recv_row])
            raise ScheduleError(
                f"link {src}→{dst} is FIFO: message #{k + 1} rank {src} sends is the "
                f"{_describe(*sl)}, but rank {dst}'s receive #{k + 1} "
                f"from it ({self.code[dst][t.seq[recv_row]]}) expects the "
                f"{_describe(*rl)}; reorder so they agree"
            )
        if n_sends[link] > n:
            row = sends[send_base[link] + n]
            raise ScheduleError(
                f"{self.ins(row)} has no matching receive: rank {t.peer[row]} receives only {n} message(s) "
                f"from rank {t.rank[row]}; add the receive or drop the send"
            )
        row = recvs[recv_base[link] + n]
        raise ScheduleError(
            f"{self.ins(row)} has no matching send: rank {t.peer[row]} sends only {n} message(s) "
            f"to rank {t.rank[row]}; add the send or drop the receive"
        )

    # --- 4. progress ------------------------------------------------------------------------------------
    def check_progress(self, semantics: CommSemantics) -> None:
        """Run every rank as far as it can (see :class:`CommSemantics` for when sends wait). A receive only
        posts; the compute consuming it waits until the message was sent."""
        t = self.t
        kinds, links, messages = t.kind.tolist(), t.link.tolist(), t.message.tolist()
        peers, input_recv = t.peer.tolist(), t.input_recv.tolist()
        partner_recv = t.partner_inputs.tolist()
        bounds = t.rank_bounds
        pc = [begin for begin, _ in bounds]
        blocked_at = [stop for _, stop in bounds]  # the row each rank waits on (its end once finished)
        sent = [0] * t.num_links  # messages issued on each link
        posted = [0] * t.num_links  # receives posted on each link
        rendezvous = semantics is not CommSemantics.BUFFERED
        grouped = semantics is CommSemantics.GROUPED
        group_end = _group_ends(kinds, bounds) if grouped else None
        issued = [begin for begin, _ in bounds]  # grouped: comm rows before this index are issued
        last_recv: list[dict[int, int]] = [{} for _ in bounds]  # grouped: latest receive row per peer
        ready = deque(range(len(bounds)))
        queued = [True] * len(bounds)

        def wake(rank: int) -> None:
            if not queued[rank]:
                queued[rank] = True
                ready.append(rank)

        def issue(row: int) -> None:
            if kinds[row] == KIND_RECV:
                posted[links[row]] += 1
            else:
                sent[links[row]] += 1
            wake(peers[row])

        while ready:
            rank = ready.popleft()
            queued[rank] = False
            row, stop = pc[rank], bounds[rank][1]
            blocked_at[rank] = stop
            while row < stop:
                kind = kinds[row]
                if grouped and kind != KIND_BUSY:
                    end = group_end[row]
                    if issued[rank] < end:
                        # A pair's operations run in order on one NCCL stream: a group waits for this
                        # rank's earlier receives from the same peers (stricter than NCCL, which only
                        # delays the stream, so what passes here passes there).
                        unfinished = next((last_recv[rank][peers[m]] for m in range(row, end)
                                           if _unfinished(last_recv[rank].get(peers[m]), sent, links, messages)),
                                          None)
                        if unfinished is not None:
                            blocked_at[rank] = unfinished
                            break
                        for member in range(row, end):  # issue the whole group at once
                            if kinds[member] == KIND_RECV:
                                last_recv[rank][peers[member]] = member
                            issue(member)
                        issued[rank] = end
                    waiting = next((m for m in range(row, end) if kinds[m] == KIND_SEND
                                    and posted[links[m]] <= messages[m]), None)
                    if waiting is not None:
                        blocked_at[rank] = waiting
                        break
                    row = end
                    continue
                if kind == KIND_RECV:
                    issue(row)
                elif kind == KIND_SEND:
                    if rendezvous and posted[links[row]] <= messages[row]:
                        blocked_at[rank] = row
                        break
                    issue(row)
                else:
                    source, partner = input_recv[row], partner_recv[row]
                    if (source >= 0 and sent[links[source]] <= messages[source]) or (
                            partner >= 0 and sent[links[partner]] <= messages[partner]):
                        blocked_at[rank] = row
                        break  # its input (or its overlapped half's) has not been sent yet
                row += 1
            pc[rank] = row
        if any(pc[r] < stop for r, (_, stop) in enumerate(bounds)):
            raise DeadlockError(self.cycle_message(blocked_at))

    def _awaited_input(self, row: int, pc: list[int]) -> int:
        """The receive a stuck compute waits for: its own, or — for an overlapped pair's F whose own input
        was sent — its second half's (whose sender has not reached the send)."""
        t = self.t
        source = int(t.input_recv[row])
        partner = int(t.partner_inputs[row])
        if partner < 0:
            return source
        if source < 0:
            return partner
        link, message = t.link[source], t.message[source]
        sends = np.flatnonzero((t.kind == KIND_SEND) & (t.link == link) & (t.message == message))
        if len(sends) and pc[int(t.rank[sends[0]])] > sends[0]:
            return partner  # its own input was sent: the pair waits on the other half's
        return source

    def cycle_message(self, pc: list[int]) -> str:
        """Follow who-waits-on-whom from the first stuck rank until a rank repeats; ``pc[r]`` is the row
        rank r waits on (a consuming compute or a send), or its end row once finished."""
        chain: list[str] = []
        seen: dict[int, int] = {}
        rank = next(r for r, (_, stop) in enumerate(self.t.rank_bounds) if pc[r] < stop)
        while rank not in seen:
            seen[rank] = len(chain)
            row = pc[rank]
            if row >= self.t.rank_bounds[rank][1]:
                chain.append(f"rank {rank} has finished its program")
                break
            ins = self.code[rank][self.t.seq[row]]
            if ins.op.is_send:
                chain.append(f"rank {rank} waits at {ins} for rank {ins.peer} to post the receive")
                rank = ins.peer
            elif ins.op.is_recv:  # grouped: the pair's stream runs this unfinished receive first
                chain.append(f"rank {rank} waits for {ins} to finish before its next group to rank {ins.peer}")
                rank = ins.peer
            else:
                source = self._awaited_input(row, pc)
                recv = self.code[rank][self.t.seq[source]]
                chain.append(f"rank {rank} waits at {ins} for rank {recv.peer} ({recv})")
                rank = recv.peer
        else:
            cycle, lead = chain[seen[rank] :], chain[: seen[rank]]
            text = "; ".join(cycle) + f" — a cycle back to rank {rank}"
            return "deadlock: " + ("; ".join(lead) + "; " if lead else "") + text
        return "deadlock: " + "; ".join(chain)
