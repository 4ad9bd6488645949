"""A broken schedule for tests: rank 0 wants mb 0's gradient before sending mb 1, the last rank wants mb 1's
activation before it runs any backward — each waits for the other (a deadlock under any semantics)."""

from pipesim.program.ir import B, F, Schedule


def build(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    eager = [op for mb in range(microbatches) for op in (F(mb), B(mb))]
    lazy = [F(mb) for mb in range(microbatches)] + [B(mb) for mb in range(microbatches)]
    return Schedule.from_orders("deadlock", [eager] + [lazy] * (pp - 1), microbatches=microbatches)
