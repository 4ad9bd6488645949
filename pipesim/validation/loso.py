"""Validation by source left out: each fitted constant re-derived without a source, that source then predicted.

The published-runs table is also where the constants of :mod:`pipesim.validation.constants` were chosen, so
its in-sample error says how well they were chosen, not how well pipesim predicts a run nobody tuned on. Here,
for every source S, each fitted constant is chosen again from the rows of all the other sources and S's rows
are predicted with those values. The left-out error is the headline; the in-sample one (the presets as shipped,
chosen with every source in view) stands beside it, and the fit on every source is reported too: where it
moves a preset, the preset came from a direct measurement that the rows only approximate.

**The fit.** Each constant takes the value of its grid that minimises the mean absolute log error of step time
over the training rows it informs, each source weighted equally (the mean over sources of each source's mean:
a source's rows share its system and software, so one long table must not set a chip-wide constant alone),
all constants together: the fit minimises the sum of the constants' losses over every combination of their
grid values (about 2·10⁶), so it cannot stop at a local minimum that depends on where a search began (the
coordinate descent from the presets used before did: docs/validation-log.md); exact ties go to the presets. The
search splits into groups of constants that move no common row, each searched alone (exact: a test checks it
against the whole search), so a constant that moves only its own chip's rows costs little. To
keep a fit cheap, a row's log step time is taken as separable in the constants: each row is simulated once
at every grid value of each constant that informs it, the others at their preset values, and the changes are
added. The left-out (and in-sample) predictions themselves are then simulated exactly, with all fitted values
at once. A constant no training row informs keeps its preset value (there is no evidence to move it) and the
result says so. Memory depends on none of the fitted constants, so its left-out error is its in-sample one.

**Pooling over sources** (:class:`SourcePooling`). The headline fit takes the mean over sources. The median is
a robust alternative, offered as a sensitivity analysis (``experiments/validation_loso.py --pooling median``):
with the mean, one source whose rows miss by a mechanism the model lacks can set a constant that every other
source would put elsewhere (Llama 3 405B and the Hopper FlashAttention-2 rate, docs/validation-log.md).
"""

from __future__ import annotations

import enum
import itertools
import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from pipesim.analytic.error_band import (
    LayoutFeature,
    StepGroup,
    layout_features,
    run_kind,
    step_groups,
    tolerance_bound,
)
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.program.loader import load_schedule
from pipesim.validation.constants import FITTED_CONSTANTS, FittedConstant, chips_with
from pipesim.validation.residual_composition import Row, composition_of, within_source_contrasts
from pipesim.validation.runs import Comparison, PublishedRun, predict
from pipesim.validation.sources import MEMORY_MODULES, MEMORY_ONLY_RUNS, module_of, platform_of

INNER_COMBINATIONS = 4096  # a (rows × combinations) matrix of that width is a few MB
# A step in the score per grid step away from the presets: far below any real difference of the loss (a mean |log
# error|), so it only settles exact ties, toward the shipped value
TIE_STEP = 1e-10


class SourcePooling(enum.Enum):
    """How a fit combines the sources' mean |log error| into the loss it minimises."""

    MEAN = "mean"  # every source weighs the same (the headline)
    MEDIAN = "median"  # the middle source's: one source far off cannot move a constant alone

    def combine(self, per_source: np.ndarray) -> np.ndarray:
        """Pool the sources' losses (axis 0: one row per source, a column per combination of constants)."""
        return np.mean(per_source, axis=0) if self is SourcePooling.MEAN else np.median(per_source, axis=0)


def synthesised(run: PublishedRun) -> bool:
    """Rows whose order is synthesised for their costs (zb-auto): ~1 s each, left out of the fits' grids."""
    return bool(load_schedule(run.schedule).build_options)


@dataclass(frozen=True)
class RowSensitivity:
    """One row's published step time, its prediction at the presets, and its change over each constant's grid."""

    run: PublishedRun
    published: float  # s
    log_error: float  # log(predicted / published) at the preset values
    shifts: dict[str, tuple[float, ...]]  # constant → log(predicted at grid[i] / predicted at preset)


