"""Loading a model by preset name or from a .yaml/.json file, with the stated parameter count checked.

Apart from :mod:`pipesim.analytic.model_spec` because both the presets and the parameter count are built on
that dataclass: keeping the loader here makes model_spec ← params, model_presets ← model_load one way.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipesim.analytic.hf_config import is_hf_config, model_from_hf_config, model_name
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import ALIASES, FIELDS, ModelSpec
from pipesim.analytic.params import total_params
from pipesim.analytic.spec_fields import parse_fields
from pipesim.errors import PipesimError
from pipesim.io.spec_files import preset_or_file

_SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def _params_text(value):
    """``params: 6.7B`` as `pipesim models` prints it → 6.7e9; anything else is left to the schema check."""
    if isinstance(value, str) and value[-1:].upper() in _SUFFIX:
        try:
            return float(value[:-1]) * _SUFFIX[value[-1].upper()]
        except ValueError:
            return value
    return value


def model_from_dict(data: dict, source: str) -> ModelSpec:
    data = {k: _params_text(v) if k == "params" else v for k, v in data.items()}
    values = parse_fields(data, FIELDS, source, ALIASES)
    values.setdefault("name", source)
    mlp = values.pop("mlp", None)
    if mlp is not None:
        if "gated" in values and values["gated"] != (mlp == "swiglu"):
            raise PipesimError(f"{source}: mlp={mlp!r} and gated={values['gated']} disagree; keep one")
        values["gated"] = mlp == "swiglu"
    stated = values.pop("params", None)
    model = ModelSpec(**values)
    if stated is not None:
        counted = total_params(model)
        if abs(stated - counted) > 0.05 * counted:
            raise PipesimError(f"{source}: params={stated:.4g} but the shape gives {counted:.4g} parameters; "
                               "fix the shape or drop params")
    return model


# Llama 3 (April 2024) and Llama 3.1 (July 2024) at 8B and 70B are one architecture (the same widths, heads,
# vocabulary and 8,192-token pre-training sequence; 3.1 lengthens the context by RoPE scaling, which changes no
# FLOPs or bytes at a given sequence), so the older names are the newer presets.
_MODEL_ALIASES = {"llama3-8b": "llama3.1-8b", "llama3-70b": "llama3.1-70b",
                  "llama4-scout-17b-16e": "llama4-scout", "llama4-maverick-17b-128e": "llama4-maverick"}
# Hugging Face repository suffixes that name a checkpoint of the same architecture
_CHECKPOINT_SUFFIXES = ("-hf", "-instruct", "-chat", "-base", "-v0.1")


def model_preset_key(spec: str) -> str | None:
    """The preset a model name means, spelled as on Hugging Face ("meta-llama/Llama-3.1-8B-Instruct",
    "Llama-2-7b-hf", "deepseek-ai/DeepSeek-V3") or as Llama 3 ("llama3-70b"), or None if none."""
    key = spec.lower().rsplit("/", 1)[-1].removeprefix("meta-")
    key = re.sub(r"^llama-(\d)", r"llama\1", key)  # "llama-3.1-8b", "llama-2-7b"
    for suffix in _CHECKPOINT_SUFFIXES:
        key = key.removesuffix(suffix)
    key = _MODEL_ALIASES.get(key, key)
    return key if key in MODEL_PRESETS else None


def load_model(spec: str, seq_len: int | None = None) -> ModelSpec:
    """A preset name (``pipesim models``; Hugging Face's spelling of one too, :func:`model_preset_key`) or a path
    to a .yaml/.json model file: pipesim's fields, or a Hugging Face ``config.json``
    (:mod:`pipesim.analytic.hf_config`), which needs ``seq_len`` (``--seq-len``: a config does not say it). The
    caller sets the shape of a preset or pipesim file (``ModelSpec.with_shape``)."""
    is_file = spec.lower().endswith((".yaml", ".yml", ".json"))
    key = None if is_file else model_preset_key(spec)

    def from_dict(data: dict, source: str) -> ModelSpec:
        if is_hf_config(data):
            return model_from_hf_config(data, source, seq_len, model_name(Path(spec)))
        return model_from_dict(data, source)

    return preset_or_file(key or spec, MODEL_PRESETS, flag="--model", what="model", listing="pipesim models",
                          from_dict=from_dict)
