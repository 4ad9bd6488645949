"""A published training run, the configuration it was measured at, and pipesim's prediction of it.

A :class:`PublishedRun` holds one measurement (step time, or a throughput turned into step time with the
run's own batch) and every setting the source states or the row infers; :func:`predict` simulates it with the
chip presets' constants and :func:`cli_args` gives the ``pipesim simulate`` line that expresses it (a test
holds the two equal). The rows themselves live in :mod:`pipesim.validation.sources`, one module per source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipesim.analytic.allocator import MemoryMeasure
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.frameworks import Framework, knobs
from pipesim.analytic.layout import (
    DEFAULT_RECOMPUTE_MODULES,
    AttentionKernel,
    BoundaryTensor,
    ColumnInput,
    CpComm,
    CpKernels,
    ElementwiseKernels,
    Fp8Linears,
    Fp8Params,
    Fp8Recipe,
    GradAccumulation,
    GradBuckets,
    Layout,
    LossKernel,
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
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.stage_split import StageSplitRequest, resolve_stage_layers
from pipesim.analytic.steady_state import StepBoundary, steady_state_step_time, sync_latency
from pipesim.analytic.step_report import StepReport, step_report
from pipesim.analytic.to_costs import build_cost_model
from pipesim.program.build import build_program
from pipesim.program.ir import PipelineShape
from pipesim.program.loader import load_schedule
from pipesim.sim.simulator import simulate


@dataclass(frozen=True)
class PublishedRun:
    """One published measurement and the configuration it was taken at."""

    source: str
    model: str
    chip: str
    gpus: int
    global_batch: int  # sequences per step
    tp: int = 1
    pp: int = 1
    cp: int = 1
    chunks: int = 1
    micro_batch: int = 1
    seq_len: int | None = None
    schedule: str = "1f1b"
    recompute: Recompute = Recompute.NONE
    recompute_layers: int | None = None  # under full recomputation, only this many layers (of a chunk) recomputed
    # full recomputation's stored inputs split over tp (Megatron-LM's --distribute-saved-activations, metaseq's)
    distribute_saved_activations: bool = False
    sequence_parallel: bool = False
    attention: AttentionKernel = AttentionKernel.FUSED
    kv_repeated: bool = False  # GQA's K and V copied to every query head before the attention (torchtitan to 2026-01)
    elementwise: ElementwiseKernels = ElementwiseKernels.FUSED  # EAGER: the framework runs PyTorch ops unfused
    loss: LossKernel = LossKernel.MEGATRON  # PYTORCH: F.cross_entropy on FP32 logits (torchtitan)
    z_loss: bool = False  # a z-loss beside the loss (OLMo-core's scripts)
    loss_input_copy: bool = False  # the FP32 logits copied before the loss (OLMo-core's trainer)
    zero: ZeroStage = ZeroStage.NONE
    zero_collectives: ZeroCollectives = ZeroCollectives.BUCKETED  # PER_LAYER: FSDP's SHARD_GRAD_OP as ZeRO-2
    shard_group: int | None = None  # the ZeRO state over groups of this many data-parallel ranks (hybrid)
    precision: Precision = Precision.BF16
    fp8_params: Fp8Params = Fp8Params.OFF  # FP8 runs: the linears' weights kept in FP8 alone (and how)
    fp8_recipe: Fp8Recipe = Fp8Recipe.DELAYED  # FP8 runs: delayed or per-tensor current ("tensorwise") scaling
    cp_comm_ctas: int | None = None  # the cp group's NCCL CTAs, where a communicator config caps them
    cp_comm: CpComm = CpComm.P2P  # how the cp ranks exchange keys and values (Megatron-LM's --cp-comm-type)
    cp_kernels: CpKernels = CpKernels.TRANSFORMER_ENGINE  # the code that runs context-parallel attention
    first_last: int | None = None  # layers on the first and on the last stage, when lighter
    boundary: StepBoundary = StepBoundary.SYNC
    overlap_p2p: bool = False  # Megatron's --overlap-p2p-communication (NeMo and Llama 3 recipes)
    # without sequence parallelism: each tp rank sends the whole boundary tensor (Megatron-Core) or 1/tp of it
    # (SPLIT: Megatron-LM 2021–2022's scatter/gather, DeepSpeed's pipeline engine)
    p2p_tensor: BoundaryTensor = BoundaryTensor.WHOLE
    p2p_calls: P2pCalls = P2pCalls.BATCHED  # SEQUENTIAL: DeepSpeed's engine, each send and receive in turn
    # what the pipeline runtime keeps of the boundary tensors (torch.distributed.pipelining's, torchtitan's)
    pipeline_buffers: PipelineBuffers = PipelineBuffers.FREED
    pipeline_outputs_kept: bool = False  # the last stage's outputs kept for step() to return (torch before 2025-10)
    fp8_linears: Fp8Linears = Fp8Linears.TRANSFORMER_ENGINE  # TORCHAO: torchao's Float8Linear (torchtitan)
    fp8_all_gather: bool = False  # torchao's FSDP float8 all-gather (enable_fsdp_float8_all_gather)
    fsdp2: bool = False  # PyTorch's fully_shard (torchtitan, OLMo-core): each per-layer gather copied out
    mlp_up: MlpUp = MlpUp.FUSED  # SPLIT: a gated MLP's gate and up projections as two linears
    rank_order: RankOrder = RankOrder.TP_CP_DP_PP  # TP_CP_PP_DP: Megatron-Core's --use-tp-pp-dp-mapping
    overlap_grad_reduce: bool = False  # --overlap-grad-reduce (NeMo's overlap_grad_sync)
    overlap_param_gather: bool = False  # --overlap-param-gather (NeMo's overlap_param_sync)
    async_tp: bool = False  # TP collectives overlapped with their GEMMs (torchtitan's AsyncTP)
    # each column linear's input all-gather beside the GEMM of the rank's own sequence shard (nanotron's
    # tp_linear_async_communication under sequence parallelism)
    overlap_tp_local_shard: bool = False
    # the column-parallel input-gradient collective beside the weight gradient (Megatron-LM since 2021-09, TE)
    overlap_tp_dgrad: bool = True
    # under sequence parallelism, where the column-parallel weight gradients get their gathered input
    column_input: ColumnInput = ColumnInput.REGATHER
    fp16_grads: bool = False  # gradients all-reduced in 16 bits (--param-bytes 16), Megatron-LM's 2021 default
    # a parameter's bytes of weights, gradients and optimizer state where the source states an account other than
    # 18 or fp16_grads' 16 (--param-bytes W+G+O: DeepSeek-V3's BF16 Adam moments, 2+4+8)
    param_bytes: OptimizerBytes | None = None
    # each GPU's share of its node's network in Gb/s where the source states one other than the chip preset's
    # (--inter-node-gbps): the preset's NICs are the reference system's, a cluster's may be fewer or slower
    inter_node_gbps: float | None = None
    # AUTOGRAD: each microbatch's weight gradients added into .grad by a pass of their own (DeepSpeed's engine,
    # plain PyTorch); FUSED: the weight-gradient GEMM accumulates (Megatron-LM's gradient_accumulation_fusion)
    grad_accumulation: GradAccumulation = GradAccumulation.FUSED
    ep: int = 1  # expert-parallel degree (mixture-of-experts models), folded over dp·cp
    moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL  # DEEPEP: a copy per node across the network
    moe_dispatch_fp8: bool = False  # the dispatch (and the combine's gradient) in FP8
    # what a selective recomputation re-runs (Megatron-Core's --recompute-modules); the attention core by default
    recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES
    stage_layers: tuple[int, ...] | None = None  # layers on every stage, stage 0 first, when stated or inferred
    # at most one of these is the published throughput; a row without one publishes only its memory
    hfu_tflops: float | None = None  # hardware TFLOP/s per GPU (recompute counted)
    mfu_tflops: float | None = None  # model TFLOP/s per GPU
    tokens_per_gpu: float | None = None
    step_s: float | None = None
    memory_gib: float | None = None
    # the pipeline rank whose memory was published (MLPerf's logs: global rank 0's, the first stage's); None: the
    # source gives the peak over the ranks, the figure pipesim reports as the peak
    memory_rank: int | None = None
    # which peak the source printed: what tensors held (max_memory_allocated) or what the caching allocator held
    # (max_memory_reserved, e.g. torchtitan's memory column)
    memory_measure: MemoryMeasure = MemoryMeasure.ALLOCATED
    # the training framework the run's code was, when it is one --framework names other than Megatron-LM's (whose
    # code most rows ran): the rows still state each setting; this records whose runs they are, for the
    # framework's line beside the error band (pipesim.analytic.error_band.framework_record)
    framework: Framework | None = None
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        given = [value for value in (self.hfu_tflops, self.mfu_tflops, self.tokens_per_gpu, self.step_s)
                 if value is not None]
        if len(given) > 1:
            raise ValueError(f"{self.source}: {self.label} gives {len(given)} throughputs; keep the published one")
        if not given and self.memory_gib is None:
            raise ValueError(f"{self.source}: {self.label} publishes neither a throughput nor a memory figure")
        if self.fp16_grads and self.param_bytes is not None:
            raise ValueError(f"{self.source}: {self.label} gives fp16_grads and param_bytes; state the bytes once")

    @property
    def optimizer_bytes(self) -> OptimizerBytes:
        """The bytes a parameter takes as the row states them (:attr:`param_bytes`, or 16-bit gradients, or
        Megatron-LM's 18)."""
        if self.param_bytes is not None:
            return self.param_bytes
        return OptimizerBytes(grads=2.0) if self.fp16_grads else OptimizerBytes()

    @property
    def measures_step(self) -> bool:
        """Whether the source published this run's speed (a memory-only row did not)."""
        return any(value is not None for value in (self.hfu_tflops, self.mfu_tflops, self.tokens_per_gpu,
                                                   self.step_s))

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def microbatches(self) -> int:
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def label(self) -> str:
        extra = f" cp{self.cp}" if self.cp > 1 else ""
        extra += f" v{self.chunks}" if self.chunks > 1 else ""
        extra += f" ep{self.ep}" if self.ep > 1 else ""
        extra += f" m{self.microbatches} b{self.micro_batch} {self.schedule}"
        return f"{self.model} tp{self.tp} pp{self.pp}{extra} {self.gpus}×{self.chip.split('-')[0]}"


@dataclass(frozen=True)
class Comparison:
    run: PublishedRun
    report: StepReport
    published_step_s: float | None  # None: the row publishes only its memory

    @property
    def step_error(self) -> float | None:
        if self.published_step_s is None:
            return None
        return self.report.step_time / self.published_step_s - 1

    @property
    def predicted_memory_gib(self) -> float:
        """pipesim's figure for what the source measured: the peak over the ranks, or the published rank's, as
        allocated or as reserved."""
        memory = self.report.memory
        held = memory.peak if self.run.memory_rank is None else memory.ranks[self.run.memory_rank]
        peak = memory.reserved(held) if self.run.memory_measure is MemoryMeasure.RESERVED else held.total
        return peak / 2**30

    @property
    def memory_error(self) -> float | None:
        if self.run.memory_gib is None:
            return None
        return self.predicted_memory_gib / self.run.memory_gib - 1


def predict(run: PublishedRun, chip: ChipSpec | None = None) -> Comparison:
    """Simulate ``run`` on its chip preset, or on ``chip`` (a preset with re-derived constants)."""
    model = MODEL_PRESETS[run.model].with_shape(run.seq_len, run.micro_batch)
    chip = (chip if chip is not None else CHIP_PRESETS[run.chip]).with_overrides(inter_node_gbps=run.inter_node_gbps)
    chunks = run.chunks if run.chunks > 1 else None
    split = run.stage_layers
    if run.first_last is not None:
        split = resolve_stage_layers(model.layers, run.pp * run.chunks,
                                     StageSplitRequest(run.first_last, run.first_last))
    synthesised = bool(load_schedule(run.schedule).build_options)  # zb-auto: its order needs these costs
    built = None if synthesised else build_program(run.schedule, run.pp, run.microbatches, chunks)
    shape = PipelineShape(run.pp, run.microbatches, run.chunks) if built is None else built.program.shape
    # DualPipe: a chunk is one slice of one of two model copies (the cost convention's v is 1, the copies 2)
    layout = Layout(tp=run.tp, dp=run.dp, pp=run.pp, chunks=shape.chunk_share, model_copies=shape.pipelines,
                    microbatches=run.microbatches,
                    recompute=run.recompute, recompute_layers=run.recompute_layers,
                    distribute_saved_activations=run.distribute_saved_activations,
                    sequence_parallel=run.sequence_parallel, attention=run.attention, kv_repeated=run.kv_repeated,
                    elementwise=run.elementwise, loss=run.loss, z_loss=run.z_loss,
                    loss_input_copy=run.loss_input_copy,
                    zero=run.zero, zero_collectives=run.zero_collectives,
                    shard_group=run.shard_group, cp=run.cp, precision=run.precision,
                    fp8_params=run.fp8_params, fp8_recipe=run.fp8_recipe, cp_comm_ctas=run.cp_comm_ctas,
                    cp_comm=run.cp_comm, cp_kernels=run.cp_kernels,
                    stage_layers=split,
                    overlap_p2p=run.overlap_p2p, p2p_tensor=run.p2p_tensor, p2p_calls=run.p2p_calls, mlp_up=run.mlp_up,
                    pipeline_buffers=run.pipeline_buffers, pipeline_outputs_kept=run.pipeline_outputs_kept,
                    fp8_linears=run.fp8_linears, fp8_all_gather=run.fp8_all_gather, fsdp2=run.fsdp2,
                    async_tp=run.async_tp, overlap_tp_local_shard=run.overlap_tp_local_shard,
                    overlap_tp_dgrad=run.overlap_tp_dgrad,
                    rank_order=run.rank_order,
                    column_input=run.column_input,
                    ep=run.ep, moe_dispatcher=run.moe_dispatcher, moe_dispatch_fp8=run.moe_dispatch_fp8,
                    recompute_modules=run.recompute_modules,
                    overlap_grad_reduce=run.overlap_grad_reduce, overlap_param_gather=run.overlap_param_gather,
                    grad_buckets=knobs(run.framework).grad_buckets, grad_accumulation=run.grad_accumulation,
                    param_bytes=run.optimizer_bytes)
    costs = build_cost_model(model, chip, layout, shape)
    if built is None:
        built = build_program(run.schedule, run.pp, run.microbatches, chunks, costs=costs)
    result = simulate(built.program, costs, check=False)
    step = steady_state_step_time(result, run.boundary, sync_latency(layout, chip))
    report = step_report(model, chip, layout, result, step, run.boundary)
    return Comparison(run, report, published_step(run, report))


def cli_args(run: PublishedRun) -> list[str]:
    """The ``pipesim simulate`` command line that expresses ``run`` (a test checks it gives predict()'s numbers)."""
    argv = ["simulate", "--model", run.model, "--hardware", run.chip, "-s", run.schedule, "--pp", str(run.pp),
            "--mb", str(run.microbatches), "--micro-batch-size", str(run.micro_batch), "--tp", str(run.tp),
            "--dp", str(run.dp), "--recompute", run.recompute.value, "--attention", run.attention.value,
            "--step-boundary", run.boundary.value]
    if run.chunks > 1:
        argv += ["--chunks", str(run.chunks)]
    if run.cp > 1:
        argv += ["--cp", str(run.cp)]
    if run.cp_comm_ctas is not None:
        argv += ["--cp-comm-ctas", str(run.cp_comm_ctas)]
    if run.cp_comm is not CpComm.P2P:
        argv += ["--cp-comm-type", run.cp_comm.value]
    if run.cp_kernels is not CpKernels.TRANSFORMER_ENGINE:
        argv += ["--cp-kernels", run.cp_kernels.value]
    if run.kv_repeated:
        argv.append("--repeat-kv")
    if run.seq_len:
        argv += ["--seq-len", str(run.seq_len)]
    if run.sequence_parallel:
        argv.append("--sequence-parallel")
    if run.distribute_saved_activations:
        argv.append("--distribute-saved-activations")
    if run.zero is not ZeroStage.NONE:
        argv += ["--zero", str(int(run.zero))]
    if run.zero_collectives is not ZeroCollectives.BUCKETED:
        argv += ["--zero-collectives", run.zero_collectives.value]
    if run.shard_group is not None:
        argv += ["--shard-group", str(run.shard_group)]
    if run.precision.quantized:
        argv.append(f"--{run.precision.value}")
    if run.fp8_params is not Fp8Params.OFF:
        argv += ["--fp8-params", run.fp8_params.value]
    if run.fp8_recipe is not Fp8Recipe.DELAYED:
        argv += ["--fp8-recipe", run.fp8_recipe.value]
    if run.overlap_p2p:
        argv.append("--overlap-p2p")
    elif run.pp > 1:  # stated: the framework's default for the schedule may overlap them
        argv.append("--no-overlap-p2p")
    if run.p2p_tensor is not BoundaryTensor.WHOLE:
        argv += ["--p2p-tensor", run.p2p_tensor.value]
    if run.p2p_calls is not P2pCalls.BATCHED:
        argv += ["--p2p-calls", run.p2p_calls.value]
    if run.pipeline_buffers is not PipelineBuffers.FREED:
        argv += ["--pipeline-buffers", run.pipeline_buffers.value]
    if run.pipeline_outputs_kept:
        argv.append("--pipeline-outputs-kept")
    if run.fp8_linears is not Fp8Linears.TRANSFORMER_ENGINE:
        argv += ["--fp8-linears", run.fp8_linears.value]
    if run.fp8_all_gather:
        argv.append("--fp8-all-gather")
    if run.fsdp2:
        argv.append("--fsdp2")
    if run.mlp_up is not MlpUp.FUSED:
        argv += ["--mlp-up", run.mlp_up.value]
    if run.rank_order is RankOrder.TP_CP_PP_DP:
        argv.append("--tp-pp-dp-mapping")
    if run.async_tp:
        argv.append("--async-tp")
    if run.overlap_tp_local_shard:
        argv.append("--overlap-tp-local-shard")
    if not run.overlap_tp_dgrad:
        argv.append("--no-overlap-tp-dgrad")
    if run.column_input is not ColumnInput.REGATHER:
        argv += ["--column-input", run.column_input.value]
    if run.overlap_grad_reduce:
        argv.append("--overlap-grad-reduce")
    if run.overlap_param_gather:
        argv.append("--overlap-param-gather")
    if knobs(run.framework).grad_buckets is not GradBuckets.MEGATRON:
        argv += ["--grad-buckets", knobs(run.framework).grad_buckets.value]
    if run.elementwise is not ElementwiseKernels.FUSED:
        argv += ["--elementwise", run.elementwise.value]
    if run.loss is not LossKernel.MEGATRON:
        argv += ["--loss", run.loss.value]
    if run.z_loss:
        argv.append("--z-loss")
    if run.loss_input_copy:
        argv.append("--loss-input-copy")
    if run.optimizer_bytes != OptimizerBytes():
        argv += ["--param-bytes", run.optimizer_bytes.text]
    if run.inter_node_gbps is not None:
        argv += ["--inter-node-gbps", f"{run.inter_node_gbps:g}"]
    if run.grad_accumulation is not GradAccumulation.FUSED:
        argv += ["--grad-accumulation", run.grad_accumulation.value]
    if run.ep > 1:
        argv += ["--ep", str(run.ep)]
    if run.moe_dispatcher is not MoeDispatcher.ALLTOALL:
        argv += ["--moe-dispatcher", run.moe_dispatcher.value]
    if run.moe_dispatch_fp8:
        argv.append("--moe-dispatch-fp8")
    if run.recompute_layers is not None:
        argv += ["--recompute-layers", str(run.recompute_layers)]
    if run.recompute_modules != DEFAULT_RECOMPUTE_MODULES:
        argv += ["--recompute-modules", *(m.value for m in run.recompute_modules)]
    if run.stage_layers is not None:
        argv += ["--stage-layers", ",".join(map(str, run.stage_layers))]
    if run.first_last is not None:
        argv += ["--first-stage-layers", str(run.first_last), "--last-stage-layers", str(run.first_last)]
    return argv


def published_step(run: PublishedRun, report: StepReport) -> float | None:
    if not run.measures_step:
        return None
    if run.step_s is not None:
        return run.step_s
    if run.tokens_per_gpu is not None:
        return report.tokens_per_step / (run.tokens_per_gpu * run.gpus)
    if run.hfu_tflops is not None:
        return report.hardware_flops / (run.hfu_tflops * 1e12 * run.gpus)
    return report.model_flops / (run.mfu_tflops * 1e12 * run.gpus)


