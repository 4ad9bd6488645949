"""The fast engine: a step's timeline as the longest path through its static dependency graph.

Without shared-bandwidth contention every instruction's start is fixed by a handful of earlier events, known
before the run: the previous instruction on its rank (program order), for a compute op the arrival of the
message it consumes (send → receive) — for the first half of an overlapped pair also the message its second
half consumes, since the pair starts when both are there —, for a send the end of the previous transfer on
its directed link (FIFO per link), and, with a synchronised step boundary, the last rank to reach the
optimizer step. A timeline is then the longest-path labelling of that DAG: ``start = max(predecessor
ends)``, ``end = start + duration`` (for a transfer, ``start = max(issue time, link free)``, exactly the
SimPy engine's rule).

The kernel walks the graph in a topological order found on the fly, the way the validator's progress check
does: a worklist of ranks, each run ahead until it needs a message not yet sent (or a barrier not yet full),
and woken when it is. It is O(instructions), and a rank left unfinished when the worklist empties is stuck:
the same deadlock the SimPy engine finds, at the same instruction.

The kernel is one plain Python function over numpy arrays (:class:`pipesim.jit.Kernel`). numba compiles it
(``cache=True``) for large Programs and for sweeps, where the one-off import and compilation pay off; small
one-shot runs use the SimPy engine. Measured choices are in README, "Simulator speed".
"""

from __future__ import annotations

import numpy as np

from pipesim.jit import Kernel
from pipesim.program.table import KIND_RECV, KIND_SEND


def _longest_path(kind, link, message, msg_base, input_recv, partner_recv, duration, tail, drains, begin, end, barrier,
                  num_barriers, barrier_delay, start, finish, position, waited):  # pragma: no cover - numba compiles it
    """Fill ``start``/``finish`` (rows), ``position`` (per rank: stuck row, or its end when finished) and
    ``waited`` (at each draining row, how long its rank waited for its channel).

    ``msg_base[l]`` is where link l's messages begin in a flat arrival array; ``barrier[row]`` ≥ 0 marks an
    instruction that starts ``barrier_delay`` after the last rank has reached its own row of that barrier.
    ``tail[row]`` > 0: after the row, that much work joins its rank's asynchronous channel (FIFO: it starts
    once the row is done and the channel's earlier work is); ``drains[row]``: the row first waits for the
    rank's channel to be free (before a barrier, which the rank reaches only then). Tests run both forms.
    """
    pp = len(begin)
    num_links = len(msg_base) - 1
    pc = begin.copy()
    clock = np.zeros(pp)
    channel_free = np.zeros(pp)  # when each rank's asynchronous channel has finished its queued work
    link_free = np.zeros(num_links)
    sent = np.zeros(num_links, dtype=np.int64)
    arrival = np.zeros(msg_base[num_links])
    waiter = np.full(num_links, -1, dtype=np.int64)
    wanted = np.zeros(num_links, dtype=np.int64)
    barrier_count = np.zeros(num_barriers, dtype=np.int64)
    barrier_time = np.zeros(num_barriers)
    counted = np.full(pp, -1, dtype=np.int64)  # the barrier row each rank was last counted at
    queue = np.empty(pp, dtype=np.int64)  # ring buffer of runnable ranks; each rank is in it at most once
    queued = np.ones(pp, dtype=np.bool_)
    for r in range(pp):
        queue[r] = r
    head = 0
    size = pp
    while size > 0:
        r = queue[head]
        head = (head + 1) % pp
        size -= 1
        queued[r] = False
        row = pc[r]
        t = clock[r]
        stop = end[r]
        while row < stop:
            k = kind[row]
            if k == KIND_RECV:
                start[row] = t  # posting costs nothing; finish becomes the arrival once consumed
                finish[row] = t
            elif k == KIND_SEND:
                ln = link[row]
                s = t if t > link_free[ln] else link_free[ln]
                a = s + duration[row]
                link_free[ln] = a
                start[row] = s
                finish[row] = a
                arrival[msg_base[ln] + message[row]] = a
                sent[ln] += 1
                w = waiter[ln]
                if w >= 0 and sent[ln] > wanted[ln]:
                    waiter[ln] = -1
                    if not queued[w]:
                        queued[w] = True
                        queue[(head + size) % pp] = w
                        size += 1
            else:
                if drains[row] and channel_free[r] > t:
                    waited[row] = channel_free[r] - t
                    t = channel_free[r]
                src = input_recv[row]
                if src >= 0:
                    ln = link[src]
                    m = message[src]
                    if sent[ln] <= m:  # not sent yet: wait for the sender to wake this rank
                        waiter[ln] = r
                        wanted[ln] = m
                        break
                    a = arrival[msg_base[ln] + m]
                    if a > finish[src]:
                        finish[src] = a
                    if a > t:
                        t = a
                src = partner_recv[row]  # a pair's F also waits for its backward half's input
                if src >= 0:
                    ln = link[src]
                    m = message[src]
                    if sent[ln] <= m:
                        waiter[ln] = r
                        wanted[ln] = m
                        break
                    a = arrival[msg_base[ln] + m]
                    if a > finish[src]:
                        finish[src] = a
                    if a > t:
                        t = a
                b = barrier[row]
                if b >= 0:
                    if counted[r] != row:
                        counted[r] = row
                        barrier_count[b] += 1
                        if t > barrier_time[b]:
                            barrier_time[b] = t
                        if barrier_count[b] == pp:  # the last to arrive releases the others
                            for other in range(pp):
                                if other != r and pc[other] < end[other] and barrier[pc[other]] == b \
                                        and not queued[other]:
                                    queued[other] = True
                                    queue[(head + size) % pp] = other
                                    size += 1
                    if barrier_count[b] < pp:
                        break
                    released = barrier_time[b] + barrier_delay
                    if released > t:
                        t = released
                start[row] = t
                t += duration[row]
                finish[row] = t
                if tail[row] > 0.0:
                    channel_free[r] = (t if t > channel_free[r] else channel_free[r]) + tail[row]
            row += 1
        pc[r] = row
        clock[r] = t
    for r in range(pp):
        position[r] = pc[r]


