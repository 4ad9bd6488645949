"""Looped breadth-first pipeline (Lamy-Poirier, "Breadth-First Pipeline Parallelism", MLSys 2023): GPipe per chunk.

Each rank holds ``v`` chunks in loop placement (stage = chunk·p + rank), like interleaved 1F1B, but runs
breadth-first: every microbatch through chunk 0, then every microbatch through chunk 1, …; the backward is
breadth-first too, chunks in reverse. Forward: all ``F(mb, c)``; backward: all ``B(mb, c)`` from the last
chunk down. Its activation memory is GPipe's (all m·v chunk-activations at the turn), and it trades it for
the large, overlappable data-parallel reductions the paper is after (each chunk's gradients are final early).
Backwards run in microbatch order (PyTorch's ``ScheduleLoopedBFS`` runs them in reverse; on uniform costs
both take the same time). Measured on uniform costs with m a multiple of p: bubble fraction
``(p−1)/(v·m+p−1)``, as interleaved 1F1B; not yet asserted as a closed form.
"""

from pipesim.program.blocks import backwards, forwards
from pipesim.program.ir import Placement, Schedule
from pipesim.program.limits import ScheduleLimits

DEFAULT_CHUNKS = 2
LIMITS = ScheduleLimits(chunks=None)


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS) -> Schedule:
    mbs = range(microbatches)
    # Forward, breadth first: the whole batch through one chunk before the next chunk.
    order = [forwards(mbs, chunk) for chunk in range(chunks)]
    # Backward, breadth first from the last chunk.
    order += [backwards(mbs, chunk) for chunk in reversed(range(chunks))]
    return Schedule.from_blocks("looped-bfs", [order] * pp, microbatches=microbatches, chunks=chunks,
                                placement=Placement.LOOP)
