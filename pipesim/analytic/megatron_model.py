"""A model described by Megatron-LM's flags (``--num-layers``, ``--hidden-size``, ``--swiglu``, ...), as a
:class:`~pipesim.analytic.model_spec.ModelSpec`: so a ``pretrain_gpt.py`` launch line simulates as pasted.

Each flag means what ``megatron/training/arguments.py`` makes of it, Megatron-LM's defaults included where a flag
is absent: the MLP 4h wide (with ``--swiglu``, ``int(8h/3 / 64)·64``), LayerNorm, learned absolute positions,
input and output embeddings tied, biases in the linears, dropout 0.1 (``--hidden-dropout``/``--attention-dropout``
0 remove it), the vocabulary padded to a multiple of ``--make-vocab-size-divisible-by`` (128) times tp, every
layer MoE once ``--num-experts`` is given, top-2 routing. Megatron reads the vocabulary from its tokenizer, so the
size is a flag here (``--vocab-size``, as its NullTokenizer takes it).

Beside ``--model``, the flags are a check instead: each one given must agree with the preset or file, so a launch
line is not simulated against a different model than it trains.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from pipesim.errors import PipesimError

if TYPE_CHECKING:  # the flags parse on every simulate command line, the model spec loads only for a model
    from pipesim.analytic.model_spec import ModelSpec

NAME = "megatron-flags"  # the model's name in reports when it was built from the flags


@dataclass(frozen=True)
class MegatronModelArgs:
    """Megatron-LM's model-shape flags, each None (or False) where not given; field names are the flags'."""

    num_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    ffn_hidden_size: int | None = None
    group_query_attention: bool = False
    num_query_groups: int | None = None
    max_position_embeddings: int | None = None
    vocab_size: int | None = None
    make_vocab_size_divisible_by: int = 128
    swiglu: bool = False
    normalization: str | None = None  # "LayerNorm" (Megatron's default) or "RMSNorm"
    position_embedding_type: str | None = None  # "learned_absolute" (default), "rope" or "none"
    untie_embeddings_and_output_weights: bool = False
    disable_bias_linear: bool = False
    hidden_dropout: float | None = None
    attention_dropout: float | None = None
    num_experts: int | None = None
    moe_router_topk: int | None = None
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_intermediate_size: int | None = None
    moe_layer_freq: str | None = None  # "N" (every N-th layer) or a pattern "[0,0,1,1,...]"
    moe_router_num_groups: int | None = None  # group-limited routing's groups of experts
    moe_router_group_topk: int | None = None  # the groups a token's experts come from
    mtp_num_layers: int | None = None  # multi-token-prediction modules on the last stage
    multi_latent_attention: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_head_dim: int | None = None
    qk_pos_emb_head_dim: int | None = None
    v_head_dim: int | None = None
    kv_channels: int | None = None  # one head's width; Megatron-LM's default hidden / heads
    qk_layernorm: bool = False
    window_size: str | None = None  # "left,right": a query sees the left keys before it (right 0: causal)
    window_attn_skip_freq: str | None = None  # "N" (every N-th layer full) or a 1/0 list per layer (1: windowed)
    padded_vocab_size: int | None = None  # the embedding's rows as given, padded no further

    def given(self) -> list[str]:
        """The flags given, as typed (``--num-layers``), in declaration order."""
        defaults = MegatronModelArgs()
        return [f"--{f.name.replace('_', '-')}" for f in fields(self)
                if getattr(self, f.name) != getattr(defaults, f.name)]


def padded_vocab(vocab: int, multiple: int) -> int:
    """The vocabulary rounded up to a multiple of ``multiple`` (the embedding's rows as Megatron-LM and nanotron
    build them: ``make_vocab_size_divisible_by`` × tp)."""
    return math.ceil(vocab / multiple) * multiple


_MAX_LAYERS = 100_000  # a list expression longer than this is not a model's layers (and would fill memory)


def _list_expression(node: ast.expr) -> list | int:
    """The value of a list expression as Megatron-LM's ``--moe-layer-freq`` takes one (it evaluates the text as
    Python: ``[1]*48``, ``[0]*3+[1]*58``, ``([1]*3+[0])*2``): integers and lists joined by ``+`` and ``*``,
    nothing else (no names, no calls)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.List):
        return [_list_expression(item) for item in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _list_expression(node.left), _list_expression(node.right)
        if isinstance(node.op, ast.Add) and type(left) is type(right):
            return left + right
        if isinstance(node.op, ast.Mult) and {type(left), type(right)} == {list, int}:
            items, times = (left, right) if isinstance(left, list) else (right, left)
            if len(items) * times > _MAX_LAYERS:
                raise ValueError("longer than any model")
            return items * times
    raise ValueError("not a list expression")


def _layer_flags(text: str) -> list[int]:
    """A per-layer 0/1 list written as a list or as Megatron-LM's list expression (:func:`_list_expression`)."""
    value = _list_expression(ast.parse(text.strip().strip("'\""), mode="eval").body)
    if not isinstance(value, list) or any(type(v) is not int for v in value):
        raise ValueError("not a list of integers")
    return value


def _window(args: MegatronModelArgs, layers: int) -> tuple[int, int]:
    """(sliding_window, global_attention_every) of ``--window-size L,R`` and ``--window-attn-skip-freq``: a query
    sees itself and the L keys before it (FlashAttention's window, R = 0 for causal attention); every layer is
    windowed, or with N one layer in N attends to everything (the N-th, 2N-th, ...), or as a 1/0 list per layer
    (1: windowed) of that form."""
    if args.window_size is None:
        if args.window_attn_skip_freq is not None:
            raise PipesimError("--window-attn-skip-freq places full-attention layers among windowed ones; add "
                               "--window-size L,0")
        return 0, 0
    try:
        left, right = (int(v) for v in args.window_size.strip("()[] ").split(","))
    except ValueError:
        raise PipesimError(f"--window-size {args.window_size!r}: give left,right, e.g. 128,0") from None
    if left < 0 or right != 0:
        raise PipesimError(f"--window-size {args.window_size}: pipesim models causal windows, left ≥ 0 and right 0")
    text = (args.window_attn_skip_freq or "").strip()
    if not text:
        return left + 1, 0
    if text.isdigit() and int(text) >= 1:
        return left + 1, int(text)
    try:
        flags = _layer_flags(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError, OverflowError):
        raise PipesimError(f"--window-attn-skip-freq {text!r}: give an integer N or a 1/0 list per layer") from None
    from pipesim.analytic.model_spec import full_attention_every

    every = full_attention_every([v == 1 for v in flags])
    if len(flags) != layers or set(flags) - {0, 1} or every is None:
        raise PipesimError(f"--window-attn-skip-freq {text}: pipesim models {layers} layers of 1/0 with every n-th "
                           "layer full (0); give that, or an integer N")
    return left + 1, every


def _moe_layout(pattern: str | None, layers: int) -> tuple[int, int, int]:
    """(first_dense_layers, moe_layer_frequency, moe_layer_offset) of ``--moe-layer-freq``: an integer N (every
    N-th layer from layer 0) or a 0/1 list per layer of the forms pipesim models (k dense layers first, then one MoE
    layer in every n: :func:`~pipesim.analytic.model_spec.moe_layer_pattern`), written out or as Megatron-LM's
    list expression (``[0]*3+[1]*58``, ``[0,1]*24``)."""
    from pipesim.analytic.model_spec import moe_layer_pattern

    if pattern is None:
        return 0, 1, 0
    text = pattern.strip()
    if text.isdigit() and int(text) >= 1:
        return 0, int(text), 0
    try:
        flags = _layer_flags(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError, OverflowError):
        raise PipesimError(f"--moe-layer-freq {pattern!r}: give an integer N or a list of 0/1 per layer, e.g. "
                           "[0,1,1,1] or [0]*3+[1]*58") from None
    fields = (moe_layer_pattern([v == 1 for v in flags])
              if len(flags) == layers and not set(flags) - {0, 1} else None)
    if fields is None:
        raise PipesimError(f"--moe-layer-freq {pattern}: pipesim models {layers} layers of 0/1, the first k dense, "
                           "then one MoE layer in every n (DeepSeek's first_k_dense_replace, Llama 4's [0,1]*24); "
                           "give that, or a model file")
    return fields


def model_from_megatron(args: MegatronModelArgs, tp: int = 1, seq_len: int | None = None) -> ModelSpec:
    """The model Megatron-LM builds from these flags (see the module doc); ``seq_len``: ``--seq-length``."""
    from pipesim.analytic.model_spec import ModelSpec

    missing = [flag for flag, value in (("--num-layers", args.num_layers), ("--hidden-size", args.hidden_size),
                                        ("--num-attention-heads", args.num_attention_heads),
                                        ("--seq-length", seq_len),
                                        ("--vocab-size", args.vocab_size or args.padded_vocab_size))
               if value is None]
    if missing:
        raise PipesimError(f"a model from Megatron-LM's flags needs {', '.join(missing)} (--vocab-size: the "
                           "tokenizer's size); or name a preset or file with --model")
    hidden = args.hidden_size
    ffn = args.ffn_hidden_size or (int(4 * hidden * 2 / 3 / 64) * 64 if args.swiglu else 4 * hidden)
    vocab = args.padded_vocab_size or padded_vocab(args.vocab_size, args.make_vocab_size_divisible_by * tp)
    dropout = any(p is None or p > 0 for p in (args.hidden_dropout, args.attention_dropout))
    experts = args.num_experts or 0
    first_dense, frequency, offset = _moe_layout(args.moe_layer_freq, args.num_layers) if experts else (0, 1, 0)
    shared = args.moe_shared_expert_intermediate_size or 0
    mla = args.multi_latent_attention
    # --kv-channels is Megatron's head width, hidden / heads by default; latent attention sizes its heads itself
    head_dim = args.kv_channels if args.kv_channels and not mla else 0
    window, every = _window(args, args.num_layers)
    return ModelSpec(
        NAME, args.num_layers, hidden, args.num_attention_heads, ffn, vocab, seq_len,
        kv_heads=args.num_query_groups if args.group_query_attention and args.num_query_groups else None,
        gated=args.swiglu, tied_embeddings=not args.untie_embeddings_and_output_weights, dropout=dropout,
        bias=not args.disable_bias_linear, rms_norm=(args.normalization or "LayerNorm") == "RMSNorm",
        learned_positions=(args.position_embedding_type or "learned_absolute") == "learned_absolute",
        experts=experts, experts_per_token=(args.moe_router_topk or 2) if experts else 0,
        expert_ffn_hidden=(args.moe_ffn_hidden_size or 0) if experts else 0,
        shared_experts=1 if experts and shared else 0, shared_expert_ffn_hidden=shared if experts else 0,
        first_dense_layers=first_dense, moe_layer_frequency=frequency, moe_layer_offset=offset,
        expert_groups=(args.moe_router_num_groups or 0) if experts else 0,
        expert_groups_per_token=(args.moe_router_group_topk or 0) if experts else 0,
        mtp_layers=args.mtp_num_layers or 0,
        q_lora_rank=(args.q_lora_rank or 0) if mla else 0, kv_lora_rank=(args.kv_lora_rank or 0) if mla else 0,
        qk_nope_head_dim=(args.qk_head_dim or 0) if mla else 0,
        qk_rope_head_dim=(args.qk_pos_emb_head_dim or 0) if mla else 0, v_head_dim=(args.v_head_dim or 0) if mla else 0,
        # under latent attention --qk-layernorm norms the query and key-value latents (DeepSeek's q_a_layernorm and
        # kv_a_layernorm), which the latent attention's own count holds already
        attention_head_dim=head_dim, qk_norm=args.qk_layernorm and not mla, sliding_window=window,
        global_attention_every=every,
    )


def check_megatron_model(model: ModelSpec, args: MegatronModelArgs) -> None:
    """Each of Megatron-LM's shape flags given must describe ``model`` (a preset or file named by --model); a
    one-line error names the first that does not."""
    stated = {  # flag: (what it says of the model field, the field)
        "--num-layers": (args.num_layers, "layers"),
        "--hidden-size": (args.hidden_size, "hidden"),
        "--num-attention-heads": (args.num_attention_heads, "heads"),
        "--ffn-hidden-size": (args.ffn_hidden_size, "ffn_hidden"),
        "--num-query-groups": (args.num_query_groups if args.group_query_attention else None, "kv_heads"),
        "--swiglu": (True if args.swiglu else None, "gated"),
        "--normalization": (None if args.normalization is None else args.normalization == "RMSNorm", "rms_norm"),
        "--position-embedding-type": (None if args.position_embedding_type is None
                                      else args.position_embedding_type == "learned_absolute", "learned_positions"),
        "--untie-embeddings-and-output-weights": (False if args.untie_embeddings_and_output_weights else None,
                                                  "tied_embeddings"),
        "--disable-bias-linear": (False if args.disable_bias_linear else None, "bias"),
        "--num-experts": (args.num_experts, "experts"),
        "--moe-router-topk": (args.moe_router_topk, "experts_per_token"),
        "--moe-router-num-groups": (args.moe_router_num_groups, "expert_groups"),
        "--moe-router-group-topk": (args.moe_router_group_topk, "expert_groups_per_token"),
        "--mtp-num-layers": (args.mtp_num_layers, "mtp_layers"),
        "--kv-lora-rank": (args.kv_lora_rank, "kv_lora_rank"),
        "--kv-channels": (None if args.multi_latent_attention else args.kv_channels, "head_dim"),
        "--qk-layernorm": (True if args.qk_layernorm and not args.multi_latent_attention else None, "qk_norm"),
        "--padded-vocab-size": (args.padded_vocab_size, "vocab"),
    }
    if args.window_size is not None or args.window_attn_skip_freq is not None:
        window, every = _window(args, model.layers)
        stated["--window-size"] = (window, "sliding_window")
        stated["--window-attn-skip-freq"] = (every, "global_attention_every")
    for flag, (given, field) in stated.items():
        actual = getattr(model, field)
        if given is not None and given != actual:
            raise PipesimError(f"{flag} contradicts model {model.name}, whose {field} is {actual}; drop --model to "
                               f"build the model from Megatron-LM's flags, or drop {flag}")


def resolve_model(model: str | ModelSpec | None, args: MegatronModelArgs, tp: int = 1,
                  seq_len: int | None = None) -> str | ModelSpec | None:
    """What ``--model`` plus Megatron-LM's shape flags name: ``model`` itself where no flag is given or each agrees
    with it (:func:`check_megatron_model`), else, without ``model``, the model the flags build."""
    if not args.given():
        return model
    if model is None:
        return model_from_megatron(args, tp, seq_len)
    from pipesim.analytic.model_load import load_model

    check_megatron_model(load_model(model, seq_len) if isinstance(model, str) else model, args)
    return model


def capacity_imbalance(factor: float | None, padded: bool, given: float | None) -> float | None:
    """The routing imbalance (``moe_imbalance``) Megatron-Core's expert capacity makes: ``factor``
    (``--moe-expert-capacity-factor``) F times an expert's mean tokens; ``padded``
    (``--moe-pad-expert-input-to-capacity``): every expert computes exactly its capacity and the dispatch carries
    the padding, so the most-loaded rank's tokens over the mean are F; unpadded, the tokens above capacity are
    dropped, so no rank exceeds F and ``given`` (or None, balanced) stands. A one-line error where they
    contradict ``given`` or each other."""
    if factor is None:
        if padded:
            raise PipesimError("--moe-pad-expert-input-to-capacity pads to the expert capacity, which needs "
                               "--moe-expert-capacity-factor F (as in Megatron-Core)")
        return given
    if padded:
        if factor < 1:
            raise PipesimError(f"--moe-expert-capacity-factor {factor:g} with padding computes fewer tokens than "
                               "routed (dropping the rest), which pipesim does not model; give F ≥ 1")
        if given is not None and given != factor:
            raise PipesimError(f"--moe-pad-expert-input-to-capacity makes every expert compute "
                               f"--moe-expert-capacity-factor {factor:g} times the mean, but --moe-imbalance {given:g} "
                               "is given too; keep one")
        return factor
    if given is not None and given > factor:
        raise PipesimError(f"--moe-imbalance {given:g} exceeds --moe-expert-capacity-factor {factor:g}, above which "
                           "Megatron-Core drops tokens; lower it, or pad (--moe-pad-expert-input-to-capacity)")
    return given
