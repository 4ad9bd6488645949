"""Grouped-safe lowering: reorder a Program's transfers so it cannot hang on NCCL point-to-point semantics.

The problem. On NCCL a send larger than the eager buffer returns only once its receive is posted, and a
pair's operations run in order on one stream (:attr:`CommSemantics.GROUPED`). :func:`lower` posts each
receive just before the compute that consumes it. Then a send waits until its receiver *reaches the
consumer*; when the receiver is itself blocked sending to the first rank (interleaved 1F1B, the V schedules,
looped BFS), both wait forever once activations exceed the eager buffer.

How Megatron-LM avoids it. Its interleaved 1F1B (``forward_backward_pipelining_with_interleaving`` in
megatron/core/pipeline_parallel/schedules.py) runs every rank through the same sequence of communication
steps, each one batched call (``send_forward_backward_recv_forward_backward`` and friends in
p2p_communication.py, one ``batch_isend_irecv``): the k-th step of a rank meets the k-th step of its
neighbours, so every send finds its receive posted in the partner's matching batch. That lockstep is
hand-derived per schedule.

This pass derives it for any compute order. Give every event of the step a *label* from one global
logical clock:

- run the compute order under ideal timing — each compute starts when its rank's previous compute ended
  and its input was produced, F, I and W taking 1 unit and B 2 (the zero-bubble papers' cost assumption;
  any positive durations would do) — a longest-path (ASAP) pass over the data-dependency DAG, which exists
  because the Program is valid under buffered sends;
- a compute is labelled ``(its end, 0, seq)``; a message ``(its producer's end, 1, sender, receiver, k)``
  — the *same* label on both ends; ``REDUCE_GRAD`` ``(its compute's end, 2, seq)``; ``STEP`` last;
- each rank's instructions are re-sorted by label. A send lands right after its producer, as before; its
  receive is posted on the receiver before the compute during which the producer finished in logical
  time — usually long before its consumer, and early enough that in ideal timing no send waits. Runs of
  consecutive transfers are issued as one group by the executor, so a rank's sends go out together with
  the receives due at the same time, as Megatron batches them.

Why it is safe by construction. Labels increase along every rank's program (computes end in order, a
message sorts after its producer and before its consumer, which ends later); the two ends of a message
share its label; and labels on a rank are distinct. Suppose a GROUPED run is stuck. Among all ranks take
the unfinished event with the smallest label L (a compute not run, a group not issued, or an issued send
whose receive is not posted); let it be on rank r. Every way r can wait names an event of a peer q with a
label ≤ L that q has not done:

1. r's compute waits for its input: the send, labelled < L, was not issued by q — a smaller unfinished
   label, impossible;
2. r's group waits for an earlier receive from q to finish (a pair's stream runs in order): that receive,
   earlier on r, has a label < L, so its send on q is unfinished with a label < L — impossible;
3. r's issued send, labelled L, waits for q to post its receive, also labelled L: q has not issued the
   group holding it; q's events before that group have labels < L, so q is stuck on that very group
   (stuck earlier, it would hold a smaller unfinished label), which waits (case 2) for a send labelled
   < L — impossible.

So no run is stuck: the Program is deadlock-free under GROUPED semantics, and by the same argument under
RENDEZVOUS (each send alone) and BUFFERED; case 2 even holds if a group waited for *all* of its rank's
earlier receives (one stream per rank, as with coalesced ``batch_isend_irecv``; tested with
:class:`~pipesim.sim.grouped_timing.StreamScope`). This is the classic
result that synchronous message passing cannot deadlock when every rank meets its partners in one global
order. :func:`grouped_program` still runs the validator on the result, so the proof is checked, not
trusted.

Keeping lower()'s Program. Where :func:`lower`'s own Program is already proven safe under GROUPED (gpipe,
1f1b, zb-h1: there its just-in-time receives pair each send with a receive as Megatron's
``send_forward_recv_backward`` does), both are timed under grouped rendezvous sends
(:func:`pipesim.sim.grouped_timing.grouped_makespan`, the validator's rules with clocks) and the faster is
kept, lower()'s on a tie: gpipe and 1f1b tie; zb-h1 is faster reordered (pp=4, m=8, unit costs: 27
units against 33, as with buffered sends), since lower() makes a rank's input-gradient send wait until its
neighbour reaches the consuming backward. ``python experiments/grouped_step_time.py`` prints the table.
"""

from __future__ import annotations

import enum

from pipesim.errors import DeadlockError, ScheduleError
from pipesim.program.ir import Op, Program
from pipesim.program.table import KIND_RECV, KIND_SEND, OP_CODE, table_of
from pipesim.program.validate import CommSemantics, validate
from pipesim.sim.costs import CostModel

# Logical durations for the labelling clock (ZB-H1 paper, Qi et al. 2024, §2: T_F = T_B_input = T_W,
# so a fused B costs two). Only their order matters for performance; safety holds for any positive values.
LOGICAL_DURATION = {Op.F: 1, Op.B: 2, Op.I: 1, Op.W: 1}

_COMPUTE_CODES = {OP_CODE[op]: LOGICAL_DURATION[op] for op in LOGICAL_DURATION}
_STEP = OP_CODE[Op.STEP]
# Label classes at one instant: a compute ending then, the transfers its end releases, REDUCE_GRAD.
_COMPUTE, _MESSAGE, _LOCAL = 0, 1, 2


