"""Where a step's seconds go on each rank: the cost model's terms summed over the rank's passes, against the
simulated step time.

A rank runs every microbatch through each of its chunks' stages: the passes' compute, the communication
compute does not hide (TP collectives, ring attention, ZeRO-3 gathers), and with blocking P2P the sends'
wire time and the device synchronisation after each call (:func:`pipesim.analytic.to_costs.stage_time_parts`).
Then its gradient sync (and ZeRO's parameter gather) and the optimizer. What is left of the step is idle:
the pipeline bubble and waits on other ranks.

Mixture-of-experts models add the expert-parallel all-to-all, split into the part the schedule hid and the
exposed part. The cost model puts each pass's all-to-all inside the pass; a schedule that runs one
microbatch's forward together with another's backward (an overlapped pair) takes less time than the two
passes' costs, and the difference — the rank's summed pass costs minus its simulated busy time, at most
its all-to-all — is what was hidden. A schedule that runs passes one at a time hides nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.comm import embedding_grad_sum, optimizer_step_time, replica_weight_gather
from pipesim.analytic.kernels import step_end_passes_time
from pipesim.analytic.layout import Layout
from pipesim.analytic.model_spec import ModelSpec
from pipesim.analytic.to_costs import (
    param_gather_time,
    rank_expert_params,
    rank_first_bucket,
    rank_params,
    stage_breakdown,
    stage_last_bucket,
    stage_reduce_grad,
    stage_time_parts,
)


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
    a2a: float = 0.0  # the expert-parallel all-to-all the rank waits for (exposed)
    a2a_hidden: float = 0.0  # the all-to-all an overlapped forward-and-backward pair hid (not part of the step)
    host_wait: float = 0.0  # the device waiting for the host to issue small kernels

    @property
    def step(self) -> float:
        return (self.compute + self.exposed_comm + self.p2p_wire + self.p2p_sync + self.grad_sync + self.optimizer
                + self.idle + self.a2a + self.host_wait)

    @property
    def communication(self) -> float:
        """Seconds the step waits on communication: the exposed collectives, the gradient sync, the pipeline sends
        (their wire time and synchronisation) and an exposed all-to-all."""
        return self.exposed_comm + self.grad_sync + self.p2p_wire + self.p2p_sync + self.a2a

    @property
    def communication_share(self) -> float:
        """:attr:`communication` over the step."""
        return self.communication / self.step if self.step else 0.0

    @property
    def a2a_exposed_share(self) -> float:
        """The exposed all-to-all's share of the step."""
        return self.a2a / self.step if self.step else 0.0

    def to_dict(self) -> dict:
        return {k if k == "rank" else f"{k}_s": v for k, v in asdict(self).items()}

    def text(self) -> str:
        def share(seconds: float) -> str:
            return f"{seconds / self.step:.1%}"

        p2p = self.p2p_wire + self.p2p_sync
        moe = ""
        if self.a2a or self.a2a_hidden:
            moe = (f", MoE all-to-all exposed {share(self.a2a)} (hidden by overlap: {self.a2a_hidden:.4g} s = "
                   f"{self.a2a_hidden / (self.a2a + self.a2a_hidden):.0%} of it)")
        shown = self.host_wait >= 5e-4 * self.step  # what rounds to 0.0% is left out
        host = f", waiting for the host to launch kernels {share(self.host_wait)}" if shown else ""
        return (f"compute {share(self.compute)}{host}, exposed TP/CP/ZeRO comm {share(self.exposed_comm)}, P2P "
                f"{share(p2p)} (sync {share(self.p2p_sync)}){moe}, gradient sync {share(self.grad_sync)}, "
                f"optimizer {share(self.optimizer)}, idle {share(self.idle)}")


def rank_times(model: ModelSpec, chip: ChipSpec, layout: Layout, shape, step_time: float,
               simulated_busy: list[float] | None = None, split_backward: bool = False,
               sync_wait: list[float] | None = None) -> list[RankTime]:
    """Each rank's :class:`RankTime` for a step of ``step_time`` seconds; ``shape`` (a PipelineShape) places the
    stages on ranks. ``simulated_busy``: each rank's compute time in the simulated step (the metrics' busy),
    from which the all-to-all an overlapped pair hid is read (module docstring); None: nothing hidden.
    ``split_backward``: the schedule splits each backward in two (:func:`stage_time_parts`). ``sync_wait``:
    how long each rank waited at its optimizer step for the gradient sync that ran asynchronously (the
    simulation's :meth:`~pipesim.sim.simulator.SimulationResult.gradient_sync_wait`): exposed gradient sync,
    with the time the rank was busy for it; None: the asynchronous part counted whole, as if nothing hid it."""
    parts = stage_time_parts(model, chip, layout, shape, split_backward)
    params = rank_params(model, layout, shape)
    experts = rank_expert_params(model, layout, shape)
    first_buckets = rank_first_bucket(model, layout, shape)
    m = shape.microbatches_per_stage  # all microbatches pass each stage, or half under DualPipe's two pipelines
    embedding_sum = embedding_grad_sum(model, layout, chip, shape)  # every rank waits for it (its docstring)
    result = []
    for rank in range(shape.pp):
        stages = shape.rank_slices(rank)  # the layout's stages (model slices) the rank's chunks run
        mine = [parts[s] for s in stages]
        grad_sync = 0.0
        for s in stages:
            part = stage_breakdown(model, layout, s)
            reduce = stage_reduce_grad(part.params, layout, chip, part.expert_params, parts[s].backward_pass,
                                       stage_last_bucket(model, layout, s))
            grad_sync += reduce.busy if sync_wait is not None else reduce.alone
        if sync_wait is not None:
            grad_sync += sync_wait[rank]
        grad_sync += embedding_sum + param_gather_time(params[rank], layout, chip, experts[rank],
                                                       sum(parts[s].forward_pass for s in stages),
                                                       first_buckets[rank])
        grad_sync += replica_weight_gather(params[rank], layout, chip)
        a2a = m * sum(p.a2a for p in mine)
        busy = dict(
            compute=m * sum(p.compute for p in mine), exposed_comm=m * sum(p.exposed_comm for p in mine),
            p2p_wire=m * sum(p.p2p_wire for p in mine), p2p_sync=m * sum(p.p2p_sync for p in mine),
            grad_sync=grad_sync, optimizer=(optimizer_step_time(params[rank], layout, chip, experts[rank])
                                            + step_end_passes_time(params[rank], layout, chip)),
            host_wait=m * sum(p.host_wait for p in mine),
        )
        hidden = 0.0
        if simulated_busy is not None and a2a:
            passes = (busy["compute"] + busy["exposed_comm"] + busy["p2p_wire"] + busy["p2p_sync"] + a2a
                      + busy["host_wait"])
            # relative slack: the two sums add the same terms in another order
            gap = passes - simulated_busy[rank]
            hidden = min(a2a, gap) if gap > 1e-9 * passes else 0.0
        busy["a2a"] = a2a - hidden
        result.append(RankTime(rank, **busy, idle=max(0.0, step_time - sum(busy.values())), a2a_hidden=hidden))
    return result
