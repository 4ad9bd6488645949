"""What is trained: a decoder-only transformer's shape (ModelSpec) and loading it from a preset or a file.

The fields are those that move FLOPs, bytes and parameters: GQA (``kv_heads`` < ``heads``) shrinks the K/V
projections and their activations; a gated MLP (SwiGLU, Shazeer 2020) has three ``hidden × ffn_hidden``
matrices instead of two; ``dropout`` adds Korthikanti et al.'s 1-byte masks; ``bias`` and ``rms_norm`` only
change the parameter count a little. A head is ``hidden / heads`` wide unless ``attention_head_dim`` says otherwise
(Qwen3, Gemma: ``head_dim`` in their ``config.json``, Megatron-LM's ``--kv-channels``), when the queries are
``heads · head_dim`` wide and the output projection maps that width back to ``hidden``. ``qk_norm`` adds an RMSNorm
over each query and key head before RoPE (Qwen3, OLMo 2: ``--qk-layernorm``), a memory-bound pass over Q and K.
``sandwich_norm`` normalises each block's output as well as its input (Gemma 2 and 3: four norms a layer).
Sliding-window attention (``sliding_window`` w > 0; Mistral 7B, gpt-oss, Gemma 2 and 3): a query attends to
itself and the w − 1 keys before it, in every layer, or with ``global_attention_every`` n in all but every n-th
layer (layer i, from 0, attends to everything when (i + 1) % n == 0: gpt-oss and Gemma 2 alternate, n = 2;
Gemma 3 has five windowed layers to one, n = 6). Chunked attention (``attention_chunk`` c > 0; Llama 4's
``attention_chunk_size``): the sequence is cut into chunks of c tokens and a query attends causally within its own
chunk alone (NeMo's Llama 4 runs each chunk as a sequence of its own), in every layer or, with
``global_attention_every`` n, in all but every n-th (Llama 4's NoPE layers, n = 4). A model has windows or chunks,
not both; either is local attention (:attr:`ModelSpec.local_attention_layers`), which only moves the attention's
work where the span is shorter than the sequence.

Mixture of experts (``experts`` > 0; Shazeer et al. 2017, GShard, Switch; the HF ``config.json`` names are in
the field docs): a MoE layer replaces the MLP by ``experts`` routed experts of width ``expert_ffn_hidden``, of
which each token uses ``experts_per_token`` (top-k), plus ``shared_experts`` every token uses (DeepSeekMoE),
and a router (one ``hidden × experts`` linear). Layer ``i`` (from 0) is MoE when ``i ≥ first_dense_layers``
and ``i % moe_layer_frequency == moe_layer_offset`` (DeepSeek's ``first_k_dense_replace`` and ``moe_layer_freq``,
offset 0; Llama 4 Maverick's and Qwen2-MoE's interleaving step n puts the MoE layers at n − 1, 2n − 1, …: offset
n − 1); the other layers keep the dense MLP of width ``ffn_hidden``.
Group-limited routing (DeepSeek-V2 §2.2.2, V3 §2.1.2; Megatron-Core's
``--moe-router-num-groups`` and ``--moe-router-group-topk``): the experts fall in ``expert_groups`` equal groups of
consecutive experts, and a token's top-k come from the ``expert_groups_per_token`` groups whose best experts score
highest. Placed one group to a node it is DeepSeek-V3's node-limited routing (a token reaches at most 4 of 8 nodes),
which bounds what a deduplicating dispatch (``Layout.moe_dispatcher``) sends across nodes.

Multi-token prediction (``mtp_layers`` D > 0; DeepSeek-V3 §2.2, Megatron-Core's ``--mtp-num-layers``, the
config's ``num_nextn_predict_layers``): D modules after the last layer, each a transformer layer of the last layer's
kind behind a projection of two normed inputs (2h → h), sharing the embedding and the output head, whose loss is
added to the model's; run on the stage with the loss unless the layout names another
(:mod:`pipesim.analytic.mtp`). Their parameters are not in the model's count, as DeepSeek-V3's 671B leaves out its
14B module.

Multi-head latent attention (``kv_lora_rank`` > 0; DeepSeek-V2 §2.1, DeepSeek-V3 §2.1.1): queries through an
optional low-rank ``q_lora_rank`` bottleneck, keys and values from one ``kv_lora_rank`` latent plus a shared
``qk_rope_head_dim`` RoPE key; per head, queries and keys are ``qk_nope_head_dim + qk_rope_head_dim`` wide and
values ``v_head_dim``.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, replace

from pipesim.analytic.spec_fields import Field, Kind
from pipesim.errors import PipesimError
from pipesim.hash_once import fields_only_state, hash_once


class LayerKind(enum.Enum):
    """A layer's MLP: the dense one, or mixture-of-experts (attention is the same in both)."""

    DENSE = "dense"
    MOE = "moe"


