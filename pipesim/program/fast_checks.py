"""Checks 1–3 of the validator in one compiled pass: does a Program pass, yes or no.

:func:`pipesim.program.validate.validate_static` runs its checks as whole-table numpy passes that also find
and name the first fault. A sweep validates thousands of Programs that are almost always right, and there the
numpy passes' fixed costs (sorts, a dozen temporaries per check) were 30% of a sweep point. This module asks
only the yes/no question, rank by rank in program order, in O(instructions) with dense stamp arrays:

- fields: chunk and microbatch ids in range, every send/receive on the rank holding the neighbouring stage;
- local order: each datum (the activation or input gradient of a (microbatch, stage)) produced or received
  on the rank before it is consumed or sent, ``F`` before its ``B``/``I``, ``B``/``I`` before its ``W``,
  each compute op once, every (microbatch, stage) of the rank forward and backward, every ``I`` with its
  ``W``, ``REDUCE_GRAD`` once per chunk after the chunk's last weight gradient, ``STEP`` once and last;
- pairing: the k-th send and the k-th receive of every link carry the same message, as many of each.

These are exactly the numpy checks' predicates, so a Program passes here if and only if it passes there
(a property test mutates Programs to hold both to that). On a failure the caller runs the numpy checks,
which name the fault. The kernel is plain Python compiled by numba (:class:`pipesim.jit.Kernel`), used in
sweeps, which load the compiler up front, and for large Programs.
"""

from __future__ import annotations

import numpy as np

from pipesim.jit import Kernel
from pipesim.program.ir import OP_CODE, Op, Placement
from pipesim.program.table import KIND_BUSY, KIND_RECV, KIND_SEND, ProgramTable

_F, _B, _I, _W = (OP_CODE[o] for o in (Op.F, Op.B, Op.I, Op.W))
_SEND_F, _SEND_B, _RECV_F, _RECV_B = (OP_CODE[o] for o in (Op.SEND_F, Op.SEND_B, Op.RECV_F, Op.RECV_B))
_REDUCE, _STEP = OP_CODE[Op.REDUCE_GRAD], OP_CODE[Op.STEP]
# What a stamp slot records about a (microbatch, stage) on the rank being checked.
_ACT, _GRAD, _F_DONE, _B_DONE, _W_DONE, _I_DONE = range(6)
_SLOTS = 6


