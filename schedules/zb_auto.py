"""ZB-auto: the compute order synthesised for the given costs and memory limit (Zero Bubble's ZB-1p/ZB-2p
idea, Qi et al., ICLR 2024, §3; with ``--chunks 2`` the V placement of "Pipeline Parallelism with Controllable
Memory", Qi et al. 2024). See ``pipesim.synth``: greedy policies and the built-ins that fit the limit, the
best refined by local search.

``pipesim simulate -s zb-auto --memory-limit 16 --costs costs.json`` synthesises for those costs; without
costs, for unit costs; without a limit, for 2·pp activation units per rank (ZB-2p; 1F1B's memory for V).
"""

from pipesim.program.ir import Schedule
from pipesim.sim.costs import CostModel
from pipesim.synth.search import synthesize_schedule

DEFAULT_CHUNKS = 1


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS, *, costs: CostModel | None = None,
          memory_limit: float | None = None) -> Schedule:
    return synthesize_schedule(pp, microbatches, chunks, costs, memory_limit)
