"""A model from a Hugging Face ``config.json``: ``--model path/to/config.json`` simulates a checkpoint's shape as
``transformers`` builds it, without writing a pipesim model file.

Each ``model_type`` pipesim reads is a :class:`Family`: what its modeling code fixes that the config does not say
(a gated MLP, RMSNorm, biases, norms over the query and key heads) and which keys carry the mixture of experts. A
``model_type`` of its own on one of those families' classes (a checkpoint's remote code around a transformers class,
Kimi K2's ``kimi_k2`` on ``DeepseekV3ForCausalLM``) reads as the class's family: ``architectures`` names it.
The keys read are the ones ``transformers``' configuration classes define, under their names:

- every family: ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``
  (default: the heads), ``intermediate_size``, ``vocab_size``, ``tie_word_embeddings`` (default false, as
  these families' configuration classes have it), ``head_dim`` (default ``hidden_size / heads``);
- Mixtral and gpt-oss: ``num_local_experts``, ``num_experts_per_tok``, every layer's MLP a set of
  ``intermediate_size``-wide experts;
- Qwen2-MoE and Qwen3-MoE: ``num_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
  ``shared_expert_intermediate_size`` (Qwen2-MoE's one shared expert), ``decoder_sparse_step`` and
  ``mlp_only_layers`` (which layers are MoE);
- Llama 4 (``llama4_text``, or a multimodal ``llama4`` config's ``text_config``): ``num_local_experts``,
  ``num_experts_per_tok``, ``intermediate_size`` (each routed expert's width and its one shared expert's),
  ``intermediate_size_mlp`` (the dense layers' MLP), ``moe_layers`` or ``interleave_moe_layer_step`` (MoE layers
  n − 1, 2n − 1, …), ``use_qk_norm`` (default true), and its chunked attention: ``attention_chunk_size`` on the
  layers ``layer_types`` marks ``chunked_attention``, or else the RoPE layers ``no_rope_layers`` marks 1 (by default
  all but every ``no_rope_layer_interval``-th, 4);
- DeepSeek-V2 and V3: ``n_routed_experts``, ``n_shared_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``, ``first_k_dense_replace``, ``moe_layer_freq``, group-limited routing's ``n_group``
  and ``topk_group`` (where ``topk_method`` is a group-limited one, not ``greedy``), the multi-token-prediction
  modules' ``num_nextn_predict_layers``, and latent attention's
  ``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``.

- sliding windows (:class:`WindowKeys`): ``sliding_window`` on every layer (Mistral, Mixtral), or on the layers
  ``layer_types`` marks (gpt-oss and Gemma 2: every other one, ``global_attention_every`` 2; Gemma 3: five in
  six, or its ``sliding_window_pattern``);
- chunked attention (Llama 4): ``attention_chunk_size`` with the layers above;
- Gemma 2 and 3 (``gemma2``; ``gemma3_text``, or a multimodal ``gemma3`` config's ``text_config``): four norms a
  layer (``sandwich_norm``), tied embeddings unless the config says otherwise.

A config does not say the sequence length a run trains at (``max_position_embeddings`` is the longest the model
was extended to), so ``--seq-len`` is required with one. What pipesim does not model is refused by name, not
approximated: Qwen's sliding windows (``use_sliding_window``, off in its released configs), full-attention layers
other than every n-th, MoE layers in a pattern other than "the first k dense, then one in every n".

Not counted, and small: Llama 4's L2 norm of queries and keys runs on its chunked (RoPE) layers alone and is counted
on every layer as a QK-norm pass, its NoPE layers' attention temperature (a scale of the queries) not at all;
Gemma 2's soft-capping of the attention and output logits (a tanh over each), gpt-oss's
attention sinks (a learned logit per head in each softmax) and its clamped
SwiGLU (a SwiGLU's bytes), Qwen2's biases on the query, key and value projections alone (``bias`` is all the
linears' or none; 3·(q + 2·kv) parameters a layer, under 0.01 % of a 7B), Qwen2-MoE's one-output gate of its
shared expert.
"""

from __future__ import annotations

import enum
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

from pipesim.analytic.model_spec import ModelSpec, check_layer_count, full_attention_every, moe_layer_pattern
from pipesim.errors import PipesimError