class P2PLowering(enum.Enum):
    """Which Program the executor runs.

    EAGER: :func:`lower`'s, receives just before their consumers; safe with buffered sends (gloo).
    GROUPED: safe under NCCL's grouped semantics, by :func:`grouped_program`.
    """

    EAGER = "eager"
    GROUPED = "grouped"


def grouped_program(program: Program, costs: CostModel | None = None) -> Program:
    """A Program computing the same thing as ``program`` that is proven deadlock-free under GROUPED sends.

    ``program`` must be valid under buffered sends (raises ScheduleError / DeadlockError naming the problem
    otherwise). If it is already proven safe, it is returned unchanged unless the reordered Program is faster
    under grouped sends with ``costs`` (unit costs by default).
    """
    from pipesim.sim.grouped_timing import grouped_makespan  # the simulator side imports this package

    validate(program, CommSemantics.BUFFERED)
    relabelled = relabel(program)
    try:
        validate(relabelled, CommSemantics.GROUPED)
    except ScheduleError as err:  # pragma: no cover - the module docstring proves this cannot happen
        raise AssertionError(f"grouped lowering of {program.name!r} is not safe: {err}") from err
    try:
        validate(program, CommSemantics.GROUPED)
    except DeadlockError:
        return relabelled
    if grouped_makespan(relabelled, costs) < grouped_makespan(program, costs):
        return relabelled
    return program


def relabel(program: Program) -> Program:
    """Sort every rank's instructions by the global labels of the module docstring (no validation)."""
    t = table_of(program)
    op, kind, rank, peer = t.op.tolist(), t.kind.tolist(), t.rank.tolist(), t.peer.tolist()
    links, messages, input_recv = t.link.tolist(), t.message.tolist(), t.input_recv.tolist()
    mb, chunk = t.microbatch.tolist(), t.chunk.tolist()
    n = t.num_rows

    # The message each send carries, and the compute on its rank that produced it (F for SEND_F, B/I for
    # SEND_B, of the same microbatch and chunk).
    send_of: dict[tuple[int, int], int] = {}
    producer: dict[int, int] = {}
    for begin, stop in t.rank_bounds:
        made: dict[tuple[bool, int, int], int] = {}
        for row in range(begin, stop):
            code = op[row]
            if code in _COMPUTE_CODES and code != OP_CODE[Op.W]:
                made[(code != OP_CODE[Op.F], mb[row], chunk[row])] = row
            elif kind[row] == KIND_SEND:
                send_of[(links[row], messages[row])] = row
                producer[row] = made[(op[row] == OP_CODE[Op.SEND_B], mb[row], chunk[row])]

    def made_by(recv_row: int) -> int:
        return producer[send_of[(links[recv_row], messages[recv_row])]]

    end = _asap(t, op, input_recv, made_by)

    labels: list[tuple] = [()] * n
    for begin, stop in t.rank_bounds:
        last_end = 0
        for row in range(begin, stop):
            code = op[row]
            if kind[row] == KIND_SEND:
                labels[row] = (end[producer[row]], _MESSAGE, rank[row], peer[row], messages[row])
            elif kind[row] == KIND_RECV:
                labels[row] = (end[made_by(row)], _MESSAGE, peer[row], rank[row], messages[row])
            elif code in _COMPUTE_CODES:
                labels[row] = (end[row], _COMPUTE, row)
                last_end = end[row]
            elif code == _STEP:
                labels[row] = (float("inf"), _COMPUTE, row)
            else:  # REDUCE_GRAD: right after its compute's transfers, before the next compute
                labels[row] = (last_end, _LOCAL, row)
    ranks = []
    for r, (begin, stop) in enumerate(t.rank_bounds):
        order = sorted(range(begin, stop), key=labels.__getitem__)
        ranks.append(tuple(program.ranks[r][row - begin] for row in order))
    return Program(program.name, program.shape, tuple(ranks))


def _asap(t, op, input_recv, sender_of) -> list[int]:
    """End of every compute row under the logical durations: each starts when its rank's previous
    compute ended and its received input was produced. Ranks advance round-robin until all are done."""
    end = [0] * t.num_rows
    rank_of_row = t.rank.tolist()
    partner = t.partner_inputs.tolist()
    overlap = t.overlap_mask.tolist()
    pc = [begin for begin, _ in t.rank_bounds]  # rows before pc[r] have their times
    clock = [0] * len(pc)
    progress = True
    while progress:
        progress = False
        for r, (_, stop) in enumerate(t.rank_bounds):
            row = pc[r]
            while row < stop:
                duration = _COMPUTE_CODES.get(op[row])
                if duration is not None:
                    ready = clock[r]
                    blocked = False
                    # An overlapped pair is one unit: its F waits for both inputs and lasts both halves,
                    # its second half ends with it (so nothing sorts between the two).
                    for source in (input_recv[row], partner[row]):
                        if source >= 0:
                            made = sender_of(source)
                            if made >= pc[rank_of_row[made]]:
                                blocked = True  # its producer has no time yet
                                break
                            ready = max(ready, end[made])
                    if blocked:
                        break
                    if overlap[row]:
                        duration = 0
                    elif row + 1 < stop and overlap[row + 1]:
                        duration += _COMPUTE_CODES[op[row + 1]]
                    end[row] = clock[r] = ready + duration
                row += 1
            if row > pc[r]:
                pc[r] = row
                progress = True
    if any(pc[r] < stop for r, (_, stop) in enumerate(t.rank_bounds)):  # pragma: no cover - buffered-valid
        raise DeadlockError(f"program {t.program.name!r}: its compute order has a cycle of data dependencies")
    return end
