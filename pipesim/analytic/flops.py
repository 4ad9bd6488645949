"""FLOPs of one transformer layer and of the LM head, split into forward, input-backward and weight-backward.

Forward of one layer, per microbatch (b sequences of s tokens; Narayanan et al. 2021, §5.1, generalized):

- QKV projection ``2bsh(q + 2·kv_dim)`` (GQA shrinks K and V), output projection ``2bsqh``, where the queries'
  width ``q = heads·head_dim`` is ``h`` but for heads of their own width (Qwen3: ``attention_head_dim``);
- attention core ``QKᵀ`` and ``·V``: ``2·2bs²q`` — halved when ``Layout.halve_causal_attention``;
- MLP ``2bsh·ffn`` per matrix: two matrices, or three when gated (SwiGLU).

For GPT (MHA, ffn = 4h) this is ``24bsh² + 4bs²h``, the zero-bubble paper's (Qi et al. 2024, Table 1) ``F``.
Backward of a matmul ``Y = XW`` costs two matmuls: ``dX = dY·Wᵀ`` (input gradient, ``I``) and ``dW = Xᵀ·dY``
(weight gradient, ``W``), each as large as the forward. The attention core has no weights, so both its
matmuls' gradients belong to ``I``. Hence ``I = linear + 2·core``, ``W = linear``: ``24bsh² + 8bs²h`` and
``24bsh²`` for GPT, Qi et al.'s ``B`` and ``W``. Recomputation adds forward work to the backward: the core
(selective) or the whole layer (full, Narayanan et al.'s factor 4 instead of 3). Element-wise FLOPs (norms,
softmax, activations) are left out, as in both papers; their time is in ``ChipSpec.achievable_fraction``.
The LM head is ``2bshV`` forward, ``2bshV`` each for I and W; the embedding lookup is not a matmul (0).

Mixture of experts: a token goes through its top-k routed experts and the shared ones, so a MoE layer's MLP
is ``2bsh · (k·f_e + n_s·f_s) · mats`` plus the router ``2bsh·E`` — the work of a dense MLP of the width a
token sees (:attr:`ModelSpec.moe_ffn_per_token`). Latent attention: its projections are
``2bs · (their weights)`` (:func:`pipesim.analytic.params.attention_params`, norms aside) and the core's
``QKᵀ`` and ``·V`` use ``qk_nope + qk_rope`` and ``v_head_dim`` per head: ``2bs²·heads·(d_qk + d_v)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.kernels import (
    local_attention_share,
    module_recompute_gemms,
    per_op_recomputed_gemms,
    recomputes_moe_block,
    selective_recompute_gemms,
)
from pipesim.analytic.layout import Layout, Recompute
from pipesim.analytic.model_spec import LayerKind, ModelSpec


@dataclass(frozen=True)
class PassFlops:
    """FLOPs per microbatch of one block: forward, input-gradient backward, weight-gradient backward, recompute."""

    forward: float
    backward_input: float
    backward_weight: float
    recompute: float = 0.0  # extra forward work done during the backward

    @property
    def backward(self) -> float:
        return self.backward_input + self.backward_weight

    @property
    def model(self) -> float:
        """Model FLOPs (MFU numerator): forward + backward, no recompute."""
        return self.forward + self.backward

    @property
    def hardware(self) -> float:
        """Hardware FLOPs (HFU numerator; Narayanan et al.'s "achieved TFLOP/s"): with recompute."""
        return self.model + self.recompute


def attention_linear_flops(model: ModelSpec) -> float:
    """Forward FLOPs of the attention block's projections."""
    tokens, h = model.micro_batch * model.seq_len, model.hidden
    if model.mla:
        q = h * model.q_lora_rank + model.q_lora_rank * model.q_width if model.q_lora_rank else h * model.q_width
        kv = (h * (model.kv_lora_rank + model.qk_rope_head_dim)
              + model.kv_lora_rank * model.heads * (model.qk_nope_head_dim + model.v_head_dim))
        return 2 * tokens * (q + kv + model.attention_out_width * h)
    return 2 * tokens * h * (model.q_width + 2 * model.kv_dim) + 2 * tokens * model.attention_out_width * h


def mlp_flops(model: ModelSpec, kind: LayerKind = LayerKind.DENSE) -> float:
    """Forward FLOPs of the MLP: dense, or a token's top-k and shared experts plus the router."""
    tokens, h, mats = model.micro_batch * model.seq_len, model.hidden, (3 if model.gated else 2)
    if kind is LayerKind.DENSE:
        return 2 * tokens * h * model.ffn_hidden * mats
    return 2 * tokens * h * model.moe_ffn_per_token * mats + 2 * tokens * h * model.experts


def linear_flops(model: ModelSpec, kind: LayerKind = LayerKind.DENSE) -> float:
    """Forward FLOPs of the layer's weight matmuls (QKV, output projection, MLP)."""
    return attention_linear_flops(model) + mlp_flops(model, kind)


def attention_core_flops(model: ModelSpec, layout: Layout) -> float:
    """Forward FLOPs of ``QKᵀ`` and ``softmax·V`` (``4bs²h`` for standard attention), local layers (a sliding
    window's or chunks') counting the share of the causal square they attend to
    (:func:`~.kernels.local_attention_share`)."""
    b, s = model.micro_batch, model.seq_len
    full = 2 * b * s * s * model.heads * (model.qk_head_dim + model.value_head_dim) * local_attention_share(model)
    return full / 2 if layout.halve_causal_attention else full


def layer_flops(model: ModelSpec, layout: Layout, kind: LayerKind = LayerKind.DENSE) -> PassFlops:
    """One transformer layer, whole (divide by tp for one rank's share)."""
    linear = linear_flops(model, kind)
    core = attention_core_flops(model, layout)
    if layout.recompute is Recompute.PER_OP:  # the matmuls it recomputes, whole (tp 1)
        tokens = model.micro_batch * model.seq_len
        recompute = sum(2 * m * n * k * count for m, n, k, count in per_op_recomputed_gemms(model, Layout(), tokens))
    else:
        # a selective recomputation's FLOPs are its modules' matmuls: the attention core's, latent attention's up
        # projections, a checkpointed MLP's (the norms and activations it may re-run are element-wise work, which
        # FLOPs leave out)
        selective = (core if layout.recomputes_attention_core else 0.0) + _module_recompute_flops(model, layout, kind)
        recompute = {Recompute.NONE: 0.0, Recompute.SELECTIVE: selective,
                     Recompute.FULL: linear + core}[layout.recompute]
    return PassFlops(linear + core, linear + 2 * core, linear, recompute)


def _module_recompute_flops(model: ModelSpec, layout: Layout, kind: LayerKind) -> float:
    """Forward FLOPs (whole, tp 1) of the matmuls a selective recomputation's modules re-run beside the attention
    core (:func:`~.kernels.selective_recompute_gemms`, :func:`~.kernels.module_recompute_gemms`); a MoE layer's
    routed experts counted at a token's top-k, as :func:`mlp_flops` counts them."""
    if layout.recompute is not Recompute.SELECTIVE:
        return 0.0
    tokens = model.micro_batch * model.seq_len
    whole = Layout(recompute=Recompute.SELECTIVE, recompute_modules=layout.recompute_modules, mlp_up=layout.mlp_up)
    flops = sum(2 * m * n * k * count for m, n, k, count in selective_recompute_gemms(model, whole, tokens))
    if recomputes_moe_block(layout, kind):
        return flops + mlp_flops(model, kind)
    return flops + sum(2 * m * n * k * count for m, n, k, count in module_recompute_gemms(model, whole, tokens, kind))


def lm_head_flops(model: ModelSpec) -> PassFlops:
    """Output projection to the vocabulary (the loss's element-wise work is left out)."""
    logits = 2 * model.micro_batch * model.seq_len * model.hidden * model.vocab
    return PassFlops(logits, logits, logits)


def mtp_projection_flops(model: ModelSpec) -> PassFlops:
    """Multi-token prediction's 2h → h projections (:mod:`~pipesim.analytic.mtp`), every module's."""
    projection = model.mtp_layers * 2 * model.micro_batch * model.seq_len * 2 * model.hidden * model.hidden
    return PassFlops(projection, projection, projection)


def mtp_extra_flops(model: ModelSpec) -> PassFlops:
    """Multi-token prediction's modules beyond their layers: each one's projection and its pass through the shared
    output head, as Megatron-Core's FLOPs count them."""
    projection, head, d = mtp_projection_flops(model), lm_head_flops(model), model.mtp_layers
    return PassFlops(projection.forward + d * head.forward, projection.backward_input + d * head.backward_input,
                     projection.backward_weight + d * head.backward_weight)


def model_flops_per_microbatch(model: ModelSpec, layout: Layout,
                               recomputed: dict[LayerKind, int] | None = None) -> PassFlops:
    """All layers plus the LM head, and the multi-token-prediction modules (their layers of the last one's kind,
    recomputed as the layout says), for one microbatch of one pipeline (sum of model and hardware FLOPs).
    ``recomputed``: per kind, how many of the model's layers recompute (``Layout.recompute_layers``: the others do
    not); None, every layer as the layout says."""
    head, extra = lm_head_flops(model), mtp_extra_flops(model)
    kinds = model.layer_kinds()
    mtp = model.layer_kind(model.layers - 1)
    counts = {kind: kinds.count(kind) + (model.mtp_layers if kind is mtp else 0) for kind in LayerKind
              if kind in kinds}
    layers = [(counts[kind], layer_flops(model, layout, kind)) for kind in counts]
    again = [(n if recomputed is None else recomputed[kind] + (model.mtp_layers if kind is mtp else 0), f)
             for kind, (n, f) in zip(counts, layers, strict=True)]
    return PassFlops(sum(n * f.forward for n, f in layers) + head.forward + extra.forward,
                     sum(n * f.backward_input for n, f in layers) + head.backward_input + extra.backward_input,
                     sum(n * f.backward_weight for n, f in layers) + head.backward_weight + extra.backward_weight,
                     sum(n * f.recompute for n, f in again))