class WindowKeys(enum.Enum):
    """How a family's config states a sliding window."""

    # ``sliding_window`` on every layer where set (Mistral, Mixtral; null: full attention)
    EVERY_LAYER = "every-layer"
    # ``sliding_window`` on the layers ``layer_types`` marks "sliding_attention" (gpt-oss; alternating by default)
    LAYER_TYPES = "layer-types"
    # ``use_sliding_window`` with ``max_window_layers`` (Qwen): which layers is the modeling code's to say; refused
    # when on, off in every released Qwen2 and Qwen3 config
    QWEN = "qwen"
    # Llama 4's attention_chunk_size on its chunked layers (layer_types, or the RoPE layers of no_rope_layers)
    CHUNKS = "chunks"


class MoeKeys(enum.Enum):
    """Which keys a family's config keeps its mixture of experts under."""

    MIXTRAL = "mixtral"
    QWEN = "qwen"
    DEEPSEEK = "deepseek"
    LLAMA4 = "llama4"


@dataclass(frozen=True)
class Family:
    """What a ``model_type``'s modeling code fixes beyond its config."""

    qk_norm: bool = False  # RMSNorm over each query and key head (Qwen3; OLMo 2 over all of Q and K)
    moe: MoeKeys | None = None  # None: the family has no mixture of experts
    latent_attention: bool = False  # DeepSeek's MLA
    window: WindowKeys | None = None  # None: the family has no sliding window
    bias: bool = False  # biases in every linear layer, the experts' included (gpt-oss)
    sandwich_norm: bool = False  # a norm after attention and after the MLP too (Gemma 2, 3)
    tied: bool = False  # tie_word_embeddings where the config does not say (its configuration class's default)
    gated: bool = True  # a gated MLP (SwiGLU, GeGLU); Nemotron's squared ReLU is not
    rms_norm: bool = True  # RMSNorm; Nemotron's LayerNorm (layernorm1p) is not
    # where layer_types is absent: every n-th layer attends to everything (its configuration class's default;
    # Gemma 3's sliding_window_pattern)
    global_attention_every: int = 2


# Every family here is Llama-shaped: a gated (SwiGLU) MLP, RMSNorm, RoPE, no biases (but gpt-oss's, and Qwen2's on
# Q, K and V: the module doc), no dropout in training configs; but Nemotron's.
FAMILIES: dict[str, Family] = {
    "llama": Family(),
    "mistral": Family(window=WindowKeys.EVERY_LAYER),
    "mixtral": Family(moe=MoeKeys.MIXTRAL, window=WindowKeys.EVERY_LAYER),
    "qwen2": Family(window=WindowKeys.QWEN),
    "qwen2_moe": Family(moe=MoeKeys.QWEN, window=WindowKeys.QWEN),
    "qwen3": Family(qk_norm=True, window=WindowKeys.QWEN),
    "qwen3_moe": Family(qk_norm=True, moe=MoeKeys.QWEN, window=WindowKeys.QWEN),
    # OpenAI's gpt-oss: biases on the attention's projections and on the experts', sliding windows on every other
    # layer, its experts under Mixtral's keys; its attention sinks (a learned logit per head) are not counted
    "gpt_oss": Family(moe=MoeKeys.MIXTRAL, window=WindowKeys.LAYER_TYPES, bias=True),
    # Google's Gemma 2 and 3 (text): GeGLU (gated), four norms a layer, embeddings tied, windows on all layers but
    # every 2nd (Gemma 2) or 6th (Gemma 3, which adds QK-norm); their logit soft-capping (Gemma 2) and scaled
    # embedding are element-wise work not counted
    "gemma2": Family(window=WindowKeys.LAYER_TYPES, sandwich_norm=True, tied=True),
    "gemma3_text": Family(qk_norm=True, window=WindowKeys.LAYER_TYPES, sandwich_norm=True, tied=True,
                          global_attention_every=6),
    "olmo2": Family(qk_norm=True),
    # NVIDIA's Nemotron-4 and Minitron (NemotronForCausalLM): a squared-ReLU MLP of two matrices (hidden_act relu2),
    # LayerNorm with a +1 on its weight (layernorm1p), no biases, rotary positions on half of each head
    "nemotron": Family(gated=False, rms_norm=False),
    # Meta's Llama 4 (Scout, Maverick): one shared expert beside top-k routed ones, MoE layers interleaved with
    # dense ones of another width, chunked attention on three layers in four; its QK-norm is the config's to say
    "llama4_text": Family(moe=MoeKeys.LLAMA4, window=WindowKeys.CHUNKS),
    "deepseek_v2": Family(moe=MoeKeys.DEEPSEEK, latent_attention=True),
    "deepseek_v3": Family(moe=MoeKeys.DEEPSEEK, latent_attention=True),
    # Hugging Face's SmolLM3 (SmolLM3ForCausalLM): Llama's layers, embeddings tied by default, RoPE left out on every
    # 4th layer (no_rope_layers: no FLOPs or bytes pipesim counts change), Qwen's sliding-window keys
    "smollm3": Family(window=WindowKeys.QWEN, tied=True),
}

