"""Spec files (YAML or JSON): reading them into mappings and dataclasses, with one-line errors naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pipesim.errors import PipesimError


def read_mapping(path: Path, what: str) -> dict:
    """Parse ``path`` as JSON (``.json``) or YAML (anything else) and require a mapping at the top."""
    if not path.is_file():
        raise PipesimError(f"{what} file {path} does not exist; give a preset name or an existing .yaml/.json file")
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        first = " ".join(str(err).split())  # YAML errors span lines; the CLI promises one
        raise PipesimError(f"{what} file {path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: "
                           f"{first}") from None
    if not isinstance(data, dict):
        raise PipesimError(f"{what} file {path}: expected a mapping of field: value at the top level")
    return data


def build_frozen(cls, data: dict, source: str, *, ints: set[str], floats: set[str], bools: set[str]):
    """Construct dataclass ``cls`` from ``data``, checking field names and types with one-line errors."""
    known = ints | floats | bools | {"name"}
    unknown = set(data) - known
    if unknown:
        raise PipesimError(f"{source}: unknown field(s) {sorted(unknown)}; allowed: {sorted(known)}")
    values: dict = {}
    for key, value in data.items():
        if key in bools:
            if not isinstance(value, bool):
                raise PipesimError(f"{source}: {key}={value!r} must be true or false")
        elif key in ints:
            if isinstance(value, bool) or not isinstance(value, int):
                raise PipesimError(f"{source}: {key}={value!r} must be an integer")
        elif key in floats:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise PipesimError(f"{source}: {key}={value!r} must be a number")
            value = float(value)
        values[key] = value
    try:
        return cls(**values)
    except TypeError as err:  # a missing required field
        raise PipesimError(f"{source}: {err}") from None


def preset_or_file(spec: str, presets: dict, *, flag: str, what: str, listing: str, from_dict):
    """A preset name (case-insensitive) from ``presets``, or a path to a .yaml/.json file parsed by ``from_dict``."""
    preset = presets.get(spec.lower())
    if preset is not None:
        return preset
    path = Path(spec)
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise PipesimError(f"{flag} {spec!r} is not a preset; use one of {', '.join(presets)} "
                           f"(see '{listing}') or a .yaml/.json file")
    return from_dict(read_mapping(path, what), source=f"{what} file {path}")
