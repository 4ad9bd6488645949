"""How a plan reads: the header naming the job, the candidate counts, and the ranking with launch lines."""

from __future__ import annotations

from pipesim.analytic.error_band import (
    COMMUNICATION_BOUND,
    StepGroup,
    communication_record,
    framework_record,
    group_records,
    memory_band,
)
from pipesim.analytic.frameworks import Framework
from pipesim.analytic.held_out_kinds import HeldOutKind, held_out_records
from pipesim.analytic.layout import (
    AttentionKernel,
    BoundaryTensor,
    ColumnInput,
    CpComm,
    CpKernels,
    ElementwiseKernels,
    Fp8Params,
    GradAccumulation,
    LossKernel,
    MlpUp,
    P2pCalls,
    ZeroCollectives,
    context_parallel_summary,
)
from pipesim.analytic.params import total_params
from pipesim.analytic.step_report import MFU_PEAK_NOTE
from pipesim.plan.launch import executor_gaps, executor_line, megatron_line
from pipesim.plan.search import PlanResult as SearchResult
from pipesim.plan.search import Status
from pipesim.plan.space import PlanRequest
from pipesim.plan.uncertainty import (
    band_of,
    communication_share_of,
    groups_of_candidate,
    held_out_kinds_of_candidate,
    near_cap,
    overlaps_best,
    validated_layout,
)

__all__ = ["counts_line", "header", "ranking_text"]


def header(request: PlanRequest, gpus: str | None = None) -> str:
    """The job line (and the framework's validation record): ``gpus`` in place of the request's count where several
    counts are planned alike (:mod:`pipesim.api.scaling`)."""
    m = request.model
    trained = "" if request.framework is Framework.MEGATRON else f" with {request.framework.value}"
    record = framework_record(request.framework.value)
    validated = f"\nvalidation: {record.text()}" if record is not None else ""
    return (f"plan: {m.name} ({total_params(m) / 1e9:.1f}B params, seq {m.seq_len}){trained} on "
            f"{request.gpus if gpus is None else gpus}× "
            f"{request.chip.name} ({_per_node(request)}), global batch {request.global_batch} sequences, "
            f"memory cap {request.cap_gib:g} GiB{_kernels(request)}{validated}")


def _per_node(request: PlanRequest) -> str:
    if request.host_gpus < request.gpus_per_node:
        return f"{request.gpus_per_node} per NVLink domain, {request.host_gpus} per host"
    return f"{request.gpus_per_node} per node"


def _kernels(request: PlanRequest) -> str:
    """The training code's kernels when they are not the defaults (they are inputs, not searched)."""
    said = [f"{request.attention.value} attention"] if request.attention is not AttentionKernel.FUSED else []
    if request.kv_repeated:
        said.append("K and V repeated to the query heads")
    if request.elementwise is not ElementwiseKernels.FUSED:
        said.append(f"{request.elementwise.value} element-wise ops")
    if request.loss is not LossKernel.MEGATRON:
        said.append(f"{request.loss.value} cross-entropy")
    if request.z_loss:
        said.append("z-loss")
    if request.loss_input_copy:
        said.append("the loss's input copied")
    if request.zero_collectives is not ZeroCollectives.BUCKETED:
        stage = {ZeroCollectives.PER_TENSOR: 3, ZeroCollectives.PER_LAYER: 2}.get(request.zero_collectives, 1)
        said.append(f"{request.zero_collectives.value} ZeRO-{stage} collectives")
    if request.shard_group is not None:
        said.append(f"ZeRO state within groups of {request.shard_group} data-parallel ranks (hybrid sharding)")
    if not request.overlap_tp_dgrad:
        said.append("TP collectives all blocking")
    if request.column_input is not ColumnInput.REGATHER:
        said.append(request.column_input.summary)
    if request.p2p_tensor is not BoundaryTensor.WHOLE:
        said.append("pipeline boundary tensors sent split over tp")
    if request.p2p_calls is not P2pCalls.BATCHED:
        said.append("blocking sends and receives one after the other")
    if request.mlp_up is not MlpUp.FUSED:
        said.append("the gated MLP's gate and up projections as two linears")
    if request.grad_accumulation is not GradAccumulation.FUSED:
        said.append("gradients summed by autograd every microbatch")
    default_cp = (request.cp_comm, request.cp_kernels) == (CpComm.P2P, CpKernels.TRANSFORMER_ENGINE)
    if not default_cp and max(request.context_parallel) > 1:
        said.append(context_parallel_summary(request.cp_comm, request.cp_kernels))
    if request.fp8_params is not Fp8Params.OFF:
        said.append(f"FP8 parameters ({request.fp8_params.value}) where a distributed optimizer runs FP8")
    if request.fp8_all_gather:
        said.append("weights gathered in FP8 where FSDP runs FP8")
    return f", {' and '.join(said)}" if said else ""


