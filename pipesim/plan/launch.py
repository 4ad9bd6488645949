"""Launch lines for a configuration: pipesim's own executor under torchrun, and Megatron-LM's flags.

The executor line reproduces the parallel layout and the schedule exactly (tp, cp, dp, pp, chunks, microbatches,
sequence parallelism as ``--tp-mode reduce-scatter``) on the executor's GPT block at the model's width, depth,
heads, sequence and micro-batch size; what the executor does not implement is listed in
:func:`executor_gaps` rather than silently dropped.

Megatron-LM flags follow its ``megatron/training/arguments.py``: ``--tensor-model-parallel-size``,
``--pipeline-model-parallel-size``, ``--num-layers-per-virtual-pipeline-stage`` (interleaved 1F1B; with lighter
first and last stages ``--num-virtual-stages-per-pipeline-rank`` and ``--account-for-embedding-in-pipeline-split
--account-for-loss-in-pipeline-split``; where pp does not divide the microbatches,
``--microbatch-group-size-per-virtual-pipeline-stage``),
``--context-parallel-size``, ``--sequence-parallel``, ``--use-distributed-optimizer`` (ZeRO-1),
``--recompute-granularity`` (with ``--recompute-method uniform --recompute-num-layers 1`` for full
recomputation, Korthikanti et al. 2023 §5), ``--fp8-format hybrid`` (Transformer Engine). Megatron-LM's pipeline
schedules are 1F1B and interleaved 1F1B only and its data parallelism shards at most the optimizer state, so
other schedules and ZeRO-2/3 have no equivalent line.
"""

from __future__ import annotations

import shlex

from pipesim.analytic.layout import (
    CpComm,
    CpKernels,
    Fp8Params,
    LossKernel,
    MoeDispatcher,
    OptimizerBytes,
    Precision,
    Recompute,
    ZeroCollectives,
    ZeroStage,
    precision_aware_moments,
)
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.pipeline_layout import FLAG as LAYOUT_FLAG
from pipesim.analytic.pipeline_layout import layout_string
from pipesim.analytic.stage_split import pipeline_split
from pipesim.plan.space import Candidate
from pipesim.program.limits import interleaved_microbatch_group

MEGATRON_SCHEDULES = frozenset({"1f1b", "interleaved", "interleaved-overlap"})


