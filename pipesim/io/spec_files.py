"""Spec files (YAML or JSON): reading them into mappings and dataclasses, with one-line errors naming the file."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import yaml

from pipesim.errors import PipesimError
from pipesim.io.text_files import read_text_file


class _DuplicateKey(ValueError):
    """A mapping names one key twice: refused, since which value wins is a guess."""


def _refuse_duplicates(pairs: list[tuple]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class _SpecLoader(yaml.SafeLoader):
    """YAML's safe loader with two changes: a key given twice is an error, and numbers in exponent form without
    a dot or sign (``989.4e12``, ``1e-3``) are floats, as YAML 1.2 and JSON read them (1.1 reads strings)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            # Only the keys written in this mapping: keys merged in with '<<' may be overridden, as YAML intends.
            written = [k for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
            keys = [self.construct_object(k, deep=True) for k in written]
            for index, key in enumerate(keys):
                try:
                    if key in keys[:index]:
                        raise _DuplicateKey(key)
                except TypeError:  # an unhashable key: the base class names it
                    break
        return super().construct_mapping(node, deep)


_SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def read_mapping(path: Path, what: str) -> dict:
    """Parse ``path`` as JSON (``.json``) or YAML (anything else) and require a mapping at the top.

    The file must be UTF-8 text (:func:`read_text_file`); a key given twice is refused (JSON's last-wins and
    YAML's either-wins would silently drop a value); YAML numbers like ``989.4e12`` are numbers.
    """
    path = Path(path)
    if not path.is_file() and not path.is_dir():
        raise PipesimError(f"{what} file {path} does not exist; give a preset name or an existing .yaml/.json file")
    text = read_text_file(path, f"{what} file")
    is_json = path.suffix.lower() == ".json"
    try:
        data = json.loads(text, object_pairs_hook=_refuse_duplicates) if is_json else yaml.load(text, _SpecLoader)
    except _DuplicateKey as err:
        raise PipesimError(f"{what} file {path} gives key {err.args[0]!r} twice; keep one") from None
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        first = " ".join(str(err).split())  # YAML errors span lines; the CLI promises one
        raise PipesimError(f"{what} file {path} is not valid {'JSON' if is_json else 'YAML'}: {first}") from None
    except (RecursionError, ValueError, OverflowError) as err:  # nesting too deep, a number JSON cannot hold
        raise PipesimError(f"{what} file {path} cannot be read: {type(err).__name__}: "
                           f"{' '.join(str(err).split())[:120]}") from None
    if not isinstance(data, dict):
        raise PipesimError(f"{what} file {path}: expected a mapping of field: value at the top level, "
                           f"not {type(data).__name__}")
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


def _did_you_mean(spec: str, names) -> str:
    """The presets a mistyped or shortened name most likely meant ("h100" → h100-sxm, h100-96gb-hbm2e; "llama3-8b"
    → llama3.1-8b), as the start of a refusal, or nothing when none is close."""
    key = spec.lower()
    picks = [name for name in names if name.startswith(key)][:3] or difflib.get_close_matches(
        key, list(names), n=3, cutoff=0.75)
    return f"did you mean {' or '.join(picks)}? " if picks else ""


def preset_or_file(spec: str, presets: dict, *, flag: str, what: str, listing: str, from_dict):
    """A preset name (case-insensitive) from ``presets``, or a path to a .yaml/.json file parsed by ``from_dict``."""
    preset = presets.get(spec.lower())
    if preset is not None:
        return preset
    path = Path(spec)
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise PipesimError(f"{flag} {spec!r} is not a preset; {_did_you_mean(spec, presets)}use one of "
                           f"{', '.join(presets)} (see '{listing}') or a .yaml/.json file")
    return from_dict(read_mapping(path, what), source=f"{what} file {path}")
