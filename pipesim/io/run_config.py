"""A training framework's own run configuration as a simulation: the model, the layout and the batch it states.

``pipesim simulate --config FILE`` (and ``pipesim.simulate(config=FILE)``) reads the file a run was launched with,
so its settings need no translating into flags. Read so far:

- **nanotron's YAML** (``run_train.py --config-file``; its ``Config`` dataclasses in ``nanotron/config/``, read at
  2411b02): ``parallelism`` (``dp``, ``tp``, ``pp``, ``context_parallel_size``; ``pp_engine`` 1f1b, or afab, its
  default, which is GPipe's order; ``tp_mode`` REDUCE_SCATTER is sequence parallelism, ALL_REDUCE, its default,
  is not; ``tp_linear_async_communication`` overlaps the column linears' input-gradient collective;
  ``recompute_layer`` recomputes every layer; ``tp_recompute_allgather`` false keeps the gathered input),
  ``tokens`` (``micro_batch_size``, ``batch_accumulation_per_replica`` microbatches, ``sequence_length``),
  ``optimizer`` (``zero_stage``; ``accumulate_grad_in_fp32`` false keeps BF16 gradients, 16 bytes a parameter)
  and ``model.model_config`` (a Llama or Qwen2 config: widths, heads, key/value heads, vocabulary padded as
  nanotron pads it, to ``make_vocab_size_divisible_by`` × tp, tied or untied embeddings), under
  ``--framework nanotron``. Qwen2's q/k/v biases (about a millionth of the FLOPs) are not modelled; mixture-of-
  experts configs are refused.

Anything the file does not state keeps pipesim's (or the framework's) default, and a flag given beside the file
wins over it, as a flag wins over a framework's default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipesim.analytic.model_spec import ModelSpec
from pipesim.errors import PipesimError


@dataclass(frozen=True)
class RunConfig:
    """What a run's configuration file states, as ``simulate``'s arguments (None: not stated)."""

    source: str  # the file, for messages
    model: ModelSpec
    schedule: str | None = None
    pp: int | None = None
    microbatches: int | None = None
    options: dict[str, Any] = field(default_factory=dict)  # ModelOptions fields


def load_run_config(path: str | Path) -> RunConfig:
    """The run configuration in ``path`` (see the module doc for the formats read); a one-line error otherwise."""
    path = Path(path)
    if not path.is_file():
        raise PipesimError(f"--config {path}: no such file")
    if path.suffix not in (".yaml", ".yml"):
        raise PipesimError(f"--config {path}: pipesim reads nanotron's YAML run configs (.yaml); for another "
                           "framework give the layout as flags (--framework, --tp, ...)")
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise PipesimError(f"--config {path}: not valid YAML ({' '.join(str(err).split())[:120]})") from None
    if not isinstance(data, dict) or not {"parallelism", "tokens", "model"} <= data.keys():
        raise PipesimError(f"--config {path}: not a nanotron run config (it needs 'parallelism', 'tokens' and "
                           "'model' sections)")
    return _nanotron(data, str(path))


def _section(data: dict, key: str, source: str) -> dict:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise PipesimError(f"--config {source}: '{key}' must be a mapping")
    return value


def _positive(section: dict, key: str, source: str, default: int | None = None) -> int | None:
    value = section.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PipesimError(f"--config {source}: {key}: {value!r} must be a positive integer")
    return value


def _nanotron(data: dict, source: str) -> RunConfig:
    parallelism = _section(data, "parallelism", source)
    tokens = _section(data, "tokens", source)
    optimizer = _section(data, "optimizer", source)
    model = _section(data, "model", source)
    tp = _positive(parallelism, "tp", source, 1)
    pp = _positive(parallelism, "pp", source, 1)
    engine = str(parallelism.get("pp_engine") or "afab").lower()
    if engine not in ("1f1b", "afab"):
        raise PipesimError(f"--config {source}: pp_engine {engine!r}: nanotron's engines are 1f1b and afab")
    sequence_parallel = str(parallelism.get("tp_mode") or "ALL_REDUCE").upper() == "REDUCE_SCATTER"
    options: dict[str, Any] = {
        "framework": "nanotron", "tp": tp, "dp": _positive(parallelism, "dp", source, 1),
        "cp": _positive(parallelism, "context_parallel_size", source, 1),
        "micro_batch_size": _positive(tokens, "micro_batch_size", source),
        "seq_len": _positive(tokens, "sequence_length", source),
        "zero": int(optimizer.get("zero_stage") or 0),
    }
    if (parallelism.get("expert_parallel_size") or 1) != 1:
        raise PipesimError(f"--config {source}: expert parallelism: nanotron's MoE configs are not read; give the "
                           "layout as flags")
    if parallelism.get("recompute_layer"):
        options["recompute"] = "full"
    if tp > 1:  # what only tensor parallelism changes (stated at tp 1 it would only earn "changes nothing" notes)
        options["sequence_parallel"] = sequence_parallel or None
        if parallelism.get("tp_linear_async_communication"):
            options["overlap_tp_dgrad"] = True
        if sequence_parallel and parallelism.get("tp_recompute_allgather") is False:
            options["column_input"] = "saved"
    if optimizer.get("accumulate_grad_in_fp32") is False:
        options["param_bytes"] = "16"
    spec = _nanotron_model(model, tp, options["seq_len"], source)
    return RunConfig(source, spec, schedule="1f1b" if engine == "1f1b" or pp == 1 else "gpipe", pp=pp,
                     microbatches=_positive(tokens, "batch_accumulation_per_replica", source, 1),
                     options={k: v for k, v in options.items() if v is not None})


def _nanotron_model(model: dict, tp: int, seq_len: int | None, source: str) -> ModelSpec:
    """A nanotron Llama or Qwen2 ``model_config`` (Hugging Face's field names) as a ModelSpec."""
    config = _section(model, "model_config", source)
    if config.get("moe_config"):
        raise PipesimError(f"--config {source}: a mixture-of-experts model_config is not read; use a model file")
    hidden_act = config.get("hidden_act", "silu")
    if hidden_act not in ("silu", "swiglu"):
        raise PipesimError(f"--config {source}: hidden_act {hidden_act!r}: nanotron's Llama and Qwen2 MLPs are "
                           "gated SiLU; for another model use a model file")
    layers = _positive(config, "num_hidden_layers", source, 32)
    heads = _positive(config, "num_attention_heads", source, 32)
    multiple = (_positive(model, "make_vocab_size_divisible_by", source, 1)) * tp
    vocab = math.ceil(_positive(config, "vocab_size", source, 32000) / multiple) * multiple
    return ModelSpec(
        Path(source).stem, layers, _positive(config, "hidden_size", source, 4096), heads,
        _positive(config, "intermediate_size", source, 11008), vocab,
        seq_len or _positive(config, "max_position_embeddings", source, 2048),
        kv_heads=_positive(config, "num_key_value_heads", source, heads), gated=True,
        tied_embeddings=bool(config.get("tie_word_embeddings", False)), dropout=False, bias=False, rms_norm=True,
        learned_positions=False,
    )
