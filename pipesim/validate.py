"""Validation: prove a Program complete, correctly ordered and deadlock-free, or name what is wrong.

The check is an abstract execution of every rank under the executor's communication semantics
(DESIGN.md, "Communication semantics"): each directed link is one FIFO channel, the k-th send on a→b is
consumed by the k-th receive on b from a, and both must agree on what travels. A receive blocks its rank
until the message was sent. A send either returns at once (:attr:`CommSemantics.BUFFERED`, what the
executor's ``isend`` gives on gloo) or waits until the peer reaches the matching receive
(:attr:`CommSemantics.RENDEZVOUS`, NCCL point-to-point without grouping).

Each rank tracks which data it holds — the activation leaving stage s for microbatch m, the input gradient
of stage s for m — and every instruction checks that what it consumes is there. If no rank can move and
some are unfinished, the waits form a cycle (every blocked rank waits on exactly one peer) and the error
names it.
"""

from __future__ import annotations

import enum
from collections import deque

from pipesim.errors import DeadlockError, ScheduleError
from pipesim.ir import Instruction, Op, Program


class CommSemantics(enum.Enum):
    """When a send returns."""

    BUFFERED = "buffered"
    RENDEZVOUS = "rendezvous"


_ACT, _GRAD = 0, 1  # kinds of data that travel between stages


def _describe(kind: int, mb: int, stage: int) -> str:
    what = "activation" if kind == _ACT else "input gradient"
    return f"{what} of stage {stage} for mb {mb}"


class _RankState:
    __slots__ = ("blocked", "done_b", "done_f", "done_i", "done_w", "have", "pc", "reduced", "stepped")

    def __init__(self) -> None:
        self.pc = 0
        self.have: set[tuple[int, int, int]] = set()  # (kind, mb, stage) data available on this rank
        self.done_f: set[tuple[int, int]] = set()  # (mb, stage)
        self.done_b: set[tuple[int, int]] = set()  # fused B
        self.done_i: set[tuple[int, int]] = set()
        self.done_w: set[tuple[int, int]] = set()
        self.reduced: set[int] = set()
        self.stepped = False
        self.blocked = False


def validate(program: Program, semantics: CommSemantics = CommSemantics.BUFFERED) -> None:
    """Raise :class:`ScheduleError` (or :class:`DeadlockError`) with a one-line reason, or return None."""
    _Checker(program, semantics).run()


