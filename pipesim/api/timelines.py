"""Measured timelines: ``pipesim.calibrate`` (a cost model from a measured run) and ``pipesim.overlay``
(predicted against measured, instruction by instruction)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pipesim.analysis.overlay import OverlayErrors
from pipesim.sim.costs import CostModel, TimeUnit

__all__ = ["Calibration", "OverlayResult", "calibrate", "overlay"]


def _frame(timeline: str | Path | pd.DataFrame, what: str) -> pd.DataFrame:
    from pipesim.io.timeline import read_timeline

    return timeline if isinstance(timeline, pd.DataFrame) else read_timeline(timeline, flag=what)


@dataclass(frozen=True)
class Calibration:
    """A cost model calibrated from a measured timeline, and the notes on what was derived."""

    costs: CostModel
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        """F/B/I/W, P2P latency, unit and overrides: what ``pipesim calibrate`` prints after "wrote FILE:"."""
        c, d = self.costs, self.costs.default
        return (f"F={d.forward:.4g} B={d.backward:.4g} I={d.backward_input:.4g} W={d.backward_weight:.4g} "
                f"p2p latency={c.p2p_latency:.4g} [{c.time_unit}], {len(c.overrides)} stage override(s)")

    def text(self) -> str:
        return "\n".join([self.summary(), *(f"note: {n}" for n in self.notes)])

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict:
        return {"costs": self.costs.to_dict(), "notes": list(self.notes)}

    def save(self, path: str | Path) -> None:
        """Write the costs file (.json or .yaml) for ``simulate(costs=...)`` / ``pipesim simulate --costs``."""
        self.costs.save(path)


def calibrate(timeline: str | Path | pd.DataFrame, *, warmup_steps: int = 1) -> Calibration:
    """Per-stage F/B/I/W 10%-trimmed means and the P2P latency of a measured timeline (``pipesim calibrate``).

    Args:
        timeline: a measured timeline file (.csv/.parquet) or DataFrame.
        warmup_steps: leading steps to drop when more exist (default 1).

    Returns:
        A :class:`Calibration`: ``.costs`` per rank's share of the model, in seconds; ``.notes`` say which
        backward passes were derived.
    """
    from pipesim.analysis.calibrate import calibrate as fit

    notes: list[str] = []
    costs = fit(_frame(timeline, "timeline"), warmup_steps=warmup_steps, notes=notes)
    return Calibration(costs, tuple(notes))


@dataclass(frozen=True, eq=False)
class OverlayResult:
    """Predicted against measured: the errors, and the two one-step timelines on one time axis.

    Attributes:
        errors: makespan error and per-instruction start-time errors.
        predicted: the predicted step compared, shifted to start at 0.
        measured: the measured step compared, shifted to start at 0.
        measured_step: which step of the measured timeline was compared.
        measured_steps: how many steps the measured timeline holds.
        time_unit: the unit of both timelines.
    """

    errors: OverlayErrors
    predicted: pd.DataFrame
    measured: pd.DataFrame
    measured_step: int
    measured_steps: int
    time_unit: str

    def text(self) -> str:
        """What ``pipesim overlay`` prints: the step compared, the unit, the errors."""
        e, u = self.errors, self.time_unit
        return (f"measured step {self.measured_step} (of {self.measured_steps}; times in {u}): makespan predicted "
                f"{e.makespan_predicted:.6g} {u} vs measured {e.makespan_measured:.6g} {u} "
                f"({e.makespan_error:+.1%}); per-instruction start error median {e.start_error_median:.3g} {u}, "
                f"p90 {e.start_error_p90:.3g} {u}, max {e.start_error_max:.3g} {u} over {e.instructions} "
                "instructions")

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict:
        """The errors, with the step compared and the unit (``pipesim overlay --json``)."""
        return self.errors.to_dict() | {"measured_step": self.measured_step, "time_unit": self.time_unit}

    def plot(self, path: str | Path, *, title: str = "predicted vs measured") -> None:
        """Both timelines as two aligned Gantt panels (.png/.pdf/.svg), the errors in the title."""
        from pipesim.analysis.overlay import plot_overlay

        plot_overlay(self.predicted, self.measured, self.errors, path, title=title, time_unit=self.time_unit)


def overlay(predicted: str | Path | pd.DataFrame, measured: str | Path | pd.DataFrame, *, step: int | None = None,
            time_unit: str | None = None) -> OverlayResult:
    """Match two timelines of the same Program instruction by instruction (``pipesim overlay``).

    Args:
        predicted: the predicted timeline (file or DataFrame, e.g. ``SimResult.timeline``); its step 0.
        measured: the measured timeline (file or DataFrame, from the executor).
        step: the measured step to compare (default: the last, warm-up excluded).
        time_unit: the unit of both timelines (default: the predicted DataFrame's ``attrs["time_unit"]``,
            else seconds).
    """
    from pipesim.analysis.overlay import one_step, overlay_errors

    predicted_frame = _frame(predicted, "predicted timeline")
    measured_frame = _frame(measured, "measured timeline")
    unit = time_unit or predicted_frame.attrs.get("time_unit") or TimeUnit.SECONDS.value
    chosen = int(measured_frame["step"].max()) if step is None else step
    p, m = one_step(predicted_frame, 0), one_step(measured_frame, chosen)
    return OverlayResult(overlay_errors(p, m), p, m, chosen, int(measured_frame["step"].nunique()), str(unit))
