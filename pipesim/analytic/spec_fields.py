"""The schema of model and chip files: every key with its type, unit, range and default, checked where the
file enters, with a one-line error naming the file, the key and the rule.

YAML 1.1 (PyYAML) reads ``989.4e12`` as a string (its float pattern wants a dot and a signed exponent), so a
string that Python reads as a finite number is accepted for a number field; booleans are never numbers, and
``.inf``/``.nan`` are refused.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

from pipesim.errors import PipesimError


class Kind(enum.Enum):
    INT = "integer"
    FLOAT = "number"
    BOOL = "true/false"
    TEXT = "text"
    INT_PAIR = "two integers"
    TABLE = "mapping of tables"  # parsed by the field's own ``parse`` (e.g. pipesim.analytic.measured)


@dataclass(frozen=True)
class Field:
    """One key of a spec file. ``low``/``high`` bound numbers; ``low_open`` makes ``low`` exclusive."""

    key: str
    kind: Kind
    unit: str
    doc: str
    default: object = None  # None and required=False: optional with a computed default (see doc)
    required: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] = ()
    parse: Callable | None = None  # Kind.TABLE: parse(value, source) -> the checked value, or PipesimError


def _number(value, field: Field, source: str):
    if isinstance(value, bool):
        raise PipesimError(f"{source}: {field.key}={value!r} must be a {field.kind.value}, not a boolean")
    if isinstance(value, str) and field.kind in (Kind.FLOAT, Kind.INT):
        try:
            value = float(value.replace("_", "")) if field.kind is Kind.FLOAT else int(value.replace("_", ""))
        except ValueError:
            raise PipesimError(f"{source}: {field.key}={value!r} must be a {field.kind.value}"
                               f"{f' in {field.unit}' if field.unit else ''}") from None
    if field.kind is Kind.INT:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise PipesimError(f"{source}: {field.key}={value!r} must be an integer")
    elif not isinstance(value, int | float):
        raise PipesimError(f"{source}: {field.key}={value!r} must be a number"
                           f"{f' in {field.unit}' if field.unit else ''}")
    else:
        value = float(value)
    if not math.isfinite(value):
        raise PipesimError(f"{source}: {field.key}={value!r} must be finite")
    too_low = field.low is not None and (value <= field.low if field.low_open else value < field.low)
    too_high = field.high is not None and value > field.high
    if too_low or too_high:
        raise PipesimError(f"{source}: {field.key}={value!r} must be {_range(field)}")
    return value


def _range(field: Field) -> str:
    low = "" if field.low is None else f"{'>' if field.low_open else '≥'} {field.low:g}"
    high = "" if field.high is None else f"≤ {field.high:g}"
    return " and ".join(p for p in (low, high) if p)


def check_value(value, field: Field, source: str):
    """``value`` converted to the field's type, or a one-line error."""
    if field.kind is Kind.BOOL:
        if not isinstance(value, bool):
            raise PipesimError(f"{source}: {field.key}={value!r} must be true or false")
        return value
    if field.kind is Kind.TEXT:
        if not isinstance(value, str) or (field.choices and value not in field.choices):
            allowed = f" one of {', '.join(field.choices)}" if field.choices else " text"
            raise PipesimError(f"{source}: {field.key}={value!r} must be{allowed}")
        return value
    if field.kind is Kind.TABLE:
        return field.parse(value, source)
    if field.kind is Kind.INT_PAIR:
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise PipesimError(f"{source}: {field.key}={value!r} must be a list of two integers, e.g. [128, 256]")
        one = Field(field.key, Kind.INT, field.unit, field.doc, low=field.low, high=field.high)
        return tuple(_number(v, one, source) for v in value)
    return _number(value, field, source)


def parse_fields(data: dict, fields: tuple[Field, ...], source: str, aliases: dict[str, str] | None = None) -> dict:
    """Check ``data`` against ``fields`` (keys, types, ranges, required keys); returns {key: value}."""
    aliases = aliases or {}
    by_key = {f.key: f for f in fields}
    values: dict = {}
    for raw_key, value in data.items():
        key = aliases.get(raw_key, raw_key)
        if not isinstance(raw_key, str) or key not in by_key:
            known = sorted(by_key) + sorted(aliases)
            raise PipesimError(f"{source}: unknown key {raw_key!r}; known keys: {', '.join(known)}")
        if key in values:
            raise PipesimError(f"{source}: {raw_key!r} and another spelling of {key!r} are both given; keep one")
        values[key] = check_value(value, by_key[key], source)
    missing = [f.key for f in fields if f.required and f.key not in values]
    if missing:
        raise PipesimError(f"{source}: missing required key(s) {', '.join(missing)} "
                           f"(see docs/model-and-chip-files.md)")
    return values


def fields_markdown(fields: tuple[Field, ...], aliases: dict[str, str] | None = None) -> str:
    """The table docs/model-and-chip-files.md shows (a test keeps the two in step)."""
    back: dict[str, list[str]] = {}
    for alias, key in (aliases or {}).items():
        back.setdefault(key, []).append(alias)
    rows = ["| key | also | type | unit | default | range | meaning |", "|---|---|---|---|---|---|---|"]
    for f in fields:
        default = "required" if f.required else ("computed" if f.default is None else f"`{f.default}`")
        rng = _range(f) if f.kind in (Kind.INT, Kind.FLOAT, Kind.INT_PAIR) else ", ".join(f.choices)
        rows.append(f"| `{f.key}` | {', '.join(f'`{a}`' for a in back.get(f.key, []))} | {f.kind.value} | "
                    f"{f.unit} | {default} | {rng} | {f.doc} |")
    return "\n".join(rows)
