"""Parameter counts: one transformer layer, the embedding, the output layer, and a whole pipeline stage.

Counts follow the layer definition of Narayanan et al. 2021, §5.1 (their ``12lh²(1 + 13/12h + (V+s)/12lh)``
for GPT), generalized to GQA (K and V projections of width ``kv_dim``), gated MLPs (three matrices) and
models without biases or with RMSNorm. With tied embeddings and more than one stage, the last stage keeps
its own copy of the embedding matrix for the output layer (Megatron-LM does; the copies' gradients are
all-reduced), so both ends hold ``V·h`` parameters.

Mixture of experts: a MoE layer's MLP is ``experts`` routed experts plus ``shared_experts``, each
``mats · hidden · width`` (mats = 3 gated, 2 not), and the router's ``hidden × experts`` matrix. Routed-expert
parameters are what expert parallelism shards (:func:`layer_expert_params`); everything else is "dense" and
replicated over the data-parallel ranks. *Active* parameters count the top-k routed experts a token uses
(DeepSeek-V3's "37B activated").

Latent attention (MLA, DeepSeek-V2 §2.1.2, as the released ``modeling_deepseek.py`` builds it): ``W_DQ``
(h × q_lora) with its RMSNorm and ``W_UQ`` (q_lora × heads·(nope+rope)) — or one h × heads·(nope+rope) matrix
without a query bottleneck —, ``W_DKV`` with the shared RoPE key (h × (kv_lora + rope)), its RMSNorm
(kv_lora), ``W_UKV`` (kv_lora × heads·(nope + v)), and the output projection (heads·v × h).
"""

from __future__ import annotations

from functools import lru_cache

from pipesim.analytic.model_spec import LayerKind, ModelSpec


def _mats(model: ModelSpec) -> int:
    return 3 if model.gated else 2


def attention_params(model: ModelSpec) -> int:
    """The attention block's weights (and biases for standard attention)."""
    h = model.hidden
    if model.mla:
        q = (h * model.q_lora_rank + model.q_lora_rank + model.q_lora_rank * model.q_width if model.q_lora_rank
             else h * model.q_width)
        kv = (h * (model.kv_lora_rank + model.qk_rope_head_dim) + model.kv_lora_rank
              + model.kv_lora_rank * model.heads * (model.qk_nope_head_dim + model.v_head_dim))
        return q + kv + model.attention_out_width * h
    q, kv = model.q_width, model.kv_dim
    biases = (q + 2 * kv) + h if model.bias else 0
    qk_norm = 2 * model.head_dim if model.qk_norm else 0  # one weight per channel of a head, shared by the heads
    return h * (q + 2 * kv) + q * h + biases + qk_norm


def _mlp(model: ModelSpec, width: int) -> int:
    biases = width * (2 if model.gated else 1) + model.hidden if model.bias else 0
    return model.hidden * width * _mats(model) + biases


def layer_expert_params(model: ModelSpec, kind: LayerKind = LayerKind.DENSE) -> int:
    """Parameters of the routed experts of one layer (0 for a dense layer): what expert parallelism shards."""
    return model.experts * _mlp(model, model.expert_ffn_hidden) if kind is LayerKind.MOE else 0


def mlp_params(model: ModelSpec, kind: LayerKind = LayerKind.DENSE, active: bool = False) -> int:
    """The MLP of one layer: dense, or routed experts + shared experts + router (``active``: only top-k)."""
    if kind is LayerKind.DENSE:
        return _mlp(model, model.ffn_hidden)
    routed = (model.experts_per_token if active else model.experts) * _mlp(model, model.expert_ffn_hidden)
    return routed + model.shared_experts * _mlp(model, model.shared_expert_ffn_hidden) + model.hidden * model.experts


def layer_params(model: ModelSpec, kind: LayerKind = LayerKind.DENSE, active: bool = False) -> int:
    norms = model.block_norms * model.hidden * (1 if model.rms_norm else 2)
    return attention_params(model) + mlp_params(model, kind, active) + norms


def largest_layer_params(model: ModelSpec) -> int:
    """The parameters of the model's largest layer (what ZeRO-3 gathers at once)."""
    return max(layer_params(model, kind) for kind in set(model.layer_kinds()))


def embedding_params(model: ModelSpec) -> int:
    positions = model.seq_len * model.hidden if model.learned_positions else 0
    return model.vocab * model.hidden + positions


def output_params(model: ModelSpec, num_stages: int) -> int:
    """Final norm plus the output projection (a second copy of the embedding when tied over several stages)."""
    norm = model.hidden * (1 if model.rms_norm else 2)
    projection = 0 if model.tied_embeddings and num_stages == 1 else model.vocab * model.hidden
    return norm + projection


def total_params(model: ModelSpec) -> int:
    """Unique parameters (a tied output layer counted once)."""
    layers = sum(layer_params(model, kind) for kind in model.layer_kinds())
    return layers + embedding_params(model) + output_params(model, 1)


def active_params(model: ModelSpec) -> int:
    """Parameters whose weights one token's computation uses: the top-k routed experts instead of all, and no
    input embedding (a table lookup, not a product: DeepSeek-V2's 2.4B of V2-Lite and V3's 37B leave it out)."""
    layers = sum(layer_params(model, kind, active=True) for kind in model.layer_kinds())
    return layers + output_params(model, 1)


def _stage_range(model: ModelSpec, stage: int, num_stages: int, layers: int | None,
                 first_layer: int | None) -> range:
    count = model.layers // num_stages if layers is None else layers
    start = stage * count if first_layer is None else first_layer
    return range(start, start + count)


@lru_cache(maxsize=4096)  # pure, and asked for per stage of every layout a planner considers
def stage_params(model: ModelSpec, stage: int, num_stages: int, layers: int | None = None,
                 first_layer: int | None = None, head_stage: int | None = None) -> int:
    """Parameters of pipeline stage ``stage`` of ``num_stages`` holding ``layers`` layers (default: L/stages)
    from ``first_layer`` on (default: ``stage · layers``; it matters only where dense and MoE layers mix), with
    the final norm and the LM head on ``head_stage`` (default: the last)."""
    count = sum(layer_params(model, model.layer_kind(i))
                for i in _stage_range(model, stage, num_stages, layers, first_layer))
    if stage == 0:
        count += embedding_params(model)
    if stage == (num_stages - 1 if head_stage is None else head_stage):
        count += output_params(model, num_stages)
    return count


@lru_cache(maxsize=4096)
def stage_expert_params(model: ModelSpec, stage: int, num_stages: int, layers: int | None = None,
                        first_layer: int | None = None) -> int:
    """The routed-expert part of :func:`stage_params` (before expert parallelism divides it)."""
    return sum(layer_expert_params(model, model.layer_kind(i))
               for i in _stage_range(model, stage, num_stages, layers, first_layer))
