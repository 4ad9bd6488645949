"""A real model on a real chip: from the user's options to the model, chip, layout and the CostModel in seconds,
and from a simulation to the steady-state step time and the step report (tokens/s, MFU, per-rank GiB).

The options themselves (:class:`~pipesim.api.model_options.ModelOptions`) live in a module of their own, so a
command without ``--model`` parses and checks them without loading the analytic model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pipesim.analytic.chip_load import load_chip
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.frameworks import FrameworkKnobs, runs_megatron_core
from pipesim.analytic.frameworks import knobs as framework_knobs
from pipesim.analytic.layout import (
    DEFAULT_RECOMPUTE_MODULES,
    AttentionKernel,
    BoundaryTensor,
    ColumnInput,
    CpComm,
    CpKernels,
    Fp8Linears,
    Fp8Params,
    Fp8Recipe,
    GradBuckets,
    Layout,
    MlpUp,
    MoeDispatcher,
    OptimizerBytes,
    P2pCalls,
    PipelineBuffers,
    Precision,
    RankOrder,
    Recompute,
    RecomputeModule,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.analytic.model_load import load_model
from pipesim.analytic.model_spec import ModelSpec
from pipesim.analytic.pipeline_layout import FLAG as LAYOUT_FLAG
from pipesim.analytic.pipeline_layout import parse_pipeline_layout
from pipesim.analytic.stage_split import (
    StageSplitRequest,
    chunks_of_layers_per_chunk,
    megatron_rank_split,
    resolve_stage_layers,
)
from pipesim.analytic.steady_state import StepBoundary, default_boundary, steady_state_step_time, sync_latency
from pipesim.analytic.step_report import StepReport, step_report
from pipesim.analytic.to_costs import build_cost_model
from pipesim.api.defaults import DEFAULT_HARDWARE, DEFAULT_PARAM_BYTES, DEFAULT_PP, DEFAULT_STEPS
from pipesim.api.model_options import ModelOptions, check_no_model_options
from pipesim.errors import PipesimError, parse_choice
from pipesim.program.ir import PipelineShape, Placement
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import SimulationResult

__all__ = ["ModelOptions", "ModelSetup", "check_no_model_options", "microbatches_of_global_batch", "model_setup",
           "model_step_report", "steady_step_time"]


@dataclass(frozen=True)
class ModelSetup:
    """Everything a model on a chip implies for one simulation."""

    model: ModelSpec
    chip: ChipSpec
    layout: Layout
    costs: CostModel
    boundary: StepBoundary | None = None  # None: default_boundary of the schedule
    steps: int = DEFAULT_STEPS
    framework: str | None = None  # the --framework named, whose published runs' errors the report quotes


def model_setup(model: str | ModelSpec, hardware: str | ChipSpec | None, options: ModelOptions,
                shape: PipelineShape) -> ModelSetup:
    """The model, chip, layout and the CostModel in seconds for ``shape``.

    ``model`` and ``hardware`` are preset names, files, or specs already loaded (``hardware`` None: h100-sxm).
    """
    o = options
    spec = load_model(model, o.seq_len) if isinstance(model, str) else model
    spec = spec.with_shape(o.seq_len, o.micro_batch_size)
    chip = hardware if isinstance(hardware, ChipSpec) else load_chip(hardware or DEFAULT_HARDWARE)
    chip = chip.with_overrides(achievable_fraction=o.achievable_fraction, gpu_speed_spread=o.gpu_speed_spread,
                               inter_node_gbps=o.inter_node_gbps)
    if o.fp8 and o.fp4:
        raise PipesimError("--fp8 and --fp4 are two GEMM precisions; keep one")
    if o.distributed_optimizer and o.zero is not None and o.zero != 1:
        raise PipesimError(f"--distributed-optimizer is ZeRO-1, but --zero {o.zero} is given; keep one")
    split = o.stage_split()
    dp = o.dp_for(shape.pp)
    boundary = StepBoundary(o.step_boundary) if o.step_boundary else None
    if o.steps is not None and boundary is StepBoundary.SYNC:
        raise PipesimError("--steps sets how many steps the post-validation steady state simulates, but "
                           "--step-boundary is sync; drop one")
    param_bytes = OptimizerBytes.parse(o.param_bytes or DEFAULT_PARAM_BYTES, "param_bytes")
    framework = framework_knobs(o.framework)
    # per model slice (DualPipe: pp of them); unasked, the framework's own split (None: even or lighter ends)
    per_chunk = o.num_layers_per_virtual_pipeline_stage
    if per_chunk is not None:
        chunks = chunks_of_layers_per_chunk(spec.layers, shape.pp, per_chunk, split.embedding_as_layer,
                                            split.loss_as_layer)
        if chunks != shape.chunks:
            raise PipesimError(f"--num-layers-per-virtual-pipeline-stage {per_chunk} means {chunks} chunks per rank, "
                               f"but the schedule has {shape.chunks}; drop one")
    if o.pipeline_model_parallel_layout is not None:
        stage_layers, mtp_stage = _layout_string_split(spec, shape, o, split)
    else:
        stage_layers, mtp_stage = _stage_layers(spec, shape, split, framework), None
    stages_after_head = o.stages_after_head
    if stages_after_head is None:  # where the framework's own split leaves the head (nanotron's may not be last)
        stages_after_head = framework.stages_after_head(spec, shape.num_slices) if split.is_default else 0
    asked = parse_choice("recompute", Recompute, o.recompute or "none")
    if spec.is_moe and framework.recompute(asked) is not asked:
        raise PipesimError(f"--recompute {asked.value}: under --framework {o.framework} it is "
                           f"{framework.recompute(asked).value}, modelled for dense layers only, and "
                           f"{spec.name} has experts; use --recompute full, or give --recompute selective "
                           "without --framework for Megatron's")
    framework.check_recompute(framework.recompute(asked), o.recompute_layers, o.framework or "megatron",
                              bool(o.distribute_saved_activations))
    modules = recompute_modules_of(o.recompute_modules, framework.recompute(asked), o.framework)
    zero = ZeroStage(o.zero or 0)
    # the distributed optimizer as asked, or unasked where the framework's recipes shard over the replicas (NeMo's)
    distributed_optimizer = (bool(o.distributed_optimizer) if o.distributed_optimizer is not None
                             else o.zero is None and framework.distributed_optimizer and dp * (o.cp or 1) > 1)
    sharded = ZeroStage.OPTIMIZER if o.zero is None and distributed_optimizer else zero  # the stage asked for
    framework.check_zero(sharded, o.framework or "megatron", shape.pp,
                         distributed_optimizer=o.zero is None and bool(o.distributed_optimizer))
    shard_group, zero_collectives = _optimizer_instances(o, dp, sharded)
    if o.outer_optimizer_sharding and o.framework is not None and not runs_megatron_core(o.framework):
        raise PipesimError(f"--outer-optimizer-sharding is Megatron-FSDP's hybrid FSDP; {o.framework}'s hybrid "
                           "sharding replicates the optimizer state across its groups: drop it or --framework")
    precision = Precision.FP8 if o.fp8 else Precision.FP4 if o.fp4 else Precision.BF16
    framework.check_precision(precision, o.framework or "megatron")
    # Async TP overlaps every TP collective with a GEMM: a framework whose plain TP waits (torchtitan's, without
    # enable_async_tensor_parallel) does not contradict it; only an explicit --no-overlap-tp-dgrad does.
    overlap_tp_dgrad = o.overlap_tp_dgrad if o.overlap_tp_dgrad is not None or not o.async_tp else True
    chosen = framework.with_given(elementwise=o.elementwise, loss=o.loss, grad_accumulation=o.grad_accumulation,
                                  overlap_tp_dgrad=overlap_tp_dgrad, column_input=o.column_input,
                                  p2p_tensor=o.p2p_tensor, p2p_calls=o.p2p_calls, mlp_up=o.mlp_up,
                                  cp_kernels=o.cp_kernels, cp_comm=o.cp_comm_type, fp8_linears=o.fp8_linears)
    attention = parse_choice("attention", AttentionKernel, o.attention or "fused")
    layout = Layout(
        # chunk_share: the v of the cost convention (1 under DualPipe, whose two copies model_copies counts)
        tp=o.tp or 1, dp=dp, pp=shape.pp, chunks=shape.chunk_share, microbatches=shape.microbatches,
        model_copies=shape.pipelines,
        recompute=framework.recompute(asked), recompute_layers=o.recompute_layers, recompute_modules=modules,
        distribute_saved_activations=bool(o.distribute_saved_activations),
        sequence_parallel=chosen.sequence_parallel(bool(o.sequence_parallel), o.tp or 1),
        distributed_optimizer=distributed_optimizer,
        attention=attention, kv_repeated=chosen.repeats_kv(o.repeat_kv, attention),
        elementwise=chosen.elementwise, loss=chosen.loss, grad_accumulation=chosen.grad_accumulation,
        z_loss=bool(o.z_loss), loss_input_copy=bool(o.loss_input_copy),
        halve_causal_attention=bool(o.halve_causal_attention),
        param_bytes=param_bytes,
        stage_layers=stage_layers, stages_after_head=stages_after_head, mtp_stage=mtp_stage, zero=zero,
        zero_collectives=(parse_choice("zero_collectives", ZeroCollectives, zero_collectives) if zero_collectives
                          else framework.zero_collectives(zero)),
        shard_group=shard_group, outer_optimizer_sharding=bool(o.outer_optimizer_sharding), cp=o.cp or 1,
        cp_comm_ctas=o.cp_comm_ctas, cp_comm=chosen.cp_comm, cp_kernels=chosen.cp_kernels,
        cp_a2a_size=_cp_a2a_size(o.hierarchical_context_parallel_sizes, o.cp or 1),
        precision=precision,
        fp8_params=(parse_choice("fp8_params", Fp8Params, o.fp8_params) if o.fp8_params is not None
                    else _framework_fp8_params(chosen, precision, sharded)),
        fp8_recipe=parse_choice("fp8_recipe", Fp8Recipe, o.fp8_recipe or "delayed"), fp8_linears=chosen.fp8_linears,
        fp8_all_gather=bool(o.fp8_all_gather),
        fsdp2=o.fsdp2 if o.fsdp2 is not None else framework.fsdp2 and sharded >= ZeroStage.GRADIENTS,
        async_tp=bool(o.async_tp),
        overlap_tp_local_shard=bool(o.overlap_tp_local_shard),
        overlap_tp_dgrad=chosen.overlap_tp_dgrad, column_input=chosen.column_input,
        overlap_p2p=bool(o.overlap_p2p), p2p_tensor=chosen.p2p_tensor,
        p2p_calls=chosen.p2p_calls, mlp_up=chosen.mlp_up,
        pipeline_buffers=parse_choice("pipeline_buffers", PipelineBuffers, o.pipeline_buffers or "freed"),
        pipeline_outputs_kept=bool(o.pipeline_outputs_kept),
        overlap_grad_reduce=(o.overlap_grad_reduce if o.overlap_grad_reduce is not None
                             else framework.grad_reduce.overlaps(sharded)),
        rank_order=RankOrder.TP_CP_PP_DP if o.tp_pp_dp_mapping else RankOrder.TP_CP_DP_PP,
        overlap_param_gather=(o.overlap_param_gather if o.overlap_param_gather is not None
                              else framework.grad_reduce.gathers_beside_forward(sharded)),
        grad_buckets=(parse_choice("grad_buckets", GradBuckets, o.grad_buckets) if o.grad_buckets is not None
                      else framework.grad_buckets),
        ep=o.ep or 1, moe_imbalance=o.moe_imbalance or 1.0,
        moe_dispatcher=parse_choice("moe_dispatcher", MoeDispatcher, o.moe_dispatcher or "alltoall"),
        moe_dispatch_fp8=bool(o.moe_dispatch_fp8), moe_shared_expert_overlap=bool(o.moe_shared_expert_overlap),
        expert_tp=o.expert_tp,
    )
    # A framework's defaults for what this layout has none of (sends without a pipeline, TP collectives at tp 1, a
    # boundary tensor each rank holds whole or split already, no gradient reduce, no gathered column input) earn
    # no "changes nothing" note: unasked, they go back to the defaults.
    inert = {"p2p_calls": (o.p2p_calls, layout.pp == 1, P2pCalls.BATCHED),
             "p2p_tensor": (o.p2p_tensor, layout.pp == 1 or layout.tp == 1 or layout.sequence_parallel,
                            BoundaryTensor.WHOLE),
             "overlap_tp_dgrad": (o.overlap_tp_dgrad, layout.tp == 1, True),
             "overlap_grad_reduce": (o.overlap_grad_reduce, not layout.reduces_gradients or layout.gathers_per_layer,
                                     False),
             "overlap_param_gather": (o.overlap_param_gather, layout.gathers_per_layer, False),
             "column_input": (o.column_input, not layout.gathers_column_input, ColumnInput.REGATHER),
             "cp_comm": (o.cp_comm_type, layout.cp == 1, CpComm.P2P),
             "cp_kernels": (o.cp_kernels, layout.cp == 1, CpKernels.TRANSFORMER_ENGINE),
             "fp8_linears": (o.fp8_linears, layout.precision is not Precision.FP8, Fp8Linears.TRANSFORMER_ENGINE),
             "fsdp2": (o.fsdp2, not (layout.gathers_per_layer or layout.accumulates_unsharded_grads), False),
             "grad_buckets": (o.grad_buckets, not layout.buckets_matter, GradBuckets.MEGATRON)}
    unasked = {name: default for name, (given, idle, default) in inert.items() if given is None and idle}
    if unasked:
        layout = replace(layout, **unasked)
    if o.mlp_up is not None and chosen.mlp_up is MlpUp.SPLIT and not spec.gated:  # asked, not a framework's default
        raise PipesimError(f"--mlp-up split: {spec.name}'s MLP is not gated (one up projection, nothing to split); "
                           "drop --mlp-up")
    return ModelSetup(spec, chip, layout, build_cost_model(spec, chip, layout, shape), boundary,
                      o.steps or DEFAULT_STEPS, o.framework)


def _framework_fp8_params(framework: FrameworkKnobs, precision: Precision, sharded: ZeroStage) -> Fp8Params:
    """What a framework's FP8 run keeps of its Transformer Engine linears' weights, unasked: its default where FP8
    parameters can be (FP8 GEMMs in those linears, the optimizer state sharded without the weights), else none."""
    if (precision is Precision.FP8 and framework.fp8_linears is Fp8Linears.TRANSFORMER_ENGINE
            and sharded.gathers_after_step):
        return framework.fp8_params
    return Fp8Params.OFF


def recompute_modules_of(names: tuple[str, ...] | list[str] | None, recompute: Recompute,
                         framework: str | None) -> tuple[RecomputeModule, ...]:
    """Megatron-Core's ``--recompute-modules`` as the layout's (its default, the attention core, when not given);
    a one-line error for a module pipesim does not know, or where no Megatron selective recomputation runs."""
    if names is None:
        return DEFAULT_RECOMPUTE_MODULES
    if isinstance(names, str):
        names = names.split()
    given = " ".join(names)
    if recompute is not Recompute.SELECTIVE or not runs_megatron_core(framework):
        raise PipesimError(f"--recompute-modules {given} chooses what Megatron-Core's selective recomputation "
                           f"re-runs, but the run's is {recompute.value}; add --recompute selective (Megatron's) "
                           "or drop --recompute-modules")
    return tuple(parse_choice("--recompute-modules", RecomputeModule, n) for n in names)


def _optimizer_instances(o: ModelOptions, dp: int, sharded: ZeroStage) -> tuple[int | None, str | None]:
    """The shard group and ZeRO collectives of Megatron-LM's ``o.num_distributed_optimizer_instances`` instances:
    groups of dp·cp/N consecutive ranks (parallel_state.py, ``INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP``), the
    distributed optimizer's (ZeRO-1) reducing hierarchically, Megatron-FSDP's (ZeRO-2/3) as its HSDP
    (``mcore_fsdp_adapter.py``: ``enable_hsdp`` with more than one instance, the partial data-parallel group inside,
    the instances outside), FSDP's hybrid sharding; ``o``'s own otherwise. One-line refusals where Megatron-LM
    refuses it, or where the options given say otherwise."""
    instances = o.num_distributed_optimizer_instances
    if instances is None or instances == 1:
        return o.shard_group, o.zero_collectives
    flag, ranks = f"--num-distributed-optimizer-instances {instances}", dp * (o.cp or 1)
    if sharded is ZeroStage.NONE:
        raise PipesimError(f"{flag} divides sharded state over instances, but nothing is sharded: add "
                           "--use-distributed-optimizer (Megatron-LM: 'Partial DistOpt cannot be used without "
                           "DistOpt') or a sharding --use-megatron-fsdp strategy, or drop it")
    if ranks % instances:
        raise PipesimError(f"{flag} must divide dp·cp = {ranks} (Megatron-LM: 'Data parallel size should be "
                           "divisible by partial DistOpt shard factor'); use a divisor of it")
    if (o.ep or 1) > 1:
        raise PipesimError(f"{flag} with --ep {o.ep}: the expert data-parallel group's instances are not modelled; "
                           "drop one of the two")
    group = ranks // instances
    if o.shard_group not in (None, group):
        raise PipesimError(f"{flag} shards within groups of dp·cp/{instances} = {group} ranks, but --shard-group "
                           f"{o.shard_group} is given; keep one")
    if sharded is not ZeroStage.OPTIMIZER:  # FSDP's hybrid sharding reduces so already, whatever its collectives
        return group, o.zero_collectives
    if o.zero_collectives not in (None, ZeroCollectives.HIERARCHICAL.value):
        raise PipesimError(f"{flag} reduces hierarchically (--zero-collectives hierarchical), but --zero-collectives "
                           f"{o.zero_collectives} is given; keep one")
    return group, ZeroCollectives.HIERARCHICAL.value


def _cp_a2a_size(sizes: tuple[int, int] | None, cp: int) -> int | None:
    """The all-to-all groups' size of Megatron-LM's ``--hierarchical-context-parallel-sizes A P``, checked to
    multiply to ``cp``; None when not given."""
    if sizes is None:
        return None
    a2a, p2p = sizes
    if a2a * p2p != cp:
        raise PipesimError(f"--hierarchical-context-parallel-sizes {a2a} {p2p} multiply to {a2a * p2p}, not --cp "
                           f"{cp}; give two sizes whose product is --cp")
    return a2a


def _layout_string_split(spec: ModelSpec, shape: PipelineShape, o: ModelOptions,
                         split: StageSplitRequest) -> tuple[tuple[int, ...], int | None]:
    """(layers per model slice, the multi-token-prediction modules' slice or None for the loss's) of Megatron-Core's
    ``--pipeline-model-parallel-layout``; a one-line error where it contradicts the model, the pipeline's shape or
    another split flag."""
    if not split.is_default or o.num_layers_per_virtual_pipeline_stage is not None:
        raise PipesimError(f"{LAYOUT_FLAG} gives every stage's layers; drop the other split flags (--stage-layers, "
                           "--first/last-stage-layers, Megatron-LM's per-rank and per-chunk counts)")
    if shape.placement is not Placement.LOOP:
        raise PipesimError(f"{LAYOUT_FLAG} lays out Megatron-LM's own schedules (each rank's chunks in a loop); for a "
                           "V or DualPipe placement give --stage-layers")
    parsed = parse_pipeline_layout(o.pipeline_model_parallel_layout)
    parsed.check(spec.layers, spec.mtp_layers, spec.name)
    if len(parsed.stages) != shape.num_slices:
        raise PipesimError(f"{LAYOUT_FLAG} lists {len(parsed.stages)} stages, but the pipeline has pp·v = "
                           f"{shape.num_slices}; make --chunks {len(parsed.stages) // shape.pp or 1} or fix the layout")
    last = len(parsed.stages) - 1
    return parsed.stage_layers, (None if parsed.mtp_stage in (None, last) else parsed.mtp_stage)


def _stage_layers(spec: ModelSpec, shape: PipelineShape, split: StageSplitRequest, framework) -> tuple[int, ...]:
    """Layers per model slice: the framework's own split unasked, Megatron-LM's per-rank flags over the ranks'
    chunks, or the user's per-slice counts."""
    name = f"model {spec.name}"
    if split.is_default:
        return framework.split_layers(spec, shape.num_slices)
    if not split.per_rank:
        return resolve_stage_layers(spec.layers, shape.num_slices, split, model_name=name)
    if shape.placement is not Placement.LOOP:
        raise PipesimError("--decoder-first/last-pipeline-num-layers and --account-for-*-in-pipeline-split split "
                           "Megatron-LM's own schedules (each rank's chunks in a loop); for a V or DualPipe "
                           "placement give --stage-layers")
    return megatron_rank_split(spec.layers, shape.slices_by_rank, split, model_name=name)