def counts_line(result: SearchResult) -> str:
    c = result.count
    return (f"considered {result.considered}, pruned {result.pruned} ({c(Status.PRUNED_MEMORY)} by the memory "
            f"bound, {c(Status.OVER_MEMORY)} over the cap in their schedule, {c(Status.PRUNED_TIME)} unable to "
            f"win), rejected by their schedule {c(Status.REJECTED)}, simulated {c(Status.SIMULATED)}")


def ranking_text(request: PlanRequest, shown: list) -> str:
    close = overlaps_best(shown, request.chip)
    lines = [f"{'#':>2} {'step s':>8} {'± band':>6} {'tok/s/GPU':>10} {'MFU':>6} {'peak GiB':>9} {'rank':>4} "
             f"{'bubble':>7}  configuration"]
    memory = memory_band()
    tight = [near_cap(o, request.cap_gib) for o in shown]
    unmeasured = [not validated_layout(o, request.model.is_moe) for o in shown]
    grouped = [groups_of_candidate(o) for o in shown]
    known = [held_out_kinds_of_candidate(o, request) for o in shown]
    waiting = [communication_record(communication_share_of(o, request)) for o in shown]
    for i, o in enumerate(shown, 1):
        e, c = o.evaluation, o.candidate
        band = band_of(o, request.chip)
        mark = ((" ≈#1" if i > 1 and close[i - 1] else "") + (" ≈cap" if tight[i - 1] else "")
                + (" ?band" if unmeasured[i - 1] else "")
                + "".join(f" {g.mark}" for g in StepGroup if g in grouped[i - 1])
                + "".join(f" {k.mark}" for k in HeldOutKind if k in known[i - 1])
                + (f" comm{waiting[i - 1].share:.0%}" if waiting[i - 1] is not None else ""))
        lines.append(f"{i:>2} {e.step_time:>8.4g} {f'{band:.0%}' if band else '–':>6} "
                     f"{e.tokens_per_s_per_gpu:>10,.0f} {e.mfu:>6.1%} "
                     f"{e.peak_gib:>9.1f} {e.peak_rank:>4} {e.bubble_fraction:>7.1%}  {c.label()}{mark}")
        lines.append(f"   executor: {executor_line(c, request.model, request.host_gpus, request.cp_comm)}")
        gaps = executor_gaps(c, request.model, request.cp_kernels,
                             request.layout_of(c).stages_after_head if c.stage_layers else 0)
        if gaps:
            lines.append(f"             (executor model: {'; '.join(gaps)})")
        if request.framework is Framework.MEGATRON:  # the ranking's figures are for Megatron's defaults
            line = megatron_line(c, request.model, request.global_batch, request.overlap_p2p, request.overlap_dp_sync,
                                 request.fp8_params_of(c), request.cp_comm, request.loss, request.loss_input_copy,
                                 request.layout_of(c).shard_group, request.moe_dispatcher,
                                 request.moe_dispatch_fp8,
                                 request.kv_repeated and request.attention is not AttentionKernel.UNFUSED,
                                 request.param_bytes, request.layout_of(c).zero_collectives)
            lines.append(f"   megatron: {line}")
    if any(o.candidate.precision.quantized for o in shown):
        lines.append(f"MFU: {MFU_PEAK_NOTE} (an FP8 or FP4 candidate's MFU can pass what BF16 could reach)")
    tied = sum(close[1:])
    if tied:
        lines.append(f"≈#1: {tied} of the listed configurations lie within the error band of #1 (validation's "
                     "left-out error for this kind of run): the model cannot tell them from the best")
    if any(unmeasured):
        lines.append(f"?band: {sum(unmeasured)} of the listed configurations are of layouts no published run had "
                     "(ZeRO-2/3 with tp or pp, context parallelism with them, experts): their bands, and so ≈#1 and "
                     "≈cap, were measured on other layouts")
    for record in group_records(frozenset().union(*grouped)):
        members = sum(record.group in g for g in grouped)
        lines.append(f"{record.group.mark}: {members} of the listed configurations are of this group; {record.text()}")
    for held in held_out_records(frozenset().union(*known)):
        members = sum(held.kind in k for k in known)
        lines.append(f"{held.kind.mark}: {members} of the listed configurations are of this kind; {held.text()}")
    bound = [w for w in waiting if w is not None]
    if bound:
        lines.append(f"comm: {len(bound)} of the listed configurations wait on communication for "
                     f"{COMMUNICATION_BOUND:.0%} of the step or more (the share after the mark); "
                     f"{bound[0].lean_text()}: beside the others, read them as likely slower than listed")
    if any(tight):
        lines.append(f"≈cap: {sum(tight)} of the listed configurations peak within the memory band "
                     f"(± {memory.relative:.0%}, {memory.basis}) of the {request.cap_gib:g} GiB cap: they may not fit")
    return "\n".join(lines)
