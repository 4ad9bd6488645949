"""Validation forward in time: each source predicted with the fitted constants chosen from the sources published
before it alone, as a prediction made then could have been.

Validation by source left out (:mod:`pipesim.validation.loso`) fits on every other source, the later ones included.
Software and chips move on, so a constant fitted on next year's runs may predict this year's better than anything
known this year could have, and a user predicting a run has only the runs already published. Here the rows of each
source that a month published are predicted with every fitted constant chosen as :func:`~pipesim.validation.loso.fit`
chooses it, from the rows of the sources published in an earlier month
(:data:`pipesim.validation.sources.PUBLISHED`), the source's own platform left out as validation leaves it out.

A constant that moves the rows but that no earlier row informs keeps its preset, which was chosen with later
sources in view: those rows are not predicted from the past alone, and :class:`ForwardResult` names the constants
(``from_later``) so that :func:`prospective_errors` sets them apart. The presets outside the fitted table (kernel
rates, link bandwidths) come from direct measurements with their own provenance (:mod:`pipesim.validation.constants`)
and stand throughout, as they do in validation by source left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipesim.analytic.error_band import run_kind
from pipesim.validation.constants import FITTED_CONSTANTS, FittedConstant
from pipesim.validation.loso import (
    Fit,
    RowSensitivity,
    SourcePooling,
    errors_with,
    fit,
    source_sensitivities,
)
from pipesim.validation.runs import Comparison, PublishedRun, predict
from pipesim.validation.sources import published_month


@dataclass(frozen=True)
class ForwardResult:
    """The rows one source published in one month, predicted with constants fitted on earlier months alone."""

    source: str  # the unit of validation (a module, or the platform it shares)
    month: str  # "YYYY-MM": when these rows were all public
    runs: list[PublishedRun]
    forward: list[float]  # signed step-time errors, as runs
    fit: Fit  # the constants fitted on the earlier sources' rows
    earlier_sources: tuple[str, ...]  # the sources (units) whose rows that fit saw
    # fitted constants that move these rows and that no earlier row informs: their presets stand, chosen later
    from_later: tuple[str, ...]

    @property
    def prospective(self) -> bool:
        """Whether every fitted constant that moves these rows was fitted on earlier sources alone."""
        return not self.from_later


def forward_in_time(by_source: dict[str, list[PublishedRun]], *,
                    month_of: Callable[[PublishedRun], str] = published_month,
                    constants: tuple[FittedConstant, ...] = FITTED_CONSTANTS,
                    predictor: Callable[..., Comparison] = predict,
                    progress: Callable[[str], None] = lambda _: None,
                    pooling: SourcePooling = SourcePooling.MEAN,
                    sens: dict[str, list[RowSensitivity]] | None = None) -> list[ForwardResult]:
    """Each source's rows of each month (``month_of``, "YYYY-MM"), predicted with the constants fitted on the rows
    of the other sources' earlier months (``sens``: the sources' :func:`~pipesim.validation.loso.source_sensitivities`,
    computed here when not given), in ``by_source`` order, then by month."""
    if sens is None:
        sens = source_sensitivities(by_source, constants, predictor, progress)
    results = []
    for name, runs in by_source.items():
        months = sorted({month_of(r) for r in runs})
        for month in months:
            progress(f"forward: {name} {month}")
            pool = [row for other, rows in sens.items() if other != name for row in rows if month_of(row.run) < month]
            held = fit(pool, constants, pooling)
            kept = [r for r in runs if month_of(r) == month]
            moving = {c for row in sens[name] if month_of(row.run) == month for c in row.shifts}
            earlier = tuple(other for other, rows in sens.items()
                            if other != name and any(month_of(row.run) < month for row in rows))
            errors = [c.step_error for c in errors_with(kept, held.values, predictor)]
            from_later = tuple(c.name for c in constants if c.name in moving and c.name in held.unfitted)
            results.append(ForwardResult(name, month, kept, errors, held, earlier, from_later))
    return results


def prospective_errors(results: list[ForwardResult]) -> list[float]:
    """The signed errors of the rows predicted from earlier sources alone (:attr:`ForwardResult.prospective`)."""
    return [e for r in results if r.prospective for e in r.forward]


def prospective_by_kind(results: list[ForwardResult],
                        left_out: dict[int, float]) -> dict[str, tuple[list[float], list[float]]]:
    """Per kind of run (:func:`~pipesim.analytic.error_band.run_kind`), the prospective rows' signed forward errors
    and, as the same rows, their left-out ones (``left_out``: each row's left-out error by the row's identity)."""
    per_kind: dict[str, tuple[list[float], list[float]]] = {}
    for result in results:
        if not result.prospective:
            continue
        for run, error in zip(result.runs, result.forward, strict=True):
            kind = run_kind(run.chip, run.precision)
            if kind is not None:
                ahead, aside = per_kind.setdefault(kind, ([], []))
                ahead.append(error)
                aside.append(left_out[id(run)])
    return dict(sorted(per_kind.items()))
