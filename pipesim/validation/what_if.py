"""What the published rows say of a change to the chip presets, before anyone models it.

A candidate mechanism usually shows first as a lever: "if A100's NVLink collectives ran at 0.7 of what the preset
says, would the A100 sources agree better?". This module answers that the same way for every trial: each row is
predicted with the presets as shipped and with the change (:class:`ChipChange`, a field scaled or set, on some
chips or all), and the errors are compared by source, in sample or by source left out, where the fitted
constants (:mod:`pipesim.validation.constants`) are refit under the change as they are for the headline
(:func:`pipesim.validation.loso.leave_one_source_out`). So a "looked at, not kept" in the validation page comes
with the command that reproduces its figures (``python experiments/what_if.py``).

A lever is not a mechanism: a change that helps is a question for the code and the hardware (what would make it
so, on which systems), not a constant to ship. A row that states its own network (``inter_node_gbps``) keeps it:
a change to ``inter_node_bandwidth`` leaves such rows as they are. A change to a fitted constant's own field fixes
it: applied after the refit's value, it leaves the refit nothing to move.
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import FIELDS as CHIP_FIELDS
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.spec_fields import Kind
from pipesim.errors import PipesimError
from pipesim.validation.loso import leave_one_source_out, summary
from pipesim.validation.runs import Comparison, PublishedRun, predict


class ChangeOp(enum.Enum):
    """How a change sets its field: multiplied by the amount, or replaced by it."""

    SCALE = "*"
    SET = "="


NUMERIC_FIELDS = {f.key: f for f in CHIP_FIELDS if f.kind in (Kind.FLOAT, Kind.INT)}


def numeric_fields() -> tuple[str, ...]:
    """The :class:`ChipSpec` fields a change can touch: the chip schema's numbers (a chip file's)."""
    return tuple(NUMERIC_FIELDS)


@dataclass(frozen=True)
class ChipChange:
    """One chip field scaled or set, on the named presets (``chips``; empty: every preset)."""

    field: str
    op: ChangeOp
    amount: float
    chips: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str, chips: Iterable[str] = ()) -> ChipChange:
        """``FIELD*FACTOR`` or ``FIELD=VALUE`` (``gemm_efficiency*0.95``, ``host_kernel_overhead=2e-5``), on
        ``chips``; a one-line error naming what is wrong otherwise."""
        op = next((o for o in ChangeOp if o.value in text), None)
        if op is None:
            raise PipesimError(f"change {text!r}: write FIELD*FACTOR or FIELD=VALUE (e.g. gemm_efficiency*0.95)")
        name, _, number = (part.strip() for part in text.partition(op.value))
        if name not in numeric_fields():
            raise PipesimError(f"change {text!r}: {name!r} is not a numeric chip field; choose one of "
                               f"{', '.join(numeric_fields())}")
        try:
            amount = float(number)
        except ValueError:
            raise PipesimError(f"change {text!r}: {number!r} is not a number") from None
        unknown = sorted(set(chips) - set(CHIP_PRESETS))
        if unknown:
            raise PipesimError(f"--chips {','.join(unknown)}: no such preset; choose from "
                               f"{', '.join(sorted(CHIP_PRESETS))}")
        return cls(name, op, amount, frozenset(chips))

    def applies_to(self, chip: ChipSpec) -> bool:
        return not self.chips or chip.name in self.chips

    def apply(self, chip: ChipSpec) -> ChipSpec:
        """``chip`` with this change, or as it is where the change names other chips or scales a field the chip
        leaves unset (an A100's FP8 peak); a value outside the field's bounds is refused as a chip file's is."""
        current = getattr(chip, self.field)
        if not self.applies_to(chip) or (self.op is ChangeOp.SCALE and current is None):
            return chip
        value = current * self.amount if self.op is ChangeOp.SCALE else self.amount
        if NUMERIC_FIELDS[self.field].kind is Kind.INT:
            value = round(value)
        return replace(chip, **{self.field: value})

    def text(self) -> str:
        where = f" on {', '.join(sorted(self.chips))}" if self.chips else " on every chip"
        return f"{self.field} {self.op.value} {self.amount:g}{where}"


def changed(chip: ChipSpec, changes: Sequence[ChipChange]) -> ChipSpec:
    """``chip`` with every change that applies to it, in order."""
    for change in changes:
        chip = change.apply(chip)
    return chip


def predictor_with(changes: Sequence[ChipChange]) -> Callable[..., Comparison]:
    """A predictor as :func:`pipesim.validation.runs.predict` is, each row's chip (the preset, or the one the
    validation's refit hands it) changed first."""
    def predictor(run: PublishedRun, chip: ChipSpec | None = None) -> Comparison:
        return predict(run, changed(chip if chip is not None else CHIP_PRESETS[run.chip], changes))

    return predictor


@dataclass(frozen=True)
class SourceDelta:
    """One source's signed step-time errors with the presets and with the change."""

    source: str
    before: tuple[float, ...]
    after: tuple[float, ...]

    @property
    def moved(self) -> float:
        """How much the source's mean |error| changed (negative: better)."""
        return summary(list(self.after))["mean_abs"] - summary(list(self.before))["mean_abs"]


@dataclass(frozen=True)
class WhatIf:
    """A change's effect on every source, in sample or left out."""

    changes: tuple[ChipChange, ...]
    left_out: bool
    sources: tuple[SourceDelta, ...]

    def pooled(self, after: bool) -> dict[str, float]:
        """All rows together: rows, mean |error|, bias, max."""
        return summary([e for s in self.sources for e in (s.after if after else s.before)])

    def over_sources(self, after: bool) -> tuple[float, float]:
        """(mean over the sources of each one's mean |error|, mean of their biases): each source weighs the same."""
        means = [summary(list(s.after if after else s.before)) for s in self.sources if s.before]
        return statistics.fmean(m["mean_abs"] for m in means), statistics.fmean(m["bias"] for m in means)


def _step_rows(runs: Iterable[PublishedRun]) -> list[PublishedRun]:
    return [run for run in runs if run.measures_step]


def compare(by_source: Mapping[str, Sequence[PublishedRun]], changes: Sequence[ChipChange], *,
            left_out: bool = False, progress: Callable[[str], None] = lambda _: None) -> WhatIf:
    """Every source's rows with the presets and with ``changes``: in sample (the presets as they are, and changed),
    or ``left_out`` (each source predicted with the fitted constants refit without it, under the presets and
    under the change: what the headline would become)."""
    by_source = {name: _step_rows(runs) for name, runs in by_source.items()}
    by_source = {name: runs for name, runs in by_source.items() if runs}
    if left_out:
        before = leave_one_source_out(by_source, progress=progress)
        after = leave_one_source_out(by_source, predictor=predictor_with(changes), progress=progress)
        deltas = [SourceDelta(b.source, tuple(b.left_out), tuple(a.left_out))
                  for b, a in zip(before.sources, after.sources, strict=True)]
    else:
        deltas = []
        changed_predict = predictor_with(changes)
        for name, runs in by_source.items():
            progress(f"in sample: {name}")
            deltas.append(SourceDelta(name, tuple(predict(r).step_error for r in runs),
                                      tuple(changed_predict(r).step_error for r in runs)))
    return WhatIf(tuple(changes), left_out, tuple(deltas))