def executor_argv(candidate: Candidate, model: ModelSpec, gpus_per_node: int, *, steps: int = 3,
                  cp_comm: CpComm = CpComm.P2P) -> list[str]:
    """``torchrun … -m executors.run …`` as an argument list (multi-node: fill in the rendezvous host);
    ``cp_comm``: how its context-parallel ranks exchange keys and values."""
    c = candidate
    gpus = c.gpus
    if gpus <= gpus_per_node:
        launcher = ["torchrun", "--nproc-per-node", str(gpus)]
    else:
        launcher = ["torchrun", "--nnodes", str(gpus // gpus_per_node), "--nproc-per-node", str(gpus_per_node),
                    "--rdzv-backend", "c10d", "--rdzv-endpoint", "HOST:29500"]
    args = [c.schedule, "--tp", str(c.tp), "--cp", str(c.cp), "--dp", str(c.dp), "--pp", str(c.pp),
            "--mb", str(c.microbatches),
            "--chunks", str(c.chunks), "--layers", str(model.layers), "--hidden", str(model.hidden),
            "--heads", str(model.heads), "--seq-len", str(model.seq_len), "--micro-batch-size",
            str(c.micro_batch_size), "--vocab", str(model.vocab), "--optimizer", "adamw", "--steps", str(steps)]
    if c.sequence_parallel:
        args += ["--tp-mode", "reduce-scatter"]
    if c.cp > 1 and cp_comm is not CpComm.P2P:
        args += ["--cp-comm-type", cp_comm.value]
    if c.stage_layers is not None:
        args += ["--stage-layers", ",".join(map(str, c.stage_layers))]
    return [*launcher, "-m", "executors.run", *args]


def executor_gaps(candidate: Candidate, model: ModelSpec,
                  cp_kernels: CpKernels = CpKernels.TRANSFORMER_ENGINE, stages_after_head: int = 0) -> list[str]:
    """What of this configuration the executor's model does not reproduce (``stages_after_head``: the plan's
    layout put the loss on stages after the LM head's, :attr:`~pipesim.analytic.layout.Layout.stages_after_head`)."""
    gaps = []
    if stages_after_head:
        gaps.append(f"the LM head and the loss together on the last stage, not the head {stages_after_head} "
                    "stage(s) before the loss")
    if candidate.cp > 1 and cp_kernels is CpKernels.PYTORCH:
        gaps.append("its own context-parallel attention, not PyTorch's context_parallel")
    if model.gated or model.kv_heads != model.heads or model.rms_norm:
        gaps.append("GPT block (MHA, GELU MLP, LayerNorm) instead of the model's GQA/SwiGLU/RMSNorm")
    if model.local_attention_layers:
        gaps.append(f"full causal attention instead of the model's {model.local_attention_kind} of "
                    f"{model.local_attention_span}")
    if model.attention_head_dim or model.qk_norm:
        own = (f"heads of {model.attention_head_dim}" if model.attention_head_dim else "its heads") + (
            " with QK-norm" if model.qk_norm else "")
        gaps.append(f"heads of hidden / heads = {model.hidden // model.heads} without QK-norm instead of the "
                    f"model's {own}")
    if candidate.recompute is not Recompute.NONE:
        gaps.append(f"no {candidate.recompute.value} recomputation")
    if candidate.zero is not ZeroStage.NONE:
        gaps.append(f"no ZeRO-{int(candidate.zero)} (optimizer state, gradients and weights replicated)")
    if candidate.precision.quantized:
        gaps.append(f"no {candidate.precision.value.upper()} GEMMs")
    if model.is_moe:
        gaps.append("dense MLP instead of the model's experts (no expert parallelism)")
    if model.mtp_layers:
        gaps.append("no multi-token-prediction module")
    return gaps


# Megatron-LM's losses and the flags that choose them (its cross-entropy, unfused unless fused)
MEGATRON_LOSS_FLAGS = {LossKernel.MEGATRON: [], LossKernel.MEGATRON_FUSED: ["--cross-entropy-loss-fusion"],
                       LossKernel.TE: ["--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te"]}


MEGATRON_BYTES = OptimizerBytes()  # Megatron-LM's default account: 2 + 4 + 12


def megatron_optimizer_flags(param_bytes: OptimizerBytes, zero: ZeroStage) -> list[str] | str:
    """Megatron-LM's flags for a ``--param-bytes`` account, or why it has none: 18 is its default, 16
    ``--grad-reduce-in-bf16``, and any other the precision-aware optimizer's types (with the distributed optimizer),
    an FP32 master kept as the 16-bit remainder beside BF16 weights
    (:func:`~pipesim.analytic.layout.precision_aware_moments`, the inverse of the account those flags give)."""
    if param_bytes == MEGATRON_BYTES:
        return []
    if param_bytes.weights != 2.0 or param_bytes.grads not in (2.0, 4.0):
        return f"Megatron-LM keeps BF16 weights and FP32 or BF16 gradients, not --param-bytes {param_bytes.text}"
    grads = [] if param_bytes.grads == 4.0 else ["--grad-reduce-in-bf16"]
    if param_bytes.optimizer == 12.0:
        return grads
    moments = precision_aware_moments(param_bytes)
    if moments is None:
        return (f"Megatron-LM's precision-aware optimizer keeps no {param_bytes.optimizer:g} bytes of optimizer state "
                "a parameter (a 2-byte master remainder and two moments of 4, 2 or 1)")
    if zero is not ZeroStage.OPTIMIZER:
        return "Megatron-LM's precision-aware optimizer runs with its distributed optimizer only"
    m, v = moments
    return (["--use-precision-aware-optimizer"] + (["--main-grads-dtype", "bf16"] if grads else [])
            + (["--exp-avg-dtype", m] if m != "fp32" else []) + (["--exp-avg-sq-dtype", v] if v != "fp32" else []))


def megatron_fsdp_flags(param_bytes: OptimizerBytes, zero: ZeroStage) -> list[str] | str:
    """Megatron-FSDP's flags for a ZeRO-2 or ZeRO-3 candidate (``--data-parallel-sharding-strategy`` optim_grads or
    optim_grads_params) and its ``--param-bytes`` account, or why it has none: it keeps BF16 weights, an FP32 master
    and moments, and gradients in the parameters' type unless told FP32 (``--megatron-fsdp-main-grads-dtype``)."""
    if param_bytes.weights != 2.0 or param_bytes.optimizer != 12.0 or param_bytes.grads not in (2.0, 4.0):
        return (f"Megatron-FSDP keeps BF16 weights, an FP32 master and moments and BF16 or FP32 gradients, not "
                f"--param-bytes {param_bytes.text}")
    strategy = "optim_grads" if zero is ZeroStage.GRADIENTS else "optim_grads_params"
    return (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy]
            + (["--megatron-fsdp-main-grads-dtype", "fp32"] if param_bytes.grads == 4.0 else []))