# The modeling class a config's ``architectures`` names, for a ``model_type`` pipesim does not know: a checkpoint
# whose remote code registers a model type of its own around a transformers class builds that class's layers
# (Moonshot's Kimi K2, ``model_type`` "kimi_k2" on DeepseekV3ForCausalLM), so it reads as that class's family.
ARCHITECTURE_FAMILIES: dict[str, str] = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "GptOssForCausalLM": "gpt_oss", "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text", "Olmo2ForCausalLM": "olmo2", "NemotronForCausalLM": "nemotron",
    "Llama4ForCausalLM": "llama4_text", "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3", "SmolLM3ForCausalLM": "smollm3",
}


def is_hf_config(data: dict) -> bool:
    """Whether a model file is a Hugging Face ``config.json`` (its ``model_type`` and ``hidden_size``, or a
    multimodal one's ``text_config``) rather than a pipesim model file."""
    return "model_type" in data and ("hidden_size" in data or isinstance(data.get("text_config"), dict))


class _Config:
    """The config's values, read with one-line errors naming the file and key."""

    def __init__(self, data: dict, source: str):
        self.data, self.source = data, source

    def count(self, key: str, default: int | None = None) -> int:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise PipesimError(f"{self.source}: the Hugging Face config has no {key!r}; add it, or write a "
                                   "pipesim model file (docs/model-and-chip-files.md)")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PipesimError(f"{self.source}: {key}={value!r} must be a non-negative integer")
        return value

    def flags(self, key: str, layers: int) -> list[int] | None:
        """A per-layer list of 0/1 (None where the config has none)."""
        value = self.data.get(key)
        if value is None or value == []:
            return None
        if not isinstance(value, list) or len(value) != layers or any(v not in (0, 1) or isinstance(v, bool)
                                                                        for v in value):
            raise PipesimError(f"{self.source}: {key} must list 0 or 1 for each of its {layers} layers")
        return value

    def indices(self, key: str, layers: int) -> list[int] | None:
        """A list of layer indices (None where the config has none)."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < layers
                                              for v in value):
            raise PipesimError(f"{self.source}: {key} must list layer indices between 0 and {layers - 1}")
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise PipesimError(f"{self.source}: {key}={value!r} must be true or false")
        return value


def model_name(path: Path) -> str:
    """A model's name in reports: the checkpoint's folder for a ``config.json`` (``Qwen3-8B/config.json`` →
    ``Qwen3-8B``), else the file's stem."""
    return path.parent.name if path.name == "config.json" and path.parent.name else path.stem


def config_family(data: dict, source: str, wrappers: Container[str] = ()) -> Family:
    """The family a config's ``model_type`` names, or, for a type pipesim does not know (nor ``wrappers``, the
    multimodal types it reads through their ``text_config``), the family of the one modeling class its
    ``architectures`` lists (:data:`ARCHITECTURE_FAMILIES`); a one-line refusal otherwise."""
    model_type = data.get("model_type")
    named = isinstance(model_type, str)
    if named and model_type in FAMILIES:
        return FAMILIES[model_type]
    classes = data.get("architectures")
    if named and model_type not in wrappers and isinstance(classes, list) and len(classes) == 1:
        known = ARCHITECTURE_FAMILIES.get(classes[0]) if isinstance(classes[0], str) else None
        if known is not None:
            return FAMILIES[known]
    said = f" (architectures {classes!r})" if classes is not None else ""
    raise PipesimError(f"{source}: model_type {model_type!r}{said} is not one pipesim reads from a Hugging Face "
                       f"config; it reads {', '.join(FAMILIES)}, and any model_type on one of their classes "
                       "(architectures): write a pipesim model file for it (docs/model-and-chip-files.md)")