def sensitivity(run: PublishedRun, constants: Iterable[FittedConstant] = FITTED_CONSTANTS,
                predictor: Callable[..., Comparison] = predict) -> RowSensitivity:
    base = predictor(run)
    shifts = {}
    for constant in constants:
        if not constant.informs(run) or run.chip not in constant.chips:
            continue  # a row on a chip the constant does not set cannot inform it
        times = []
        for value in constant.grid:
            chip = constant.apply(chips_with({})[run.chip], value)
            times.append(predictor(run, chip).report.step_time)
        shifts[constant.name] = tuple(math.log(t / base.report.step_time) for t in times)
    return RowSensitivity(run, base.published_step_s, math.log(base.report.step_time / base.published_step_s),
                          shifts)


@dataclass(frozen=True)
class Fit:
    """Fitted values, and which constants had no informing row (kept at the preset)."""

    values: dict[str, float]
    unfitted: tuple[str, ...] = ()
    informing_rows: dict[str, int] = field(default_factory=dict)


def fit(rows: list[RowSensitivity], constants: tuple[FittedConstant, ...] = FITTED_CONSTANTS,
        pooling: SourcePooling = SourcePooling.MEAN) -> Fit:
    """The grid point of every constant at once that minimises the sum over constants of each constant's loss (the
    mean |log error| of the rows it informs, each source's mean pooled over sources by ``pooling``), found by
    trying every combination of grid values: the result does not depend on where a search starts."""
    informing = {c.name: [i for i, r in enumerate(rows) if c.name in r.shifts] for c in constants}
    fitted = [c for c in constants if informing[c.name]]
    best = _joint_minimum(rows, fitted, informing, pooling)
    values = {c.name: c.grid[best[n]] for n, c in enumerate(fitted)}
    unfitted = tuple(c.name for c in constants if not informing[c.name])
    return Fit(values, unfitted, {name: len(members) for name, members in informing.items()})


def _loss_weights(rows: list[RowSensitivity], members: list[int]) -> np.ndarray:
    """(sources × rows) matrix whose product with |error| gives each source's mean |error| over ``members``."""
    sources: dict[str, list[int]] = {}
    for i in members:
        sources.setdefault(source_of(rows[i].run), []).append(i)
    weights = np.zeros((len(sources), len(rows)))
    for s, indices in enumerate(sources.values()):
        weights[s, indices] = 1.0 / len(indices)
    return weights


def _joint_minimum(rows: list[RowSensitivity], constants: list[FittedConstant], informing: dict[str, list[int]],
                   pooling: SourcePooling) -> tuple[int, ...]:
    """Grid indices of ``constants`` minimising the summed loss, ties going to the combination nearest the presets.

    Exhaustive over every combination of grid values (about 2·10⁶). Under the mean over sources the loss is one
    weighted sum over rows, and a row's error depends only on the constants that inform it, so the search splits
    (:func:`_split_minimum`); the median over sources does not split and is searched whole."""
    if not constants:
        return ()
    base = np.array([r.log_error for r in rows])
    shifts = [np.array([r.shifts.get(c.name, (0.0,) * len(c.grid)) for r in rows]) for c in constants]
    presets = [c.grid.index(c.preset_value) for c in constants]
    per_constant = [_loss_weights(rows, informing[c.name]) for c in constants]
    if pooling is SourcePooling.MEAN:  # then the summed loss is one weighted sum of the rows: one matrix product
        weights = sum(w.mean(axis=0) for w in per_constant)
        members = [frozenset(informing[c.name]) for c in constants]
        return _split_minimum(base, shifts, presets, weights, members)

    def loss(errors: np.ndarray) -> np.ndarray:  # errors: rows × combinations → the summed loss per combination
        magnitude = np.abs(errors)
        return sum(pooling.combine(w @ magnitude) for w in per_constant)

    return _exhaustive_minimum(base, shifts, presets, loss)[0]