def megatron_gap(candidate: Candidate, loss: LossKernel = LossKernel.MEGATRON, loss_input_copy: bool = False,
                 shard_group: int | None = None, fp8_dispatch: bool = False,
                 fused_attention_repeats_kv: bool = False,
                 param_bytes: OptimizerBytes = MEGATRON_BYTES,
                 zero_collectives: ZeroCollectives = ZeroCollectives.BUCKETED,
                 overlap_dp_sync: bool = True) -> str | None:
    """Why Megatron-LM cannot run this configuration with this loss (and the layout's ZeRO shard group and how it
    reduces, its FP8 MoE dispatch, grouped K and V repeated before a fused attention, its bytes a parameter, the
    plan's data-parallel overlap), or None if it can. ZeRO-2 and ZeRO-3 run as Megatron-FSDP
    (:func:`megatron_fsdp_flags`)."""
    fsdp = candidate.zero > ZeroStage.OPTIMIZER
    optimizer = (megatron_fsdp_flags if fsdp else megatron_optimizer_flags)(param_bytes, candidate.zero)
    if isinstance(optimizer, str):
        return optimizer
    if fsdp and candidate.pp > 1:
        return ("pipesim's ZeRO-3 under pipelining is torchtitan's FSDP (each stage's weights gathered once a step); "
                "Megatron-FSDP's with a pipeline is not modelled")
    if candidate.zero is ZeroStage.GRADIENTS and not overlap_dp_sync:
        return ("Megatron-FSDP's optim_grads reduces every microbatch's gradients beside its backward; plan "
                "without --blocking-dp-sync")
    if fused_attention_repeats_kv:
        return ("Megatron-Core's fused attention reads grouped K and V as they are: it repeats them only on its "
                "unfused path (--attention unfused)")
    if candidate.schedule == "interleaved-overlap" and candidate.ep == 1:
        return ("Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm) overlaps expert-parallel "
                "all-to-alls: it needs --expert-model-parallel-size > 1")
    if fp8_dispatch and candidate.ep > 1:
        return "Megatron-Core's DeepEP dispatch is BF16 (its fused_a2a sends no FP8 tokens); FP8 dispatch is DeepSeek's"
    if loss not in MEGATRON_LOSS_FLAGS:
        return f"Megatron-LM has no {loss.value} cross-entropy; its losses are megatron, megatron-fused and te"
    if loss_input_copy:
        return "Megatron-LM's loss takes its logits as they are: it makes no copy of them"
    if candidate.pp > 1 and candidate.schedule not in MEGATRON_SCHEDULES:
        return (f"Megatron-LM has no {candidate.schedule} schedule; its pipeline schedules are 1F1B, interleaved "
                "1F1B and, with experts, combined 1F1B (interleaved-overlap)")
    if shard_group is not None and not fsdp and zero_collectives is not ZeroCollectives.HIERARCHICAL:
        return (f"Megatron-LM has no ZeRO-1 within groups of {shard_group} that all-reduces the gradients "
                "over every rank: its --num-distributed-optimizer-instances reduce-scatters within each instance "
                "(plan with --zero-collectives hierarchical for that)")
    return None