def model_from_hf_config(data: dict, source: str, seq_len: int | None, name: str) -> ModelSpec:
    """The :class:`ModelSpec` ``transformers`` builds from ``data`` (the module doc), trained at ``seq_len``
    tokens (required: a config does not say it)."""
    multimodal = {"gemma3": "gemma3_text", "llama4": "llama4_text"}
    if isinstance(data.get("model_type"), str) and data["model_type"] in multimodal and isinstance(
            data.get("text_config"), dict):
        # a multimodal Gemma 3 or Llama 4 checkpoint: its language model (the vision tower is not simulated)
        data = {**data["text_config"], "model_type": multimodal[data["model_type"]]}
    family = config_family(data, source, multimodal)
    if seq_len is None:
        raise PipesimError(f"{source}: a Hugging Face config does not say the sequence length trained at "
                           "(max_position_embeddings is the longest the model takes); add --seq-len N "
                           "(seq_len=N in Python)")
    c = _Config(data, source)
    layers = c.count("num_hidden_layers")
    check_layer_count(name, layers)  # before any per-layer list is built from it (the MoE and window patterns are)
    heads, hidden = c.count("num_attention_heads"), c.count("hidden_size")
    head_dim = c.count("head_dim", 0) if not family.latent_attention else 0
    llama4 = family.moe is MoeKeys.LLAMA4
    fields = dict(
        name=name, layers=layers, hidden=hidden, heads=heads,
        # Llama 4's intermediate_size is its experts' width; its dense layers' is intermediate_size_mlp
        ffn_hidden=c.count("intermediate_size_mlp" if llama4 else "intermediate_size"), vocab=c.count("vocab_size"),
        seq_len=seq_len, kv_heads=c.count("num_key_value_heads", heads), gated=family.gated,
        tied_embeddings=c.flag("tie_word_embeddings", family.tied), dropout=False, bias=family.bias,
        rms_norm=family.rms_norm,
        attention_head_dim=head_dim, qk_norm=c.flag("use_qk_norm", True) if llama4 else family.qk_norm,
        sandwich_norm=family.sandwich_norm,
        **_window_fields(c, family, layers), **_moe_fields(c, family, layers), **_latent_attention_fields(c, family))
    return ModelSpec(**fields)


