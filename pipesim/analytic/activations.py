"""Bytes of activations stored per microbatch: one transformer layer, the embedding, the output layer.

Korthikanti et al. 2023, "Reducing Activation Recomputation in Large Transformer Models", §4 and Table 2,
with 2-byte activations and 1-byte dropout masks. Per layer (``a`` heads, ``t`` = tp):

==========================================  ===================================
no recompute, tensor parallel                ``sbh(10 + 24/t + 5as/(ht))``
no recompute, tensor + sequence parallel     ``sbh(34/t + 5as/(ht))``
selective recompute, tensor parallel         ``sbh(10 + 24/t)``
selective recompute, tensor + sequence par.  ``sbh(34/t)``
full recompute                               ``2sbh`` (``2sbh/t`` with sequence parallel)
==========================================  ===================================

The terms, so they generalize (d = bytes per activation element):

- replicated across tp unless sequence parallel (the "10"): the two norm inputs ``2·d·sbh``, the QKV input
  ``d·sbh``, the MLP input ``d·sbh``, two dropout masks ``2·sbh``;
- sharded by tp (the "24"): Q ``d·sbh``, K and V ``2·d·sb·kv_dim`` (GQA stores less, unless they are copied out
  to every query head before the kernel: ``heads/kv_heads`` times that), the output-projection
  input ``d·sbh`` (``h`` here: the queries' width ``heads·head_dim``, which only Qwen3-like heads make other than
  ``h``; with ``qk_norm`` the query and key norms' inputs ``d·sb·(q + kv_dim)`` too), the MLP intermediates
  ``2·d·sb·ffn`` (GeLU input and output) or ``3·d·sb·ffn`` when gated (gate, up, and their product);
- the attention scores ``as²b(2d + 1)`` = ``5as²b``: softmax output, its dropout mask and dropout output;
  ``d·as²b`` without dropout. Gone with selective recompute or a fused (Flash) attention kernel; the
  latter's per-row softmax statistics (``4asb`` bytes) are left out (< 0.2 % of a layer).

Models without dropout (Llama) drop the mask terms. Eager PyTorch modules (``--elementwise eager``) keep more:
FP32 norm inputs, SwiGLU's ``silu(gate)``, the attention output's transposed copy (:func:`_eager_kept`).
Embedding (first stage): the int64 token ids ``8sb`` (Megatron-LM's accounting; not sharded) and the embedding
dropout mask ``sbh``. Output (last stage): Korthikanti §4.3 / Megatron-LM's ``4sbh(1 + V/h)``: final-norm input
and output-layer input ``2·d·sbh``, and FP32 logits for the loss ``4sbV`` (vocabulary-parallel, so ``/t``).

Mixture of experts (a MoE layer; Megatron-Core's token dispatcher): the router's FP32 scores ``4sbE``; the
dispatched tokens ``d·sb·k·h`` that the experts' first GEMMs read, and the experts' outputs ``d·sb·k·h``
that the weighted combine reads in its backward; the routed experts' intermediates as a dense MLP's, of width
``k·f_e``, plus the shared experts' (``n_s·f_s``). The routed terms scale with ``Layout.moe_imbalance``: the
most-loaded rank holds that many times the mean of the tokens. Expert weights are sharded over tp like the
dense MLP's (expert tensor parallelism = tp), the dispatched tokens are not. Latent attention: Q, K and V
at their per-head widths, plus the latents ``c_Q`` and ``c_KV`` (and the shared RoPE key), each stored as its
norm's input and its up-projection's input, replicated over tp (the down-projections are not split).
"""

from __future__ import annotations

from pipesim.analytic.comm import cp_kv_bytes
from pipesim.analytic.kernels import (
    FP32,
    Z_LOSS_BYTES,
    kv_repeat,
    mlp_width,
    recomputed_mlp_width,
    recomputes_moe_block,
    routed_width,
)
from pipesim.analytic.layout import (
    AttentionKernel,
    ColumnInput,
    CpComm,
    CpKernels,
    Layout,
    LossKernel,
    Recompute,
    RecomputeModule,
)
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.errors import PipesimError


