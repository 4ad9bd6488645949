"""The options of a model-based simulation, apart from the model: :class:`ModelOptions` holds every option that
only means something with a model; ``None`` in a field means "the default" (listed on each field), so that giving
an option without a model can be refused by name (:func:`check_no_model_options`).

Kept out of :mod:`pipesim.api.model_setup`, which loads the analytic model (chips, models, kernels, the step
report), so that ``pipesim simulate`` on unit costs parses its flags without importing any of it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields, replace

import numpy as np

from pipesim.analytic.stage_split import StageSplitRequest
from pipesim.errors import PipesimError

__all__ = ["ModelOptions", "check_no_model_options"]



# Options renamed since a release a notebook may have been written against: old keyword → new
RENAMED_OPTIONS: dict[str, str] = {"optimizer_shard_group": "shard_group"}  # hybrid sharding took ZeRO-2/3 too

# The least value of each whole-number option a library call may give, where it is not 1 (the command line's flags
# take the same: --first-stage-layers and --last-stage-layers ≥ 0, --zero 0–3); and the most, where there is one
_INT_RANGES = {"first_stage_layers": (0, None), "last_stage_layers": (0, None), "stages_after_head": (0, None),
               "zero": (0, 3)}


def whole_number(caller: str, name: str, value: object, low: int = 1, high: int | None = None) -> int:
    """``value`` as an ``int`` (numpy's integers too), or a one-line error naming ``caller``'s keyword ``name``
    where it is not a whole number from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise PipesimError(f"{caller}(): {name}={value!r} must be a whole number")
    if value < low or (high is not None and value > high):
        span = f"≥ {low}" if high is None else f"from {low} to {high}"
        raise PipesimError(f"{caller}(): {name}={value!r} must be {span}")
    return int(value)


def _checked_kind(caller: str, name: str, value: object, annotation: str) -> object:
    """A library call's option as Python's own kind (numpy's integers and booleans as ``int`` and ``bool``), or,
    of the wrong kind, refused in one line naming it, as the command line's parser refuses a flag's: a whole
    number in its range, a finite number, True or False (options the engine parses from words, and lists, are
    checked where they are parsed)."""
    if value is None:
        return value
    if annotation == "int | None":
        return whole_number(caller, name, value, *_INT_RANGES.get(name, (1, None)))
    if annotation == "float | None":
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise PipesimError(f"{caller}(): {name}={value!r} must be a finite number")
        return float(value)
    if annotation == "bool | None":
        if not isinstance(value, (bool, np.bool_)):
            raise PipesimError(f"{caller}(): {name}={value!r} must be True or False")
        return bool(value)
    return value


@dataclass(frozen=True)
class ModelOptions:
    """Layout and fidelity options of a model-based simulation (each the ``simulate`` flag of the same name).

    Attributes:
        framework: ``"megatron"`` (default), ``"nemo"``, ``"torchtitan"``, ``"nanotron"`` or
            ``"megatron-deepspeed"``: the training code's defaults for ``elementwise``, ``loss``,
            ``grad_accumulation``, ``overlap_tp_dgrad``, ``column_input``, ``overlap_grad_reduce``,
            ``overlap_param_gather``, ``distributed_optimizer`` (NeMo's recipes shard the optimizer state
            unasked), what ``recompute="selective"`` keeps and how ``zero=2`` communicates
            (:mod:`pipesim.analytic.frameworks`); an option given here wins over the framework's default.
        tp: tensor-parallel degree (default 1).
        dp: data-parallel degree (default 1).
        gpus: the GPUs of the run, as a recipe states them: ``dp`` becomes ``gpus / (tp·cp·pp)`` (``dp`` given too
            must agree).
        recompute: ``"none"`` (default), ``"selective"``, ``"full"`` or ``"per-op"`` (torchtitan's per-op
            selective checkpointing) activation recomputation.
        recompute_layers: with ``recompute="full"``, only the first N layers of each model chunk are recomputed
            (Megatron's ``--recompute-method block --recompute-num-layers N``; default every layer).
        recompute_modules: with ``recompute="selective"`` (Megatron's), what it re-runs: ``"core_attn"`` (the
            default), ``"layernorm"``, ``"moe_act"``, ``"mla_up_proj"`` (Megatron-Core's ``--recompute-modules``; its
            ``mlp``, ``moe`` and ``shared_experts`` are not modelled and are refused by name).
        distribute_saved_activations: with ``recompute="full"``, ``tp > 1`` and no sequence parallelism, each
            layer's stored input split over the tp ranks and all-gathered before its recomputed forward
            (Megatron-LM's ``--distribute-saved-activations``).
        sequence_parallel: shard norms/dropout along the sequence (needs ``tp > 1``; always on with
            ``framework="torchtitan"`` at ``tp > 1``, whose TP plan shards every norm).
        distributed_optimizer: shard optimizer state over dp (ZeRO-1).
        attention: ``"fused"`` (FlashAttention-2, default), ``"triton"`` (FlashAttention in Triton, slower),
            ``"flash1"`` (FlashAttention v1, slower by the sequence and head size) or ``"unfused"``.
        repeat_kv: grouped-query attention's keys and values copied out to every query head before the attention
            call (torchtitan's Llama until January 2026, Hugging Face transformers' eager and SDPA paths): the copy
            each way, the kernel saving the repeated tensors, context parallelism exchanging them.
        elementwise: ``"fused"`` (fused norm, RoPE and activation kernels, default), ``"eager"`` (one PyTorch
            kernel per op, as reference model code runs without torch.compile) or ``"eager-fused-norm"`` (eager
            ops around a fused norm kernel, as Aleph Alpha's scaling framework with its RMS kernel).
        loss: ``"megatron"`` (vocabulary-parallel cross-entropy in place, default), ``"pytorch"``
            (F.cross_entropy on FP32 logits), ``"gathered"`` (the logits all-gathered over tp first),
            ``"nanotron"``, ``"fused"`` (one fused kernel a pass on the FP32 logits, flash-attn's Triton
            cross-entropy), ``"compiled"`` (PyTorch's loss under torch.compile, the FP32 cast inside),
            ``"megatron-fused"`` (Megatron-Core's ``--cross-entropy-loss-fusion``) or ``"te"`` (its
            ``--cross-entropy-fusion-impl te``, Transformer Engine's kernel).
        z_loss: the z-loss on the same logits (eager ops beside an eager loss; refused with Megatron's).
        loss_input_copy: the logits copied before the loss (``logits[..., :-1, :].contiguous()``), in the dtype
            the loss takes (FP32; BF16 into a compiled loss).
        grad_accumulation: ``"fused"`` (the weight-gradient GEMM accumulates, Megatron-LM's default) or
            ``"autograd"`` (PyTorch's ``.grad +=`` after every microbatch but the first).
        halve_causal_attention: count half of QKᵀ and ·V FLOPs.
        achievable_fraction: one fraction of peak FLOP/s for every kernel (default: the chip's per-kernel model).
        gpu_speed_spread: the relative spread of the GPUs' speeds, of which a synchronous step waits for the
            slowest (default: the chip's; 0: every GPU alike; :mod:`pipesim.analytic.slowest_gpu`).
        inter_node_gbps: each GPU's share of its node's network in Gb/s (the node's NICs together over its GPUs),
            where the cluster's differs from the chip preset's (default: the chip's).
        seq_len: override the model's sequence length.
        micro_batch_size: sequences per microbatch (default: the model's).
        param_bytes: ``"18"`` (default), ``"16"`` or ``"W+G+O"`` bytes per parameter for weights, grads and Adam
            (``"2+4+6"``: a precision-aware optimizer's 16-bit master remainder and BF16 moments).
        first_stage_layers: layers on stage 0, which also holds the embedding (default: an even split).
        last_stage_layers: layers on the last stage, which also holds the LM head and loss.
        stage_layers: layers on every stage, stage 0 first (pp·v counts summing to the model's layers).
        stages_after_head: the stages after the LM head's, holding no layer, only the logits' FP32 cast and the
            loss (1: both on the last stage; 2: the cast on the stage before it), the logits crossing the
            boundaries between: where nanotron's cost balance puts them. Default: the framework's split unasked
            (``framework="nanotron"`` may set it), else 0; with ``stage_layers`` ending in as many zeros.
        decoder_first_pipeline_num_layers: layers on pipeline rank 0 over all its chunks, the other ranks
            splitting the rest evenly (Megatron-LM's flag of that name; a multiple of the chunks per rank).
        decoder_last_pipeline_num_layers: layers on the last pipeline rank over all its chunks.
        account_for_embedding_in_pipeline_split: the embedding counts as a layer in the pipeline split, so the
            first model chunk holds one layer fewer (Megatron-LM's flag of that name).
        account_for_loss_in_pipeline_split: the loss counts as a layer, so the last model chunk holds one fewer.
        num_layers_per_virtual_pipeline_stage: layers per model chunk: the chunks per rank become each rank's
            layers over it (Megatron-LM's flag of that name; ``simulate`` only).
        pipeline_model_parallel_layout: Megatron-Core's layout string (``"Et*3|(tt|)*29,m|L"``): the layers of
            each of the pp·v stages, the multi-token-prediction modules' stage, and the chunks per rank
            (:mod:`pipesim.analytic.pipeline_layout`; ``simulate`` only).
        zero: ZeRO stage 1, 2 or 3 over the dp·cp ranks (default 0: nothing sharded).
        zero_collectives: ``"bucketed"`` (DeepSpeed's ZeRO-2, default), ``"per-layer"`` (with ZeRO-2: PyTorch
            FSDP's SHARD_GRAD_OP, each layer gathers its weights and reduce-scatters its gradients, every
            microbatch), ``"per-tensor"`` (with ZeRO-3: DeepSpeed's 2021 ZeRO-3, a collective per parameter
            tensor, each costing the host an operation per rank), ``"all-reduce-fp32"`` (with ZeRO-1: whole
            gradients all-reduced in FP32, Aleph Alpha's) or ``"hierarchical"`` (with ZeRO-1 and a
            ``shard_group``: reduce-scattered within the group, the shard all-reduced across the groups).
        shard_group: with ZeRO 1–3, the ZeRO state sharded over groups of this many consecutive data-parallel
            ranks, replicated across the groups (hybrid sharding; default: dp·cp). ZeRO-1: the gradients
            all-reduced over every data-parallel rank, the updated weights gathered within each group
            (InternEvo's ``zero1=N``); ZeRO-2/3: gathers and reduce-scatters within the group, each reduced shard
            all-reduced across the replicas (PyTorch FSDP's HYBRID_SHARD, torchtitan's HSDP). With ZeRO-1,
            ``zero_collectives="hierarchical"`` reduces as ZeRO-2/3 do (Megatron-LM's optimizer instances).
        num_distributed_optimizer_instances: Megatron-LM's distributed optimizer in this many instances
            (``--num-distributed-optimizer-instances``): ZeRO-1 with ``shard_group`` dp·cp over it and the
            hierarchical reduce (each instance's ranks reduce-scatter, the shards all-reduce across the
            instances, the weights gather within); 1 (default) is one instance over all dp·cp.
        outer_optimizer_sharding: with ZeRO-3 and a ``shard_group`` (no pipelining), the optimizer state sharded
            across the groups too, over every dp·cp rank: each reduced shard reduce-scattered across the replicas
            instead of all-reduced, the updated weights gathered across them after the step (Megatron-FSDP's hybrid
            FSDP, ``--outer-dp-sharding-strategy optim``).
        cp: context-parallel degree (default 1).
        fp8: FP8 GEMMs at the chip's FP8 peak.
        fp4: NVFP4 GEMMs at the chip's FP4 peak (Blackwell; not with ``fp8``).
        fp8_params: with ``fp8`` and a distributed optimizer, the FP8 linears' weights kept in FP8 alone
            (Megatron-LM's ``--fp8-param-gather``, NeMo's ``fp8_params``), no BF16 copy: ``"both"`` (the data and
            its transpose kept, Transformer Engine 2.x: 2 bytes a parameter), ``"rowwise"`` (the data alone, the
            transpose made in each backward: 1 byte) or ``"off"`` (a BF16 weight and an FP8 copy); None: the
            framework's (off, but ``"both"`` under ``framework="nemo"``, whose FP8 recipes set it).
        fp8_recipe: with ``fp8``, how its casts are scaled: ``"delayed"`` (default, Megatron-LM's: scales from
            earlier steps' amax) or ``"tensorwise"`` (per-tensor current scaling: an amax pass before each cast).
        cp_comm_ctas: with ``cp``, the CTAs (NCCL channels) the context-parallel group's ring sends may use
            (Megatron-Core's per-communicator ``max_ctas``, ``--nccl-communicator-config-path``; NVIDIA's MLPerf
            recipes give that group 1): each hop then moves no faster than that many channels. None: NCCL's
            own choice.
        cp_comm_type: with ``cp``, how the context-parallel ranks exchange keys and values (Megatron-LM's
            ``--cp-comm-type``): ``"p2p"`` (a ring, each block sent beside a step's attention; Megatron's default),
            ``"allgather"`` (the whole K and V gathered before the attention; torchtitan's default) or ``"a2a"``
            (Ulysses: all-to-alls trade the sequence split for a head split) or ``"a2a+p2p"`` (all-to-alls inside
            groups of adjacent cp ranks, a ring between the groups). The framework's default.
        hierarchical_context_parallel_sizes: with ``cp_comm_type="a2a+p2p"``, (the all-to-all groups' size, the
            ring's length), their product ``cp`` (Megatron-LM's ``--hierarchical-context-parallel-sizes``).
        cp_kernels: with ``cp``, the code that runs context-parallel attention: ``"transformer-engine"``
            (Megatron-Core's; default) or ``"pytorch"`` (PyTorch's ``context_parallel``, torchtitan's: an SDPA call
            a step, merged in FP32 by eager ops). The framework's default.
        fp8_linears: whose FP8 linears: ``"transformer-engine"`` (an FP8 weight copy kept through the step, inputs
            saved in FP8; default) or ``"torchao"`` (torchao's ``Float8Linear``: BF16 input and weight saved, cast
            again at each GEMM, no copy kept). The framework's default (torchtitan's is torchao).
        fsdp2: the FSDP is PyTorch's ``fully_shard`` (FSDP2; ``zero`` 2 or 3): each per-layer gather copied out of
            its flat buffer into the parameters on the compute stream. Default: the framework's (torchtitan's).
        fp8_all_gather: with torchao's FP8 linears under FSDP (``zero=3``): the weights all-gathered in FP8, each
            rank casting its shard first, and no GEMM casting a weight (torchao's
            ``enable_fsdp_float8_all_gather``; OLMo-core sets it, torchtitan's default does not).
        async_tp: overlap tensor-parallel collectives with their GEMMs.
        overlap_tp_dgrad: in the backward, each column-parallel linear's input-gradient collective runs beside
            its weight-gradient GEMM (default True, as Megatron-LM and Transformer Engine do; False: every TP
            collective waits, as older Megatron-LM, its forks and PyTorch DTensor's TP do).
        overlap_tp_local_shard: under sequence parallelism, each TP all-gather runs beside the GEMM of the rank's
            own shard, 1/tp of the linear's (nanotron's ``tp_linear_async_communication``; default off).
        column_input: under sequence parallelism, where the column-parallel linears' weight gradients get their
            gathered input: ``"regather"`` (default: all-gathered again beside the input-gradient GEMM, as
            Megatron-LM and Transformer Engine do), ``"regather-blocking"`` (again, waited for: nanotron's
            default) or ``"saved"`` (the forward's gathered input kept, tp times the bytes: PyTorch DTensor's TP,
            torchtitan).
        step_boundary: ``"sync"`` or ``"post-validation"`` (default: post-validation for split-backward
            schedules, sync otherwise).
        steps: back-to-back steps of the post-validation steady state (default 3).
        overlap_p2p: pipeline sends overlap compute (default: the framework's way for the schedule, as
            :meth:`for_schedule` resolves it: Megatron-LM overlaps its interleaved schedule's sends, torchtitan its
            multi-stage schedules'; other orders' sends block).
        p2p_tensor: without sequence parallelism, what each tp rank sends across a pipeline boundary:
            ``"whole"`` (the whole tensor, Megatron-Core's and nanotron's way; default) or ``"split"`` (1/tp of it,
            all-gathered on the receiving node: Megatron-LM 2021–2022's scatter/gather, DeepSpeed's pipeline
            engine). The framework's default.
        p2p_calls: blocking sends: ``"batched"`` (a pass's send and its paired receive in one call, both
            directions at once, as Megatron-LM batches them; default) or ``"sequential"`` (one blocking call after
            the other, as DeepSpeed's pipeline engine runs them: a pass waits out both transfers). The framework's
            default.
        pipeline_buffers: what the pipeline runtime keeps of the tensors crossing stage boundaries, beyond the
            activations: ``"freed"`` (nothing: Megatron's, nanotron's and DeepSpeed's engines; default),
            ``"torch"`` (torch.distributed.pipelining's single-stage schedules: a receive buffer per microbatch
            and each output kept until its backward) or ``"torch-runtime"`` (its multi-stage runtime: those, and
            every send held until the step ends). The framework's way for the schedule, as :meth:`for_schedule`
            resolves it (torchtitan's).
        pipeline_outputs_kept: with torch's buffers, the last stage keeps every microbatch's output until the step
            ends, for ``step()`` to return (PyTorch's schedules before ``return_outputs=False``; torchtitan
            before October 2025).
        mlp_up: a gated MLP's gate and up projections: ``"fused"`` (one GEMM, Megatron-Core's and nanotron's;
            default) or ``"split"`` (two linears, Aleph Alpha's scaling, torchtitan, Hugging Face's Llama: two
            GEMMs, and without sequence parallelism each column-parallel linear's own input-gradient all-reduce).
            The framework's default.
        tp_pp_dp_mapping: rank order tp, cp, pp, dp (Megatron-Core's ``--use-tp-pp-dp-mapping``): pipeline
            neighbours tp·cp ranks apart, data parallelism outermost (default: Megatron's tp, cp, dp, pp).
        overlap_grad_reduce: the data-parallel gradient reduce runs during each stage's last backward (True) or
            after it (False); None: as the framework runs it (after, but for nanotron's DDP hooks and NeMo's
            recipes).
        overlap_param_gather: the distributed optimizer's parameter all-gather runs during the next step's first
            forward (True) or after the optimizer step (False); None: as the framework runs it (after, but for
            NeMo's recipes).
        grad_buckets: how an overlapped gradient reduce buckets a stage's gradients (the bucket the backward fills
            last is reduced after it and gathered first): ``"megatron"`` (Megatron-Core's DDP), ``"torch-ddp"``
            (PyTorch's DistributedDataParallel, nanotron's) or ``"per-module"`` (a unit per module, torchtitan's
            replicate); None: the framework's.
        ep: expert-parallel degree of a mixture-of-experts model, carved out of dp·cp (default 1).
        moe_imbalance: the most-loaded expert-parallel rank's routed tokens over the mean (≥ 1; default 1).
        moe_dispatcher: how tokens reach their experts: ``"alltoall"`` (one NCCL all-to-all each way, a copy per
            routed expert; default) or ``"deepep"`` (DeepEP: a copy per destination node across the network,
            forwarded over NVLink; Megatron-Core's flex dispatcher).
        moe_dispatch_fp8: with DeepEP, the dispatch (and the combine's gradient) in FP8 with a scale per 128
            elements, as DeepSeek-V3 trained.
        moe_shared_expert_overlap: the shared experts run beside the dispatch and combine (Megatron-Core's
            ``--moe-shared-expert-overlap``).
        expert_tp: expert tensor-parallel degree: ``tp`` (the default: the experts split like the dense MLP) or 1,
            MoE parallel folding (each rank routes its own 1/tp of the sequence to whole experts; needs sequence
            parallelism, and ep then divides tp·dp·cp).
    """

    tp: int | None = None
    dp: int | None = None
    gpus: int | None = None
    framework: str | None = None
    recompute: str | None = None
    recompute_layers: int | None = None
    recompute_modules: tuple[str, ...] | None = None
    distribute_saved_activations: bool | None = None
    sequence_parallel: bool | None = None
    distributed_optimizer: bool | None = None
    attention: str | None = None
    repeat_kv: bool | None = None
    elementwise: str | None = None
    loss: str | None = None
    z_loss: bool | None = None
    loss_input_copy: bool | None = None
    grad_accumulation: str | None = None
    halve_causal_attention: bool | None = None
    achievable_fraction: float | None = None
    gpu_speed_spread: float | None = None
    inter_node_gbps: float | None = None
    seq_len: int | None = None
    micro_batch_size: int | None = None
    param_bytes: str | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    stage_layers: tuple[int, ...] | None = None
    stages_after_head: int | None = None
    decoder_first_pipeline_num_layers: int | None = None
    decoder_last_pipeline_num_layers: int | None = None
    account_for_embedding_in_pipeline_split: bool | None = None
    account_for_loss_in_pipeline_split: bool | None = None
    num_layers_per_virtual_pipeline_stage: int | None = None
    pipeline_model_parallel_layout: str | None = None
    zero: int | None = None
    zero_collectives: str | None = None
    shard_group: int | None = None
    num_distributed_optimizer_instances: int | None = None
    outer_optimizer_sharding: bool | None = None
    cp: int | None = None
    cp_comm_ctas: int | None = None
    cp_comm_type: str | None = None
    hierarchical_context_parallel_sizes: tuple[int, int] | None = None
    cp_kernels: str | None = None
    fp8: bool | None = None
    fp4: bool | None = None
    fp8_params: str | None = None
    fp8_recipe: str | None = None
    fp8_linears: str | None = None
    fp8_all_gather: bool | None = None
    fsdp2: bool | None = None
    async_tp: bool | None = None
    overlap_tp_dgrad: bool | None = None
    overlap_tp_local_shard: bool | None = None
    column_input: str | None = None
    step_boundary: str | None = None
    steps: int | None = None
    overlap_p2p: bool | None = None  # (the order of the fields is the order a refusal names them in)
    p2p_tensor: str | None = None
    p2p_calls: str | None = None
    pipeline_buffers: str | None = None
    pipeline_outputs_kept: bool | None = None
    mlp_up: str | None = None
    tp_pp_dp_mapping: bool | None = None
    overlap_grad_reduce: bool | None = None
    overlap_param_gather: bool | None = None
    grad_buckets: str | None = None
    ep: int | None = None
    moe_imbalance: float | None = None
    moe_dispatcher: str | None = None
    moe_dispatch_fp8: bool | None = None
    moe_shared_expert_overlap: bool | None = None
    expert_tp: int | None = None

    @classmethod
    def from_keywords(cls, caller: str, options: dict) -> ModelOptions:
        """The options a library call was given as keywords; a one-line error naming those it does not know."""
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        renamed = [f"{old} is now {RENAMED_OPTIONS[old]}" for old in unknown if old in RENAMED_OPTIONS]
        if renamed:
            raise PipesimError(f"{caller}(): {'; '.join(renamed)} (the same option under its new name): rename it")
        if unknown:
            raise PipesimError(f"{caller}() got unknown option(s) {', '.join(unknown)}; model options are "
                               f"{', '.join(cls.__dataclass_fields__)}")
        return cls(**{name: _checked_kind(caller, name, value, cls.__dataclass_fields__[name].type)
                      for name, value in options.items()})

    def stage_split(self) -> StageSplitRequest:
        """The layer split asked for, per model slice or, with Megatron-LM's flags, per pipeline rank."""
        return StageSplitRequest(
            self.first_stage_layers, self.last_stage_layers,
            tuple(self.stage_layers) if self.stage_layers is not None else None,
            self.decoder_first_pipeline_num_layers, self.decoder_last_pipeline_num_layers,
            bool(self.account_for_embedding_in_pipeline_split), bool(self.account_for_loss_in_pipeline_split))

    def dp_for(self, pp: int) -> int:
        """The data-parallel degree: ``dp``, or from ``gpus`` over ``tp·cp·pp``; a one-line error where the GPUs
        do not divide or disagree with ``dp``."""
        if self.gpus is None:
            return self.dp or 1
        model_parallel = (self.tp or 1) * (self.cp or 1) * pp
        if self.gpus % model_parallel:
            raise PipesimError(f"--gpus {self.gpus} is not a multiple of tp·cp·pp = {self.tp or 1}·{self.cp or 1}·{pp} "
                               f"= {model_parallel}; change --gpus, --tp, --cp or --pp")
        dp = self.gpus // model_parallel
        if self.dp is not None and self.dp != dp:
            raise PipesimError(f"--gpus {self.gpus} over tp·cp·pp = {model_parallel} means dp {dp}, but --dp "
                               f"{self.dp} is given; drop one")
        return dp

    def for_schedule(self, schedule: str, pp: int) -> ModelOptions:
        """These options with the pipeline sends as the framework's engine runs the built-in ``schedule`` on
        ``pp`` ranks, where neither ``overlap_p2p`` nor sequential ``p2p_calls`` (one blocking call after the
        other) was asked: Megatron-LM overlaps its interleaved schedule's sends, torchtitan its multi-stage
        schedules' (:meth:`~pipesim.analytic.frameworks.FrameworkKnobs.overlaps_p2p`); every other order's sends
        block, and without a pipeline there are none (left unset: no note of a flag nobody gave). Likewise
        ``pipeline_buffers``, unasked: what the framework's engine keeps running ``schedule``
        (:meth:`~pipesim.analytic.frameworks.FrameworkKnobs.pipeline_buffers`)."""
        if pp == 1:
            return self
        from pipesim.analytic.frameworks import knobs  # loaded for a model run only, as the analytic model is
        from pipesim.analytic.layout import PipelineBuffers

        own = knobs(self.framework)
        resolved, buffers = self, own.pipeline_buffers(schedule)
        if self.pipeline_buffers is None and buffers is not PipelineBuffers.FREED:  # unset stays Megatron's way
            resolved = replace(resolved, pipeline_buffers=buffers.value)
        if self.overlap_p2p is not None or self.p2p_calls == "sequential":
            return resolved
        return replace(resolved, overlap_p2p=own.overlaps_p2p(schedule))

    def given(self) -> list[str]:
        """Names of the options set (not None), in declaration order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def check_no_model_options(options: ModelOptions, hardware: str | None) -> None:
    """Model-only options without a model are a mistake worth naming."""
    given = options.given() + (["hardware"] if hardware is not None else [])
    if given:
        raise PipesimError(f"{_flag(given[0])} describes a real model; add --model NAME (see 'pipesim models')")