def megatron_model_gap(model: ModelSpec) -> str | None:
    """Why Megatron-LM's flags cannot build ``model``, or None: it has no chunked attention (Llama 4's runs in
    NeMo's ``Llama4Config``, whose ``chunkify`` Megatron-LM's arguments do not reach)."""
    if model.attention_chunk and model.local_attention_layers:
        return (f"Megatron-LM has no chunked attention (the model's chunks of {model.attention_chunk}; NeMo's "
                "Llama4Config runs them); at a --seq-len within one chunk every layer attends to all of it")
    return None


def megatron_split_flags(stage_layers: tuple[int, ...], layers: int, pp: int, mtp_layers: int = 0) -> list[str]:
    """Megatron-LM's flags for an uneven split of ``layers`` over the model slices, placed on the ``pp`` ranks in a
    loop: one layer fewer on the first and last slice (:func:`~pipesim.analytic.stage_split.pipeline_split`: the
    embedding and the loss counted as a layer each); the first and last rank's layers set by count over all their
    chunks where every rank's chunks hold alike and the ranks between them even (a split chosen against the LM
    head's rank in whole chunks: :func:`~pipesim.analytic.stage_split.head_balanced_split`); else every stage
    named, ``--pipeline-model-parallel-layout`` (with ``mtp_layers`` multi-token-prediction layers on the last),
    which takes the place of the virtual-stage flags."""
    if stage_layers == pipeline_split(layers, len(stage_layers)):
        return ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    by_rank = [stage_layers[rank::pp] for rank in range(pp)]
    if all(len(set(chunks)) == 1 for chunks in by_rank) and len({sum(chunks) for chunks in by_rank[1:-1]}) <= 1:
        return ["--decoder-first-pipeline-num-layers", str(sum(by_rank[0])),
                "--decoder-last-pipeline-num-layers", str(sum(by_rank[-1]))]
    return [LAYOUT_FLAG, layout_string(stage_layers, mtp_layers)]