def _exhaustive_minimum(base: np.ndarray, shifts: list[np.ndarray], presets: list[int],
                        loss: Callable[[np.ndarray], np.ndarray]) -> tuple[tuple[int, ...], float]:
    """Every combination of the grids of ``shifts`` (one rows × grid array a constant) tried: the best indices and
    their score, ``loss`` of the rows' errors plus :data:`TIE_STEP` per grid step away from ``presets``. The
    innermost constants' shifts are enumerated once as a matrix (up to :data:`INNER_COMBINATIONS`); the outer
    ones loop."""
    sizes = [s.shape[1] for s in shifts]
    inner = len(shifts)
    while inner > 0 and math.prod(sizes[inner - 1:]) <= INNER_COMBINATIONS:
        inner -= 1
    inner_combos = np.array(list(itertools.product(*(range(n) for n in sizes[inner:]))), dtype=int).reshape(
        math.prod(sizes[inner:]), len(sizes) - inner)
    inner_shift = sum((shifts[inner + k][:, inner_combos[:, k]] for k in range(len(sizes) - inner)),
                      np.zeros((len(base), len(inner_combos))))
    inner_distance = sum((np.abs(inner_combos[:, k] - presets[inner + k]) for k in range(len(sizes) - inner)),
                         np.zeros(len(inner_combos)))
    best, best_score = (), math.inf
    for outer in itertools.product(*(range(n) for n in sizes[:inner])):
        errors = base + sum((shifts[k][:, i] for k, i in enumerate(outer)), np.zeros(len(base)))
        distance = sum(abs(i - presets[k]) for k, i in enumerate(outer)) + inner_distance
        score = loss(errors[:, None] + inner_shift) + TIE_STEP * distance
        j = int(np.argmin(score))
        if score[j] < best_score:
            best, best_score = (*outer, *(int(i) for i in inner_combos[j])), float(score[j])
    return best, best_score


def _split_minimum(base: np.ndarray, shifts: list[np.ndarray], presets: list[int], weights: np.ndarray,
                   members: list[frozenset[int]]) -> tuple[int, ...]:
    """:func:`_exhaustive_minimum` of the loss ``weights · |errors|``, constant ``k`` moving the rows ``members[k]``.

    The constants that move most rows (more than half: the spread of GPU speeds, which every multi-GPU row has)
    are tried at every combination of their values; for each, the others fall into groups that share no row
    (union of constants that move a common row), and each group is minimised alone, since a sum of terms over
    disjoint variables is least where each term is. The Blackwell clock, which moves only Blackwell rows, is
    then searched beside the Hopper constants instead of across them. Exact, and ties go toward the presets as in
    the whole search (the distance to them adds over the groups too); a test checks it against the whole search."""
    rows = len(base)
    hubs = [k for k, m in enumerate(members) if len(m) > rows / 2]
    others = [k for k in range(len(members)) if k not in hubs]
    group_of = {k: k for k in others}  # union-find over the other constants, joined by a row they share

    def root(k: int) -> int:
        while group_of[k] != k:
            k = group_of[k]
        return k

    for row in range(rows):
        moved = [k for k in others if row in members[k]]
        for k in moved[1:]:
            group_of[root(k)] = root(moved[0])
    groups: dict[int, list[int]] = {}
    for k in others:
        groups.setdefault(root(k), []).append(k)
    group_rows = [np.array(sorted(frozenset().union(*(members[k] for k in g))), dtype=int) for g in groups.values()]
    in_a_group = np.zeros(rows, dtype=bool)
    for indices in group_rows:
        in_a_group[indices] = True
    hub_only = ~in_a_group

    best, best_score = None, math.inf
    for combo in itertools.product(*(range(shifts[k].shape[1]) for k in hubs)):
        errors = base + sum((shifts[k][:, i] for k, i in zip(hubs, combo, strict=True)), np.zeros(rows))
        score = float(weights[hub_only] @ np.abs(errors[hub_only]))
        score += TIE_STEP * sum(abs(i - presets[k]) for k, i in zip(hubs, combo, strict=True))
        chosen = dict(zip(hubs, combo, strict=True))
        for group, indices in zip(groups.values(), group_rows, strict=True):
            w = weights[indices]
            indices_best, group_score = _exhaustive_minimum(
                errors[indices], [shifts[k][indices] for k in group], [presets[k] for k in group],
                lambda e, w=w: w @ np.abs(e))
            score += group_score
            chosen.update(zip(group, indices_best, strict=True))
        if score < best_score:
            best, best_score = tuple(chosen[k] for k in range(len(members))), score
    return best


def source_of(run: PublishedRun) -> str:
    """The source a row comes from (the unit of validation: its module, or the module whose platform it shares),
    or its citation for a row built elsewhere."""
    try:
        return platform_of(module_of(run))
    except KeyError:
        return run.source