def _window_fields(c: _Config, family: Family, layers: int) -> dict:
    """``sliding_window`` and ``global_attention_every`` as the family's keys state them (:class:`WindowKeys`)."""
    if family.window is None:
        return {}
    if family.window is WindowKeys.QWEN:
        if c.flag("use_sliding_window"):
            raise PipesimError(f"{c.source}: use_sliding_window is true, and which of Qwen's layers it windows "
                               "(max_window_layers) is its modeling code's to say; pipesim does not model it: write a "
                               "pipesim model file with sliding_window")
        return {}
    if family.window is WindowKeys.CHUNKS:
        return _chunk_fields(c, layers)
    window = c.count("sliding_window", 0)
    if not window:
        return {}
    if family.window is WindowKeys.EVERY_LAYER:
        return dict(sliding_window=window)
    pattern = c.count("sliding_window_pattern", family.global_attention_every)
    types = c.data.get("layer_types") or ["sliding_attention" if (i + 1) % pattern else "full_attention"
                                          for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers or set(types) - {"sliding_attention", "full_attention"}:
        raise PipesimError(f"{c.source}: layer_types must list 'sliding_attention' or 'full_attention' for each of "
                           f"its {layers} layers")
    every = full_attention_every([kind == "sliding_attention" for kind in types])
    if every is None:
        full = [i for i, kind in enumerate(types) if kind == "full_attention"]
        raise PipesimError(f"{c.source}: layer_types puts full attention on layers {full}; pipesim models every n-th "
                           "layer full (global_attention_every): write a pipesim model file")
    return dict(sliding_window=window, global_attention_every=every)


def _chunk_fields(c: _Config, layers: int) -> dict:
    """Llama 4's ``attention_chunk`` and ``global_attention_every``: chunks on the layers ``layer_types`` marks
    ``chunked_attention``, or else on the RoPE layers (``no_rope_layers`` 1; by default all but every
    ``no_rope_layer_interval``-th, as its configuration class builds them)."""
    chunk = c.count("attention_chunk_size", 0)
    if not chunk:
        return {}
    types = c.data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or set(types) - {"chunked_attention",
                                                                                 "full_attention"}:
            raise PipesimError(f"{c.source}: layer_types must list 'chunked_attention' or 'full_attention' for each "
                               f"of its {layers} layers")
        chunked = [kind == "chunked_attention" for kind in types]
    else:
        rope = c.flags("no_rope_layers", layers)
        interval = c.count("no_rope_layer_interval", 4)
        chunked = ([v == 1 for v in rope] if rope is not None
                   else [(i + 1) % interval != 0 if interval else True for i in range(layers)])
    if not any(chunked):  # every layer attends to the whole sequence
        return {}
    every = full_attention_every(chunked)
    if every is None:
        full = [i for i, is_chunked in enumerate(chunked) if not is_chunked]
        raise PipesimError(f"{c.source}: full attention on layers {full[:8]}{'…' if len(full) > 8 else ''}; pipesim "
                           "models chunks on every layer but every n-th (global_attention_every): write a pipesim "
                           "model file")
    return dict(attention_chunk=chunk, global_attention_every=every)


def _moe_pattern(c: _Config, is_moe: list[bool], keys: str) -> dict:
    """The ModelSpec's MoE-layer fields of a per-layer list, or a one-line refusal naming the config's ``keys``."""
    fields = moe_layer_pattern(is_moe)
    if fields is None:
        moe = [i for i, v in enumerate(is_moe) if v]
        where = f"put MoE on layers {moe[:8]}{'…' if len(moe) > 8 else ''}" if moe else "leave no MoE layer"
        raise PipesimError(f"{c.source}: {keys} {where}; pipesim models the first k layers dense, then one MoE layer "
                           "in every n: write a pipesim model file with first_dense_layers, moe_layer_frequency and "
                           "moe_layer_offset")
    dense, every, offset = fields
    return dict(first_dense_layers=dense, moe_layer_frequency=every, moe_layer_offset=offset)


def _moe_fields(c: _Config, family: Family, layers: int) -> dict:
    if family.moe is MoeKeys.MIXTRAL:
        experts = c.count("num_local_experts", 0)
        return dict(experts=experts, experts_per_token=c.count("num_experts_per_tok") if experts else 0)
    if family.moe is MoeKeys.QWEN:
        experts = c.count("num_experts", 0)
        if not experts:
            return {}
        # Qwen2MoeDecoderLayer: MoE where the layer is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
        step, dense = c.count("decoder_sparse_step", 1), set(c.indices("mlp_only_layers", layers) or [])
        pattern = _moe_pattern(c, [i not in dense and (i + 1) % max(step, 1) == 0 for i in range(layers)],
                               "decoder_sparse_step and mlp_only_layers")
        shared = c.count("shared_expert_intermediate_size", 0)
        return dict(experts=experts, experts_per_token=c.count("num_experts_per_tok"),
                    expert_ffn_hidden=c.count("moe_intermediate_size"), shared_experts=1 if shared else 0,
                    shared_expert_ffn_hidden=shared, **pattern)
    if family.moe is MoeKeys.LLAMA4:
        experts = c.count("num_local_experts", 0)
        if not experts:
            return {}
        moe = c.indices("moe_layers", layers)
        if moe is None:  # its configuration class's default: layers n − 1, 2n − 1, … of the interleaving step n
            step = c.count("interleave_moe_layer_step", 1)
            moe = list(range(step - 1, layers, step)) if step else []
        width = c.count("intermediate_size")
        return dict(experts=experts, experts_per_token=c.count("num_experts_per_tok"), expert_ffn_hidden=width,
                    shared_experts=1, shared_expert_ffn_hidden=width,
                    **_moe_pattern(c, [i in set(moe) for i in range(layers)], "moe_layers"))
    if family.moe is MoeKeys.DEEPSEEK:
        experts = c.count("n_routed_experts", 0)
        if not experts:
            return {}
        # the groups limit the routing only under the group-limited top-k methods (V2's group_limited_greedy,
        # V3's noaux_tc); "greedy" (V2-Lite, V2's default) picks from every expert whatever n_group says
        limited = c.data.get("topk_method", "greedy") != "greedy"
        return dict(experts=experts, experts_per_token=c.count("num_experts_per_tok"),
                    expert_ffn_hidden=c.count("moe_intermediate_size"), shared_experts=c.count("n_shared_experts", 0),
                    first_dense_layers=c.count("first_k_dense_replace", 0),
                    moe_layer_frequency=c.count("moe_layer_freq", 1),
                    expert_groups=c.count("n_group", 0) if limited else 0,
                    expert_groups_per_token=c.count("topk_group", 0) if limited else 0,
                    mtp_layers=c.count("num_nextn_predict_layers", 0))
    return {}


def _latent_attention_fields(c: _Config, family: Family) -> dict:
    if not family.latent_attention:
        return {}
    return dict(q_lora_rank=c.count("q_lora_rank", 0), kv_lora_rank=c.count("kv_lora_rank"),
                qk_nope_head_dim=c.count("qk_nope_head_dim"), qk_rope_head_dim=c.count("qk_rope_head_dim"),
                v_head_dim=c.count("v_head_dim"))
