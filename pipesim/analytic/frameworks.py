"""What a training framework does by default, as the layout fields it decides: one name for a set of knobs.

The analytic model describes *how* a step runs (:class:`~pipesim.analytic.layout.Layout`): which kernels run the
element-wise work and the loss, how gradients accumulate, whether the backward's TP collectives overlap, where
the column-parallel linears' weight gradients get their gathered input, what "selective" recomputation keeps,
how ZeRO-2 communicates. Those are not the user's choices but the framework's, and a user who names the
framework should not have to know them. Every default below was read from the framework's code; the
validation sources that run on the framework state the same settings (``tests/test_frameworks.py`` holds the
two together). An explicit flag always wins over the framework's default.

- **Megatron-LM / Megatron-Core with Transformer Engine** (NeMo, Megatron-Bridge): pipesim's defaults. Fused
  element-wise kernels, the vocabulary-parallel loss, weight-gradient GEMMs that accumulate in place
  (``--gradient-accumulation-fusion``), the column-parallel input-gradient collective beside the weight-gradient
  GEMM and the gathered input gathered again for it (Korthikanti et al. 2023), selective recomputation of the
  attention core. Without sequence parallelism every tp rank sends a pipeline boundary's whole tensor: Megatron-
  Core's ``get_tensor_shapes`` splits it over tp only under sequence parallelism (Megatron-LM's 2021–2022
  scatter/gather of it, Narayanan et al. 2021 §4.1, is gone: ``--p2p-tensor split`` for runs of that code). Its
  interleaved schedule's pipeline sends overlap compute unasked (``--overlap-p2p-communication`` has been the
  default since October 2023); its other schedules block on them. Its context parallelism is Transformer
  Engine's ring (``--cp-comm-type p2p``, Megatron-LM's default; ``allgather`` and ``a2a`` are its other two).
- **NeMo** (NeMo 2.0's recipes and Megatron-Bridge's, NeMo 1.0's launcher configs before them): Megatron-Core
  underneath, so Megatron's defaults above, but a recipe is not Megatron-LM's bare command line. Its optimizer
  is the distributed optimizer (``use_distributed_optimizer=True`` in ``nemo/collections/llm/recipes/optim/
  adam.py``; the launcher's ``distributed_fused_adam``), and every pre-training recipe's
  ``DistributedDataParallelConfig`` sets ``overlap_grad_reduce=True`` and ``overlap_param_gather=True`` (the
  launcher's ``overlap_grad_sync``/``overlap_param_sync: true``), with the gradients reduced in FP32
  (``grad_reduce_in_fp32=True``, pipesim's 18 bytes a parameter): unasked, a run with replicas (dp·cp > 1) shards
  its optimizer state (ZeRO-1; ``--zero 0`` keeps it whole) and reduces its gradients beside the last backward and
  gathers its parameters beside the first forward (``--no-overlap-grad-reduce``, ``--no-overlap-param-gather``
  turn them off: ``GradReduce.OVERLAPPED``). Its FP8 precision plugins keep the FP8 linears' weights in FP8
  alone (``fp8_param_gather = True`` in every one of ``recipes/precision/mixed_precision.py``'s FP8 mixes:
  ``--fp8-params``, where the optimizer state is sharded; ``--fp8-params off`` keeps a BF16 copy). Its
  ``GPTConfig`` fuses the cross-entropy
  (``cross_entropy_loss_fusion: bool = True``, ``nemo/collections/llm/gpt/model/base.py``: ``--loss
  megatron-fused``). TP communication overlap is not a default (the recipes' ``performance_mode`` adds it:
  ``--async-tp``), nor sequence parallelism (each recipe says; ``--sequence-parallel``).
- **torchtitan** (FSDP2, DTensor TP, ``torch.distributed.pipelining``): eager element-wise ops
  (``torch.compile`` is off unless ``[compile] enable``: ``CompileConfig.enable = False``; give
  ``--elementwise fused`` for a compiled run); ``F.cross_entropy`` on the FP32-cast logits
  (``components/loss.py``; under tp, sharded along the vocabulary, torch's ``loss_parallel``:
  ``Layout.torch_loss_parallel``); gradients summed by autograd; DTensor's TP waits for every collective and its
  linears save the gathered input (``saved``); "selective" is per-op SAC (``selective_ac_option = "op"``);
  ZeRO-2 as FSDP's per-module collectives; its ``FeedForward`` keeps ``w1`` and ``w3`` apart (``--mlp-up
  split``: two GEMMs; its tensor parallelism gathers their input once, so no collective more). Its tensor
  parallelism is always sequence-parallel: the TP plan (``parallelize_llama``'s ``apply_tp``) shards every
  norm with ``SequenceParallel()`` and hands the attention and MLP a ``Shard(1)`` input they all-gather, so
  ``--tp`` > 1 implies ``--sequence-parallel``. Its data
  parallelism is DDP or FSDP2: no ZeRO-1 (FSDP2 shards the weights; ``reshard_after_forward = "never"`` keeps
  them gathered, ZeRO-2's shape). Without sharding it all-reduces each module's gradients as that module's
  backward ends (``apply_replicate``, pytorch/torchtitan #2458, March 2026: the embedding, each block, the norm with
  the output projection), on the last microbatch only (``GradReduce.DDP_HOOKS``, ``GradBuckets.PER_MODULE``: the
  embedding's unit is the one reduced after the backward; ``--no-overlap-grad-reduce`` waits for all of it after
  the backward instead). Unasked, it splits the layers over the stages counting the embedding and the
  head as a layer each (``pipeline_parallel_first/last_stage_less_layers = 1``), the remainder to the first
  stages: 32 layers over 4 stages are 8, 9, 8, 7 (``stage_split.effective_layer_split``). ``torch.distributed.
  pipelining`` overlaps the sends of its multi-stage schedules (interleaved, looped BFS, the zero-bubble ones,
  DualPipe-V, and any order pipesim exports) and blocks on those of its single-stage 1F1B and GPipe; it keeps a
  receive buffer per microbatch and each microbatch's output until its backward, and its multi-stage runtime
  every tensor it sent until the step ends (``--pipeline-buffers torch`` for 1F1B and GPipe, ``torch-runtime``
  for the rest: :mod:`pipesim.analytic.pipeline_buffers`). Its float8 is torchao's ``Float8Linear``, which saves
  the BF16 input and weight and casts them again at each GEMM (``--fp8-linears torchao``: no FP8 weight copy, BF16
  saved inputs; under FSDP its ``enable_fsdp_float8_all_gather``, off by default, gathers the weights in FP8:
  ``--fp8-all-gather``). Its FSDP is FSDP2 (``fully_shard``), which copies each per-layer gather into the
  parameters on the compute stream (``--fsdp2``). Its context
  parallelism is PyTorch's ``context_parallel`` (``--cp-kernels pytorch``: one SDPA call per ring step, merged
  in FP32 by eager ops) with its default rotation, an all-gather of K and V (``_ContextParallelOptions.
  rotate_method = ALL_GATHER``: ``--cp-comm-type allgather``).
- **nanotron**: fused norms and RoPE (``TritonRMSNorm``, flash-attn's rotary in its training path), its SwiGLU
  (``GLUActivation``: ``act(gate) * up``) as two eager ops and its attention's q, k, v and output moved between
  layouts by copies (``--elementwise eager-activation``; its residual adds are plain adds, no dropout); the
  vocabulary-parallel loss in FP32 (``_ShardedCrossEntropy``: Megatron's ops, but the max subtracted out of place,
  ``--loss nanotron``); gradients accumulated into FP32 buffers after every microbatch
  (``accumulate_grad_in_fp32``: a memory-bound pass); ``tp_linear_async_communication`` off by default, so the
  column linear's reduce-scatter waits after both GEMMs, and ``tp_recompute_allgather`` on, so its backward
  gathers the input again and waits for it (``regather-blocking``). It shards the optimizer state at most
  (``optimizer.zero_stage``: 0 or 1), recomputes every layer or none (``recompute_layer``: no selective policy,
  no partial one) and trains in BF16 (its Llama and Qwen modules have no FP8 linears; its
  ``fp8`` package is not wired into them), and its data parallelism is torch's DDP, whose bucket hooks reduce the
  FP32 gradients during the last microbatch's backward (``GradReduce.DDP_HOOKS``: ``--overlap-grad-reduce``
  unasked). Its defaults that are not layout fields: the all-forward-all-backward engine (``pp_engine:
  afab``, pipesim's ``-s gpipe``, although every one of its example configs sets ``1f1b``, which pipesim keeps
  as its default schedule) and no sequence parallelism (``tp_mode: all_reduce``; ``reduce_scatter`` is
  ``--sequence-parallel``). Its engines are those two, all-forward-all-backward and 1F1B: no interleaving.
  Its ``PipelineBlock`` sends a block's output as each rank holds it: without sequence parallelism, each tp
  rank's whole tensor (``--p2p-tensor whole``), and its engine runs the sends and receives one at a time, each
  waited for (``PipelineTrainBatchState.run_communication``, ``P2P.send_tensors``/``recv_tensors``: ``--p2p-calls
  sequential``), each tensor behind two blocking sends of its shape and strides that the receiver reads on the
  host before it posts the data's receive. It assigns the layers to ranks by their cumulative cost
  (``get_block_compute_costs``; the LM head weighs vocab·h), so the last rank, which holds the head, takes fewer
  layers (``stage_split.cost_threshold_split``), and a head that fills an earlier rank's share leaves the
  logits' FP32 cast and the loss to the ranks after it, the logits crossing the stages between
  (``Layout.stages_after_head``).
- **Megatron-DeepSpeed / GPT-NeoX** (Megatron's 2021 model code on DeepSpeed's engine): Megatron's fused
  kernels and loss; DeepSpeed's mixed-precision engine keeps ``.grad`` and sums it by autograd; every TP
  collective waits (the column-parallel linear all-reduces its input gradient in a blocking autograd function,
  ``_CopyToModelParallelRegion``); ZeRO-2 in DeepSpeed's buckets. DeepSpeed's pipeline engine runs one order,
  ``TrainSchedule``'s 1F1B, and it sends each tp rank's 1/tp of a boundary tensor
  (``is_pipe_partitioned``: a ``PartitionedTensor``), all-gathered on the receiving stage; each step's send and
  receive are blocking calls one after the other (``SendActivation`` then ``RecvGrad``: ``--p2p-calls
  sequential``), where Megatron batches them. ``GPTModelPipe`` partitions ``type:transformer``: the layers
  balanced by count, the remainder to the first stages (``stage_split.balanced_count_split``). Its FP8 is
  Transformer Engine's (``--fp8-e4m3``/``--fp8-hybrid``); it has no NVFP4.

Megatron's and torchtitan's engines run every order pipesim builds that they can express (torchtitan any, through
``_PipelineScheduleRuntime``: ``pipesim export``), so their schedules are not restricted.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pipesim.analytic.layout import (
    AttentionKernel,
    BoundaryTensor,
    ColumnInput,
    CpComm,
    CpKernels,
    ElementwiseKernels,
    Fp8Linears,
    Fp8Params,
    GradAccumulation,
    GradBuckets,
    LossKernel,
    MlpUp,
    P2pCalls,
    PipelineBuffers,
    Precision,
    Recompute,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.analytic.stage_split import (
    SplitPolicy,
    balanced_count_split,
    check_enough_layers,
    cost_threshold_split,
    effective_layer_split,
)
from pipesim.errors import PipesimError, parse_choice

if TYPE_CHECKING:  # a unit-cost simulate reads the framework names without loading model specs
    from pipesim.analytic.model_spec import ModelSpec


class GradReduce(enum.Enum):
    """When a framework's data-parallel gradient reduce runs, unasked (``--overlap-grad-reduce`` or
    ``--no-overlap-grad-reduce`` given wins)."""

    # after the stage's last backward: Megatron without --overlap-grad-reduce; DeepSpeed's pipeline engine
    # (``_exec_reduce_grads``, an instruction after the last ``BackwardPass``)
    AFTER_BACKWARD = "after-backward"
    # DDP's bucket hooks during the last microbatch's backward, for the ZeRO stages whose gradients go through
    # DDP (0 and 1): nanotron wraps its model in torch's DistributedDataParallel, lets it sync on the last
    # microbatch's backward only (``PipelineEngine._get_bwd_context``: ``no_sync`` before,
    # ``ddp_trigger_sync_in_bwd`` then), and its FP32 comm hook (``get_fp32_accum_hook``) all-reduces each 25 MB
    # bucket, or under ZeRO-1 reduce-scatters it, as the bucket fills; the trainer waits for the handles only
    # before the optimizer step. torchtitan's data parallelism without sharding the same way, per module
    # (``apply_replicate``: FSDP2's post-backward all-reduces each unit, only on the last microbatch under a
    # pipeline schedule, which turns gradient sync off before; its DDP before March 2026 with 100 MB buckets)
    DDP_HOOKS = "ddp-hooks"
    # in buckets beside the last backward, and the distributed optimizer's parameter gather beside the next step's
    # first forward: NeMo's recipes set Megatron-Core's overlap_grad_reduce and overlap_param_gather
    OVERLAPPED = "overlapped"

    def overlaps(self, zero: ZeroStage) -> bool:
        """Whether the gradient reduce of a run sharded at ``zero`` overlaps the last backward."""
        if self is GradReduce.OVERLAPPED:
            return True
        return self is GradReduce.DDP_HOOKS and zero <= ZeroStage.OPTIMIZER

    def gathers_beside_forward(self, zero: ZeroStage) -> bool:
        """Whether a run sharded at ``zero`` gathers its sharded parameters beside the next step's first forward
        (the distributed optimizer's gather, ZeRO 1–2: Megatron-Core's ``overlap_param_gather``)."""
        return self is GradReduce.OVERLAPPED and zero.gathers_after_step


class Framework(enum.Enum):
    """A training framework whose defaults set the layout fields of :class:`FrameworkKnobs`."""

    MEGATRON = "megatron"  # Megatron-LM / Megatron-Core with Transformer Engine, from its command line
    NEMO = "nemo"  # NeMo's and Megatron-Bridge's recipes: Megatron-Core with their optimizer and DDP defaults
    TORCHTITAN = "torchtitan"
    NANOTRON = "nanotron"
    MEGATRON_DEEPSPEED = "megatron-deepspeed"  # Megatron-DeepSpeed, GPT-NeoX


@dataclass(frozen=True)
class FrameworkKnobs:
    """The layout fields a framework decides, at its defaults."""

    elementwise: ElementwiseKernels
    loss: LossKernel
    grad_accumulation: GradAccumulation
    overlap_tp_dgrad: bool
    column_input: ColumnInput
    selective: Recompute  # what the framework's "selective" recomputation keeps
    zero2_collectives: ZeroCollectives  # how its ZeRO-2 (gradients and optimizer sharded) communicates
    # without sequence parallelism, whether each tp rank sends 1/tp of a pipeline boundary tensor or all of it
    p2p_tensor: BoundaryTensor = BoundaryTensor.WHOLE
    # whether its blocking pipeline engine receives and sends in one batched call or one after the other
    p2p_calls: P2pCalls = P2pCalls.BATCHED
    # a gated MLP's gate and up projections: one fused GEMM or two linears
    mlp_up: MlpUp = MlpUp.FUSED
    zero_stages: tuple[ZeroStage, ...] = tuple(ZeroStage)  # the sharding it offers (what plan searches)
    # the GEMM precisions its model code trains in (what plan searches)
    precisions: tuple[Precision, ...] = tuple(Precision)
    # the recomputation policies it offers, as it means them (what plan searches), and whether it can recompute
    # only some of a stage's layers (Megatron's --recompute-num-layers)
    recomputes: tuple[Recompute, ...] = tuple(Recompute)
    partial_recompute: bool = True
    # whether its full recomputation can keep each layer's input split over the tp ranks (Megatron-LM's
    # --distribute-saved-activations, DeepSpeed's partition_activations); nanotron and torchtitan have no such switch
    distributed_saved_activations: bool = True
    # Whether its tensor parallelism always shards the norms along the sequence (Korthikanti et al.'s sequence
    # parallelism): then tp > 1 means --sequence-parallel, and plan searches nothing else.
    tp_shards_sequence: bool = False
    schedules: tuple[str, ...] | None = None  # the built-in schedules its pipeline engine runs; None: any order
    # how it splits the layers over the pipeline stages when no split is given (stage_split.SplitPolicy)
    stage_split: SplitPolicy = SplitPolicy.EVEN_OR_LIGHTER_ENDS
    # when its data-parallel gradient reduce runs (GradReduce): after the backward, or beside the last one
    grad_reduce: GradReduce = GradReduce.AFTER_BACKWARD
    # how its overlapped gradient reduce cuts a stage's gradients (GradBuckets, pipesim.analytic.grad_buckets):
    # Megatron-Core's buckets, torch DDP's (nanotron), or a unit per module (torchtitan's replicate)
    grad_buckets: GradBuckets = GradBuckets.MEGATRON
    # whether it shards the optimizer state over the replicas unasked (NeMo's distributed optimizer, ZeRO-1)
    distributed_optimizer: bool = False
    # what its FP8 runs keep of Transformer Engine's linears' weights where the optimizer state is sharded
    # (Layout.fp8_params): a BF16 weight and an FP8 copy, or the FP8 weight alone (NeMo's fp8_param_gather)
    fp8_params: Fp8Params = Fp8Params.OFF
    # whether its code has switches that overlap the data-parallel sync with the passes (Megatron-LM's
    # --overlap-grad-reduce and --overlap-param-gather), which a tuned recipe turns on; elsewhere the sync runs as
    # grad_reduce says and the sharded parameters are gathered after the optimizer step
    dp_overlap_switches: bool = False
    # the built-in schedules whose pipeline sends its engine issues without waiting, each receive waited for only
    # where its data is read (--overlap-p2p), unasked (--overlap-p2p or --no-overlap-p2p given wins); its other
    # schedules' sends block
    overlapped_p2p_schedules: tuple[str, ...] = ()
    # the code that runs its context-parallel attention, and how it exchanges keys and values
    cp_kernels: CpKernels = CpKernels.TRANSFORMER_ENGINE
    cp_comm: CpComm = CpComm.P2P
    # whose FP8 linears its FP8 runs train with (Transformer Engine's, or torchao's Float8Linear)
    fp8_linears: Fp8Linears = Fp8Linears.TRANSFORMER_ENGINE
    # whether its pipeline engine is torch.distributed.pipelining, which keeps a receive buffer per microbatch and
    # each output until its backward, and in its multi-stage runtime the sends until the step ends
    # (PipelineBuffers); the others free each boundary tensor once used
    torch_pipelining: bool = False
    # Its FSDP is PyTorch's fully_shard (FSDP2), whose per-layer gathers are copied out into the parameters on the
    # compute stream (Layout.fsdp2): torchtitan's
    fsdp2: bool = False
    # Whether its unfused attention copies grouped-query K and V out to every query head before the batched GEMMs
    # (Layout.kv_repeated): Megatron-Core's DotProductAttention (repeat_interleave), unless --no-repeat-kv
    unfused_attention_repeats_kv: bool = False

    def overlaps_p2p(self, schedule: str) -> bool:
        """Whether this framework's engine overlaps the pipeline sends of the built-in ``schedule``, unasked."""
        return schedule in self.overlapped_p2p_schedules

    def pipeline_buffers(self, schedule: str) -> PipelineBuffers:
        """What this framework's engine keeps of the boundary tensors running ``schedule`` (a built-in name, or an
        order from a file): torch.distributed.pipelining's single-stage schedules for 1F1B and GPipe, its
        multi-stage runtime for every other order (torchtitan's interleaved and zero-bubble ones, and the orders it
        loads from a file); nothing more elsewhere."""
        if not self.torch_pipelining:
            return PipelineBuffers.FREED
        return PipelineBuffers.TORCH if schedule in ("1f1b", "gpipe") else PipelineBuffers.TORCH_RUNTIME

    def dp_sync_overlaps(self, zero: ZeroStage, tuned: bool) -> tuple[bool, bool]:
        """(gradient reduce, parameter gather) overlapped with the passes in a run sharded at ``zero``: with the
        framework's switches, both where ``tuned`` (the gather only where there are sharded parameters to gather);
        without them, as its code runs them."""
        if self.dp_overlap_switches:
            return tuned, tuned and zero is not ZeroStage.NONE
        return self.grad_reduce.overlaps(zero), False

    def split_layers(self, model: ModelSpec, stages: int) -> tuple[int, ...] | None:
        """The layers of each of ``stages`` stages as this framework splits ``model`` when the user names no
        split; None where that is pipesim's default split (even, or Megatron's lighter ends, else refused with
        one that works: :func:`~pipesim.analytic.stage_split.resolve_stage_layers`)."""
        policy = self.stage_split
        if policy is SplitPolicy.EVEN_OR_LIGHTER_ENDS or stages == 1:
            return None
        check_enough_layers(model.layers, stages, f"model {model.name}")
        if policy is SplitPolicy.EFFECTIVE_LAYERS:
            return effective_layer_split(model.layers, stages)
        if policy is SplitPolicy.BALANCED_COUNT:
            return balanced_count_split(model.layers, stages)
        return _nanotron_split(model, stages)[0]

    def stages_after_head(self, model: ModelSpec, stages: int) -> int:
        """The stages after the LM head's when this framework splits ``model`` over ``stages`` unasked
        (:attr:`~pipesim.analytic.layout.Layout.stages_after_head`): 0 but where nanotron's cost balance leaves
        the logits' cast and the loss to stages of their own."""
        if self.stage_split is not SplitPolicy.COST_THRESHOLDS or stages == 1:
            return 0
        return _nanotron_split(model, stages)[1]

    def check_schedule(self, schedule: str, framework: str) -> None:
        """Refuse a built-in schedule the framework's pipeline engine does not run, naming the ones it does."""
        if self.schedules is not None and schedule not in self.schedules:
            raise PipesimError(f"schedule {schedule}: {framework}'s pipeline engine does not run it (it runs "
                               f"{', '.join(self.schedules)}); choose one of those or drop --framework")

    def with_given(self, *, elementwise: str | ElementwiseKernels | None = None,
                   loss: str | LossKernel | None = None,
                   grad_accumulation: str | GradAccumulation | None = None,
                   overlap_tp_dgrad: bool | None = None,
                   column_input: str | ColumnInput | None = None,
                   p2p_tensor: str | BoundaryTensor | None = None,
                   p2p_calls: str | P2pCalls | None = None,
                   mlp_up: str | MlpUp | None = None,
                   cp_kernels: str | CpKernels | None = None,
                   cp_comm: str | CpComm | None = None,
                   fp8_linears: str | Fp8Linears | None = None) -> FrameworkKnobs:
        """These defaults with every option the user gave (not None) in its place: an explicit flag wins."""
        given = {"elementwise": (ElementwiseKernels, elementwise), "loss": (LossKernel, loss),
                 "grad_accumulation": (GradAccumulation, grad_accumulation),
                 "overlap_tp_dgrad": (bool, overlap_tp_dgrad), "column_input": (ColumnInput, column_input),
                 "p2p_tensor": (BoundaryTensor, p2p_tensor), "p2p_calls": (P2pCalls, p2p_calls),
                 "mlp_up": (MlpUp, mlp_up), "cp_kernels": (CpKernels, cp_kernels), "cp_comm": (CpComm, cp_comm),
                 "fp8_linears": (Fp8Linears, fp8_linears)}
        return replace(self, **{name: parse_choice(name, kind, value) for name, (kind, value) in given.items()
                                if value is not None})

    def sequence_parallel(self, asked: bool, tp: int) -> bool:
        """Whether a run at ``tp`` shards along the sequence: as asked, or always where the framework's TP does."""
        return asked or (self.tp_shards_sequence and tp > 1)

    def repeats_kv(self, asked: bool | None, attention: AttentionKernel) -> bool:
        """Whether grouped-query K and V reach the attention copied out to every query head: as ``asked``
        (``--repeat-kv``/``--no-repeat-kv``), else where this framework's ``attention`` path copies them."""
        if asked is not None:
            return asked
        return self.unfused_attention_repeats_kv and attention is AttentionKernel.UNFUSED

    def recompute(self, asked: Recompute) -> Recompute:
        """The recomputation ``asked`` means in this framework ("selective" is not the same policy everywhere)."""
        return self.selective if asked is Recompute.SELECTIVE else asked

    def check_recompute(self, policy: Recompute, layers: int | None, framework: str,
                        distributed: bool = False) -> None:
        """Refuse a recomputation policy (as this framework means it), a partial one or distributed saved inputs
        it does not offer."""
        if distributed and not self.distributed_saved_activations:
            raise PipesimError(f"--distribute-saved-activations: {framework} keeps a recomputed layer's input whole "
                               "(it has no such switch); drop it or --framework")
        if policy not in self.recomputes:
            offered = ", ".join(r.value for r in self.recomputes)
            raise PipesimError(f"--recompute {policy.value}: {framework} does not recompute that way (it offers "
                               f"--recompute {offered}); choose one of those or drop --framework")
        if layers is not None and not self.partial_recompute:
            raise PipesimError(f"--recompute-layers {layers}: {framework} recomputes every layer or none; drop "
                               "--recompute-layers or --framework")

    def check_zero(self, zero: ZeroStage, framework: str, pp: int = 1, distributed_optimizer: bool = False) -> None:
        """Refuse a ZeRO stage the framework does not offer, naming the ones it does (``distributed_optimizer``:
        asked as ``--distributed-optimizer``), or one its FSDP runs as another under a pipeline of ``pp``
        stages."""
        if zero not in self.zero_stages:
            offered = ", ".join(str(int(z)) for z in self.zero_stages)
            asked = "--distributed-optimizer (ZeRO-1)" if distributed_optimizer else f"--zero {int(zero)}"
            raise PipesimError(f"{asked}: {framework} does not shard that way (it offers --zero "
                               f"{offered}); choose one of those or drop --framework")
        if zero is ZeroStage.GRADIENTS and pp > 1 and self.zero2_collectives is ZeroCollectives.PER_LAYER:
            # torchtitan's apply_fsdp: under a pipeline reshard_after_forward defaults to off ("to avoid
            # per-microbatch all-gathers") and the pipeline stage keeps the gathered weights until its last backward
            raise PipesimError(f"--zero 2 with --pp {pp}: {framework}'s FSDP under a pipeline keeps each stage's "
                               "weights gathered from its first forward to its last backward (reshard_after_forward "
                               "off, its default there), which pipesim runs as --zero 3: use --zero 3")

    def check_precision(self, precision: Precision, framework: str) -> None:
        """Refuse a GEMM precision the framework's model code does not train in, naming the ones it does."""
        if precision not in self.precisions:
            offered = ", ".join(p.value for p in self.precisions)
            raise PipesimError(f"{precision.value} GEMMs: {framework}'s model code does not train in them (it trains "
                               f"in {offered}); use one of those or drop --framework")

    def zero_collectives(self, zero: ZeroStage) -> ZeroCollectives:
        """How this framework's ZeRO stage ``zero`` communicates (the layout's default but for ZeRO-2)."""
        return self.zero2_collectives if zero is ZeroStage.GRADIENTS else ZeroCollectives.BUCKETED


