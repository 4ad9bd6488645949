"""How long a training run of a token budget takes at a simulated step time: its steps, days and GPU-hours, and
the range of days that the step time's validated error band allows.

The band (:mod:`pipesim.analytic.error_band`) bounds the left-out error of published runs of the kind,
``|predicted / measured − 1| ≤ b``, so the measured step lies in ``[t / (1 + b), t / (1 − b)]`` around a predicted
``t``: not symmetric, and without an upper end once ``b`` reaches 1. The figures are the steps alone, back to back
at the steady-state step time: checkpoints, evaluations, restarts after failures and data-loader stalls are not
in them, and a real run's wall clock is longer by those.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pipesim.errors import PipesimError

SECONDS_PER_DAY = 86_400.0
SECONDS_PER_HOUR = 3_600.0
# the suffixes training budgets are written with (15T tokens, 300B, 1.5M): decimal, as papers count tokens
TOKEN_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_TOKENS = re.compile(r"(?P<number>[0-9][0-9_,]*(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?)\s*(?P<suffix>[kmbgt]?)")


def parse_tokens(text: str, name: str = "--train-tokens") -> float:
    """A token count as people write it: ``2T``, ``300B``, ``1.5e12``, ``15,000M``; one line naming ``name`` (a flag
    or keyword; empty: the value alone) and the accepted forms otherwise."""
    match = _TOKENS.fullmatch(str(text).strip().lower())
    tokens = None
    if match:
        try:
            tokens = float(match["number"].replace(",", "").replace("_", "")) * TOKEN_SUFFIXES.get(match["suffix"], 1)
        except ValueError:
            tokens = None
    if tokens is None or not math.isfinite(tokens) or tokens < 1:
        raise PipesimError(f"{f'{name} ' if name else ''}{text!r} is not a token count; write a positive number, "
                           "with K, M, B or T for thousands to trillions (e.g. 2T, 300B, 1.5e12)")
    return tokens


def token_count_text(tokens: float) -> str:
    """A token count as budgets are said: 2T, 300B, 1.5M."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if tokens >= scale:
            return f"{tokens / scale:.4g}{suffix}"
    return f"{tokens:.4g}"


def _days(days: float) -> str:
    """Days to three figures, whole days past a hundred (2,510, not 2.51e+03)."""
    return f"{days:,.0f}" if days >= 100 else f"{days:.3g}"


@dataclass(frozen=True)
class TrainingTime:
    """``tokens`` trained at ``tokens_per_step`` a step of ``step_time`` seconds on ``gpus`` GPUs; ``band``: the
    step time's relative error band (None: unvalidated, no range)."""

    tokens: float
    tokens_per_step: int
    step_time: float
    gpus: int
    band: float | None = None

    def __post_init__(self) -> None:
        if self.tokens_per_step < 1 or not self.step_time > 0:
            raise PipesimError("a training time needs a step of at least one token and a positive step time")

    @property
    def steps(self) -> int:
        """Optimizer steps to reach the budget (the last one whole)."""
        return math.ceil(self.tokens / self.tokens_per_step)

    @property
    def seconds(self) -> float:
        return self.steps * self.step_time

    @property
    def days(self) -> float:
        return self.seconds / SECONDS_PER_DAY

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.gpus / SECONDS_PER_HOUR

    @property
    def days_range(self) -> tuple[float, float | None] | None:
        """The days the band allows, ``(days / (1 + b), days / (1 − b))``; the upper end None once ``b`` ≥ 1;
        None without a band."""
        if self.band is None:
            return None
        return self.days / (1 + self.band), (self.days / (1 - self.band) if self.band < 1 else None)

    def text(self) -> str:
        """One line: the budget, the steps, days and GPU-hours, the band's range of days, what is not counted."""
        span = self.days_range
        if span is None:
            within = "no validated band for this kind of run"
        else:
            low, high = span
            within = (f"{_days(low)}–{_days(high)} days within the step time's band (±{self.band:.0%})"
                      if high is not None else f"at least {_days(low)} days within the step time's band "
                      f"(±{self.band:.0%})")
        gpus = f"{self.gpus:,} GPU{'' if self.gpus == 1 else 's'}"
        return (f"training {token_count_text(self.tokens)} tokens: {self.steps:,} steps of "
                f"{self.tokens_per_step:,} tokens, "
                f"{_days(self.days)} days on {gpus} ({self.gpu_hours:,.0f} GPU-hours); {within}; the steps alone, "
                "without checkpoints, evaluations or restarts")

    def to_dict(self) -> dict:
        span = self.days_range
        return {"tokens": self.tokens, "tokens_per_step": self.tokens_per_step, "steps": self.steps,
                "step_time_s": self.step_time, "gpus": self.gpus, "seconds": self.seconds, "days": self.days,
                "gpu_hours": self.gpu_hours, "band": self.band,
                "days_low": None if span is None else span[0], "days_high": None if span is None else span[1]}
