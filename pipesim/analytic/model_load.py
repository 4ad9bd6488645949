"""Loading a model by preset name or from a .yaml/.json file, with the stated parameter count checked.

Apart from :mod:`pipesim.analytic.model_spec` because both the presets and the parameter count are built on
that dataclass: keeping the loader here makes model_spec ← params, model_presets ← model_load one way.
"""

from __future__ import annotations

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


def load_model(spec: str) -> ModelSpec:
    """A preset name (``pipesim models``) or a path to a .yaml/.json model file."""
    return preset_or_file(spec, MODEL_PRESETS, flag="--model", what="model", listing="pipesim models",
                          from_dict=model_from_dict)