def microbatches_of_global_batch(global_batch: int, model: str | ModelSpec, options: ModelOptions,
                                 mb: int | None = None, pp: int = DEFAULT_PP) -> int:
    """Microbatches per step of each pipeline that ``global_batch`` sequences per optimizer step mean: a published
    recipe states its global batch, pipesim's ``mb`` counts one pipeline's microbatches. The dp replicas split the
    batch, each microbatch holds the micro-batch size (the options' or the model's); cp ranks share each sequence,
    so they do not divide it. ``mb``, when given too, must agree."""
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise PipesimError(f"--global-batch {global_batch!r}: give a positive number of sequences per step")
    spec = load_model(model, options.seq_len) if isinstance(model, str) else model
    micro_batch = options.micro_batch_size or spec.micro_batch
    dp = options.dp_for(pp)
    per_microbatch = micro_batch * dp
    if global_batch % per_microbatch:
        raise PipesimError(f"--global-batch {global_batch} is not a multiple of micro-batch size {micro_batch} × "
                           f"dp {dp} = {per_microbatch} sequences; change --global-batch, --micro-batch-size or --dp")
    microbatches = global_batch // per_microbatch
    if mb is not None and mb != microbatches:
        raise PipesimError(f"--global-batch {global_batch} means {microbatches} microbatches per pipeline (micro-batch "
                           f"size {micro_batch} × dp {dp}), but --mb {mb} is given; drop one")
    return microbatches


def boundary_of(setup: ModelSetup, result: SimulationResult) -> StepBoundary:
    return setup.boundary or default_boundary(result.program)


def steady_step_time(setup: ModelSetup, result: SimulationResult) -> float:
    """Seconds per step with steps back to back (:mod:`pipesim.analytic.steady_state`)."""
    return steady_state_step_time(result, boundary_of(setup, result), sync_latency(setup.layout, setup.chip),
                                  setup.steps)


def model_step_report(setup: ModelSetup, result: SimulationResult) -> StepReport:
    """Step time, tokens/s, MFU, bubble and per-rank GiB of ``result`` (render with ``report_text``/``to_dict``)."""
    return step_report(setup.model, setup.chip, setup.layout, result, steady_step_time(setup, result),
                       boundary_of(setup, result), framework=setup.framework)