_KERNEL = Kernel(_longest_path)


def worth_compiling(rows: int) -> bool:
    """Whether the compiled kernel is the fast choice for ``rows`` instructions: always once it is loaded
    in this process (sweeps warm it up), else from :data:`~pipesim.jit.COMPILE_THRESHOLD` rows, where the
    SimPy engine's per-instruction cost (~3 µs) outgrows numba's one-off start (~0.5–1 s)."""
    return _KERNEL.worth_compiling(rows)


def warm_up() -> bool:
    """Load the compiled kernel now and run it once (sweeps call this up front); False without numba."""
    if _KERNEL.compiled() is None:
        return False
    run_longest_path(np.zeros(1, np.int64), np.full(1, -1, np.int64), np.full(1, -1, np.int64), 0,
                     np.full(1, -1, np.int64), np.ones(1), ((0, 1),), np.full(1, -1, np.int64), 0, 0.0,
                     tail=np.ones(1), drains=np.ones(1, np.bool_))
    return True


def run_longest_path(kind, link, message, num_links, input_recv, durations, bounds, barrier, num_barriers,
                     barrier_delay=0.0, *, compiled: bool = True, partner_recv: np.ndarray | None = None,
                     tail: np.ndarray | None = None, drains: np.ndarray | None = None,
                     waited: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Start and end of every row, and where each rank stopped (its end row when it finished).

    ``partner_recv`` (a table's :attr:`~pipesim.program.table.ProgramTable.partner_recv`): the second input
    receive of each overlapped pair's first half, -1 elsewhere; None when the Program has no pairs.
    ``tail`` / ``drains``: each row's work for its rank's asynchronous channel, and the rows that wait for that
    channel (:func:`_longest_path`); None: no asynchronous work. ``waited``, if given, receives each draining
    row's wait. ``compiled=False`` runs the kernel as plain Python (tests check both forms agree; slow: ~4 µs
    a row).
    """
    n = len(kind)
    if partner_recv is None:
        partner_recv = np.full(n, -1, dtype=np.int64)
    if tail is None:
        tail = np.zeros(n)
    if drains is None:
        drains = np.zeros(n, dtype=np.bool_)
    if waited is None:
        waited = np.zeros(n)
    sends = kind == KIND_SEND
    per_link = np.bincount(link[sends], minlength=num_links) if num_links else np.zeros(0, np.int64)
    msg_base = np.zeros(num_links + 1, dtype=np.int64)
    np.cumsum(per_link, out=msg_base[1:])
    begin = np.array([b for b, _ in bounds], dtype=np.int64)
    end = np.array([e for _, e in bounds], dtype=np.int64)
    start = np.zeros(n)
    finish = np.zeros(n)
    position = np.zeros(len(bounds), dtype=np.int64)
    kernel = (_KERNEL.compiled() if compiled else None) or _longest_path
    kernel(kind, link, message, msg_base, input_recv, partner_recv, np.ascontiguousarray(durations, dtype=np.float64),
           np.ascontiguousarray(tail, dtype=np.float64), np.ascontiguousarray(drains, dtype=np.bool_), begin, end,
           barrier, num_barriers, float(barrier_delay), start, finish, position, waited)
    return start, finish, position.tolist()