def megatron_argv(candidate: Candidate, model: ModelSpec, global_batch: int,
                  overlap_p2p: bool = True, overlap_dp_sync: bool = False,
                  fp8_params: Fp8Params = Fp8Params.OFF, cp_comm: CpComm = CpComm.P2P,
                  loss: LossKernel = LossKernel.MEGATRON,
                  dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL,
                  param_bytes: OptimizerBytes = MEGATRON_BYTES, shard_group: int | None = None,
                  zero_collectives: ZeroCollectives = ZeroCollectives.BUCKETED) -> list[str] | None:
    """Megatron-LM's ``pretrain_gpt.py`` flags for this configuration, or None (see :func:`megatron_gap`);
    ``overlap_p2p``: the plan overlapped the interleaved schedule's sends; ``overlap_dp_sync``: its gradient
    reduce and (with the distributed optimizer) parameter gather; ``fp8_params``: the FP8 parameters the
    candidate keeps (``--fp8-param-gather``); ``loss``: the cross-entropy the plan ran; ``param_bytes``: its
    account of a parameter's bytes (:func:`megatron_optimizer_flags`); ``shard_group``: the ZeRO-1 shard group
    of a hierarchical reduce (``zero_collectives``), Megatron-LM's dp·cp/group optimizer instances."""
    c = candidate
    if megatron_gap(c, loss, shard_group=shard_group, param_bytes=param_bytes,
                    zero_collectives=zero_collectives, overlap_dp_sync=overlap_dp_sync) is not None:
        return None
    if megatron_model_gap(model) is not None:
        return None
    args = ["--tensor-model-parallel-size", str(c.tp), "--pipeline-model-parallel-size", str(c.pp)]
    if c.cp > 1:
        args += ["--context-parallel-size", str(c.cp)]
        if cp_comm is not CpComm.P2P:
            args += ["--cp-comm-type", cp_comm.value]
    if c.schedule == "interleaved-overlap":  # Megatron-Core's combined 1F1B: interleaved, paired
        args.append("--overlap-moe-expert-parallel-comm")
    split_flags = ([] if c.stage_layers is None
                   else megatron_split_flags(c.stage_layers, model.layers, c.pp, model.mtp_layers))
    if c.pp > 1 and c.schedule in ("interleaved", "interleaved-overlap"):
        if c.stage_layers is None:
            args += ["--num-layers-per-virtual-pipeline-stage", str(model.layers // (c.pp * c.chunks))]
        elif LAYOUT_FLAG not in split_flags:  # the layers per stage differ: Megatron counts virtual stages instead
            args += ["--num-virtual-stages-per-pipeline-rank", str(c.chunks)]
        group = interleaved_microbatch_group(c.pp, c.microbatches)
        if group != c.pp:  # pp does not divide m: Megatron-Core's larger groups, which pipesim simulated
            args += ["--microbatch-group-size-per-virtual-pipeline-stage", str(group)]
        if not overlap_p2p:  # Megatron-LM overlaps them unasked (since 4eeff55, October 2023)
            args.append("--no-overlap-p2p-communication")
    args += split_flags
    args += ["--micro-batch-size", str(c.micro_batch_size), "--global-batch-size", str(global_batch),
             "--num-layers", str(model.layers), "--hidden-size", str(model.hidden),
             "--num-attention-heads", str(model.heads), "--ffn-hidden-size", str(model.ffn_hidden),
             "--seq-length", str(model.seq_len), "--max-position-embeddings", str(model.seq_len)]
    if model.kv_heads != model.heads:
        args += ["--group-query-attention", "--num-query-groups", str(model.kv_heads)]
    if model.attention_head_dim:
        args += ["--kv-channels", str(model.attention_head_dim)]
    if model.qk_norm:
        args.append("--qk-layernorm")
    if model.sliding_window:  # FlashAttention's (left, right): the keys before the query, none after
        args += ["--window-size", f"{model.sliding_window - 1},0"]
        if model.global_attention_every:
            args += ["--window-attn-skip-freq", str(model.global_attention_every)]
    if model.gated:
        args.append("--swiglu")
    if model.rms_norm:
        args += ["--normalization", "RMSNorm"]
    if not model.learned_positions:
        args += ["--position-embedding-type", "rope"]
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if not model.bias:
        args.append("--disable-bias-linear")
    if not model.dropout:  # Megatron-LM's dropout is 0.1 unless set
        args += ["--hidden-dropout", "0", "--attention-dropout", "0"]
    if model.is_moe:
        args += ["--num-experts", str(model.experts), "--moe-router-topk", str(model.experts_per_token),
                 "--moe-ffn-hidden-size", str(model.expert_ffn_hidden), "--expert-model-parallel-size", str(c.ep),
                 *(["--expert-tensor-parallel-size", str(c.expert_tp)] if c.expert_tp is not None else []),
                 "--moe-grouped-gemm", "--moe-token-dispatcher-type",
                 "flex" if dispatcher is MoeDispatcher.DEEPEP else "alltoall"]
        if dispatcher is MoeDispatcher.DEEPEP:
            args += ["--moe-flex-dispatcher-backend", "deepep"]
        if model.expert_groups:
            args += ["--moe-router-num-groups", str(model.expert_groups), "--moe-router-group-topk",
                     str(model.expert_groups_per_token)]
        if model.shared_experts:
            args += ["--moe-shared-expert-intermediate-size",
                     str(model.shared_experts * model.shared_expert_ffn_hidden)]
        if model.first_dense_layers or model.moe_layer_frequency > 1:
            pattern = ",".join("1" if k is LayerKind.MOE else "0" for k in model.layer_kinds())
            args += ["--moe-layer-freq", f"[{pattern}]"]
    if model.mtp_layers:
        args += ["--mtp-num-layers", str(model.mtp_layers)]
    if model.mla:
        args += ["--multi-latent-attention", "--kv-lora-rank", str(model.kv_lora_rank), "--qk-head-dim",
                 str(model.qk_nope_head_dim), "--qk-pos-emb-head-dim", str(model.qk_rope_head_dim),
                 "--v-head-dim", str(model.v_head_dim)]
        if model.q_lora_rank:
            args += ["--q-lora-rank", str(model.q_lora_rank)]
    args += MEGATRON_LOSS_FLAGS[loss]
    if c.sequence_parallel:
        args.append("--sequence-parallel")
    if c.zero > ZeroStage.OPTIMIZER:
        args += megatron_fsdp_flags(param_bytes, c.zero)
    else:
        if c.zero is ZeroStage.OPTIMIZER:
            args.append("--use-distributed-optimizer")
        args += megatron_optimizer_flags(param_bytes, c.zero)
    if overlap_dp_sync:
        args.append("--overlap-grad-reduce")
        if c.zero is not ZeroStage.NONE:
            args.append("--overlap-param-gather")
    if shard_group is not None:  # the distributed optimizer's instances, or Megatron-FSDP's HSDP
        args += ["--num-distributed-optimizer-instances", str(c.dp * c.cp // shard_group)]
    if c.recompute is Recompute.SELECTIVE:
        args += ["--recompute-granularity", "selective"]
    elif c.recompute is Recompute.FULL:
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    args.append("--bf16")
    if c.precision is Precision.FP8:
        args += ["--fp8-format", "hybrid"]
        if fp8_params is not Fp8Params.OFF:
            args.append("--fp8-param-gather")
    elif c.precision is Precision.FP4:
        args += ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"]  # TransformerConfig.fp4: NVFP4BlockScaling
    return args


def megatron_line(candidate: Candidate, model: ModelSpec, global_batch: int, overlap_p2p: bool = True,
                  overlap_dp_sync: bool = False, fp8_params: Fp8Params = Fp8Params.OFF,
                  cp_comm: CpComm = CpComm.P2P, loss: LossKernel = LossKernel.MEGATRON,
                  loss_input_copy: bool = False, shard_group: int | None = None,
                  dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL, fp8_dispatch: bool = False,
                  fused_attention_repeats_kv: bool = False, param_bytes: OptimizerBytes = MEGATRON_BYTES,
                  zero_collectives: ZeroCollectives = ZeroCollectives.BUCKETED) -> str:
    gap = megatron_gap(candidate, loss, loss_input_copy, shard_group, fp8_dispatch,
                       fused_attention_repeats_kv, param_bytes, zero_collectives, overlap_dp_sync)
    gap = gap or megatron_model_gap(model)
    if gap is not None:
        return f"({gap})"
    argv = megatron_argv(candidate, model, global_batch, overlap_p2p, overlap_dp_sync, fp8_params, cp_comm, loss,
                         dispatcher, param_bytes, shard_group, zero_collectives)
    return "pretrain_gpt.py " + shlex.join(argv)


def executor_line(candidate: Candidate, model: ModelSpec, gpus_per_node: int,
                  cp_comm: CpComm = CpComm.P2P) -> str:
    return shlex.join(executor_argv(candidate, model, gpus_per_node, cp_comm=cp_comm))
