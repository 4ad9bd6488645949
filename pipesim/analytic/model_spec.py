"""What is trained: a decoder-only transformer's shape (ModelSpec) and loading it from a preset or a file.

The fields are those that move FLOPs, bytes and parameters: GQA (``kv_heads`` < ``heads``) shrinks the K/V
projections and their activations; a gated MLP (SwiGLU, Shazeer 2020) has three ``hidden × ffn_hidden``
matrices instead of two; ``dropout`` adds Korthikanti et al.'s 1-byte masks; ``bias`` and ``rms_norm`` only
change the parameter count a little. Head dimension is ``hidden / heads`` (true of every preset).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from pipesim.analytic.spec_fields import Field, Kind
from pipesim.errors import PipesimError


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
        if isinstance(self.kv_heads, bool) or not isinstance(self.kv_heads, int) or self.kv_heads < 1 \
                or self.heads % self.kv_heads:
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


FIELDS: tuple[Field, ...] = (
    Field("name", Kind.TEXT, "", "shown in reports", default="the file name"),
    Field("layers", Kind.INT, "", "transformer layers", required=True, low=1),
    Field("hidden", Kind.INT, "", "model width h", required=True, low=1),
    Field("heads", Kind.INT, "", "attention (query) heads", required=True, low=1),
    Field("ffn_hidden", Kind.INT, "", "MLP inner width", required=True, low=1),
    Field("vocab", Kind.INT, "tokens", "vocabulary size (padded as trained)", required=True, low=1),
    Field("seq_len", Kind.INT, "tokens", "sequence length (--seq-len overrides)", required=True, low=1),
    Field("kv_heads", Kind.INT, "", "key/value heads (GQA); default: heads", low=1),
    Field("gated", Kind.BOOL, "", "SwiGLU/GeGLU MLP (three matrices)", default=False),
    Field("mlp", Kind.TEXT, "", "as `pipesim models` prints it: swiglu sets gated, gelu clears it",
          choices=("swiglu", "gelu")),
    Field("micro_batch", Kind.INT, "sequences", "per microbatch (--micro-batch-size overrides)", default=1,
          low=1),
    Field("tied_embeddings", Kind.BOOL, "", "output layer shares the input embedding", default=False),
    Field("dtype_bytes", Kind.INT, "bytes", "per weight/activation element (2: BF16)", default=2, low=1, high=8),
    Field("dropout", Kind.BOOL, "", "dropout masks stored (GPT-3 yes, Llama no)", default=True),
    Field("bias", Kind.BOOL, "", "biases in the linear layers", default=True),
    Field("rms_norm", Kind.BOOL, "", "RMSNorm (h weights) instead of LayerNorm (2h)", default=False),
    Field("learned_positions", Kind.BOOL, "", "a learned seq_len × h position table (else RoPE)", default=False),
    Field("params", Kind.FLOAT, "parameters", "as `pipesim models` prints it (e.g. 7.0e9); checked against the "
          "count from the shape (within 5 %), not used", low=0, low_open=True),
)
# The column names `pipesim models` prints.
ALIASES = {"ffn": "ffn_hidden", "seq": "seq_len", "kv": "kv_heads"}