# Megatron-LM overlaps its interleaved schedule's sends by default (--overlap-p2p-communication since 4eeff55,
# October 2023, "Make overlap_p2p_comm the default": --no-overlap-p2p-communication turns it off) and no other
# schedule's (validate_args sets overlap_p2p_comm False without a virtual pipeline); its combined 1F1B
# (interleaved-overlap) is the interleaved schedule too.
MEGATRON_OVERLAPPED_P2P = ("interleaved", "interleaved-overlap")
# torch.distributed.pipelining runs its multi-stage schedules, and any order pipesim exports, through
# _PipelineScheduleRuntime, whose _step_microbatches batches each send and waits for the sends only at the step's
# end, each receive posted ahead and waited for just before the compute that reads it; its single-stage
# Schedule1F1B and ScheduleGPipe wait for every batch of sends and receives where they are issued.
TORCH_RUNTIME_SCHEDULES = ("interleaved", "interleaved-overlap", "looped-bfs", "zb-h1", "zb-h2", "zb-v", "zb-auto",
                           "dualpipe-v")

_MEGATRON_CORE_KNOBS = FrameworkKnobs(
    ElementwiseKernels.FUSED, LossKernel.MEGATRON, GradAccumulation.FUSED, overlap_tp_dgrad=True,
    column_input=ColumnInput.REGATHER, selective=Recompute.SELECTIVE, zero2_collectives=ZeroCollectives.BUCKETED,
    dp_overlap_switches=True, overlapped_p2p_schedules=MEGATRON_OVERLAPPED_P2P, unfused_attention_repeats_kv=True)

