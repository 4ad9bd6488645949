"""``pipesim fit``: a chip's fitted constants re-derived from step times measured on the user's own system
(:mod:`pipesim.analysis.step_fit`), each run predicted by :func:`pipesim.simulate`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pipesim.analysis.step_fit import KNOBS_BY_FIELD, MeasuredStep, StepFit, fit_steps, load_measured_steps
from pipesim.analytic.chip_load import load_chip
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.errors import PipesimError


def _simulated_step(step: MeasuredStep, chip: ChipSpec) -> float:
    """The step time :func:`pipesim.simulate` predicts for ``step`` on ``chip``; a bad option names the run."""
    from pipesim.api.simulation import simulate

    options = dict(step.options)
    try:
        return simulate(options.pop("schedule", None), options.pop("pp", None), options.pop("mb", None),
                        options.pop("chunks", None), hardware=chip, **options).step_time
    except (TypeError, ValueError) as error:  # an option simulate() does not take, or a value it cannot read
        raise PipesimError(f"run {step.label!r}: {error}; give pipesim.simulate's keyword options, with the "
                           "values its flags take") from None
    except PipesimError as error:
        raise PipesimError(f"run {step.label!r}: {error}") from None


def fit_chip(runs: str | Path | Sequence[MeasuredStep], hardware: str | ChipSpec,
             knobs: Sequence[str] | None = None, progress: Callable[[str], None] = lambda _: None) -> StepFit:
    """Fit ``hardware``'s constants to measured steps (``pipesim fit``).

    Args:
        runs: a measured-steps YAML file (``runs:``, each run :func:`pipesim.simulate`'s keyword options and its
            measured ``step_s``; docs/calibration.md) or :class:`~pipesim.analysis.step_fit.MeasuredStep` objects.
        hardware: the chip the runs ran on: a preset name, a chip file or a ``ChipSpec``.
        knobs: the chip fields to fit (:data:`~pipesim.analysis.step_fit.DEFAULT_KNOBS` by name); all of them
            by default, each kept at the chip's value where no run moves it.

    Returns:
        A :class:`~pipesim.analysis.step_fit.StepFit`: the fitted chip (``.chip``; ``.save(path, source)`` writes
        it as a chip file), each knob before and after, and each run's step as given, fitted and left out.
    """
    steps = load_measured_steps(Path(runs)) if isinstance(runs, (str, Path)) else list(runs)
    chip = hardware if isinstance(hardware, ChipSpec) else load_chip(hardware)
    names = list(KNOBS_BY_FIELD) if knobs is None else list(knobs)
    unknown = [n for n in names if n not in KNOBS_BY_FIELD]
    if unknown:
        raise PipesimError(f"knob {unknown[0]!r} is not one pipesim fits; use one of {', '.join(KNOBS_BY_FIELD)}")
    return fit_steps(steps, chip, _simulated_step, [KNOBS_BY_FIELD[n] for n in names], progress)
