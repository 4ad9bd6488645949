"""A Program flattened into columns (numpy arrays), computed once and shared by simulations and timelines.

Sweeps simulate one Program under many cost models; everything here depends on the Program alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pipesim.ir import Op, Program

OP_ORDER = tuple(Op)
OP_CODE = {op: code for code, op in enumerate(OP_ORDER)}
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

    @property
    def num_rows(self) -> int:
        return len(self.op)


@lru_cache(maxsize=256)
def table_of(program: Program) -> ProgramTable:
    """Flatten ``program`` (cached: Programs are immutable)."""
    shape = program.shape
    ops, ranks, stages, chunks, mbs, peers, seqs, kinds, links, messages, boundary = ([] for _ in range(11))
    link_ids: dict[tuple[int, int], int] = {}
    link_counts: dict[tuple[int, int], int] = {}
    bounds = []
    for rank, code in enumerate(program.ranks):
        begin = len(ops)
        for seq, ins in enumerate(code):
            op = ins.op
            chunk = -1 if ins.chunk is None else ins.chunk
            stage = shape.stage(rank, chunk) if chunk >= 0 else -1
            ops.append(OP_CODE[op])
            ranks.append(rank)
            stages.append(stage)
            chunks.append(chunk)
            mbs.append(-1 if ins.mb is None else ins.mb)
            peers.append(-1 if ins.peer is None else ins.peer)
            seqs.append(seq)
            if op.is_comm:
                key = (rank, ins.peer) if op.is_send else (ins.peer, rank)
                counter_key = (key, op.is_send)
                link_ids.setdefault(key, len(link_ids))
                index = link_counts.get(counter_key, 0)
                link_counts[counter_key] = index + 1
                kinds.append(KIND_SEND if op.is_send else KIND_RECV)
                links.append(link_ids[key])
                messages.append(index)
                # The tensor crossing the boundary between stage s and s+1 is sized by stage s's output.
                forward = op in (Op.SEND_F, Op.RECV_F)
                sender_stage = stage if op.is_send else (stage - 1 if forward else stage + 1)
                boundary.append(sender_stage if forward else sender_stage - 1)
            else:
                kinds.append(KIND_BUSY)
                links.append(-1)
                messages.append(-1)
                boundary.append(-1)
        bounds.append((begin, len(ops)))

    def arr(values: list[int]) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)

    return ProgramTable(
        program=program, op=arr(ops), rank=arr(ranks), stage=arr(stages), chunk=arr(chunks),
        microbatch=arr(mbs), peer=arr(peers), seq=arr(seqs), kind=arr(kinds), link=arr(links),
        message=arr(messages), rank_bounds=tuple(bounds), num_links=len(link_ids), boundary_stage=arr(boundary),
    )
