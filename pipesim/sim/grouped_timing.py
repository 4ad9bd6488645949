"""Step time under the validator's GROUPED semantics: a timed version of its abstract run.

The simulator times buffered sends (a send never waits), under which where a receive is posted does not
matter. On NCCL it does: a send waits until its receive is posted. This model gives the validator's
:attr:`~pipesim.program.validate.CommSemantics.GROUPED` rules clocks, to compare two Programs of one
schedule (:func:`pipesim.program.grouped.grouped_program` keeps the faster):

- a compute starts when its rank is free and its received input has arrived; it takes its duration;
- a run of consecutive SEND/RECV instructions is one group, issued when the rank reaches it and the rank's
  earlier receives from the group's peers have arrived (a pair's stream runs in order); its receives are
  posted then;
- a transfer starts at ``max(send issued, receive posted, link free)`` and takes the simulator's transfer
  time (links are FIFO); the rank leaves the group once all of the group's sends have arrived.
"""

from __future__ import annotations

import enum

from pipesim.errors import DeadlockError
from pipesim.program.ir import Program
from pipesim.program.table import KIND_BUSY, KIND_RECV, KIND_SEND, table_of
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import durations_of

_UNKNOWN = -1.0


class StreamScope(enum.Enum):
    """Which earlier receives a group waits for: those from its own peers (PAIR: one NCCL stream per pair of
    ranks, the validator's rule) or all of the rank's (RANK: one stream per rank, as when PyTorch coalesces
    a ``batch_isend_irecv`` over several peers onto one communicator) — stricter, for checking a Program
    against either runtime."""

    PAIR = "pair"
    RANK = "rank"


def grouped_makespan(program: Program, costs: CostModel | None = None,
                     scope: StreamScope = StreamScope.PAIR) -> float:
    """The step time of ``program`` under grouped rendezvous sends; raises DeadlockError if it hangs.

    ``program`` should have passed :func:`~pipesim.program.validate.validate_static` (pairing).
    """
    t = table_of(program)
    costs = costs or CostModel()
    duration = durations_of(t, costs).tolist()
    kind, link, message = t.kind.tolist(), t.link.tolist(), t.message.tolist()
    peer, input_recv = t.peer.tolist(), t.input_recv.tolist()
    partner_recv = t.partner_inputs.tolist()
    bounds = t.rank_bounds
    # Per (link, message): when the send was issued, when the receive was posted, when the data arrived.
    issued = [[] for _ in range(t.num_links)]
    posted = [[] for _ in range(t.num_links)]
    arrival = [[] for _ in range(t.num_links)]
    link_free = [0.0] * t.num_links

    def arrive(lnk: int) -> None:
        """Time every message of ``lnk`` whose send is issued and receive posted (in FIFO order)."""
        done = arrival[lnk]
        while len(done) < min(len(issued[lnk]), len(posted[lnk])):
            k = len(done)
            begin = max(issued[lnk][k], posted[lnk][k], link_free[lnk])
            link_free[lnk] = begin + transfer[lnk][k]
            done.append(link_free[lnk])

    transfer = [[] for _ in range(t.num_links)]  # per link, the duration of message k (from its SEND row)
    for row in range(t.num_rows):
        if kind[row] == KIND_SEND:
            transfer[link[row]].append(duration[row])

    group_end = [0] * t.num_rows
    for begin, stop in bounds:
        end = stop
        for row in range(stop - 1, begin - 1, -1):
            if kind[row] == KIND_BUSY:
                end = row
            else:
                group_end[row] = end

    def known(row: int) -> float:
        """When the message of a SEND/RECV row arrived, or _UNKNOWN while it has not been timed."""
        lnk, k = link[row], message[row]
        return arrival[lnk][k] if k < len(arrival[lnk]) else _UNKNOWN

    pc = [begin for begin, _ in bounds]
    clock = [0.0] * len(bounds)
    group_issued = [False] * len(bounds)  # whether the group at pc[r] was issued
    last_recv: list[dict[int, int]] = [{} for _ in bounds]
    progress = True
    while progress:
        progress = False
        for r, (_, stop) in enumerate(bounds):
            row = pc[r]
            while row < stop:
                if kind[row] == KIND_BUSY:
                    ready = clock[r]
                    # an overlapped pair's F waits for both halves' inputs
                    data = [known(source) for source in (input_recv[row], partner_recv[row]) if source >= 0]
                    if _UNKNOWN in data:
                        break
                    ready = max([ready, *data])
                    clock[r] = ready + duration[row]
                    row += 1
                    continue
                end = group_end[row]
                if not group_issued[r]:
                    if scope is StreamScope.RANK:
                        earlier = list(last_recv[r].values())
                    else:
                        earlier = [last_recv[r][peer[m]] for m in range(row, end) if peer[m] in last_recv[r]]
                    times = [known(m) for m in earlier]
                    if _UNKNOWN in times:
                        break
                    clock[r] = max([clock[r], *times])
                    for m in range(row, end):
                        (posted if kind[m] == KIND_RECV else issued)[link[m]].append(clock[r])
                        if kind[m] == KIND_RECV:
                            last_recv[r][peer[m]] = m
                        arrive(link[m])
                    group_issued[r] = True
                    progress = True
                sends = [known(m) for m in range(row, end) if kind[m] == KIND_SEND]
                if _UNKNOWN in sends:
                    break
                clock[r] = max([clock[r], *sends])
                group_issued[r] = False
                row = end
            if row != pc[r]:
                pc[r] = row
                progress = True
    stuck = [f"rank {r} at {program.ranks[r][pc[r] - begin]}" for r, (begin, stop) in enumerate(bounds)
             if pc[r] < stop]
    if stuck:  # validate(program, CommSemantics.GROUPED) names the cycle; this only says where it stopped
        raise DeadlockError(f"program {program.name!r} hangs under grouped sends: {'; '.join(stuck)}")
    return max(clock)

