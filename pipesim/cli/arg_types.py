"""Argument types for the command lines: each rejects bad values with a message naming the value and the rule."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _parsed(text: str, cast: type, accept: Callable[[float], bool], rule: str):
    """``cast(text)`` if it parses and ``accept`` holds, else an argparse error saying which rule failed."""
    try:
        value = cast(text)
    except ValueError:
        kind = "an integer" if cast is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"{text} must be {rule}")
    return value


def positive_int(text: str) -> int:
    return _parsed(text, int, lambda v: v >= 1, "a positive integer (≥ 1)")


def non_negative_float(text: str) -> float:
    return _parsed(text, float, lambda v: math.isfinite(v) and v >= 0, "a finite number ≥ 0")


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    return _parsed(text, float, lambda v: 0 < v <= 1, "in (0, 1]")


def non_negative_int(text: str) -> int:
    return _parsed(text, int, lambda v: v >= 0, "an integer ≥ 0")


def positive_float(text: str) -> float:
    """A finite number > 0 (a learning rate, a scale): NaN, inf, zero and negatives are refused."""
    return _parsed(text, float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")