# The most layers a model may have: the deepest published transformers have a few hundred, and pipesim keeps a
# list of the layers' kinds (a model of 10^12 layers from a typo would hang building it)
MAX_LAYERS = 100_000


def check_layer_count(name: str, layers: int) -> None:
    """A one-line refusal of a layer count over :data:`MAX_LAYERS` (a reader checks it before building anything per
    layer; every ModelSpec checks it too)."""
    if layers > MAX_LAYERS:
        raise PipesimError(f"model {name}: layers={layers} must be ≤ {MAX_LAYERS:,}")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, plus the per-microbatch shape it is trained at."""

    # the planner's caches key on the model: hashed once per instance, kept out of pickles
    __hash__ = hash_once
    __getstate__ = fields_only_state

    name: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    kv_heads: int | None = None  # None: multi-head attention (kv_heads = heads)
    gated: bool = False  # SwiGLU/GeGLU MLP: gate and up projections, then down
    micro_batch: int = 1  # sequences per microbatch (b)
    tied_embeddings: bool = False  # output layer reuses the input embedding matrix
    dtype_bytes: int = 2  # BF16 weights and activations
    dropout: bool = True  # dropout after attention scores, attention output and MLP (GPT-3); Llama has none
    bias: bool = True  # biases in the linear layers (GPT), none in Llama
    rms_norm: bool = False  # RMSNorm (h parameters) instead of LayerNorm (2h)
    learned_positions: bool = False  # a seq_len × hidden position embedding (GPT-2/3); RoPE has no parameters
    attention_head_dim: int = 0  # one head's width; 0: hidden / heads (every model before Qwen3 and Gemma)
    qk_norm: bool = False  # RMSNorm over each query and key head (Qwen3, OLMo 2)
    sandwich_norm: bool = False  # a norm after attention and after the MLP too, four a layer (Gemma 2 and 3)
    sliding_window: int = 0  # keys a query sees in a windowed layer, itself included; 0: full causal attention
    global_attention_every: int = 0  # with a window or chunks, every n-th layer attends to everything; 0: none does
    attention_chunk: int = 0  # a query attends within its own chunk of this many tokens (Llama 4); 0: no chunks
    # Mixture of experts (0 experts: a dense model; the module docstring gives the layer rule).
    experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0  # top-k (required with experts)
    expert_ffn_hidden: int = 0  # one routed expert's inner width; 0: ffn_hidden
    shared_experts: int = 0  # experts every token goes through (DeepSeekMoE)
    shared_expert_ffn_hidden: int = 0  # one shared expert's inner width; 0: expert_ffn_hidden
    first_dense_layers: int = 0  # the first k layers keep the dense MLP
    moe_layer_frequency: int = 1  # every n-th layer (counted from 0) is MoE
    moe_layer_offset: int = 0  # ... the one at this place in each n (Llama 4 Maverick: 1 of 2)
    expert_groups: int = 0  # group-limited routing: groups of consecutive experts (n_group); 0: no limit
    expert_groups_per_token: int = 0  # the groups a token's experts come from (topk_group)
    mtp_layers: int = 0  # multi-token-prediction modules after the last layer (num_nextn_predict_layers)
    # Multi-head latent attention (0 kv_lora_rank: standard multi-head / grouped-query attention).
    q_lora_rank: int = 0  # 0: queries projected directly from the hidden state
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len", "micro_batch", "dtype_bytes"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PipesimError(f"model {self.name}: {key}={value!r} must be a positive integer")
        check_layer_count(self.name, self.layers)
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if (
            isinstance(self.kv_heads, bool)
            or not isinstance(self.kv_heads, int)
            or self.kv_heads < 1
            or self.heads % self.kv_heads
        ):
            raise PipesimError(f"model {self.name}: heads={self.heads} must be a multiple of kv_heads={self.kv_heads}")
        if (isinstance(self.attention_head_dim, bool) or not isinstance(self.attention_head_dim, int)
                or self.attention_head_dim < 0):
            raise PipesimError(f"model {self.name}: attention_head_dim={self.attention_head_dim!r} must be an "
                               "integer ≥ 0 (0: hidden / heads)")
        if self.mla and self.attention_head_dim:
            raise PipesimError(f"model {self.name}: attention_head_dim describes standard attention, but latent "
                               "attention (kv_lora_rank) sizes its heads by qk_nope_head_dim, qk_rope_head_dim and "
                               "v_head_dim; drop attention_head_dim")
        if self.attention_head_dim and self.attention_head_dim * self.heads == self.hidden:
            object.__setattr__(self, "attention_head_dim", 0)  # the default width: one spelling of one model
        if self.hidden % self.heads and not self.mla and not self.attention_head_dim:
            raise PipesimError(f"model {self.name}: hidden={self.hidden} must be a multiple of heads={self.heads}, "
                               "or give attention_head_dim (head_dim) for heads of another width")
        if isinstance(self.mtp_layers, bool) or not isinstance(self.mtp_layers, int) or self.mtp_layers < 0:
            raise PipesimError(f"model {self.name}: mtp_layers={self.mtp_layers!r} must be an integer ≥ 0")
        self._check_moe()
        self._check_mla()
        self._check_window()

    def _check_window(self) -> None:
        for key in ("sliding_window", "global_attention_every", "attention_chunk"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise PipesimError(f"model {self.name}: {key}={value!r} must be an integer ≥ 0")
        if self.sliding_window and self.attention_chunk:
            raise PipesimError(f"model {self.name}: sliding_window={self.sliding_window} and attention_chunk="
                               f"{self.attention_chunk} are two kinds of local attention; pipesim models one a "
                               "model: drop one")
        if self.global_attention_every and not self.local_attention_span:
            raise PipesimError(f"model {self.name}: global_attention_every={self.global_attention_every} places "
                               "full-attention layers among windowed or chunked ones, but sliding_window and "
                               "attention_chunk are 0; set one or drop global_attention_every")

    def _check_moe(self) -> None:
        keys = (
            "experts",
            "experts_per_token",
            "expert_ffn_hidden",
            "shared_experts",
            "shared_expert_ffn_hidden",
            "first_dense_layers",
            "expert_groups",
            "expert_groups_per_token",
        )
        for key in (*keys, "moe_layer_frequency", "moe_layer_offset"):
            value = getattr(self, key)
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (1 if key == "moe_layer_frequency" else 0)
            ):
                raise PipesimError(
                    f"model {self.name}: {key}={value!r} must be an integer ≥ "
                    f"{1 if key == 'moe_layer_frequency' else 0}"
                )
        if not self.experts:
            given = [k for k in keys[1:] if getattr(self, k)]
            pattern = [k for k in ("moe_layer_frequency", "moe_layer_offset")
                       if getattr(self, k) != (1 if k == "moe_layer_frequency" else 0)]
            if given or pattern:
                raise PipesimError(
                    f"model {self.name}: {(given or pattern)[0]} describes "
                    "mixture-of-experts layers, but experts is 0; set experts or drop it"
                )
            return
        if not 1 <= self.experts_per_token <= self.experts:
            raise PipesimError(
                f"model {self.name}: experts_per_token={self.experts_per_token} must be between 1 "
                f"and experts={self.experts} (the router's top-k)"
            )
        if self.moe_layer_offset >= self.moe_layer_frequency:
            raise PipesimError(
                f"model {self.name}: moe_layer_offset={self.moe_layer_offset} must be below "
                f"moe_layer_frequency={self.moe_layer_frequency} (the MoE layer's place in each group of that many)"
            )
        if self.moe_layers == 0:
            raise PipesimError(
                f"model {self.name}: first_dense_layers={self.first_dense_layers}, moe_layer_frequency="
                f"{self.moe_layer_frequency} and moe_layer_offset={self.moe_layer_offset} leave no MoE "
                f"layer of {self.layers}; lower them or set experts to 0"
            )
        self._check_expert_groups()
        if not self.expert_ffn_hidden:
            object.__setattr__(self, "expert_ffn_hidden", self.ffn_hidden)
        if not self.shared_expert_ffn_hidden:
            object.__setattr__(self, "shared_expert_ffn_hidden", self.expert_ffn_hidden)

    def _check_expert_groups(self) -> None:
        groups, chosen = self.expert_groups, self.expert_groups_per_token
        if chosen and not groups:
            raise PipesimError(f"model {self.name}: expert_groups_per_token={chosen} chooses among groups of experts, "
                               "but expert_groups is 0; set expert_groups or drop expert_groups_per_token")
        if groups <= 1 or chosen >= groups:  # one group, or every group chosen: no limit (DeepSeek-V2-Lite's 1, 1)
            object.__setattr__(self, "expert_groups", 0)
            object.__setattr__(self, "expert_groups_per_token", 0)
            return
        if self.experts % groups:
            raise PipesimError(f"model {self.name}: expert_groups={groups} must divide experts={self.experts} "
                               "(equal groups of consecutive experts)")
        if not 1 <= chosen < groups:
            raise PipesimError(f"model {self.name}: expert_groups_per_token={chosen} must be between 1 and "
                               f"expert_groups={groups} (the groups a token's experts come from)")
        if self.experts_per_token > chosen * (self.experts // groups):
            raise PipesimError(f"model {self.name}: experts_per_token={self.experts_per_token} exceeds the "
                               f"{chosen * (self.experts // groups)} experts of {chosen} groups; raise "
                               "expert_groups_per_token")

    def _check_mla(self) -> None:
        keys = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        for key in keys:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise PipesimError(f"model {self.name}: {key}={value!r} must be an integer ≥ 0")
        if not self.kv_lora_rank:
            given = [k for k in keys if getattr(self, k)]
            if given:
                raise PipesimError(
                    f"model {self.name}: {given[0]} describes latent attention (MLA), but "
                    "kv_lora_rank is 0; set kv_lora_rank or drop it"
                )
            return
        missing = [k for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim") if not getattr(self, k)]
        if missing:
            raise PipesimError(
                f"model {self.name}: latent attention (kv_lora_rank={self.kv_lora_rank}) needs {missing[0]} ≥ 1"
            )

    @property
    def head_dim(self) -> int:
        """One head's width: ``attention_head_dim`` where given, else ``hidden / heads``."""
        return self.attention_head_dim or self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): ``kv_heads · head_dim``; equals ``hidden`` without GQA."""
        return self.kv_heads * self.head_dim

    @property
    def query_heads_per_kv_head(self) -> float:
        """Query heads sharing each key and value head: ``heads / kv_heads`` under grouped-query attention, 1 for
        multi-head attention and for latent attention (whose keys and values are per head already)."""
        return 1.0 if self.mla else self.heads / self.kv_heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's query and key: ``qk_nope + qk_rope`` under MLA, else ``head_dim``."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim if self.mla else self.head_dim

    @property
    def q_width(self) -> int:
        """Width of Q (all heads): ``heads · head_dim``, ``hidden`` for standard attention of ``hidden / heads``-wide
        heads."""
        return self.heads * self.qk_head_dim

    @property
    def k_width(self) -> int:
        """Width of K as the attention kernel reads it: ``kv_dim`` (GQA), or every head's key under MLA."""
        return self.heads * self.qk_head_dim if self.mla else self.kv_dim

    @property
    def v_width(self) -> int:
        return self.heads * self.v_head_dim if self.mla else self.kv_dim

    @property
    def attention_out_width(self) -> int:
        """Input width of the output projection: ``heads · value_head_dim`` (= ``q_width`` for standard attention)."""
        return self.heads * self.value_head_dim

    @property
    def moe_ffn_per_token(self) -> int:
        """The MLP width one token goes through in a MoE layer: top-k routed plus the shared experts."""
        return self.experts_per_token * self.expert_ffn_hidden + self.shared_experts * self.shared_expert_ffn_hidden

    def layer_kind(self, index: int) -> LayerKind:
        """Whether layer ``index`` (from 0) has the dense MLP or a MoE one (module docstring)."""
        if (self.experts and index >= self.first_dense_layers
                and index % self.moe_layer_frequency == self.moe_layer_offset):
            return LayerKind.MOE
        return LayerKind.DENSE

    def layer_kinds(self) -> tuple[LayerKind, ...]:
        # Kept beside the fields (not in eq/hash; a frozen dataclass's __dict__): the cost model asks for it
        # per stage, the planner of tens of thousands of configurations of one model.
        kinds = self.__dict__.get("_layer_kinds")
        if kinds is None:
            kinds = self.__dict__["_layer_kinds"] = tuple(self.layer_kind(i) for i in range(self.layers))
        return kinds

    @property
    def block_norms(self) -> int:
        """Norms a layer runs: before attention and before the MLP, and with ``sandwich_norm`` after each too."""
        return 4 if self.sandwich_norm else 2

    @property
    def local_attention_span(self) -> int:
        """The tokens a local-attention layer reaches: its sliding window or its chunk (0: neither)."""
        return self.sliding_window or self.attention_chunk

    @property
    def local_attention_kind(self) -> str:
        """How the model's local layers attend, as reports say it."""
        return "chunks" if self.attention_chunk else "sliding windows"

    @property
    def local_attention_text(self) -> str:
        """The local attention as reports and listings name it ("chunks of 8192", "sliding window 128")."""
        return f"chunks of {self.attention_chunk}" if self.attention_chunk else f"sliding window {self.sliding_window}"

    @property
    def local_attention_layers(self) -> int:
        """Layers whose attention is local, a sliding window or chunks shorter than the sequence (the rest attend to
        everything)."""
        span = self.local_attention_span
        if not span or span >= self.seq_len:
            return 0
        n = self.global_attention_every
        return self.layers - (self.layers // n if n else 0)

    @property
    def moe_layers(self) -> int:
        return sum(k is LayerKind.MOE for k in self.layer_kinds())

    @property
    def tokens_per_microbatch(self) -> int:
        return self.micro_batch * self.seq_len

    def with_shape(self, seq_len: int | None = None, micro_batch: int | None = None) -> ModelSpec:
        return replace(self, seq_len=seq_len or self.seq_len, micro_batch=micro_batch or self.micro_batch)

    def to_dict(self) -> dict:
        return asdict(self)


def full_attention_every(windowed: list[bool]) -> int | None:
    """``global_attention_every`` of a per-layer list of which layers are windowed: 0 when every one is, n when
    exactly the n-th, 2n-th, ... attend to everything, None for any other pattern (which a ModelSpec cannot say)."""
    full = [i for i, is_windowed in enumerate(windowed) if not is_windowed]
    if not full:
        return 0
    every = full[0] + 1
    return every if full == list(range(every - 1, len(windowed), every)) else None


def moe_layer_pattern(is_moe: list[bool]) -> tuple[int, int, int] | None:
    """``(first_dense_layers, moe_layer_frequency, moe_layer_offset)`` of a per-layer list of which layers are MoE,
    None for a pattern a ModelSpec cannot say (or no MoE layer). Written with no dense layers first where the first
    MoE layer falls in the first period (Llama 4 Maverick's 1, 3, 5, …: (0, 2, 1)), else with them (DeepSeek-V3's
    three: (3, 1, 0))."""
    moe = [i for i, flag in enumerate(is_moe) if flag]
    if not moe:
        return None
    first = moe[0]
    every = moe[1] - first if len(moe) > 1 else len(is_moe)
    offset, dense = first % every, (0 if first < every else first)
    rule = [i >= dense and i % every == offset for i in range(len(is_moe))]
    return (dense, every, offset) if rule == list(is_moe) else None


FIELDS: tuple[Field, ...] = (
    Field("name", Kind.TEXT, "", "shown in reports", default="the file name"),
    Field("layers", Kind.INT, "", "transformer layers", required=True, low=1, high=MAX_LAYERS),
    Field("hidden", Kind.INT, "", "model width h", required=True, low=1),
    Field("heads", Kind.INT, "", "attention (query) heads", required=True, low=1),
    Field("ffn_hidden", Kind.INT, "", "MLP inner width", required=True, low=1),
    Field("vocab", Kind.INT, "tokens", "vocabulary size (padded as trained)", required=True, low=1),
    Field("seq_len", Kind.INT, "tokens", "sequence length (--seq-len overrides)", required=True, low=1),
    Field("kv_heads", Kind.INT, "", "key/value heads (GQA); default: heads", low=1),
    Field("gated", Kind.BOOL, "", "SwiGLU/GeGLU MLP (three matrices)", default=False),
    Field(
        "mlp",
        Kind.TEXT,
        "",
        "as `pipesim models` prints it: swiglu sets gated, gelu clears it",
        choices=("swiglu", "gelu"),
    ),
    Field("micro_batch", Kind.INT, "sequences", "per microbatch (--micro-batch-size overrides)", default=1, low=1),
    Field("tied_embeddings", Kind.BOOL, "", "output layer shares the input embedding", default=False),
    Field("dtype_bytes", Kind.INT, "bytes", "per weight/activation element (2: BF16)", default=2, low=1, high=8),
    Field("dropout", Kind.BOOL, "", "dropout masks stored (GPT-3 yes, Llama no)", default=True),
    Field("bias", Kind.BOOL, "", "biases in the linear layers", default=True),
    Field("rms_norm", Kind.BOOL, "", "RMSNorm (h weights) instead of LayerNorm (2h)", default=False),
    Field("learned_positions", Kind.BOOL, "", "a learned seq_len × h position table (else RoPE)", default=False),
    Field("attention_head_dim", Kind.INT, "", "one attention head's width (head_dim, --kv-channels); 0: hidden / heads",
          default=0, low=0),
    Field("qk_norm", Kind.BOOL, "", "RMSNorm over each query and key head (Qwen3, OLMo 2; --qk-layernorm)",
          default=False),
    Field("sandwich_norm", Kind.BOOL, "", "a norm after attention and after the MLP too, four a layer (Gemma 2, 3)",
          default=False),
    Field("sliding_window", Kind.INT, "tokens", "keys a query attends to in a windowed layer, itself included "
          "(sliding_window); 0: full causal attention", default=0, low=0),
    Field("global_attention_every", Kind.INT, "", "with sliding_window or attention_chunk, every n-th layer attends "
          "to the whole sequence (2: gpt-oss, Gemma 2; 6: Gemma 3; 4: Llama 4); 0: every layer is local", default=0,
          low=0),
    Field("attention_chunk", Kind.INT, "tokens", "a query attends causally within its own chunk of this many tokens "
          "(attention_chunk_size, Llama 4); 0: no chunks", default=0, low=0),
    Field(
        "experts",
        Kind.INT,
        "",
        "routed experts per MoE layer (n_routed_experts, num_local_experts); 0: dense",
        default=0,
        low=0,
    ),
    Field(
        "experts_per_token",
        Kind.INT,
        "",
        "experts each token is routed to, top-k (num_experts_per_tok)",
        default=0,
        low=0,
    ),
    Field(
        "expert_ffn_hidden",
        Kind.INT,
        "",
        "one routed expert's inner width (moe_intermediate_size); default: ffn_hidden",
        low=0,
    ),
    Field("shared_experts", Kind.INT, "", "experts every token uses (n_shared_experts)", default=0, low=0),
    Field(
        "shared_expert_ffn_hidden", Kind.INT, "", "one shared expert's inner width; default: expert_ffn_hidden", low=0
    ),
    Field(
        "first_dense_layers",
        Kind.INT,
        "",
        "the first k layers keep the dense MLP (first_k_dense_replace)",
        default=0,
        low=0,
    ),
    Field(
        "moe_layer_frequency",
        Kind.INT,
        "",
        "layer i ≥ first_dense_layers is MoE when i % this == moe_layer_offset (moe_layer_freq, "
        "interleave_moe_layer_step)",
        default=1,
        low=1,
    ),
    Field("moe_layer_offset", Kind.INT, "", "with moe_layer_frequency n, the MoE layer's place in each n layers "
          "(Llama 4 Maverick, Qwen2-MoE's decoder_sparse_step: n − 1)", default=0, low=0),
    Field("expert_groups", Kind.INT, "", "group-limited routing: groups of consecutive experts (n_group, "
          "--moe-router-num-groups); 0: a token may reach any expert", default=0, low=0),
    Field("expert_groups_per_token", Kind.INT, "", "with expert_groups, the groups a token's experts come from "
          "(topk_group, --moe-router-group-topk)", default=0, low=0),
    Field("mtp_layers", Kind.INT, "", "multi-token-prediction modules after the last layer, on the loss's stage "
          "(num_nextn_predict_layers, --mtp-num-layers); 0: none", default=0, low=0),
    Field("q_lora_rank", Kind.INT, "", "MLA query bottleneck rank; 0: no bottleneck", default=0, low=0),
    Field("kv_lora_rank", Kind.INT, "", "MLA key/value latent rank; 0: standard attention", default=0, low=0),
    Field("qk_nope_head_dim", Kind.INT, "", "MLA per-head query/key width without RoPE", default=0, low=0),
    Field(
        "qk_rope_head_dim", Kind.INT, "", "MLA per-head RoPE query/key width (the key part is shared)", default=0, low=0
    ),
    Field("v_head_dim", Kind.INT, "", "MLA per-head value width", default=0, low=0),
    Field(
        "params",
        Kind.FLOAT,
        "parameters",
        "as `pipesim models` prints it (e.g. 7.0e9); checked against the count from the shape (within 5 %), not used",
        low=0,
        low_open=True,
    ),
)
# The column names `pipesim models` prints.
ALIASES = {"ffn": "ffn_hidden", "seq": "seq_len", "kv": "kv_heads", "head_dim": "attention_head_dim"}