@dataclass(frozen=True)
class SourceResult:
    """One source: its rows predicted in sample and with it left out of the fit."""

    source: str
    runs: list[PublishedRun]  # the rows predicted, in order
    in_sample: list[float]  # signed step-time errors with the presets as shipped (chosen with every source in view)
    left_out: list[float]  # signed step-time errors, constants fitted without this source
    left_out_fit: Fit
    memory: list[float]  # signed memory errors (no fitted constant moves memory)
    left_out_comparisons: list[Comparison] = field(default_factory=list)


@dataclass(frozen=True)
class ValidationResult:
    all_sources_fit: Fit
    sources: list[SourceResult]
    # each constant's own loss at each of its grid values, the others at their presets, on every source's rows:
    # how flat the fit's choice is where it moves a preset (own_loss_profile)
    all_sources_profiles: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def pooled(self, key: str) -> list[float]:
        return [e for s in self.sources for e in getattr(s, key)]


def own_loss_profile(rows: list[RowSensitivity], constant: FittedConstant) -> tuple[float, ...]:
    """The loss the fit weighs for ``constant`` alone (the mean over the sources of its informing rows of each
    source's mean |log error|) at each of its grid values, every other constant at its preset: where the fit
    moves a preset, whether the choice is a clear one or a flat valley's. Empty where no row informs it."""
    informing = [i for i, r in enumerate(rows) if constant.name in r.shifts]
    if not informing:
        return ()
    weights = _loss_weights(rows, informing).mean(axis=0)
    base = np.array([r.log_error for r in rows])
    shifts = np.array([r.shifts.get(constant.name, (0.0,) * len(constant.grid)) for r in rows])
    return tuple(float(v) for v in weights @ np.abs(base[:, None] + shifts))


def errors_with(runs: list[PublishedRun], values: dict[str, float],
                predictor: Callable[..., Comparison] = predict) -> list[Comparison]:
    chips = chips_with(values)
    return [predictor(run, chips[run.chip]) for run in runs]


def source_sensitivities(by_source: dict[str, list[PublishedRun]],
                         constants: tuple[FittedConstant, ...] = FITTED_CONSTANTS,
                         predictor: Callable[..., Comparison] = predict,
                         progress: Callable[[str], None] = lambda _: None) -> dict[str, list[RowSensitivity]]:
    """Each source's rows simulated at every grid value of each constant that informs them (:func:`sensitivity`),
    the rows whose order is synthesised left out (too slow to simulate at every grid value): what every fit reads."""
    sens: dict[str, list[RowSensitivity]] = {}
    for name, runs in by_source.items():
        progress(f"sensitivities: {name}")
        sens[name] = [sensitivity(r, constants, predictor) for r in runs if not synthesised(r)]
    return sens


def leave_one_source_out(by_source: dict[str, list[PublishedRun]], *, include_synthesised: bool = True,
                         constants: tuple[FittedConstant, ...] = FITTED_CONSTANTS,
                         predictor: Callable[..., Comparison] = predict,
                         progress: Callable[[str], None] = lambda _: None,
                         pooling: SourcePooling = SourcePooling.MEAN,
                         sens: dict[str, list[RowSensitivity]] | None = None) -> ValidationResult:
    """Fit on all sources and on each set of all-but-one; predict every source both ways (``sens``: the
    sources' :func:`source_sensitivities`, computed here when not given)."""
    if sens is None:
        sens = source_sensitivities(by_source, constants, predictor, progress)
    pooled = [r for rows in sens.values() for r in rows]
    everything = fit(pooled, constants, pooling)
    profiles = {c.name: own_loss_profile(pooled, c) for c in constants}
    results = []
    for name, runs in by_source.items():
        progress(f"left out: {name}")
        kept = [r for r in runs if include_synthesised or not synthesised(r)]
        held = fit([r for other, rows in sens.items() if other != name for r in rows], constants, pooling)
        inside = errors_with(kept, {}, predictor)
        outside = errors_with(kept, held.values, predictor)
        results.append(SourceResult(name, kept, [c.step_error for c in inside], [c.step_error for c in outside], held,
                                    [c.memory_error for c in inside if c.memory_error is not None], outside))
    return ValidationResult(everything, results, profiles)


