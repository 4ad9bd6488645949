"""ZB-auto: the compute order synthesised for the given costs and memory limit (Zero Bubble's ZB-1p/ZB-2p
idea, Qi et al., ICLR 2024, §3; with ``--chunks 2`` the V placement of "Pipeline Parallelism with Controllable
Memory", Qi et al. 2024). See ``pipesim.synth``: greedy policies and the built-ins that fit the limit, the
best refined by local search.

``pipesim simulate -s zb-auto --memory-limit 16 --costs costs.json`` synthesises for those costs; without
costs, for unit costs; without a limit, for 2·pp activation units per rank (ZB-2p; 1F1B's memory for V).
"""

from pipesim.errors import ScheduleError
from pipesim.program.ir import Schedule
from pipesim.program.limits import ScheduleLimits
from pipesim.sim.costs import CostModel
from pipesim.synth.search import synthesize_schedule

DEFAULT_CHUNKS = 1
LIMITS = ScheduleLimits(chunks=(1, 2))  # one chunk per rank, or the V placement


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS, *, costs: CostModel | None = None,
          memory_limit: float | None = None) -> Schedule:
    if chunks not in LIMITS.chunks:
        raise ScheduleError(f"zb-auto synthesises one chunk per rank or the V placement (--chunks 1 or 2), "
                            f"not --chunks {chunks}")
    return synthesize_schedule(pp, microbatches, chunks, costs, memory_limit)
