"""A chip's fitted constants re-derived from step times measured on the user's own system.

The presets' fitted constants (:mod:`pipesim.validation.constants`) were chosen on published runs, on other
people's clusters and software. A team with its own runs has better evidence: their measured step times. This
module fits the same kind of constants to them, the way validation does, and says how much to trust the result
the same way: each run predicted with the constants fitted *without* it (leave one run out).

- :class:`MeasuredStep`: one run, the keyword options of :func:`pipesim.simulate` that describe it (the schedule,
  ``pp``, ``mb``, the model, ``tp``, ``dp``, …) and its measured seconds a step.
- :class:`ChipKnob`: one :class:`~pipesim.analytic.chip_spec.ChipSpec` field and the grid of values tried.
  :data:`DEFAULT_KNOBS`: what a training step's GEMMs reach of the benchmark rate (BF16 and FP8 apart), the spread
  of GPU speeds a synchronous step waits on, the share of the link NCCL's rings reach, and how much of ZeRO-3's
  per-layer collectives really overlaps compute.
- :func:`fit_steps`: each knob's effect on each run's predicted step (one simulation per grid value, the other
  knobs at the chip's own values), then every combination of grid values searched at once for the least mean
  |log error| (the effects taken to add in log time, as :mod:`pipesim.validation.loso` takes them), ties going
  to the chip's own values; then every run simulated again at the fitted values, and each run at the values
  fitted without it. A knob no run moves keeps the chip's value.

The fit is only as good as the runs are varied: a knob moves with the runs that exercise it (the network share
with multi-node data parallelism, FP8's share with FP8 runs). The left-out error is the figure to quote; the
in-sample one says only how well the knobs can bend to these runs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.errors import PipesimError
from pipesim.io.atomic import write_text_atomic
from pipesim.io.spec_files import read_mapping

# A grid step toward the chip's own values is worth this much mean |log error|: ties and near-ties stay put
TIE_STEP = 1e-6


@dataclass(frozen=True)
class ChipKnob:
    """A chip field a fit may move, and the values it tries (the chip's own is added to them)."""

    field: str
    grid: tuple[float, ...]
    meaning: str


def _grid(low: float, high: float, step: float) -> tuple[float, ...]:
    return tuple(round(low + i * step, 6) for i in range(round((high - low) / step) + 1))


DEFAULT_KNOBS: tuple[ChipKnob, ...] = (
    ChipKnob("training_gemm_ratio", _grid(0.6, 1.0, 0.02),
             "share of the benchmark BF16 GEMM rate a training step's GEMMs reach"),
    ChipKnob("fp8_gemm_efficiency", _grid(0.3, 0.8, 0.025), "share of the FP8 peak a training step's GEMMs reach"),
    ChipKnob("gpu_speed_spread", _grid(0.0, 0.06, 0.005), "spread of GPU speeds a synchronous step waits on"),
    ChipKnob("collective_efficiency", _grid(0.5, 1.0, 0.05),
             "share of the link NCCL's ring collectives reach across nodes (inside a node too, on a chip without a "
             "measured table of its NVLink shares)"),
    ChipKnob("zero3_overlap_share", _grid(0.0, 1.0, 0.125),
             "share of ZeRO-3/FSDP's per-layer collectives that really runs beside compute"),
)
KNOBS_BY_FIELD = {k.field: k for k in DEFAULT_KNOBS}


@dataclass(frozen=True)
class MeasuredStep:
    """One measured run: its label, the :func:`pipesim.simulate` options that describe it, its seconds a step."""

    label: str
    options: dict
    step_s: float


@dataclass(frozen=True)
class RunFit:
    """One run's step: measured, predicted on the chip as given, with the fitted values, and with the values
    fitted without it."""

    label: str
    measured: float
    before: float
    fitted: float
    left_out: float

    def error(self, predicted: float) -> float:
        return predicted / self.measured - 1


@dataclass(frozen=True)
class StepFit:
    """What :func:`fit_steps` found: the chip with the fitted values, each knob's value before and after (the
    knobs no run moved are left out of ``values``), and every run's predictions."""

    chip: ChipSpec
    before: dict[str, float]
    values: dict[str, float]
    unmoved: tuple[str, ...]
    runs: tuple[RunFit, ...]

    def mean_abs(self, which: str) -> float:
        """Mean |error| over the runs of ``before``, ``fitted`` or ``left_out``."""
        return statistics.fmean(abs(r.error(getattr(r, which))) for r in self.runs)

    def bias(self, which: str) -> float:
        return statistics.fmean(r.error(getattr(r, which)) for r in self.runs)

    @property
    def caution(self) -> str | None:
        """A note when the runs are too few for the knobs they move (fewer than two runs a knob): the fit can then
        bend to nearly every run, and only the left-out column says how well it predicts; None otherwise."""
        if len(self.runs) >= 2 * len(self.values):
            return None
        return (f"{len(self.runs)} runs for {len(self.values)} knobs that move them: the fit can bend to nearly "
                "every run; read the left-out column, and fit fewer knobs (--knobs) or add runs")

    def to_dict(self) -> dict:
        """What ``pipesim fit --json`` prints: the chip's name, each knob before and after, the knobs kept, each
        run's measured and predicted seconds, and the mean |error| and bias of each kind of prediction."""
        kinds = {"as_given": "before", "fitted": "fitted", "left_out": "left_out"}
        return {"chip": self.chip.name,
                "knobs": {name: {"before": self.before[name], "fitted": value} for name, value in self.values.items()},
                "kept": list(self.unmoved),
                "runs": [{"label": r.label, "measured_s": r.measured, "as_given_s": r.before, "fitted_s": r.fitted,
                          "left_out_s": r.left_out} for r in self.runs],
                "errors": {kind: {"mean_abs": self.mean_abs(which), "bias": self.bias(which)}
                           for kind, which in kinds.items()},
                "caution": self.caution}

    def summary(self) -> str:
        """One line: the runs' mean |error| and bias on the chip as given, fitted, and left out."""
        return ", ".join(f"{name} {self.mean_abs(which):.1%} mean |error| (bias {self.bias(which):+.1%})"
                         for name, which in (("as given", "before"), ("fitted", "fitted"),
                                             ("left out", "left_out")))

    def text(self, hardware: str) -> str:
        """What ``pipesim fit`` prints for the runs on ``hardware``: the summary, each knob before and after, the
        knobs kept, a line a run (measured seconds, then its error as given, fitted and left out) and any caution."""
        lines = [f"{len(self.runs)} runs on {hardware}: {self.summary()}"]
        lines += [f"  {name}: {self.before[name]:g} → {value:g}" for name, value in self.values.items()]
        if self.unmoved:
            lines.append(f"  no run moves {', '.join(self.unmoved)}: kept")
        lines.append(f"{'run':<24} {'measured s':>11} {'as given':>9} {'fitted':>8} {'left out':>9}")
        lines += [f"{r.label[:24]:<24} {r.measured:>11.4g} {r.error(r.before):>+9.1%} {r.error(r.fitted):>+8.1%} "
                  f"{r.error(r.left_out):>+9.1%}" for r in self.runs]
        if self.caution:
            lines.append(f"note: {self.caution}")
        return "\n".join(lines)

    def save(self, path: Path, source: str) -> None:
        """The fitted chip as a chip file (``--hardware FILE``), its provenance in a comment above the fields."""
        moved = "; ".join(f"{name} {self.before[name]:g} → {value:g}" for name, value in self.values.items())
        header = [f"# {self.chip.name}: fitted by 'pipesim fit' to {len(self.runs)} measured steps ({source})",
                  f"# {moved or 'no knob moved'}; the runs: {self.summary()}"]
        body = yaml.safe_dump(self.chip.to_dict(), sort_keys=False)
        write_text_atomic(path, "\n".join(header) + "\n" + body)


Predictor = Callable[[MeasuredStep, ChipSpec], float]


def fit_steps(steps: Sequence[MeasuredStep], chip: ChipSpec, predict: Predictor,
              knobs: Sequence[ChipKnob] = DEFAULT_KNOBS, progress: Callable[[str], None] = lambda _: None) -> StepFit:
    """Fit ``knobs`` of ``chip`` to ``steps`` (module docstring), ``predict`` giving a run's seconds a step on a
    chip (:func:`pipesim.fit_chip` passes :func:`pipesim.simulate`'s): at least two runs, so that each can be
    left out."""
    if len(steps) < 2:
        raise PipesimError(f"{len(steps)} measured run(s): a fit needs at least 2, so that each can be predicted "
                           "by the others; add runs")
    grids = [tuple(sorted({*k.grid, getattr(chip, k.field)})) for k in knobs]
    own = [predict(s, chip) for s in steps]
    base = np.array([math.log(t / s.step_s) for t, s in zip(own, steps, strict=True)])
    shifts = []  # per knob: runs × grid, log(predicted at the value / predicted at the chip's own)
    for knob, grid in zip(knobs, grids, strict=True):
        progress(f"{knob.field}: {len(grid)} values × {len(steps)} runs")
        shifts.append(np.array([_shifts(predict, s, chip, knob.field, grid, own[r]) for r, s in enumerate(steps)]))
    moved = [k for k, s in enumerate(shifts) if np.abs(s).max() > 1e-12]
    presets = [grids[k].index(getattr(chip, knobs[k].field)) for k in range(len(knobs))]
    everyone = list(range(len(steps)))
    best = _best_indices(base, shifts, presets, moved, everyone)
    fitted_chip = replace(_chip_at(chip, knobs, grids, best), name=f"{chip.name}-fit")
    runs = []
    for r, step in enumerate(steps):
        progress(f"left out: {step.label}")
        others = [i for i in everyone if i != r]
        without = _chip_at(chip, knobs, grids, _best_indices(base, shifts, presets, moved, others))
        runs.append(RunFit(step.label, step.step_s, own[r], predict(step, fitted_chip), predict(step, without)))
    return StepFit(fitted_chip, {knobs[k].field: getattr(chip, knobs[k].field) for k in moved},
                   {knobs[k].field: grids[k][best[k]] for k in moved},
                   tuple(knobs[k].field for k in range(len(knobs)) if k not in moved), tuple(runs))


def _shifts(predict: Predictor, step: MeasuredStep, chip: ChipSpec, field: str, grid: tuple[float, ...],
            own: float) -> list[float]:
    """log(predicted at each grid value / predicted at the chip's own) for one run; the grid's two ends first, and
    where neither moves the run (a knob its layout does not exercise: FP8's share in a BF16 run) the rest are not
    simulated (the knobs' effects are monotone in their value)."""
    def shift(value: float) -> float:
        return 0.0 if value == getattr(chip, field) else math.log(predict(step, replace(chip, **{field: value})) / own)

    ends = shift(grid[0]), shift(grid[-1])
    if ends == (0.0, 0.0):
        return [0.0] * len(grid)
    return [ends[0], *(shift(v) for v in grid[1:-1]), ends[1]]


def _best_indices(base: np.ndarray, shifts: list[np.ndarray], presets: list[int], moved: list[int],
                  rows: list[int]) -> list[int]:
    """Grid indices of every knob minimising the mean |log error| of ``rows`` (knobs not in ``moved`` stay at
    their presets), every combination of the moved knobs' values tried: the first moved knob's values one at a
    time, the others' combinations at once (a matrix of rows × combinations, so memory stays a grid's worth
    smaller); the fewest grid steps from the presets win a tie."""
    best = list(presets)
    if not moved:
        return best
    first, rest = moved[0], moved[1:]
    sizes = [shifts[k].shape[1] for k in rest]
    # knob × combination: each combination's grid indices (one empty combination when one knob moves)
    combos = np.indices(sizes).reshape(len(rest), math.prod(sizes))
    inner = base[rows, None] + sum((shifts[k][np.ix_(rows, combos[n])] for n, k in enumerate(rest)),
                                   np.zeros((len(rows), combos.shape[1])))
    inner_distance = sum((np.abs(combos[n] - presets[k]) for n, k in enumerate(rest)), np.zeros(combos.shape[1]))
    best_score, choice = math.inf, None
    for i in range(shifts[first].shape[1]):
        scores = (np.abs(inner + shifts[first][rows, i, None]).mean(axis=0)
                  + TIE_STEP * (inner_distance + abs(i - presets[first])))
        j = int(np.argmin(scores))
        if scores[j] < best_score:
            best_score, choice = float(scores[j]), (i, j)
    i, j = choice
    best[first] = i
    for n, k in enumerate(rest):
        best[k] = int(combos[n, j])
    return best


def _chip_at(chip: ChipSpec, knobs: Sequence[ChipKnob], grids: list[tuple[float, ...]], indices: list[int]) -> ChipSpec:
    return replace(chip, **{k.field: grid[i] for k, grid, i in zip(knobs, grids, indices, strict=True)})


# simulate()'s options that count something: checked where the file is read, so a typo names its run and key
INTEGER_OPTIONS = frozenset({"pp", "mb", "chunks", "tp", "dp", "cp", "ep", "global_batch", "micro_batch_size",
                             "seq_len"})


def load_measured_steps(path: Path) -> list[MeasuredStep]:
    """The runs of a measured-steps file: a mapping with ``runs``, a list of mappings each with ``step_s``
    (seconds a step, measured), an optional ``label`` and :func:`pipesim.simulate`'s keyword options."""
    if not Path(path).is_file():
        raise PipesimError(f"measured-steps file {path} does not exist; give the .yaml file of your runs "
                           "(docs/calibration.md)")
    data = read_mapping(path, "measured-steps")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise PipesimError(f"{path}: no 'runs' list; write 'runs:' and under it one mapping a run, each with "
                           "'step_s' and pipesim.simulate's options (docs/calibration.md)")
    steps = []
    for n, run in enumerate(runs, 1):
        if not isinstance(run, dict):
            raise PipesimError(f"{path}: run {n} is not a mapping; give each run its options and 'step_s'")
        options = dict(run)
        label = str(options.pop("label", f"run {n}"))
        seconds = options.pop("step_s", None)
        if (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds)
                or seconds <= 0):
            raise PipesimError(f"{path}: {label}: 'step_s' must be the measured seconds a step, a positive number "
                               f"(got {seconds!r})")
        for key in INTEGER_OPTIONS & options.keys():
            value = options[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PipesimError(f"{path}: {label}: {key!r} must be a positive whole number (got {value!r})")
        if "hardware" in options:
            raise PipesimError(f"{path}: {label}: 'hardware' is the fit's (--hardware), one chip for every run; "
                               "drop it from the run")
        steps.append(MeasuredStep(label, options, float(seconds)))
    return steps
