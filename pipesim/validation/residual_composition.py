"""Where the published rows' step-time errors come from, by what each step is made of.

:mod:`.residual_groups` asks which *settings* lean one way; this module asks which *parts of the step* do. Each
row's prediction says where its busiest rank's step goes (:class:`~pipesim.analytic.time_breakdown.RankTime`):
compute, the collectives it waits for (TP, CP, ZeRO-3), the data-parallel gradient sync, pipeline sends, the
host, the bubble. If a part is modelled too cheap, the rows where that part is a large share of the step are
predicted too fast, and more so the larger the share.

Sources differ in ways no part of the model explains (their systems, software, what they left unstated), so a
comparison across sources would mix those differences into every part's slope. Each measure here therefore
compares a source's rows with one another:

- :func:`within_source_slopes`: least squares of the signed error on the parts' shares with one intercept per
  source (source fixed effects), each source weighing the same (its rows 1/n each), and a standard error by
  leaving out one source at a time (the delete-one-group jackknife: sources, not rows, are the independent
  draws). A slope of −0.3 says a step with 10 % more of that part comes out 3 points more optimistic than the
  same source's other rows.
- :func:`within_source_contrasts`: per source with rows on both sides of a share, the mean error of its rows
  above against its rows below.
- :func:`exposure_bins`: the rows pooled by their communication share (across sources: the rows' own picture,
  confounded by which sources fill which bin, so read beside the other two).

``python experiments/residual_composition.py`` prints all three for the presets' predictions; docs/validation-log.md
says what they find.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from itertools import pairwise

import numpy as np

from pipesim.analytic.error_band import COMMUNICATION_BOUND
from pipesim.analytic.time_breakdown import RankTime

# The edges :func:`exposure_bins` pools the rows between (shares of the step spent waiting on communication)
EXPOSURE_EDGES = (0.0, 0.02, 0.05, 0.10, 0.20, 1.0)
# A source informs a part's slope only if that part's share varies across its rows by at least this much
MIN_SPREAD = 0.01


@dataclass(frozen=True)
class Composition:
    """Shares of the busiest rank's step: what :class:`RankTime` counts, each over the step."""

    exposed_comm: float  # TP, CP and ZeRO-3 collectives the compute waits for
    grad_sync: float  # the data-parallel gradient sync (and the parameter gather) left exposed
    p2p: float  # pipeline sends: their wire time and the synchronisation after blocking calls
    a2a: float  # a mixture-of-experts all-to-all left exposed
    host_wait: float  # the device waiting for the host to issue kernels
    optimizer: float
    idle: float  # the bubble and waits on other ranks

    @property
    def communication(self) -> float:
        """Every share the step spends waiting on communication (:attr:`RankTime.communication_share`)."""
        return self.exposed_comm + self.grad_sync + self.p2p + self.a2a

    def share(self, part: str) -> float:
        """A part's share by name: a field, or ``communication``."""
        return self.communication if part == "communication" else getattr(self, part)


PARTS: tuple[str, ...] = tuple(f.name for f in fields(Composition))


def composition_of(rank: RankTime) -> Composition:
    """The shares of ``rank``'s step (a :class:`RankTime`, usually a report's busiest rank)."""
    step = rank.step
    if step <= 0:
        raise ValueError("a rank's step must be positive to take shares of it")
    return Composition(rank.exposed_comm / step, rank.grad_sync / step, (rank.p2p_wire + rank.p2p_sync) / step,
                       rank.a2a / step, rank.host_wait / step, rank.optimizer / step, rank.idle / step)


@dataclass(frozen=True)
class Row:
    """One published row: its source (the unit of validation), signed step-time error (predicted / published − 1)
    and the predicted step's composition."""

    source: str
    error: float
    composition: Composition


@dataclass(frozen=True)
class Slope:
    """One part's within-source slope: signed error per unit share of the step."""

    part: str
    slope: float
    standard_error: float  # jackknife over sources
    sources: int  # sources whose rows spread over this part (those that inform the slope)
    rows: int  # their rows

    @property
    def t(self) -> float:
        """The slope in standard errors (0 where there is no spread to estimate one from)."""
        return self.slope / self.standard_error if self.standard_error > 0 else 0.0