def summary(errors: list[float]) -> dict[str, float]:
    """Rows, mean |error|, mean signed error (bias) and max |error|."""
    if not errors:
        return {"rows": 0, "mean_abs": math.nan, "bias": math.nan, "max_abs": math.nan}
    return {"rows": len(errors), "mean_abs": statistics.fmean(abs(e) for e in errors),
            "bias": statistics.fmean(errors), "max_abs": max(abs(e) for e in errors)}


BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 0


def source_bootstrap(result: ValidationResult, coverage: float = 0.9, draws: int = BOOTSTRAP_DRAWS,
                     seed: int = BOOTSTRAP_SEED) -> dict[str, tuple[float, float]]:
    """How far the headline figures move with which sources happened to be gathered: ``draws`` resamples of the
    sources with replacement (a source's rows share its system and software, so the source is the unit drawn, as
    it is the unit left out), each source keeping its own left-out errors (no refit: the folds are the ones
    :func:`leave_one_source_out` ran), and the central ``coverage`` interval of the pooled rows' mean |error|, of
    their mean signed error, and of the mean over sources of each source's mean |error|. A sampling interval,
    seeded so it is the same every run; not the error of any one prediction (that is the band)."""
    signed = [np.array(s.left_out) for s in result.sources if s.left_out]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(signed), size=(draws, len(signed)))
    sums = np.array([np.abs(e).sum() for e in signed])
    signed_sums = np.array([e.sum() for e in signed])
    counts = np.array([len(e) for e in signed])
    means = sums / counts
    rows = counts[picks].sum(axis=1)
    stats = {"mean_abs": sums[picks].sum(axis=1) / rows, "bias": signed_sums[picks].sum(axis=1) / rows,
             "mean_over_sources": means[picks].mean(axis=1)}
    tail = (1 - coverage) / 2 * 100
    return {name: (float(np.percentile(v, tail)), float(np.percentile(v, 100 - tail))) for name, v in stats.items()}


def left_out_by_kind(result: ValidationResult) -> dict[str, list[float]]:
    """The signed left-out step-time errors of each kind of run (chip family, precision: the kinds of
    :func:`pipesim.analytic.error_band.run_kind`; a chip it does not know yet has no kind and is left out)."""
    per_kind: dict[str, list[float]] = {}
    for s in result.sources:
        for run, error in zip(s.runs, s.left_out, strict=True):
            kind = run_kind(run.chip, run.precision)
            if kind is not None:
                per_kind.setdefault(kind, []).append(error)
    return dict(sorted(per_kind.items()))


def framework_records(result: ValidationResult) -> dict[str, tuple[int, int, float, float]]:
    """Per training framework the published rows name (:attr:`PublishedRun.framework`), its rows, their sources
    and the lowest and highest signed left-out step-time error: what :func:`pipesim.analytic.error_band.
    framework_record` quotes beside a band."""
    errors: dict[str, list[float]] = {}
    sources: dict[str, set[str]] = {}
    for s in result.sources:
        for run, error in zip(s.runs, s.left_out, strict=True):
            if run.framework is not None:
                errors.setdefault(run.framework.value, []).append(error)
                sources.setdefault(run.framework.value, set()).add(s.source)
    return {name: (len(v), len(sources[name]), round(min(v), 3), round(max(v), 3))
            for name, v in sorted(errors.items())}


def run_step_groups(run: PublishedRun) -> frozenset[StepGroup]:
    """The step groups (:func:`pipesim.analytic.error_band.step_groups`) of a published run's layout as it ran."""
    return step_groups(run.microbatches, int(run.zero), run.dp * run.cp)


def step_group_records(result: ValidationResult) -> dict[str, tuple[int, int, float, float, float]]:
    """Per step group (:class:`pipesim.analytic.error_band.StepGroup`) its published step-time rows, their sources
    and the lowest, highest and mean signed left-out error: what :func:`pipesim.analytic.error_band.group_records`
    quotes beside a band. A group no row is of is left out."""
    errors: dict[str, list[float]] = {}
    sources: dict[str, set[str]] = {}
    for s in result.sources:
        for run, error in zip(s.runs, s.left_out, strict=True):
            for group in run_step_groups(run):
                errors.setdefault(group.value, []).append(error)
                sources.setdefault(group.value, set()).add(s.source)
    return {g.value: (len(errors[g.value]), len(sources[g.value]), round(min(errors[g.value]), 3),
                      round(max(errors[g.value]), 3), round(statistics.fmean(errors[g.value]), 3))
            for g in StepGroup if g.value in errors}