def _static_ok(op, mb, chunk, stage, peer, kind, link, message, begin, end, num_links, chunks, m, num_stages,
               v_placement, pipeline_stages, pipeline_mbs):  # pragma: no cover - numba compiles it; tests run both
    # v_placement: odd chunks run back up the ranks (V and DUAL). pipeline_stages, pipeline_mbs: the stages and
    # microbatch ids of each pipeline (all of them, except under DUAL's two: halves of each).
    pp = len(begin)
    stamp = np.zeros(_SLOTS * m * num_stages, dtype=np.int64)  # rank + 1 where the slot is set on that rank
    reduced = np.zeros(chunks, dtype=np.int64)  # rank + 1 once the chunk's REDUCE_GRAD ran there
    for r in range(pp):
        mark = r + 1
        if end[r] <= begin[r] or op[end[r] - 1] != _STEP:
            return False
        forwards = 0
        backwards = 0
        splits = 0
        weights_of_splits = 0
        reduces = 0
        for row in range(begin[r], end[r]):
            o = op[row]
            if o == _STEP:
                if row != end[r] - 1:
                    return False
                continue
            c = chunk[row]
            if c < 0 or c >= chunks:
                return False
            if o == _REDUCE:
                if reduced[c] == mark:
                    return False
                reduced[c] = mark
                reduces += 1
                continue
            b = mb[row]
            if b < 0 or b >= m:
                return False
            s = stage[row]
            if s // pipeline_stages != b // pipeline_mbs:  # the microbatch's own pipeline only
                return False
            if kind[row] != KIND_BUSY:
                towards_next = o in (_SEND_F, _RECV_B)
                neighbour = s + 1 if towards_next else s - 1
                if neighbour < 0 or neighbour >= num_stages or neighbour // pipeline_stages != s // pipeline_stages:
                    return False
                lap = neighbour // pp
                offset = neighbour - lap * pp
                holder = pp - 1 - offset if v_placement and lap % 2 == 1 else offset
                if peer[row] != holder or holder == r:
                    return False
                if o == _RECV_F:
                    stamp[(_ACT * m + b) * num_stages + s - 1] = mark
                elif o == _RECV_B:
                    stamp[(_GRAD * m + b) * num_stages + s + 1] = mark
                elif o == _SEND_F:
                    if stamp[(_ACT * m + b) * num_stages + s] != mark:
                        return False
                elif stamp[(_GRAD * m + b) * num_stages + s] != mark:  # SEND_B
                    return False
                continue
            here = b * num_stages + s
            if o == _F:
                if stamp[_F_DONE * m * num_stages + here] == mark:
                    return False
                if s % pipeline_stages > 0 and stamp[(_ACT * m + b) * num_stages + s - 1] != mark:
                    return False
                stamp[_F_DONE * m * num_stages + here] = mark
                stamp[_ACT * m * num_stages + here] = mark
                forwards += 1
            elif o in (_B, _I):
                if stamp[_B_DONE * m * num_stages + here] == mark or stamp[_F_DONE * m * num_stages + here] != mark:
                    return False
                if s % pipeline_stages < pipeline_stages - 1 and stamp[(_GRAD * m + b) * num_stages + s + 1] != mark:
                    return False
                if o == _B and reduced[c] == mark:  # a final weight gradient after its REDUCE_GRAD
                    return False
                stamp[_B_DONE * m * num_stages + here] = mark
                stamp[_GRAD * m * num_stages + here] = mark
                backwards += 1
                if o == _I:
                    stamp[_I_DONE * m * num_stages + here] = mark
                    splits += 1
            else:  # W
                if stamp[_W_DONE * m * num_stages + here] == mark or stamp[_B_DONE * m * num_stages + here] != mark:
                    return False
                if reduced[c] == mark:
                    return False
                stamp[_W_DONE * m * num_stages + here] = mark
                if stamp[_I_DONE * m * num_stages + here] == mark:
                    weights_of_splits += 1
        per_rank = chunks * pipeline_mbs
        if forwards != per_rank or backwards != per_rank or splits != weights_of_splits or reduces != chunks:
            return False
    # Pairing: the k-th send and receive of each link carry the same (payload, microbatch, leaving stage).
    sends = np.zeros(num_links, dtype=np.int64)
    recvs = np.zeros(num_links, dtype=np.int64)
    for row in range(len(op)):
        if kind[row] == KIND_SEND:
            sends[link[row]] += 1
        elif kind[row] == KIND_RECV:
            recvs[link[row]] += 1
    base = np.zeros(num_links + 1, dtype=np.int64)
    for k in range(num_links):
        if sends[k] != recvs[k]:
            return False
        base[k + 1] = base[k] + sends[k]
    sent_label = np.zeros(3 * base[num_links], dtype=np.int64)
    for row in range(len(op)):
        if kind[row] == KIND_SEND:
            at = 3 * (base[link[row]] + message[row])
            sent_label[at] = 1 if op[row] == _SEND_B else 0
            sent_label[at + 1] = mb[row]
            sent_label[at + 2] = stage[row]
    for row in range(len(op)):
        if kind[row] == KIND_RECV:
            at = 3 * (base[link[row]] + message[row])
            gradient = 1 if op[row] == _RECV_B else 0
            leaving = stage[row] + 1 if gradient else stage[row] - 1
            if sent_label[at] != gradient or sent_label[at + 1] != mb[row] or sent_label[at + 2] != leaving:
                return False
    return True


_KERNEL = Kernel(_static_ok)


def passes(table: ProgramTable, *, compiled: bool = True) -> bool | None:
    """Whether the Program of ``table`` passes checks 1–3; None where the compiled kernel is not worth loading
    (small one-shot runs: the numpy checks are quicker than importing numba). ``compiled=False`` runs the
    kernel as plain Python (tests compare both forms)."""
    if compiled and not _KERNEL.worth_compiling(table.num_rows):
        return None
    kernel = _KERNEL.compiled() if compiled else _static_ok
    if kernel is None:  # pragma: no cover - numba is a dependency
        return None
    shape = table.program.shape
    begin = np.array([b for b, _ in table.rank_bounds], dtype=np.int64)
    end = np.array([e for _, e in table.rank_bounds], dtype=np.int64)
    return bool(kernel(table.op, table.microbatch, table.chunk, table.stage, table.peer, table.kind, table.link,
                       table.message, begin, end, table.num_links, shape.chunks, shape.microbatches,
                       shape.num_stages, shape.placement is not Placement.LOOP, shape.stages_per_pipeline,
                       shape.microbatches // shape.pipelines))


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernel now; sweeps call this before forking workers."""
    kernel = _KERNEL.compiled()
    if kernel is not None:
        one = np.zeros(1, dtype=np.int64)
        kernel(one + _STEP, one - 1, one - 1, one - 1, one - 1, one + KIND_BUSY, one - 1, one - 1, one * 0,
               one + 1, 0, 1, 1, 1, False, 1, 1)
