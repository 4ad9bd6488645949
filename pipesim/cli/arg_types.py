"""Argument types for the command lines: each parses one flag's text where it enters and rejects a bad value
with a message naming the value and the rule. Every command checks its arguments through these, and nothing
else: numbers through :func:`_parsed`, output files through :func:`output_file` (checked before any work).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from pipesim.analytic.slowest_gpu import MAX_SPREAD
from pipesim.errors import PipesimError
from pipesim.io.atomic import check_output_path

# Python refuses int() of more than 4300 digits with a ValueError about its own limit; any count, size or index
# pipesim takes is far shorter, so longer text is refused here with the rule instead.
_MAX_DIGITS = 30


def _parsed(text: str, cast: type, accept: Callable, rule: str):
    """``cast(text)`` if it parses and ``accept`` holds, else an argparse error saying which rule failed."""
    kind = "an integer" if cast is int else "a number"
    if cast is int and len(text.strip().lstrip("+-")) > _MAX_DIGITS:
        raise argparse.ArgumentTypeError(f"{text[:20]}… is not {rule}")
    try:
        value = cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"{text} must be {rule}")
    return value


def positive_int(text: str) -> int:
    return _parsed(text, int, lambda v: v >= 1, "a positive integer (≥ 1)")


def non_negative_int(text: str) -> int:
    return _parsed(text, int, lambda v: v >= 0, "an integer ≥ 0")


def layer_list(text: str) -> tuple[int, ...]:
    """``--stage-layers 7,8,8,7``: one non-negative layer count per stage."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers, e.g. 7,8,8,7") from None
    if any(c < 0 for c in counts):
        raise argparse.ArgumentTypeError(f"{text}: layer counts must be ≥ 0")
    return counts


def param_bytes(text: str) -> str:
    """``--param-bytes 18``, ``16`` or ``2+4+6`` (:meth:`pipesim.analytic.layout.OptimizerBytes.parse`), kept as
    typed."""
    from pipesim.analytic.layout import OptimizerBytes

    try:
        OptimizerBytes.parse(text, name="")
    except PipesimError as err:
        raise argparse.ArgumentTypeError(str(err).strip()) from None
    return text


def token_count(text: str) -> float:
    """``--train-tokens 2T``: a token budget (:func:`pipesim.analytic.training_time.parse_tokens`)."""
    from pipesim.analytic.training_time import parse_tokens

    try:
        return parse_tokens(text, name="")
    except PipesimError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def non_negative_float(text: str) -> float:
    return _parsed(text, float, lambda v: math.isfinite(v) and v >= 0, "a finite number ≥ 0")


def speed_spread(text: str) -> float:
    """A GPU speed spread: a relative standard deviation in [0, MAX_SPREAD] (the chip field's bounds)."""
    return _parsed(text, float, lambda v: 0 <= v <= MAX_SPREAD, f"in [0, {MAX_SPREAD:g}]")


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    return _parsed(text, float, lambda v: 0 < v <= 1, "in (0, 1]")


def positive_float(text: str) -> float:
    """A finite number > 0 (a learning rate, a scale): NaN, inf, zero and negatives are refused."""
    return _parsed(text, float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")


def cost_value(text: str) -> float:
    """A duration or byte count of the costs schema (:mod:`pipesim.sim.costs`): 0, or within its stated range."""
    from pipesim.sim.costs import COST_RANGE, in_cost_range

    return _parsed(text, float, in_cost_range, f"0 or a number in [{COST_RANGE[0]:g}, {COST_RANGE[1]:g}]")


def number_pair(text: str) -> tuple[float, float]:
    """``A,B``: two finite numbers, for a figure's size or axis limits."""
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected two numbers A,B, e.g. 3.5,2.4")
    finite = [_parsed(part.strip(), float, math.isfinite, "a finite number") for part in parts]
    return finite[0], finite[1]


def positive_pair(text: str) -> tuple[float, float]:
    """``W,H``: two finite numbers > 0, for a figure's size in inches."""
    first, second = number_pair(text)
    if first <= 0 or second <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: both numbers must be > 0, e.g. 3.5,2.4")
    return first, second


def positive_int_list(text: str) -> list[int]:
    """Comma-separated positive integers, e.g. ``2,4,8``; at least one."""
    values = [positive_int(v.strip()) for v in text.split(",") if v.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r} lists no value; give e.g. 2,4,8")
    return values


def cost_value_list(text: str) -> list[float]:
    """Comma-separated costs, e.g. ``1,1.5``; at least one."""
    values = [cost_value(v.strip()) for v in text.split(",") if v.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r} lists no value; give e.g. 1,1.5")
    return values


def stage_override(text: str) -> tuple[int, dict[str, float]]:
    """``STAGE:field=value[,field=value]``, e.g. ``0:forward=1.5,backward=3`` (fields as in costs files)."""
    usage = f"{text!r} is not STAGE:field=value[,field=value], e.g. 0:forward=1.5,backward=3"
    stage_text, sep, assignments = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(usage)
    try:
        stage = non_negative_int(stage_text.strip())
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{usage}: stage {err}") from None
    values = {}
    for item in assignments.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise argparse.ArgumentTypeError(usage)
        try:
            values[key.strip()] = cost_value(value.strip())
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentTypeError(f"{text!r}: {key.strip()} {err}") from None
    return stage, values


def output_file(*suffixes: str, what: str = "output") -> Callable[[str], Path]:
    """An output path, checked when the flag is parsed (before any work): a known suffix (any case), a name
    that is not empty, a folder that exists and is writable, and not a folder itself."""
    def parse(text: str) -> Path:
        suffix = Path(text).suffix.lower()
        if text.strip() and suffixes and suffix not in suffixes:
            raise argparse.ArgumentTypeError(
                f"{text}: unknown {what} format {suffix or '(no suffix)'}; use {_alternatives(suffixes)}"
            )
        try:
            return check_output_path(text, what)
        except PipesimError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = f"{what} file"  # argparse names the type in some messages
    return parse


def _alternatives(words) -> str:
    """``.a``, ``.a or .b``, ``.a, .b or .c``."""
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