def _moe_replicated(model: ModelSpec, layout: Layout, kind: LayerKind) -> float:
    """Per token: the router's FP32 scores and the dispatched tokens in and out of the experts (bytes). The tokens
    in are what the experts' first linear saves of its input, quantized in FP8 or NVFP4 like any linear's
    (:func:`linear_input_element_bytes`: Transformer Engine's grouped linear); those out, which the combine keeps for
    the routing probabilities' gradient, in the model's dtype."""
    if kind is LayerKind.DENSE:
        return 0.0
    per_element = linear_input_element_bytes(model, layout) + model.dtype_bytes
    dispatched = per_element * model.experts_per_token * model.hidden * layout.moe_imbalance
    return 4 * model.experts + dispatched


def _mla_latents(model: ModelSpec) -> float:
    """Per token, under latent attention: c_Q and c_KV as norm input and up-projection input, the RoPE key."""
    if not model.mla:
        return 0.0
    return model.dtype_bytes * (2 * model.q_lora_rank + 2 * model.kv_lora_rank + model.qk_rope_head_dim)


def layer_activation_bytes(model: ModelSpec, layout: Layout, kind: LayerKind = LayerKind.DENSE) -> float:
    """Bytes one transformer layer keeps for its backward, per microbatch, on one tp rank."""
    b, s, h, a, d, t = model.micro_batch, model.seq_len, model.hidden, model.heads, model.dtype_bytes, layout.tp
    sbh = s * b * h
    sp = layout.sequence_parallel
    if layout.recompute is Recompute.FULL:  # the layer's input, split over tp by SP or by being distributed
        return d * sbh / (t if sp or layout.distribute_saved_activations else 1)
    if layout.recompute is Recompute.PER_OP:
        return s * b * per_op_kept_width(model, layout, kind) * d
    mask = 1.0 if model.dropout else 0.0
    lin = linear_input_element_bytes(model, layout)
    modules = layout.recomputed_modules
    # the two norm inputs (four with sandwich norms), then the QKV and MLP inputs (the norms' outputs, saved by
    # the linears that read them, unless the norms are recomputed: Megatron-Core's layernorm module discards them)
    norm_outputs = 0.0 if RecomputeModule.LAYERNORM in modules else 2 * lin * sbh
    # a checkpointed MoE block (the ``moe`` module) keeps its input alone: no router scores, no dispatched tokens
    moe_kept = 0.0 if recomputes_moe_block(layout, kind) else _moe_replicated(model, layout, kind)
    replicated = (model.block_norms * d * sbh + norm_outputs + 2 * mask * sbh
                  + s * b * (moe_kept + _mla_latents(model)))
    # the up projection's output(s), kept by the activation for its backward, and the down projection's input;
    # none of a checkpointed MLP's (``mlp``, ``moe``, ``shared_experts``: its input, kept, is a norm output above)
    per_width = (2 if model.gated else 1) * d + lin
    mlp_mid = per_width * s * b * (mlp_width(model, layout, kind) - recomputed_mlp_width(model, layout, kind))
    if (kind is LayerKind.MOE and RecomputeModule.MOE_ACT in modules
            and not recomputes_moe_block(layout, kind)):  # the routed experts' down-projection input
        mlp_mid -= lin * s * b * routed_width(model, layout)
    # with qk_norm the norms over the query and key heads keep their inputs too
    qk_norm_inputs = d * s * b * (model.q_width + model.k_width) if model.qk_norm else 0.0
    # the attention kernel's inputs, unless latent attention's up projections are recomputed (Megatron-Core's
    # mla_up_proj module discards them once the kernel has read them); K and V as the kernel reads them, repeated
    # to every query head where they are (the copy is what it saves, kv_repeat)
    qkv = 0.0 if model.mla and RecomputeModule.MLA_UP_PROJ in modules else d * (
        model.q_width + (model.k_width + model.v_width) * kv_repeat(model, layout))
    attention = (s * b * qkv + qk_norm_inputs
                 + _attention_output_bytes(model, layout) * s * b * model.attention_out_width)
    sharded = attention + mlp_mid
    scores_kept = not layout.recomputes_attention_core and layout.attention is AttentionKernel.UNFUSED
    # softmax output (d), and with dropout its mask (1) and output (d): 5as²b for d = 2
    scores = (d + mask * (1 + d)) * a * s * s * b if scores_kept else 0.0
    eager_replicated, eager_sharded = _eager_kept(model, layout, kind)
    return ((replicated + s * b * eager_replicated) / (t if sp else 1) + (sharded + scores + s * b * eager_sharded) / t
            + _gathered_column_inputs(model, layout, kind))