class _Checker:
    def __init__(self, program: Program, semantics: CommSemantics) -> None:
        self.program = program
        self.shape = program.shape
        self.rendezvous = semantics is CommSemantics.RENDEZVOUS
        self.pp = self.shape.pp
        if len(program.ranks) != self.pp:
            raise ScheduleError(f"program has {len(program.ranks)} ranks but pp={self.pp}")
        self.states = [_RankState() for _ in range(self.pp)]
        # link (src, dst) -> labels sent so far, and how many of them dst has received
        self.sent: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        self.received: dict[tuple[int, int], int] = {}

    # --- driver ---------------------------------------------------------------------------------------
    def run(self) -> None:
        ready = deque(range(self.pp))
        queued = [True] * self.pp
        while ready:
            rank = ready.popleft()
            queued[rank] = False
            for woken in self._advance(rank):
                if not queued[woken]:
                    queued[woken] = True
                    ready.append(woken)
        unfinished = [r for r in range(self.pp) if self.states[r].pc < len(self.program.ranks[r])]
        if unfinished:
            raise DeadlockError(self._cycle_message(unfinished[0]))
        self._check_complete()

    def _advance(self, rank: int) -> list[int]:
        """Run ``rank`` until it blocks or finishes; return the ranks it may have unblocked."""
        state = self.states[rank]
        program = self.program.ranks[rank]
        woken: list[int] = []
        while state.pc < len(program):
            ins = program[state.pc]
            op = ins.op
            if op.is_recv:
                link = (ins.peer, rank)
                index = self.received.get(link, 0)
                if index >= len(self.sent.get(link, ())):
                    if self.rendezvous and self._peer_waits_to_send(ins.peer, rank):
                        self._complete_send(ins.peer)
                        woken.append(ins.peer)
                    else:
                        state.blocked = True
                        return woken
                self._receive(rank, ins, link, index)
            elif op.is_send:
                self._check_send(rank, ins)
                if self.rendezvous and not self._peer_waits_to_receive(rank, ins.peer):
                    state.blocked = True
                    return woken
                self._send(rank, ins)
                woken.append(ins.peer)
            else:
                self._compute(rank, ins)
            state.pc += 1
            state.blocked = False
        return woken

    # --- rendezvous helpers ---------------------------------------------------------------------------
    def _peer_waits_to_send(self, src: int, dst: int) -> bool:
        peer = self.states[src]
        code = self.program.ranks[src]
        return peer.blocked and peer.pc < len(code) and code[peer.pc].op.is_send and code[peer.pc].peer == dst

    def _peer_waits_to_receive(self, src: int, dst: int) -> bool:
        peer = self.states[dst]
        code = self.program.ranks[dst]
        return peer.blocked and peer.pc < len(code) and code[peer.pc].op.is_recv and code[peer.pc].peer == src

    def _complete_send(self, src: int) -> None:
        """A rendezvous send blocked on ``src`` is matched by its receiver now."""
        state = self.states[src]
        self._send(src, self.program.ranks[src][state.pc])
        state.pc += 1
        state.blocked = False

    # --- per-instruction rules ------------------------------------------------------------------------
    def _locate(self, rank: int, ins: Instruction) -> int:
        """Check the instruction's fields and return the stage it acts on."""
        shape = self.shape
        if ins.chunk is None or not 0 <= ins.chunk < shape.chunks:
            raise ScheduleError(f"rank {rank}: {ins} names chunk {ins.chunk}; chunks are 0..{shape.chunks - 1}")
        if ins.op is not Op.REDUCE_GRAD and (ins.mb is None or not 0 <= ins.mb < shape.microbatches):
            raise ScheduleError(
                f"rank {rank}: {ins} names mb {ins.mb}; microbatches are 0..{shape.microbatches - 1}"
            )
        return shape.stage(rank, ins.chunk)

    def _expected_peer(self, rank: int, ins: Instruction, stage: int) -> tuple[int, int]:
        """(peer rank, neighbouring stage) the communication instruction must talk to."""
        towards_next = ins.op in (Op.SEND_F, Op.RECV_B)
        neighbour = stage + 1 if towards_next else stage - 1
        if not 0 <= neighbour < self.shape.num_stages:
            raise ScheduleError(f"rank {rank}: {ins} acts on stage {stage}, which has no stage {neighbour}")
        peer = self.shape.rank_of(neighbour)
        if ins.peer != peer:
            raise ScheduleError(
                f"rank {rank}: {ins} talks to rank {ins.peer}, but stage {neighbour} lives on rank {peer}"
            )
        if peer == rank:
            raise ScheduleError(f"rank {rank}: {ins} sends to itself; stage {neighbour} is local, drop it")
        return peer, neighbour

    def _check_send(self, rank: int, ins: Instruction) -> None:
        stage = self._locate(rank, ins)
        self._expected_peer(rank, ins, stage)
        label = (_ACT if ins.op is Op.SEND_F else _GRAD, ins.mb, stage)
        if label not in self.states[rank].have:
            raise ScheduleError(
                f"rank {rank}: {ins} sends the {_describe(*label)} before computing it; move it after "
                f"{'F' if label[0] == _ACT else 'B/I'} mb={ins.mb} chunk={ins.chunk}"
            )

    def _send(self, rank: int, ins: Instruction) -> None:
        stage = self.shape.stage(rank, ins.chunk)
        label = (_ACT if ins.op is Op.SEND_F else _GRAD, ins.mb, stage)
        self.sent.setdefault((rank, ins.peer), []).append(label)

    def _receive(self, rank: int, ins: Instruction, link: tuple[int, int], index: int) -> None:
        stage = self._locate(rank, ins)
        _, neighbour = self._expected_peer(rank, ins, stage)
        expected = (_ACT if ins.op is Op.RECV_F else _GRAD, ins.mb, neighbour)
        arrived = self.sent[link][index]
        if arrived != expected:
            raise ScheduleError(
                f"link {link[0]}→{link[1]} is FIFO: message #{index + 1} rank {link[0]} sends is the "
                f"{_describe(*arrived)}, but rank {rank}'s receive #{index + 1} from it ({ins}) expects the "
                f"{_describe(*expected)}; reorder so sends and receives on this link agree"
            )
        self.received[link] = index + 1
        self.states[rank].have.add(expected)

    def _compute(self, rank: int, ins: Instruction) -> None:
        op, state = ins.op, self.states[rank]
        if op is Op.STEP:
            self._step(rank, state)
            return
        stage = self._locate(rank, ins)
        if state.stepped:
            raise ScheduleError(f"rank {rank}: {ins} comes after STEP; STEP must be last")
        if op is Op.REDUCE_GRAD:
            self._reduce(rank, ins, state)
            return
        key = (ins.mb, stage)
        if op is Op.F:
            if key in state.done_f:
                raise ScheduleError(f"rank {rank}: {ins} runs twice (forward of stage {stage}, mb {ins.mb})")
            if stage > 0:
                self._need(rank, ins, (_ACT, ins.mb, stage - 1), "RECV_F")
            state.done_f.add(key)
            state.have.add((_ACT, ins.mb, stage))
            return
        if op is Op.W:
            if key in state.done_w:
                raise ScheduleError(f"rank {rank}: {ins} runs twice")
            if key not in state.done_i:
                raise ScheduleError(f"rank {rank}: {ins} runs before I mb={ins.mb} chunk={ins.chunk}")
            state.done_w.add(key)
            return
        # B or I
        if key in state.done_b or key in state.done_i:
            raise ScheduleError(f"rank {rank}: {ins} runs twice (backward of stage {stage}, mb {ins.mb})")
        if key not in state.done_f:
            raise ScheduleError(f"rank {rank}: {ins} runs before F mb={ins.mb} chunk={ins.chunk}")
        if stage < self.shape.num_stages - 1:
            self._need(rank, ins, (_GRAD, ins.mb, stage + 1), "RECV_B")
        (state.done_b if op is Op.B else state.done_i).add(key)
        state.have.add((_GRAD, ins.mb, stage))

    def _need(self, rank: int, ins: Instruction, label: tuple[int, int, int], recv: str) -> None:
        if label not in self.states[rank].have:
            raise ScheduleError(
                f"rank {rank}: {ins} runs before its input, the {_describe(*label)}, was computed on or "
                f"received by rank {rank}; put a {recv} (or the producing op) before it"
            )

    def _missing_backward(self, rank: int, state: _RankState, chunk: int) -> str | None:
        stage = self.shape.stage(rank, chunk)
        for mb in range(self.shape.microbatches):
            key = (mb, stage)
            if key not in state.done_b and key not in state.done_w:
                op = "W" if key in state.done_i else "B"
                return f"{op} mb={mb} chunk={chunk}"
        return None

    def _reduce(self, rank: int, ins: Instruction, state: _RankState) -> None:
        if ins.chunk in state.reduced:
            raise ScheduleError(f"rank {rank}: {ins} runs twice")
        missing = self._missing_backward(rank, state, ins.chunk)
        if missing:
            raise ScheduleError(f"rank {rank}: {ins} runs before {missing}; gradients would be incomplete")
        state.reduced.add(ins.chunk)

    def _step(self, rank: int, state: _RankState) -> None:
        if state.stepped:
            raise ScheduleError(f"rank {rank}: STEP runs twice")
        for chunk in range(self.shape.chunks):
            missing = self._missing_backward(rank, state, chunk)
            if missing:
                raise ScheduleError(f"rank {rank}: STEP runs before {missing}")
            if chunk not in state.reduced:
                raise ScheduleError(f"rank {rank}: STEP runs before REDUCE_GRAD chunk={chunk}")
        state.stepped = True

    # --- end-of-program checks ------------------------------------------------------------------------
    def _check_complete(self) -> None:
        for rank, state in enumerate(self.states):
            shape = self.shape
            for chunk in range(shape.chunks):
                stage = shape.stage(rank, chunk)
                for mb in range(shape.microbatches):
                    if (mb, stage) not in state.done_f:
                        raise ScheduleError(
                            f"rank {rank} never runs F mb={mb} chunk={chunk} (stage {stage}); every "
                            "microbatch must pass every stage once"
                        )
            if not state.stepped:
                raise ScheduleError(f"rank {rank} never runs STEP; it must be its last instruction")
        for link, labels in self.sent.items():
            received = self.received.get(link, 0)
            if received < len(labels):
                raise ScheduleError(
                    f"rank {link[0]} sends the {_describe(*labels[received])} to rank {link[1]}, which never "
                    "receives it; add the matching receive or drop the send"
                )

    def _cycle_message(self, start: int) -> str:
        """Follow who-waits-on-whom from ``start`` until a rank repeats (or a finished rank is hit)."""
        chain: list[str] = []
        seen: dict[int, int] = {}
        rank = start
        while rank not in seen:
            seen[rank] = len(chain)
            code = self.program.ranks[rank]
            pc = self.states[rank].pc
            if pc >= len(code):
                chain.append(f"rank {rank}, which has finished its program without sending it")
                return "deadlock: " + ", ".join(chain)
            ins = code[pc]
            verb = "to receive it" if ins.op.is_send else "for"
            if ins.op.is_send:
                chain.append(f"rank {rank} waits at {ins} for rank {ins.peer} {verb}")
            else:
                chain.append(f"rank {rank} waits at {ins} for rank {ins.peer}")
            rank = ins.peer
        cycle = chain[seen[rank] :]
        lead = chain[: seen[rank]]
        text = "; ".join(cycle) + f" — a cycle back to rank {rank}"
        if lead:
            text = "; ".join(lead) + "; " + text
        return "deadlock: " + text
