"""Where a step's seconds go on each rank: the cost model's terms summed over the rank's passes, against the
simulated step time.

A rank runs every microbatch through each of its chunks' stages: the passes' compute, the communication
compute does not hide (TP collectives, ring attention, ZeRO-3 gathers), and with blocking P2P the sends'
wire time and the device synchronisation after each call (:func:`pipesim.analytic.to_costs.stage_time_parts`).
Then its gradient sync (and ZeRO's parameter gather) and the optimizer. What is left of the step is idle:
the pipeline bubble and waits on other ranks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.comm import dp_grad_sync, optimizer_step_time
from pipesim.analytic.layout import Layout, ZeroStage
from pipesim.analytic.model_spec import ModelSpec
from pipesim.analytic.to_costs import rank_params, stage_breakdown, stage_reduce_grad, stage_time_parts


@dataclass(frozen=True)
class RankTime:
    """Seconds of one step on one rank, by what they are spent on."""

    rank: int
    compute: float
    exposed_comm: float
    p2p_wire: float
    p2p_sync: float
    grad_sync: float
    optimizer: float
    idle: float

    @property
    def step(self) -> float:
        return (self.compute + self.exposed_comm + self.p2p_wire + self.p2p_sync + self.grad_sync + self.optimizer
                + self.idle)

    def to_dict(self) -> dict:
        return {k if k == "rank" else f"{k}_s": v for k, v in asdict(self).items()}

    def text(self) -> str:
        def share(seconds: float) -> str:
            return f"{seconds / self.step:.1%}"

        p2p = self.p2p_wire + self.p2p_sync
        return (f"compute {share(self.compute)}, exposed TP/CP/ZeRO comm {share(self.exposed_comm)}, P2P "
                f"{share(p2p)} (sync {share(self.p2p_sync)}), gradient sync {share(self.grad_sync)}, optimizer "
                f"{share(self.optimizer)}, idle {share(self.idle)}")


def rank_times(model: ModelSpec, chip: ChipSpec, layout: Layout, shape, step_time: float) -> list[RankTime]:
    """Each rank's :class:`RankTime` for a step of ``step_time`` seconds; ``shape`` (a PipelineShape) places the
    stages on ranks."""
    parts = stage_time_parts(model, chip, layout, shape)
    params = rank_params(model, layout, shape)
    m = layout.microbatches
    result = []
    for rank in range(shape.pp):
        stages = [shape.stage(rank, c) for c in range(shape.chunks)]
        mine = [parts[s] for s in stages]
        grad_sync = sum(stage_reduce_grad(stage_breakdown(model, layout, s).params, layout, chip) for s in stages)
        if not (layout.sharding is ZeroStage.PARAMETERS and layout.pp == 1):
            grad_sync += dp_grad_sync(params[rank], layout, chip).gather
        busy = dict(
            compute=m * sum(p.compute for p in mine), exposed_comm=m * sum(p.exposed_comm for p in mine),
            p2p_wire=m * sum(p.p2p_wire for p in mine), p2p_sync=m * sum(p.p2p_sync for p in mine),
            grad_sync=grad_sync, optimizer=optimizer_step_time(params[rank], layout, chip),
        )
        result.append(RankTime(rank, **busy, idle=max(0.0, step_time - sum(busy.values()))))
    return result