def _design(rows: Sequence[Row], parts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The weighted problem: source indicators then the parts' shares; errors; √weights (1/n per source's row)."""
    sources = sorted({r.source for r in rows})
    index = {s: i for i, s in enumerate(sources)}
    counts = {s: sum(r.source == s for r in rows) for s in sources}
    x = np.zeros((len(rows), len(sources) + len(parts)))
    for i, r in enumerate(rows):
        x[i, index[r.source]] = 1.0
        x[i, len(sources):] = [r.composition.share(p) for p in parts]
    y = np.array([r.error for r in rows])
    root_weights = np.sqrt([1.0 / counts[r.source] for r in rows])
    return x, y, root_weights, sources


def _fit(x: np.ndarray, y: np.ndarray, root_weights: np.ndarray, parts: int) -> np.ndarray:
    """The parts' coefficients of the weighted least squares (the source intercepts dropped)."""
    coefficients, *_ = np.linalg.lstsq(x * root_weights[:, None], y * root_weights, rcond=None)
    return coefficients[-parts:]


def within_source_slopes(rows: Iterable[Row], parts: Sequence[str]) -> list[Slope]:
    """The slopes of ``parts`` (names of :class:`Composition` shares, or ``communication``) fitted together, with an
    intercept per source and each source weighing the same; standard errors by the jackknife over sources
    (module doc). A part no source spreads over gets slope 0 and standard error 0."""
    rows = list(rows)
    x, y, root_weights, sources = _design(rows, parts)
    slopes = _fit(x, y, root_weights, len(parts))
    by_source = np.array([r.source for r in rows])
    leave_one_out = []
    for source in sources:
        keep = by_source != source
        columns = [j for j, s in enumerate(sources) if s != source] + list(range(len(sources), x.shape[1]))
        leave_one_out.append(_fit(x[keep][:, columns], y[keep], root_weights[keep], len(parts)))
    g = len(sources)
    spread = np.asarray(leave_one_out)
    errors = np.sqrt((g - 1) / g * ((spread - spread.mean(axis=0)) ** 2).sum(axis=0)) if g > 1 else np.zeros(len(parts))
    result = []
    for k, part in enumerate(parts):
        informing = [s for s in sources
                     if np.ptp([r.composition.share(part) for r in rows if r.source == s]) >= MIN_SPREAD]
        n = sum(r.source in informing for r in rows)
        if not informing:
            result.append(Slope(part, 0.0, 0.0, 0, 0))
        else:
            result.append(Slope(part, float(slopes[k]), float(errors[k]), len(informing), n))
    return result


@dataclass(frozen=True)
class ExposureBin:
    """The rows whose communication share lies in ``[low, high)``, pooled across sources."""

    low: float
    high: float
    rows: int
    sources: int
    mean_abs: float
    bias: float
    p90_abs: float  # the 90th percentile of |error|


def exposure_bins(rows: Iterable[Row], edges: Sequence[float] = EXPOSURE_EDGES) -> list[ExposureBin]:
    """:class:`ExposureBin` per pair of consecutive ``edges`` (the last bin closed above); empty bins left out."""
    rows = list(rows)
    result = []
    for low, high in pairwise(edges):
        last = high == edges[-1]
        inside = [r for r in rows if low <= r.composition.communication and
                  (r.composition.communication <= high if last else r.composition.communication < high)]
        if not inside:
            continue
        errors = np.array([r.error for r in inside])
        result.append(ExposureBin(low, high, len(inside), len({r.source for r in inside}),
                                  float(np.abs(errors).mean()), float(errors.mean()),
                                  float(np.quantile(np.abs(errors), 0.9))))
    return result


@dataclass(frozen=True)
class SourceContrast:
    """One source's communication-bound rows against its other rows."""

    source: str
    bound_rows: int
    bound_mean: float
    other_rows: int
    other_mean: float

    @property
    def difference(self) -> float:
        """How much more optimistic (negative) the communication-bound rows are than the source's others."""
        return self.bound_mean - self.other_mean


def within_source_contrasts(rows: Iterable[Row], threshold: float = COMMUNICATION_BOUND) -> list[SourceContrast]:
    """Per source with rows on both sides of ``threshold`` (a communication share), its :class:`SourceContrast`;
    most negative difference first."""
    by_source: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        bound, other = by_source.setdefault(r.source, ([], []))
        (bound if r.composition.communication >= threshold else other).append(r.error)
    contrasts = [SourceContrast(s, len(b), statistics.fmean(b), len(o), statistics.fmean(o))
                 for s, (b, o) in by_source.items() if b and o]
    return sorted(contrasts, key=lambda c: c.difference)