def cp_backward_buffers(model: ModelSpec, layout: Layout) -> float:
    """Bytes PyTorch's context-parallel attention holds beyond the layer's activations and their gradients while
    its backward runs, on one rank (``_templated_ring_attention_backward``, ``torch/distributed/tensor/
    experimental/_attention.py``): every cp rank's keys and values all-gathered (its default rotation, ``cp``
    blocks of :func:`~pipesim.analytic.comm.cp_kv_bytes`; its ring rotation holds the block in use and the one
    arriving, two); the query's, key's and value's gradients accumulated in FP32 (``convert_to_f32``), twice the
    BF16 gradients the working set counts; the K and V gradients concatenated in FP32 to send on and the block
    received, two FP32 copies more. 0 without context parallelism and for Transformer Engine's, whose buffers are
    not counted."""
    if layout.cp == 1 or layout.cp_kernels is not CpKernels.PYTORCH:
        return 0.0
    keys_values = cp_kv_bytes(model, layout)
    queries = model.dtype_bytes * model.micro_batch * model.seq_len / layout.cp * model.q_width / layout.tp
    fp32 = FP32 / model.dtype_bytes
    blocks = layout.cp if layout.cp_comm is CpComm.ALL_GATHER else 2
    return blocks * keys_values + fp32 * (queries + keys_values) + 2 * fp32 * keys_values


