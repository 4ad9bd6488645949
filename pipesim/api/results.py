"""What :func:`pipesim.simulate` returns: the timeline, metrics, memory (peaks and over time), the model report,
the step time, figures, and the same text and JSON the ``pipesim simulate`` command prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pipesim.api.rendering import summary_dict, summary_text
from pipesim.api.unit_costs import GIB
from pipesim.errors import PipesimError
from pipesim.program.build import BuiltProgram
from pipesim.sim.closed_forms import AnalyticBubble
from pipesim.sim.costs import ACTIVATION_UNIT, TimeUnit
from pipesim.sim.memory import MemoryProfile
from pipesim.sim.metrics import Metrics
from pipesim.sim.simulator import SimulationResult

if TYPE_CHECKING:  # a model-based run's report loads the analytic model on use: unit-cost runs need none of it
    import pandas as pd
    from matplotlib.axes import Axes

    from pipesim.analytic.error_band import ErrorBand
    from pipesim.analytic.step_report import StepReport
    from pipesim.analytic.training_time import TrainingTime
    from pipesim.api.model_setup import ModelSetup

__all__ = ["MemoryResult", "SimResult"]


@dataclass(frozen=True)
class MemoryResult:
    """Activation memory per rank: the peaks, and what each rank holds over time.

    Units are microbatches through one rank's share of the model (a chunk of v holds 1/v); bytes (and GiB)
    follow when the costs give ``activation_bytes``.
    """

    profile: MemoryProfile
    time_unit: TimeUnit
    makespan: float

    @property
    def peak_activations(self) -> tuple[float, ...]:
        """Peak activations held at once, per rank, in microbatch units."""
        return self.profile.peak_activations

    @property
    def peak_bytes(self) -> tuple[float, ...] | None:
        """Peak activation bytes per rank, or None when the costs give no ``activation_bytes``. Where the pipeline
        runtime holds bytes until the step's end (:attr:`peak_held_bytes`), the activations at the moment the two
        together peak."""
        return self.profile.peak_bytes

    @property
    def peak_held_bytes(self) -> tuple[float, ...] | None:
        """Per rank, what the pipeline runtime held until the step's end (``StageCosts.held_to_step_end``: the
        sends torch.distributed.pipelining's multi-stage runtime waits for at the end) where it and the activations
        peak together; None where nothing is held."""
        return self.profile.peak_held_bytes

    @property
    def has_bytes(self) -> bool:
        return self.profile.peak_bytes is not None

    @cached_property
    def over_time(self) -> pd.DataFrame:
        """One row per change: ``rank``, ``time``, ``activations`` held after it (and ``gib`` with bytes).

        A step function per rank, zero before its first row; its maximum per rank is the peak.
        """
        import pandas as pd  # here, not with the module: `simulate --json` builds no frame

        curve = self.profile.curve
        frame = pd.DataFrame({"rank": curve["rank"].astype(int), "time": curve["time"],
                              "activations": curve["activations"]})
        if self.has_bytes:
            frame["gib"] = curve["bytes"] / GIB
        if "held_to_step_end" in curve:  # a runtime's sends held to the step's end, beside the activations
            frame["held_gib"] = curve["held_to_step_end"] / GIB
            frame["total_gib"] = frame["gib"] + frame["held_gib"]
        frame = frame.sort_values(["rank", "time"], kind="stable").reset_index(drop=True)
        frame.attrs["time_unit"] = self.time_unit.value
        return frame

    def to_dict(self) -> dict:
        return {"unit": ACTIVATION_UNIT, "peak_activations": list(self.peak_activations),
                "peak_bytes": list(self.peak_bytes) if self.peak_bytes else None,
                "peak_held_bytes": list(self.peak_held_bytes) if self.peak_held_bytes else None}

    def plot(self, path: str | Path | None = None, *, ax: Axes | None = None, title: str = "activation memory"):
        """Draw memory over time, a step line per rank, in GiB when bytes are known, else microbatch units.

        With ``ax``, draw on it (a notebook's subplot) and return it; with ``path``, write the figure
        (.png/.pdf/.svg) and return None. Neither: a new figure's axes.
        """
        from pipesim.plots.memory_plot import draw_memory, plot_memory

        value, ylabel = ("gib", "activations (GiB)") if self.has_bytes else (
            "activations", "activations (microbatches)")
        if "total_gib" in self.over_time:  # what the runtime holds to the step's end is memory held too
            value, ylabel = "total_gib", "activations and held sends (GiB)"
        if path is not None and ax is None:
            plot_memory(self.over_time, path, value=value, ylabel=ylabel, title=title,
                        time_unit=self.time_unit.value, end=self.makespan)
            return None
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(7.0, 3.2))
        draw_memory(ax, self.over_time, value=value, ylabel=ylabel, time_unit=self.time_unit.value,
                    end=self.makespan)
        if path is not None:
            from pipesim.plots.gantt import save_figure

            save_figure(ax.get_figure(), path, close=False)
        return ax


@dataclass(frozen=True, eq=False)
class SimResult:
    """One simulated training step (``pipesim simulate``), with everything the command prints.

    Attributes:
        built: the schedule as built (name, source, compute order, lowered Program).
        raw: the simulator's result (per-instruction start/end arrays).
        analytic: the schedule's closed-form bubble on uniform costs, where it has one.
        setup: the model, chip and layout of a model-based run; None for abstract costs.
        memory_limit: a memory-aware schedule's activation limit per rank, in microbatch units.
    """

    built: BuiltProgram
    raw: SimulationResult
    analytic: AnalyticBubble | None = None
    setup: ModelSetup | None = None
    memory_limit: float | None = None

    @property
    def costs(self):
        """The cost model simulated (seconds with a model or calibrated costs, else cost units)."""
        return self.raw.costs

    @property
    def time_unit(self) -> TimeUnit:
        return self.raw.costs.time_unit

    @property
    def timeline(self) -> pd.DataFrame:
        """One row per executed instruction (the timeline schema: step, rank, stage, chunk, op, microbatch,
        peer, seq, start, end, source, bytes); ``attrs["time_unit"]`` names the unit of start/end."""
        frame = self.raw.timeline
        frame.attrs["time_unit"] = self.time_unit.value
        return frame

    @property
    def metrics(self) -> Metrics:
        """Makespan, ideal, bubble fraction and overhead, per-rank busy/idle/span."""
        return self.raw.metrics

    @cached_property
    def memory(self) -> MemoryResult:
        """Peak activations per rank, and memory over time (``.over_time``, ``.plot()``)."""
        return MemoryResult(self.raw.memory, self.time_unit, self.raw.metrics.makespan)

    @cached_property
    def model_report(self) -> StepReport | None:
        """Step time, tokens/s, MFU, HFU and per-rank GiB of a model-based run; None for abstract costs."""
        if self.setup is None:
            return None
        from pipesim.api.model_setup import model_step_report

        return model_step_report(self.setup, self.raw)

    @property
    def step_time(self) -> float:
        """Time per training step: the steady-state seconds with steps back to back for a model-based run
        (the model report's), the one step's makespan otherwise."""
        report = self.model_report
        return report.step_time if report else self.raw.metrics.makespan

    def training(self, tokens: float | str) -> TrainingTime:
        """A training run of ``tokens`` (a number, or text such as ``"2T"``) at this step: its steps, days and
        GPU-hours, and the days the step time's error band allows (the steps alone: no checkpoints, evaluations
        or restarts). A model-based run's only: unit costs count no tokens."""
        from pipesim.analytic.training_time import parse_tokens

        report = self.model_report
        if report is None:
            raise PipesimError("--train-tokens times a real model's tokens; add --model NAME (model= in "
                               "pipesim.simulate): unit costs have no tokens or seconds")
        return report.training(parse_tokens(str(tokens), "train_tokens"))

    @property
    def step_band(self) -> ErrorBand | None:
        """The step time's validated error band (model-based runs), else None."""
        report = self.model_report
        return report.error_band if report else None

    @property
    def title(self) -> str:
        shape = self.built.program.shape
        return f"{self.built.name}: pp={shape.pp}, m={shape.microbatches}, v={shape.chunks}"

    def plot(self, path: str | Path | None = None, *, ax: Axes | None = None, title: str | None = None):
        """The Gantt chart: with ``path`` written to a file (.png/.pdf/.svg), with ``ax`` drawn on it (and the
        axes returned), with neither drawn on a new figure."""
        from pipesim.plots.gantt import draw_gantt, plot_gantt

        if path is not None and ax is None:
            plot_gantt(self.timeline, path, title=self.title if title is None else title,
                       time_unit=self.time_unit)
            return None
        if ax is None:
            import matplotlib.pyplot as plt

            pp = self.built.program.shape.pp
            _, ax = plt.subplots(figsize=(7.0, 0.45 * pp + 1.2))
            ax.set_title(self.title if title is None else title, fontsize=9)
        draw_gantt(ax, self.timeline, time_unit=self.time_unit)
        return ax

    def to_dict(self) -> dict:
        """The summary ``pipesim simulate --json`` prints (with ``model_report`` for a model-based run)."""
        data = summary_dict(self.built, self.raw, self.analytic)
        if self.model_report is not None:
            data["model_report"] = self.model_report.to_dict()
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def text(self, *, drawing: bool = True) -> str:
        """What ``pipesim simulate`` prints (without its "wrote FILE" lines); ``drawing=False`` leaves out the
        terminal timeline."""
        from pipesim.plots.terminal import render

        parts = [summary_text(self.built, self.raw, self.analytic)]
        if self.memory_limit is not None:
            peak = max(self.memory.peak_activations)
            limit = self.memory_limit
            parts.append(f"memory limit {limit:.4g} activation units per rank: peak {peak:.4g} "
                         f"({'within' if peak <= limit + 1e-9 else 'OVER'} the limit)")
        picture = render(self.timeline) if drawing else None
        if picture:
            parts.append(picture)
        if self.model_report is not None:
            from pipesim.analytic.step_report import report_text

            parts.append(report_text(self.model_report))
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        m = self.metrics
        unit = "units" if self.time_unit is TimeUnit.UNIT else self.time_unit.value
        return (f"<SimResult {self.title}: makespan {m.makespan:.6g} {unit}, step {self.step_time:.6g} {unit}, "
                f"bubble {m.bubble_fraction:.4f}>")

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython/Jupyter show the CLI's text
        printer.text(repr(self) if cycle else self.text())