def communication_contrast(result: ValidationResult) -> tuple[int, int, float]:
    """Each source's communication-bound rows (:data:`~pipesim.analytic.error_band.COMMUNICATION_BOUND` of the
    predicted step or more waiting on communication) against its other rows, by their left-out errors
    (:func:`~pipesim.validation.residual_composition.within_source_contrasts`): the sources with rows on both
    sides, how many of them differ the way of the median, and the median difference: what
    :class:`~pipesim.analytic.error_band.CommunicationRecord` quotes beside a band."""
    rows = [Row(s.source, error, composition_of(comparison.report.busiest))
            for s in result.sources
            for error, comparison in zip(s.left_out, s.left_out_comparisons, strict=True)
            if comparison.report.busiest is not None]
    differences = [c.difference for c in within_source_contrasts(rows)]
    if not differences:
        return 0, 0, 0.0
    median = statistics.median(differences)
    return len(differences), sum(d * median > 0 for d in differences), round(median, 3)


def error_bands(result: ValidationResult) -> tuple[dict[str, tuple[float | None, int, float]], tuple[float, int]]:
    """The step-time error bands of :mod:`pipesim.analytic.validation_bands`: per kind of run (chip family,
    precision) the 90/90 tolerance bound of |left-out error| (None for a kind with too few rows for one), its
    row count and its largest |left-out error|; and the bound over every row, with its row count
    (:func:`pipesim.analytic.error_band.tolerance_bound`)."""
    per_kind = {kind: [abs(e) for e in errors] for kind, errors in left_out_by_kind(result).items()}
    pooled = [abs(e) for e in result.pooled("left_out")]

    def bound(values: list[float]) -> float | None:
        value = tolerance_bound(values)
        return None if value is None else round(value, 3)

    return ({k: (bound(v), len(v), round(max(v), 3)) for k, v in per_kind.items()},
            (bound(pooled), len(pooled)))


def memory_errors(result: ValidationResult,
                  predictor: Callable[..., Comparison] = predict) -> tuple[list[float], int]:
    """The signed memory errors of the step-time sources' rows (in ``result``) and of the memory-only sources'
    (:data:`~pipesim.validation.sources.MEMORY_MODULES`; no fitted constant moves memory, so no fold is needed
    for them), and how many sources they come from."""
    sources = sum(bool(s.memory) for s in result.sources) + len(MEMORY_MODULES)
    return result.pooled("memory") + [predictor(run).memory_error for run in MEMORY_ONLY_RUNS], sources


def regime_counts(runs: Iterable[PublishedRun]) -> dict[tuple[str, ...], int]:
    """How many of ``runs`` have each layout feature set (:func:`pipesim.analytic.error_band.layout_features`),
    by its names, sorted."""
    counts: dict[tuple[str, ...], int] = {}
    for run in runs:
        zero = int(run.zero) if run.dp * run.cp > 1 else 0  # nothing to shard over one rank
        features = layout_features(run.tp, run.pp, run.cp, zero, MODEL_PRESETS[run.model].is_moe)
        regime = tuple(f.value for f in LayoutFeature if f in features)
        counts[regime] = counts.get(regime, 0) + 1
    return dict(sorted(counts.items()))


def layout_regimes(runs: Iterable[PublishedRun]) -> tuple[tuple[str, ...], ...]:
    """The distinct layout feature sets of ``runs``: what a band measured on them was measured on."""
    return tuple(regime_counts(runs))


def memory_error_band(errors: list[float], sources: int) -> tuple[float | None, int, int]:
    """The peak-memory band of :mod:`pipesim.analytic.validation_bands`: the 90/90 tolerance bound of |error| over
    every published memory row (no fitted constant moves memory: in sample is left out), the rows, the sources."""
    value = tolerance_bound([abs(e) for e in errors])
    return (None if value is None else round(value, 3)), len(errors), sources