def linear_input_element_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes per element of what a linear layer saves of its input for its weight gradient.

    In FP8 (``--fp8``: Transformer Engine's FP8 linears) the saved input is the quantized one, 1 byte: TE's
    ``Linear`` keeps ``saved_inputmat = inputmat`` after ``input_quantizer`` cast it (keeping only the row- or
    column-wise FP8 data the backward reads), and ``LayerNormLinear`` keeps its FP8 ``ln_out`` beside the norm's
    BF16 input (``transformer_engine/pytorch/module/linear.py`` and ``layernorm_linear.py``, "Cache state for
    backward pass"). The inputs that are not a linear's stay at ``d`` bytes: the norms' inputs, Q, K and V (the
    attention runs in BF16 unless FP8 attention is asked for), the up projection's output that the activation
    keeps. In NVFP4 the same: the column-wise NVFP4 copy the weight gradient reads, 0.5625 bytes an element with
    its scales (:attr:`~pipesim.analytic.layout.Precision.element_bytes`). torchao's FP8 linears save their
    BF16 input and cast it again in the backward (:class:`~pipesim.analytic.layout.Fp8Linears`): ``d`` bytes."""
    return layout.precision.element_bytes if layout.keeps_quantized_copies else float(model.dtype_bytes)


def _attention_output_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes per element kept of the attention's output: the output projection's saved input, and the fused
    kernel's own copy of its output for its backward (FlashAttention's backward reads it) when the kernel is not
    recomputed. In BF16 the two are one tensor; in FP8 (NVFP4) the projection keeps a quantized copy beside the
    kernel's BF16 output (:func:`linear_input_element_bytes`)."""
    d = model.dtype_bytes
    if not layout.keeps_quantized_copies:  # the projection saves the kernel's BF16 output itself
        return d
    kernel_keeps_output = not layout.recomputes_attention_core and layout.attention is not AttentionKernel.UNFUSED
    return (d if kernel_keeps_output else 0.0) + linear_input_element_bytes(model, layout)


def _eager_kept(model: ModelSpec, layout: Layout, kind: LayerKind) -> tuple[float, float]:
    """Bytes per token that eager PyTorch modules (``--elementwise eager``) keep beyond the fused kernels'
    (replicated over tp unless sequence parallel, sharded by tp), as autograd saves each op's inputs:

    - RMSNorm through FP32 (``x.float()``, ``x * rsqrt(x.pow(2).mean(-1) + ε)``, ``.type_as(x)``, ``* weight``;
      Meta's reference ``llama/model.py``, Hugging Face's ``LlamaRMSNorm``, torchtitan's ``RMSNorm``): ``pow`` and
      the product keep the FP32 input (4 bytes an element, where the fused norm keeps its d-byte input) and
      ``* weight`` the normalised BF16 tensor (d): 4 bytes more per element, twice a layer. ``F.layer_norm`` is one
      op that keeps its input, as the fused kernel does: nothing more.
    - SwiGLU as ``silu(gate) * up``: the product keeps ``silu(gate)`` for the backward beside ``gate`` (kept by
      ``silu``), ``up`` and the product (the down projection's input): ``d·f`` more than the fused kernel's
      gate, up and output (Megatron-LM's ``megatron/model`` ``swiglu`` is this code too).
    - The attention output, transposed back to (tokens, heads·d_v) by a copy: the fused kernel keeps its own
      output for its backward, the output projection the copy, so ``d·(heads·d_v)`` more. Only without
      recomputation (selective recomputes the kernel, so only the copy is kept) and with a fused kernel (the
      unfused path's batched matmul keeps its inputs, not its output). Legacy Megatron-LM's ``b s h d -> s b
      (h d)`` copy is a no-op at micro-batch 1, which this counts alike.
    - RoPE's complex product with the cached frequencies keeps only the frequencies (they need no gradient):
      nothing. Dropout keeps its mask either way.

    Nothing under full or per-op recomputation: those keep only what their policy saves.
    """
    if not layout.elementwise.eager or layout.recompute in (Recompute.FULL, Recompute.PER_OP):
        return 0.0, 0.0
    d = model.dtype_bytes
    ops = layout.elementwise
    eager_norms = model.rms_norm and ops.eager_norms
    norms = model.block_norms * FP32 * model.hidden if eager_norms else 0.0
    qk_norms = FP32 * (model.q_width + model.k_width) if eager_norms and model.qk_norm else 0.0
    swiglu = d * mlp_width(model, layout, kind) if model.gated and ops.eager_activation else 0.0
    transposed = not layout.recomputes_attention_core and layout.attention is not AttentionKernel.UNFUSED
    copy = d * model.attention_out_width if transposed and ops.copies_attention_output else 0.0
    return norms, swiglu + copy + qk_norms


def _gathered_column_inputs(model: ModelSpec, layout: Layout, kind: LayerKind) -> float:
    """What a layer keeps beyond its sharded column-parallel inputs when the framework keeps them gathered
    (:attr:`Layout.keeps_gathered_column_input`, PyTorch DTensor's TP): the QKV input and, in a dense layer, the
    MLP input, each ``d·sbh`` where sequence parallelism stores ``d·sbh/t``."""
    if not layout.keeps_gathered_column_input:
        return 0.0
    inputs = 2 if kind is LayerKind.DENSE else 1
    return inputs * model.dtype_bytes * model.seq_len * model.micro_batch * model.hidden * (1 - 1 / layout.tp)


def per_op_kept_width(model: ModelSpec, layout: Layout, kind: LayerKind = LayerKind.DENSE) -> float:
    """Elements per token one tp rank keeps under torchtitan's per-op checkpointing (``--recompute per-op``).

    torchtitan's policy (``torchtitan/models/llama3/infra/parallelize.py``, ``_custom_policy``) saves the
    outputs of the ops in its ``_save_list`` (the attention kernel, matmuls, reduce-scatters) except every
    second matmul, counted in call order; the checkpointed layer also keeps its input. A Llama layer calls
    ``wq, wk, wv, wo, w1, w3, w2``: it keeps the outputs of wq, wv, w1 and w2 (w2's is the full hidden width,
    before its reduction over tp) and the attention output; wk, wo, w3, the norms, RoPE and the activation are
    recomputed. An ungated MLP (``fc1, fc2``) keeps fc1's output. The attention kernel's log-sum-exp (one FP32
    value per head and token) is left out, as for the fused kernel elsewhere."""
    if kind is not LayerKind.DENSE:
        raise PipesimError("--recompute per-op is modelled for dense layers only (torchtitan's policy on a MoE "
                           "layer depends on its expert code): use --recompute selective or full")
    t, h = layout.tp, model.hidden
    layer_input = h / (t if layout.sequence_parallel else 1)
    attention = (model.q_width + model.v_width + model.attention_out_width) / t
    mlp = model.ffn_hidden / t + (h if model.gated else 0.0)
    return layer_input + attention + mlp


def linear_input_bytes(model: ModelSpec, layout: Layout, kind: LayerKind = LayerKind.DENSE) -> float:
    """The part of a layer's stored activations that the weight-gradient pass (W) needs: linear-layer inputs."""
    b, s, h, d, t = model.micro_batch, model.seq_len, model.hidden, model.dtype_bytes, layout.tp
    sp = layout.sequence_parallel
    if layout.recompute in (Recompute.FULL, Recompute.PER_OP):
        return layer_activation_bytes(model, layout, kind)
    lin = linear_input_element_bytes(model, layout)
    # QKV input and MLP input (plus, for MoE, the dispatched tokens the experts' first GEMMs read)
    dispatched = 0.0 if kind is LayerKind.DENSE else d * model.experts_per_token * h * layout.moe_imbalance
    replicated = s * b * (2 * lin * h + dispatched + _mla_latents(model) / 2)
    # output-projection input, down-projection input
    sharded = lin * s * b * model.attention_out_width + lin * s * b * mlp_width(model, layout, kind)
    return replicated / (t if sp else 1) + sharded / t + _gathered_column_inputs(model, layout, kind)


def embedding_activation_bytes(model: ModelSpec, layout: Layout) -> float:
    """First stage, per microbatch: token ids and the embedding dropout mask."""
    s, b, h = model.seq_len, model.micro_batch, model.hidden
    mask = s * b * h if model.dropout else 0.0
    return 8 * s * b + mask / (layout.tp if layout.sequence_parallel else 1)


# Bytes per logit the loss holds at its peak on top of the FP32 logits kept for the backward (4 B, below).
# Megatron-LM (megatron/core/tensor_parallel/cross_entropy.py) casts the BF16 logits to FP32 and computes the
# softmax in place, so the forward holds the BF16 logits beside the FP32 copy (2 + 4) and the backward the
# softmax, turned into the gradient in place, beside the gradient's cast back to BF16 (4 + 2): 2 beyond the
# stored 4. PyTorch's F.cross_entropy on ``logits.float()`` (torchtitan's loss) holds the BF16 logits, the FP32
# copy and the log-softmax output in the forward (2 + 4 + 4), and in the backward the saved log-softmax,
# the NLL's gradient and log-softmax's input gradient, each FP32 (4 + 4 + 4): 8 beyond the stored 4. nanotron's
# (``sharded_cross_entropy``) subtracts the max into a new FP32 tensor while its helper still holds the FP32 cast,
# and the caller the BF16 logits (2 + 4 + 4 in the forward; the backward is Megatron's): 6 beyond the stored 4.
# A fused kernel holds the BF16 logits beside the FP32 cast in the forward (2) and the FP32 gradient beside the
# saved FP32 logits in the backward (4): 4. A compiled one keeps the BF16 logits and writes a BF16 gradient: 2.
# Megatron's fused pieces hold what its unfused ops hold (2); Transformer Engine's writes the gradient into the
# BF16 logits it keeps: nothing beyond them.
LOSS_TRANSIENT_BYTES = {LossKernel.MEGATRON: 2.0, LossKernel.PYTORCH: 8.0, LossKernel.GATHERED: 8.0,
                        LossKernel.NANOTRON: 6.0, LossKernel.FUSED: 4.0, LossKernel.COMPILED: 2.0,
                        LossKernel.MEGATRON_FUSED: 2.0, LossKernel.TE: 0.0}
# PyTorch's loss_parallel (Layout.torch_loss_parallel; kernels.LOSS_PARALLEL_BYTES for its ops) holds, in the
# forward, the BF16 logits, their FP32 copy, the max-subtracted tensor and its exp (2 + 4 + 4 + 4), then the
# log-probabilities in the exp's place: 10 beyond the stored 4; in the backward the saved log-probabilities, the
# zero tensor, exp of the log-probabilities and their sum, then the scaled gradient in the exp's place
# (4 + 4 + 4 + 4): 12 beyond them, where ATen's fused log-softmax holds 8.
LOSS_PARALLEL_TRANSIENT_BYTES = 12.0
# An eager z-loss (and nanotron's, whose backward clones the softmax) holds one more FP32 tensor of the logits'
# size at a time; the loss's input copy one of its input's (the copy beside the model's logits, then the slice's
# gradient).
EXTRA_LOGITS_TENSOR_BYTES = 4.0


def loss_transient_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes the cross-entropy holds, per microbatch, beyond what :func:`output_activation_bytes` stores."""
    per_logit = LOSS_PARALLEL_TRANSIENT_BYTES if layout.torch_loss_parallel else LOSS_TRANSIENT_BYTES[layout.loss]
    if layout.z_loss and any(Z_LOSS_BYTES.get(layout.loss, ())):
        per_logit += EXTRA_LOGITS_TENSOR_BYTES
    if layout.loss_input_copy:
        per_logit += layout.loss.logit_bytes
    return per_logit * model.seq_len * model.micro_batch * model.vocab / layout.loss_shards / layout.cp


def output_activation_bytes(model: ModelSpec, layout: Layout) -> float:
    """Last stage, per microbatch: the LM head's saved inputs and the logits the loss keeps
    (:func:`head_input_bytes` and :func:`loss_logit_bytes`, on one stage)."""
    return head_input_bytes(model, layout) + loss_logit_bytes(model, layout)


def head_input_bytes(model: ModelSpec, layout: Layout) -> float:
    """The LM head's stage, per microbatch: the final norm's and the output layer's inputs. The output layer is
    column-parallel: where the framework keeps such inputs gathered (:attr:`ColumnInput.SAVED`, PyTorch DTensor's
    ``ColwiseParallel``: torchtitan), it keeps the whole gathered input, under any recomputation, which does not
    reach the head."""
    s, b, h, d, t = model.seq_len, model.micro_batch, model.hidden, model.dtype_bytes, layout.tp
    shard = d * s * b * h / (t if layout.sequence_parallel else 1)
    gathered = layout.gathers_column_input and layout.column_input is ColumnInput.SAVED
    return shard + (d * s * b * h if gathered else shard)


def loss_logit_bytes(model: ModelSpec, layout: Layout) -> float:
    """The loss's stage, per microbatch: the logits it keeps for its backward (FP32, BF16 under a compiled loss;
    the whole vocabulary's on every tp rank where it gathers them)."""
    return layout.loss.logit_bytes * model.seq_len * model.micro_batch * model.vocab / layout.loss_shards
