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
- sharded by tp (the "24"): Q ``d·sbh``, K and V ``2·d·sb·kv_dim`` (GQA stores less), the output-projection
  input ``d·sbh``, the MLP intermediates ``2·d·sb·ffn`` (GeLU input and output) or ``3·d·sb·ffn`` when gated
  (gate, up, and their product);
- the attention scores ``as²b(2d + 1)`` = ``5as²b``: softmax output, its dropout mask and dropout output;
  ``d·as²b`` without dropout. Gone with selective recompute or a fused (Flash) attention kernel; the
  latter's per-row softmax statistics (``4asb`` bytes) are left out (< 0.2 % of a layer).

Models without dropout (Llama) drop the mask terms. Embedding (first stage): the int64 token ids ``8sb``
(Megatron-LM's accounting; not sharded) and the embedding dropout mask ``sbh``. Output (last stage):
Korthikanti §4.3 / Megatron-LM's ``4sbh(1 + V/h)``: final-norm input and output-layer input ``2·d·sbh``, and
FP32 logits for the loss ``4sbV`` (vocabulary-parallel, so ``/t``).
"""

from __future__ import annotations

from pipesim.analytic.layout import AttentionKernel, Layout, Recompute
from pipesim.analytic.model_spec import ModelSpec


def layer_activation_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes one transformer layer keeps for its backward, per microbatch, on one tp rank."""
    b, s, h, a, d, t = model.micro_batch, model.seq_len, model.hidden, model.heads, model.dtype_bytes, layout.tp
    sbh = s * b * h
    sp = layout.sequence_parallel
    if layout.recompute is Recompute.FULL:
        return d * sbh / (t if sp else 1)
    mask = 1.0 if model.dropout else 0.0
    replicated = 2 * d * sbh + d * sbh + d * sbh + 2 * mask * sbh
    mlp_mid = (3 if model.gated else 2) * d * s * b * model.ffn_hidden
    sharded = d * sbh + 2 * d * s * b * model.kv_dim + d * sbh + mlp_mid
    scores_kept = layout.recompute is Recompute.NONE and layout.attention is AttentionKernel.UNFUSED
    # softmax output (d), and with dropout its mask (1) and output (d): 5as²b for d = 2
    scores = (d + mask * (1 + d)) * a * s * s * b if scores_kept else 0.0
    return replicated / (t if sp else 1) + (sharded + scores) / t


def linear_input_bytes(model: ModelSpec, layout: Layout) -> float:
    """The part of a layer's stored activations that the weight-gradient pass (W) needs: linear-layer inputs."""
    b, s, h, d, t = model.micro_batch, model.seq_len, model.hidden, model.dtype_bytes, layout.tp
    sp = layout.sequence_parallel
    if layout.recompute is Recompute.FULL:
        return layer_activation_bytes(model, layout)
    replicated = 2 * d * s * b * h  # QKV input, MLP input
    sharded = d * s * b * h + d * s * b * model.ffn_hidden  # output-projection input, down-projection input
    return replicated / (t if sp else 1) + sharded / t


def embedding_activation_bytes(model: ModelSpec, layout: Layout) -> float:
    """First stage, per microbatch: token ids and the embedding dropout mask."""
    s, b, h = model.seq_len, model.micro_batch, model.hidden
    mask = s * b * h if model.dropout else 0.0
    return 8 * s * b + mask / (layout.tp if layout.sequence_parallel else 1)


def output_activation_bytes(model: ModelSpec, layout: Layout) -> float:
    """Last stage, per microbatch: final-norm and output-layer inputs, FP32 logits."""
    s, b, h, d, t = model.seq_len, model.micro_batch, model.hidden, model.dtype_bytes, layout.tp
    inputs = 2 * d * s * b * h / (t if layout.sequence_parallel else 1)
    return inputs + 4 * s * b * model.vocab / t