KNOBS: dict[Framework, FrameworkKnobs] = {
    Framework.MEGATRON: _MEGATRON_CORE_KNOBS,
    # Megatron-Core underneath, with what NeMo's recipes set on top of its defaults
    Framework.NEMO: replace(_MEGATRON_CORE_KNOBS, loss=LossKernel.MEGATRON_FUSED, grad_reduce=GradReduce.OVERLAPPED,
                            distributed_optimizer=True, fp8_params=Fp8Params.BOTH),
    Framework.TORCHTITAN: FrameworkKnobs(
        ElementwiseKernels.EAGER, LossKernel.PYTORCH, GradAccumulation.AUTOGRAD, overlap_tp_dgrad=False,
        column_input=ColumnInput.SAVED, selective=Recompute.PER_OP, zero2_collectives=ZeroCollectives.PER_LAYER,
        zero_stages=(ZeroStage.NONE, ZeroStage.GRADIENTS, ZeroStage.PARAMETERS), tp_shards_sequence=True,
        mlp_up=MlpUp.SPLIT, stage_split=SplitPolicy.EFFECTIVE_LAYERS,
        recomputes=(Recompute.NONE, Recompute.PER_OP, Recompute.FULL), distributed_saved_activations=False,
        overlapped_p2p_schedules=TORCH_RUNTIME_SCHEDULES, cp_kernels=CpKernels.PYTORCH, cp_comm=CpComm.ALL_GATHER,
        torch_pipelining=True, fp8_linears=Fp8Linears.TORCHAO, fsdp2=True, grad_reduce=GradReduce.DDP_HOOKS,
        grad_buckets=GradBuckets.PER_MODULE),
    Framework.NANOTRON: FrameworkKnobs(
        ElementwiseKernels.EAGER_ACTIVATION, LossKernel.NANOTRON, GradAccumulation.AUTOGRAD, overlap_tp_dgrad=False,
        column_input=ColumnInput.REGATHER_BLOCKING, selective=Recompute.SELECTIVE,
        zero2_collectives=ZeroCollectives.BUCKETED, zero_stages=(ZeroStage.NONE, ZeroStage.OPTIMIZER),
        p2p_calls=P2pCalls.SEQUENTIAL, schedules=("1f1b", "gpipe"), stage_split=SplitPolicy.COST_THRESHOLDS,
        grad_reduce=GradReduce.DDP_HOOKS, grad_buckets=GradBuckets.TORCH_DDP, precisions=(Precision.BF16,),
        recomputes=(Recompute.NONE, Recompute.FULL),
        partial_recompute=False, distributed_saved_activations=False),
    Framework.MEGATRON_DEEPSPEED: FrameworkKnobs(
        ElementwiseKernels.FUSED, LossKernel.MEGATRON, GradAccumulation.AUTOGRAD, overlap_tp_dgrad=False,
        column_input=ColumnInput.REGATHER, selective=Recompute.SELECTIVE, zero2_collectives=ZeroCollectives.BUCKETED,
        p2p_tensor=BoundaryTensor.SPLIT, p2p_calls=P2pCalls.SEQUENTIAL, schedules=("1f1b",),
        stage_split=SplitPolicy.BALANCED_COUNT, precisions=(Precision.BF16, Precision.FP8)),
}

