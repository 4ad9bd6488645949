"""``pipesim.plan``: the fastest parallel configuration of a model on a number of GPUs that fits in memory,
found by simulating each candidate's real schedule (the search is :mod:`pipesim.plan`)."""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pipesim.analytic.allocator import reserved_peak
from pipesim.analytic.chip_load import load_chip
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.frameworks import Framework, FrameworkKnobs
from pipesim.analytic.frameworks import knobs as framework_knobs
from pipesim.analytic.layout import (
    SEARCHED_RECOMPUTE,
    AttentionKernel,
    BoundaryTensor,
    ColumnInput,
    CpComm,
    CpKernels,
    ElementwiseKernels,
    Fp8Linears,
    Fp8Params,
    LossKernel,
    MlpUp,
    MoeDispatcher,
    OptimizerBytes,
    P2pCalls,
    Precision,
    Recompute,
    ZeroCollectives,
    ZeroStage,
    check_cp_pairing,
    check_z_loss,
)
from pipesim.analytic.model_load import load_model
from pipesim.analytic.model_spec import ModelSpec
from pipesim.api.defaults import PLAN_DEFAULTS
from pipesim.api.model_options import whole_number
from pipesim.api.plan_rendering import counts_line, header, ranking_text
from pipesim.errors import PipesimError, parse_choice
from pipesim.plan.ranking import distinct_top
from pipesim.plan.search import Outcome, Status
from pipesim.plan.search import PlanResult as SearchResult
from pipesim.plan.space import SEARCHED_PRECISIONS, PlanRequest

if TYPE_CHECKING:
    import pandas as pd

    from pipesim.analytic.training_time import TrainingTime

__all__ = ["PlanResult", "plan", "plan_request"]


