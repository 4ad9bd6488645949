"""What is trained: a decoder-only transformer's shape (ModelSpec) and loading it from a preset or a file.

The fields are those that move FLOPs, bytes and parameters: GQA (``kv_heads`` < ``heads``) shrinks the K/V
projections and their activations; a gated MLP (SwiGLU, Shazeer 2020) has three ``hidden × ffn_hidden``
matrices instead of two; ``dropout`` adds Korthikanti et al.'s 1-byte masks; ``bias`` and ``rms_norm`` only
change the parameter count a little. Head dimension is ``hidden / heads`` (true of every preset).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from pipesim.errors import PipesimError
from pipesim.io.spec_files import build_frozen, preset_or_file


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, plus the per-microbatch shape it is trained at."""

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

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len", "micro_batch", "dtype_bytes"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PipesimError(f"model {self.name}: {key}={value!r} must be a positive integer")
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.kv_heads < 1 or self.heads % self.kv_heads:
            raise PipesimError(f"model {self.name}: heads={self.heads} must be a multiple of kv_heads={self.kv_heads}")
        if self.hidden % self.heads:
            raise PipesimError(f"model {self.name}: hidden={self.hidden} must be a multiple of heads={self.heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): ``kv_heads · head_dim``; equals ``hidden`` without GQA."""
        return self.kv_heads * self.head_dim

    @property
    def tokens_per_microbatch(self) -> int:
        return self.micro_batch * self.seq_len

    def with_shape(self, seq_len: int | None = None, micro_batch: int | None = None) -> ModelSpec:
        return replace(self, seq_len=seq_len or self.seq_len, micro_batch=micro_batch or self.micro_batch)

    def to_dict(self) -> dict:
        return asdict(self)


_INTS = {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len", "micro_batch", "dtype_bytes"}
_BOOLS = {"gated", "tied_embeddings", "dropout", "bias", "rms_norm", "learned_positions"}


def model_from_dict(data: dict, source: str) -> ModelSpec:
    data = dict(data)
    data.setdefault("name", source)
    return build_frozen(ModelSpec, data, source, ints=_INTS, floats=set(), bools=_BOOLS)


def load_model(spec: str) -> ModelSpec:
    """A preset name (``pipesim models``) or a path to a .yaml/.json model file."""
    from pipesim.analytic.model_presets import MODEL_PRESETS

    return preset_or_file(spec, MODEL_PRESETS, flag="--model", what="model", listing="pipesim models",
                          from_dict=model_from_dict)