DEFAULT_FRAMEWORK = Framework.MEGATRON
# the frameworks whose model code is Megatron-Core's: its selective recomputation's modules, its launch line
MEGATRON_CORE = (Framework.MEGATRON, Framework.NEMO)


def knobs(framework: Framework | str | None) -> FrameworkKnobs:
    """The knobs of ``framework`` (a name as ``--framework`` takes it; None: Megatron's, pipesim's defaults)."""
    if framework is None:
        return KNOBS[DEFAULT_FRAMEWORK]
    try:
        return KNOBS[Framework(framework)]
    except ValueError:
        names = ", ".join(f.value for f in Framework)
        raise PipesimError(f"framework {framework!r} is not known; use one of {names}") from None


def runs_megatron_core(framework: Framework | str | None) -> bool:
    """Whether ``framework`` (a name as ``--framework`` takes it; None: pipesim's default) trains with Megatron-Core's
    model code, whose selective recomputation takes ``--recompute-modules``."""
    knobs(framework)  # an unknown name is refused by name
    return Framework(framework or DEFAULT_FRAMEWORK.value) in MEGATRON_CORE


def _nanotron_split(model: ModelSpec, stages: int) -> tuple[tuple[int, ...], int]:
    """nanotron's cost balance of ``model`` over ``stages`` (:func:`~.stage_split.cost_threshold_split`), with its
    ``LlamaModel.get_block_compute_costs``: a decoder layer 4·heads·d_qkv·h + 3·ffn·h (d_qkv = h / heads, key and
    value heads counted as many as the queries), the LM head vocab·h; 2·ffn·h for an MLP without a gate, by the
    same count of its matrices."""
    layer_cost = 4 * model.hidden * model.hidden + (3 if model.gated else 2) * model.ffn_hidden * model.hidden
    return cost_threshold_split(model.layers, stages, layer_cost, model.vocab * model.hidden)