@dataclass(frozen=True, eq=False)
class PlanResult:
    """The outcome of a plan: every candidate, the ranking ``pipesim plan`` prints, the Pareto front.

    Attributes:
        request: what was asked (model, chip, GPUs, global batch and the search space).
        search: the search's own result (every :class:`~pipesim.plan.search.Outcome`).
        top: how many configurations the ranking lists.
    """

    request: PlanRequest
    search: SearchResult
    top: int = PLAN_DEFAULTS.top

    @cached_property
    def candidates(self) -> pd.DataFrame:
        """Every candidate, simulated or not, one row each (what ``pipesim plan -o`` writes)."""
        return self.search.frame()

    @cached_property
    def _listed(self) -> tuple[list[Outcome], int]:
        return distinct_top(self.search.fitting(), self.top)

    @property
    def ranked(self) -> list[Outcome]:
        """The listed configurations, fastest first (exact step-time ties needing more memory left out)."""
        return self._listed[0]

    @property
    def hidden_ties(self) -> int:
        """Configurations tying with a listed one on step time but needing more memory (not listed)."""
        return self._listed[1]

    @property
    def best(self) -> Outcome | None:
        """The fastest configuration that fits (the ranking's #1), or None when nothing fits."""
        return self.ranked[0] if self.ranked else None

    @property
    def pareto(self) -> pd.DataFrame:
        """The candidates on the Pareto front of step time against peak memory."""
        frame = self.candidates
        return frame[frame["pareto"]].reset_index(drop=True) if len(frame) else frame

    def training(self, tokens: float | str, rank: int = 1) -> TrainingTime:
        """A training run of ``tokens`` (a number, or text such as ``"2T"``) at the ``rank``-th listed
        configuration's step (the best by default): its steps, days and GPU-hours, and the days its error band
        allows (the steps alone: no checkpoints, evaluations or restarts)."""
        from pipesim.analytic.training_time import TrainingTime, parse_tokens

        budget = parse_tokens(str(tokens), "train_tokens")
        if not 1 <= rank <= len(self.ranked):
            listed = f"1–{len(self.ranked)}" if self.ranked else "none: nothing fits"
            raise PipesimError(f"rank {rank} is not a listed configuration (listed: {listed})")
        from pipesim.plan.uncertainty import band_of

        chosen, r = self.ranked[rank - 1], self.request
        # band_of is 0 where the kind of run has no validated band (or --achievable-fraction replaced the model)
        return TrainingTime(budget, r.global_batch * r.model.seq_len, chosen.evaluation.step_time, r.gpus,
                            band_of(chosen, r.chip) or None)

    def nothing_fits(self) -> str | None:
        """Why nothing fits and the smallest change that would help, in one line; None when something fits."""
        if self.ranked:
            return None
        outcomes = self.search.outcomes
        if outcomes and all(o.status is Status.REJECTED for o in outcomes):
            # nothing was refused for its memory: every candidate was refused for what it is, and memory advice
            # would mislead; the commonest reason says what to change
            reasons = Counter(o.reason for o in outcomes)
            reason, times = reasons.most_common(1)[0]
            others = f"; {len(reasons) - 1} other reason(s) for the rest" if len(reasons) > 1 else ""
            return (f"every one of the {len(outcomes)} configurations was refused, {times} of them for this: "
                    f"{reason}{others}")
        from pipesim.plan.advice import nothing_fits_message

        return nothing_fits_message(self.request)

    def header(self) -> str:
        """The job line and the candidate counts ``pipesim plan`` prints first."""
        return f"{header(self.request)}\n{counts_line(self.search)}"

    def text(self) -> str:
        """What ``pipesim plan`` prints (without its "wrote FILE" lines)."""
        parts = [self.header()]
        if not self.ranked:
            parts.append(f"nothing fits: {self.nothing_fits()}")
            return "\n".join(parts)
        parts.append(self.ranking_text())
        return "\n".join(parts)

    def ranking_text(self) -> str:
        """The ranked configurations with their launch lines (empty when nothing fits)."""
        if not self.ranked:
            return ""
        lines = [ranking_text(self.request, self.ranked)]
        if self.hidden_ties:
            lines.append(
                f"({self.hidden_ties} configuration(s) tying with a listed one on step time but needing "
                "more memory not listed)"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        best = self.best
        what = f"best {best.candidate.label()} at {best.evaluation.step_time:.4g} s" if best else "nothing fits"
        return f"<PlanResult {self.request.model.name} on {self.request.gpus}× {self.request.chip.name}: {what}>"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(repr(self) if cycle else self.text())

    def to_dict(self) -> dict:
        """The ranking as data: each listed configuration's label, step time, band, throughput, MFU, memory."""
        from pipesim.plan.uncertainty import (
            band_of,
            communication_share_of,
            groups_of_candidate,
            held_out_kinds_of_candidate,
            near_cap,
            validated_layout,
        )

        rows = []
        for o in self.ranked:
            e = o.evaluation
            rows.append(
                {
                    "label": o.candidate.label(),
                    "step_time_s": e.step_time,
                    "step_time_band": band_of(o, self.request.chip),
                    "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
                    "mfu": e.mfu,
                    "peak_gib": e.peak_gib,
                    "peak_reserved_gib": reserved_peak(e.peak_gib, self.request.chip.memory_gib),
                    "peak_rank": e.peak_rank,
                    "may_not_fit": near_cap(o, self.request.cap_gib),
                    "validated_layout": validated_layout(o, self.request.model.is_moe),
                    "step_groups": sorted(g.value for g in groups_of_candidate(o)),
                    "held_out_kinds": sorted(k.value for k in held_out_kinds_of_candidate(o, self.request)),
                    "communication_share": communication_share_of(o, self.request),
                    "bubble_fraction": e.bubble_fraction,
                }
            )
        s = self.search
        return {
            "model": self.request.model.name,
            "chip": self.request.chip.name,
            "gpus": self.request.gpus,
            "global_batch": self.request.global_batch,
            "memory_cap_gib": self.request.cap_gib,
            "considered": s.considered,
            "pruned": s.pruned,
            "ranked": rows,
            "hidden_ties": self.hidden_ties,
        }

    def write(self, path: str | Path) -> None:
        """Every candidate (.csv or .parquet), atomically."""
        from pipesim.io.atomic import write_table

        write_table(self.candidates, path)

    def plot(self, path: str | Path, *, labelled: int = 5) -> None:
        """The Pareto front of step time against peak memory, the first ``labelled`` listed ones marked."""
        from pipesim.plots.pareto_plot import plot_pareto

        r = self.request
        plot_pareto(
            self.candidates,
            path,
            cap_gib=r.cap_gib,
            labelled=[o.candidate.label() for o in self.ranked[:labelled]],
            title=f"{r.model.name} on {r.gpus}× {r.chip.name}, global batch {r.global_batch}",
        )


def _tuple(values, convert) -> tuple:
    if isinstance(values, (str, int)):
        values = [values]
    return tuple(convert(v) for v in values)


def plan_request(
    model: str | ModelSpec,
    gpus: int,
    global_batch: int,
    *,
    hardware: str | ChipSpec = PLAN_DEFAULTS.hardware,
    gpus_per_node: int | None = None,
    memory_cap: float | None = None,
    schedules: Sequence[str] | None = None,
    recompute: Sequence[str | Recompute] | None = None,
    zero: Sequence[int | ZeroStage] | None = None,
    precision: Sequence[str | Precision] | None = None,
    cp: Sequence[int] = PLAN_DEFAULTS.context_parallel,
    ep: Sequence[int] | None = None,
    min_cp_tokens: int = PLAN_DEFAULTS.min_cp_tokens,
    micro_batch_sizes: Sequence[int] | None = None,
    max_chunks: int = PLAN_DEFAULTS.max_chunks,
    seq_len: int | None = None,
    achievable_fraction: float | None = None,
    gpu_speed_spread: float | None = None,
    inter_node_gbps: float | None = None,
    param_bytes: str | None = None,
    blocking_p2p: bool = False,
    blocking_dp_sync: bool = False,
    even_ends: bool = False,
    attention: str | AttentionKernel = AttentionKernel.FUSED,
    repeat_kv: bool | None = None,
    framework: str | Framework | None = None,
    elementwise: str | ElementwiseKernels | None = None,
    loss: str | LossKernel | None = None,
    zero_collectives: str | ZeroCollectives | None = None,
    shard_group: int | None = None,
    overlap_tp_dgrad: bool | None = None,
    overlap_tp_local_shard: bool = False,
    column_input: str | ColumnInput | None = None,
    p2p_tensor: str | BoundaryTensor | None = None,
    p2p_calls: str | P2pCalls | None = None,
    mlp_up: str | MlpUp | None = None,
    moe_dispatcher: str | MoeDispatcher | None = None,
    moe_dispatch_fp8: bool = False,
    fp8_params: str | Fp8Params | None = None,
    fp8_all_gather: bool = False,
    cp_comm_type: str | CpComm | None = None,
    cp_kernels: str | CpKernels | None = None,
    z_loss: bool | None = None,
    loss_input_copy: bool | None = None,
) -> PlanRequest:
    """The search a :func:`plan` call runs, without running it (arguments as :func:`plan`'s)."""

    spec = (load_model(model, seq_len) if isinstance(model, str) else model).with_shape(seq_len=seq_len)
    chip = load_chip(hardware) if isinstance(hardware, str) else hardware
    chip = chip.with_overrides(achievable_fraction=achievable_fraction, gpu_speed_spread=gpu_speed_spread,
                               inter_node_gbps=inter_node_gbps)
    param_bytes = PLAN_DEFAULTS.param_bytes if param_bytes is None else param_bytes
    micro_batch_sizes = PLAN_DEFAULTS.micro_batch_sizes if micro_batch_sizes is None else micro_batch_sizes
    optimizer_bytes = OptimizerBytes.parse(param_bytes, "param_bytes")
    name = framework.value if isinstance(framework, Framework) else framework
    defaults = framework_knobs(name).with_given(elementwise=elementwise, loss=loss, overlap_tp_dgrad=overlap_tp_dgrad,
                                                column_input=column_input, p2p_tensor=p2p_tensor,
                                                p2p_calls=p2p_calls, mlp_up=mlp_up, cp_comm=cp_comm_type,
                                                cp_kernels=cp_kernels)
    check_cp_pairing(defaults.cp_kernels, defaults.cp_comm)
    check_z_loss(defaults.loss, bool(z_loss))
    if defaults.cp_comm is CpComm.A2A_P2P:
        raise PipesimError("--cp-comm-type a2a+p2p: its group sizes depend on the cp degree plan searches; plan with "
                           "p2p, allgather or a2a, then simulate a layout with --hierarchical-context-parallel-sizes")
    if fp8_all_gather and defaults.fp8_linears is not Fp8Linears.TORCHAO:
        raise PipesimError("--fp8-all-gather is torchao's FSDP float8 all-gather, for its FP8 linears: plan with "
                           "--framework torchtitan, or drop it")
    collectives = defaults.zero2_collectives if zero_collectives is None else ZeroCollectives(zero_collectives)
    if collectives is ZeroCollectives.HIERARCHICAL and shard_group is None:
        raise PipesimError("--zero-collectives hierarchical reduces within shard groups and across them; give the "
                           "group with --shard-group N, or drop it")
    dispatcher = parse_choice("moe_dispatcher", MoeDispatcher, moe_dispatcher or MoeDispatcher.ALLTOALL)
    if (dispatcher is not MoeDispatcher.ALLTOALL or moe_dispatch_fp8) and not spec.is_moe:
        flag = "--moe-dispatch-fp8" if moe_dispatch_fp8 else f"--moe-dispatcher {dispatcher.value}"
        raise PipesimError(f"{flag} moves a mixture-of-experts layer's tokens, but {spec.name} is dense; drop it")
    if moe_dispatch_fp8 and dispatcher is not MoeDispatcher.DEEPEP:
        raise PipesimError("--moe-dispatch-fp8 is DeepEP's FP8 dispatch; add --moe-dispatcher deepep or drop it")
    searched = SEARCHED_RECOMPUTE if recompute is None else _tuple(recompute, Recompute)
    if zero is None:  # every stage the training code offers
        stages = tuple(z for z in ZeroStage if z in defaults.zero_stages)
    else:
        stages = _tuple(zero, lambda z: ZeroStage(int(z)))
        for stage in stages:
            defaults.check_zero(stage, name or "megatron")
    return PlanRequest(
        spec,
        chip,
        gpus,
        global_batch,
        gpus_per_node=gpus_per_node or chip.node_size,
        memory_cap_gib=memory_cap,
        schedules=_schedules_for(defaults, name, schedules),
        recompute=_recompute_for(defaults, searched, spec, asked=recompute is not None, framework=name),
        zero=stages,
        sequence_parallel=(True,) if defaults.tp_shards_sequence else (False, True),
        precision=_precisions_for(defaults, name, precision),
        context_parallel=_tuple(cp, int),
        min_cp_tokens=min_cp_tokens,
        micro_batch_sizes=_tuple(micro_batch_sizes, int),
        max_chunks=max_chunks,
        param_bytes=optimizer_bytes,
        overlap_p2p=not blocking_p2p,
        overlap_dp_sync=not blocking_dp_sync,
        balance_head=not even_ends,
        expert_parallel=None if ep is None else _tuple(ep, int),
        attention=AttentionKernel(attention),
        kv_repeated=defaults.repeats_kv(repeat_kv, AttentionKernel(attention)),
        elementwise=defaults.elementwise, loss=defaults.loss, z_loss=bool(z_loss),
        loss_input_copy=bool(loss_input_copy),
        zero_collectives=collectives,
        shard_group=shard_group,
        overlap_tp_dgrad=defaults.overlap_tp_dgrad, overlap_tp_local_shard=bool(overlap_tp_local_shard),
        column_input=defaults.column_input, p2p_tensor=defaults.p2p_tensor, p2p_calls=defaults.p2p_calls,
        mlp_up=defaults.mlp_up, cp_comm=defaults.cp_comm, cp_kernels=defaults.cp_kernels,
        moe_dispatcher=dispatcher, moe_dispatch_fp8=bool(moe_dispatch_fp8),
        grad_accumulation=defaults.grad_accumulation, fp8_linears=defaults.fp8_linears,
        framework=Framework(name) if name is not None else Framework.MEGATRON,
        fp8_params=Fp8Params(fp8_params or Fp8Params.OFF), fp8_all_gather=bool(fp8_all_gather),
    )


def _precisions_for(defaults: FrameworkKnobs, framework: str | None,
                    asked: str | Precision | Sequence[str | Precision] | None) -> tuple[Precision, ...]:
    """The GEMM precisions to search: those asked (each one the framework's model code trains in), or the searched
    ones it trains in."""
    if asked is None:
        return tuple(p for p in SEARCHED_PRECISIONS if p in defaults.precisions)
    precisions = _tuple(asked, Precision)
    for precision in precisions:
        defaults.check_precision(precision, framework or "megatron")
    return precisions


def _recompute_for(defaults: FrameworkKnobs, searched: tuple[Recompute, ...], model: ModelSpec,
                   asked: bool, framework: str | None = None) -> tuple[Recompute, ...]:
    """The recomputation policies to search, "selective" as the framework means it, each one it offers (those
    asked, each checked); a mixture-of-experts model searches without torchtitan's per-op one unless it was asked
    for (modelled for dense layers only)."""
    mapped = tuple(dict.fromkeys(defaults.recompute(r) for r in searched))
    if model.is_moe and not asked:
        mapped = tuple(r for r in mapped if r is not Recompute.PER_OP)
    if asked:  # each one asked must be one the framework offers
        for policy in mapped:
            defaults.check_recompute(policy, None, framework or "megatron")
        return mapped
    return tuple(r for r in mapped if r in defaults.recomputes)


def _schedules_for(defaults: FrameworkKnobs, framework: str | None, asked: Sequence[str] | None) -> tuple[str, ...]:
    """The schedules to search: those asked (each one the framework's engine runs), or every built-in it runs."""
    from pipesim.program.loader import builtin_names

    if asked is None:
        return tuple(n for n in builtin_names() if defaults.schedules is None or n in defaults.schedules)
    names = _tuple(asked, str)
    for name in names:
        defaults.check_schedule(name, framework or "megatron")
    return names


def plan(
    model: str | ModelSpec | None = None,
    gpus: int | None = None,
    global_batch: int | None = None,
    *,
    config: str | Path | None = None,
    top: int = PLAN_DEFAULTS.top,
    jobs: int = PLAN_DEFAULTS.jobs,
    cluster: str | None = None,
    progress: Callable[[int], None] | None = None,
    on_queue: Callable[[int], None] | None = None,
    **space: object,
) -> PlanResult:
    """Find the fastest parallel configuration that fits (``pipesim plan``).

    Args:
        model: a model preset (:func:`pipesim.models`), file or ``ModelSpec``.
        gpus: GPUs in the job.
        global_batch: sequences per optimizer step.
        config: a run's configuration file (nanotron's YAML, torchtitan's TOML: :mod:`pipesim.io.run_config`) in
            place of ``model``: its model, framework, sequence and precision, and, unless given, its GPUs and
            global batch; the layout is what the plan searches. Space arguments given win.
        top: configurations the ranking lists (default 10).
        jobs: local processes (0 = all cores; default 1).
        cluster: a Dask scheduler address (``tcp://HOST:8786``) to evaluate on instead.
        progress: called with k as k more candidates are decided.
        on_queue: called once with how many candidates survived the memory bound (the progress total).
        **space: the search space, as :func:`plan_request`: ``hardware`` (default h100-sxm),
            ``gpus_per_node`` (default the chip's), ``memory_cap`` GiB (default the chip's HBM), ``schedules``
            (default every built-in), ``recompute``, ``zero``, ``precision`` (default bf16 and fp8; fp4 when
            named), ``cp`` (default 1,2,4,8), ``ep`` (expert-parallel degrees, MoE models only; default every one
            dividing dp·cp and the experts), ``min_cp_tokens`` (2048), ``micro_batch_sizes`` (1,2,4,8),
            ``max_chunks`` (4), ``seq_len``, ``achievable_fraction``, ``gpu_speed_spread`` (default the chip's:
            the spread of the GPUs' speeds, of which a step waits for the slowest; the same for every candidate of
            one cluster), ``inter_node_gbps`` (default the chip's: each GPU's share of its node's network, Gb/s),
            ``param_bytes`` ("18"; "16" or "W+G+O" as ``simulate`` takes them), ``blocking_p2p`` (False),
            ``blocking_dp_sync`` (False: the gradient reduce and parameter gather beside the passes),
            ``even_ends`` (False: pipelines that place their slices in a loop, single-chunk and interleaved, are
            also tried with their ends chosen against the LM head's rank,
            :meth:`~pipesim.plan.space.PlanRequest.head_balanced_split`),
            ``framework`` ("megatron", the default, "nemo", "torchtitan", "nanotron" or "megatron-deepspeed": the
            training code, whose defaults set the kernels and collectives below unless given, what the
            searched "selective" recomputation keeps and the gradient accumulation;
            :mod:`pipesim.analytic.frameworks`), ``attention``, ``elementwise`` and ``loss`` (the kernels the
            training code runs, not searched: "fused", "triton", "flash1" or "unfused"; "fused" or "eager"; "megatron",
            "megatron-fused", "te", "pytorch", "gathered", "nanotron", "fused" or "compiled"), ``z_loss`` and
            ``loss_input_copy`` (a z-loss beside the loss, its input copied first; not searched), ``repeat_kv``
            (grouped-query K and V copied to every query head before the attention; not searched; default: where
            the framework's attention path does, Megatron-Core's unfused one),
            ``zero_collectives``
            (how ZeRO candidates without pipelining communicate, not searched: "bucketed", DeepSpeed's;
            "per-layer", ZeRO-2 as PyTorch FSDP's SHARD_GRAD_OP; "per-tensor", ZeRO-3 as DeepSpeed's 2021
            release), ``shard_group`` (sharded candidates' ZeRO state over groups of that many
            data-parallel ranks, the groups replicas: InternEvo's ``zero1=N`` for ZeRO-1, FSDP's HYBRID_SHARD for
            ZeRO-2/3; not searched; default over all dp·cp), ``overlap_tp_dgrad`` (True: the column-parallel
            linears' input-gradient collectives beside their weight gradients, Megatron-LM's and Transformer
            Engine's backward; False: every TP collective waits; not searched), ``overlap_tp_local_shard``
            (under sequence parallelism, each TP all-gather beside the GEMM of the rank's own shard, nanotron's
            asynchronous TP; not searched), ``column_input``
            (under sequence parallelism, where the column-parallel linears' weight gradients get their gathered
            input: "regather", Megatron-LM's and Transformer Engine's second
            all-gather beside the input-gradient GEMM; "regather-blocking", nanotron's, waited for; "saved",
            PyTorch DTensor's, the gathered input kept; not searched), ``p2p_tensor`` (without sequence
            parallelism, what each tp rank sends across a pipeline boundary: "whole", Megatron-Core's; "split",
            Megatron-LM 2021–2022's scatter/gather and DeepSpeed's; not searched), ``p2p_calls`` (blocking
            sends: "batched", Megatron-LM's send and receive in one call; "sequential", DeepSpeed's one after the
            other; not searched), ``mlp_up`` (a gated MLP's gate and up projections: "fused", one GEMM;
            "split", two linears with, without sequence parallelism, an input-gradient collective each; not
            searched), ``moe_dispatcher`` and ``moe_dispatch_fp8`` (how a MoE model's candidates send tokens to
            their experts: "alltoall", NCCL's, a copy per routed expert, or "deepep", a copy per node across the
            network; and with DeepEP whether the dispatch is FP8; not searched), ``cp_comm_type`` and
            ``cp_kernels`` (how the context-parallel candidates exchange keys
            and values, "p2p", "allgather" or "a2a", and whose code runs their attention, "transformer-engine" or
            "pytorch"; the framework's, not searched), ``fp8_params`` ("both" or
            "rowwise": the FP8 candidates with a distributed optimizer keep their linears' weights in FP8 alone,
            as Megatron-LM's ``--fp8-param-gather`` does, with the transpose as Transformer Engine 2.x keeps it or
            without; not searched), ``fp8_all_gather`` (False; True: the FP8 candidates under FSDP, ZeRO-3, gather
            their weights in FP8, torchao's ``enable_fsdp_float8_all_gather``; torchtitan's linears only; not
            searched).

    Returns:
        A :class:`PlanResult`; ``.best`` is None when nothing fits (``.nothing_fits()`` says what would).
    """
    from pipesim.plan.search import run_plan
    from pipesim.plan.workers import Workers

    if config is not None:
        if model is not None:
            raise PipesimError(f"--config {config} states its model; drop --model")
        from pipesim.io.run_config import load_run_config, plan_job

        job = plan_job(load_run_config(config), gpus, global_batch)
        model, gpus, global_batch = job.model, job.gpus, job.global_batch
        space = {**job.space, **{k: v for k, v in space.items() if v is not None}}
        if job.micro_batch is not None and "micro_batch_sizes" not in space:  # the run's own among those searched
            space["micro_batch_sizes"] = sorted({*PLAN_DEFAULTS.micro_batch_sizes, job.micro_batch})
    if model is None or gpus is None or global_batch is None:
        raise PipesimError("plan needs a model, the GPUs and the global batch (--model, --gpus and --global-batch; "
                           "plan(model, gpus, global_batch)), or --config, a run's configuration file")
    searchable = [name for name, p in inspect.signature(plan_request).parameters.items()
                  if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(space) - set(searchable))
    if unknown:
        raise PipesimError(f"plan() got unknown option(s) {', '.join(unknown)}; the search space's options are "
                           f"{', '.join(searchable)} (the layout itself, tp, pp, dp and the rest, is what it searches)")
    gpus, global_batch = whole_number("plan", "gpus", gpus), whole_number("plan", "global_batch", global_batch)
    request = plan_request(model, gpus, global_batch, **space)
    with Workers(jobs, cluster) as workers:
        result = run_plan(request, top=top, workers=workers, progress=progress, on_queue=on_queue)
    return PlanResult(request, result, top)
