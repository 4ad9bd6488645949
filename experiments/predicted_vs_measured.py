"""Figure 4: predicted vs measured on CPU (pp = 2, gloo) — calibrate from one run, predict a different one.

For each schedule the simulator is calibrated (``pipesim.analysis.calibrate``) from a measured run with 4
microbatches and then predicts the run with 8 (GPipe is predicted from 1F1B's calibration: another
schedule on the same stages; interleaved, whose chunks are other stages, from its own 4-microbatch run).
The headline number is the makespan error of the prediction against the median measured step (the first
step is warm-up and dropped); the figure overlays the last measured step on the prediction.
Run: ``python experiments/predicted_vs_measured.py [--fast] [--out DIR | --update-docs]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from executors.harness import spawn
from executors.model import ModelConfig
from executors.runtime import RunConfig, run_configs
from pipesim.analysis.calibrate import calibrate
from pipesim.analysis.overlay import one_step, overlay_errors
from pipesim.plots.figures import PAGE_WIDTH_IN, as_percent, experiment_args, save_pdf_png
from pipesim.plots.gantt import draw_gantt, legend_handles, plt, visible_ops
from pipesim.program.build import build_program
from pipesim.sim.simulator import simulate
from pipesim.topology import Topology

CALIBRATED_FROM = {"gpipe": "1f1b", "1f1b": "1f1b", "interleaved": "interleaved"}
FULL_MODEL = ModelConfig(layers=8, hidden=128, heads=4, seq_len=64, micro_batch_size=4, vocab=512)
FAST_MODEL = ModelConfig(layers=4, hidden=64, heads=4, seq_len=32, micro_batch_size=2, vocab=128)


@dataclass(frozen=True)
class Prediction:
    schedule: str
    predicted: pd.DataFrame  # one step
    measured: pd.DataFrame  # the last step
    makespan_predicted: float
    makespan_measured: float  # median over steps after the first
    makespan_fastest: float  # the fastest measured step: a shared machine's noise only ever adds time
    makespan_self: float  # predicted from a calibration on this very run: the model's floor, noise aside

    @property
    def error(self) -> float:
        return (self.makespan_predicted - self.makespan_measured) / self.makespan_measured


def step_makespans(timeline: pd.DataFrame) -> pd.Series:
    steps = timeline.groupby("step")
    return steps["end"].max() - steps["start"].min()


def predict_all(model: ModelConfig, *, calibration_mb: int = 4, target_mb: int = 8, steps: int = 6,
                rounds: int = 4, schedules=("gpipe", "1f1b", "interleaved")) -> list[Prediction]:
    """Measure the calibration and target runs in one gloo world of 2 processes, then predict the targets.

    A shared machine's speed wanders over seconds, so the runs take turns (``rounds`` rounds of every
    config, ``steps`` steps each, the first step of each dropped as warm-up) rather than one after another:
    calibration and target see the same conditions.
    """
    topology = Topology(pp=2)
    sources = sorted({CALIBRATED_FROM[s] for s in schedules})
    runs = [(s, calibration_mb) for s in sources] + [(s, target_mb) for s in schedules]
    configs = [RunConfig(schedule=s, topology=topology, microbatches=m, steps=steps, model=model) for s, m in runs]
    results = spawn(run_configs, topology.world_size, configs * rounds)[0]
    timelines = []
    for index in range(len(runs)):
        parts = [results[r * len(runs) + index].timeline for r in range(rounds)]
        # Renumber steps across rounds and drop each round's warm-up step.
        timelines.append(pd.concat([
            t[t["step"] > 0].assign(step=t["step"] + r * steps) for r, t in enumerate(parts)
        ], ignore_index=True))
    costs = {s: calibrate(t, warmup_steps=0) for s, t in zip(sources, timelines, strict=False)}
    predictions = []
    for schedule, timeline in zip(schedules, timelines[len(sources):], strict=True):
        program = build_program(schedule, topology.pp, target_mb).program
        predicted = simulate(program, costs[CALIBRATED_FROM[schedule]]).timeline
        predictions.append(Prediction(
            schedule=schedule,
            predicted=predicted,
            measured=one_step(timeline),
            makespan_predicted=float(predicted["end"].max()),
            makespan_measured=float(np.median(step_makespans(timeline))),
            makespan_fastest=float(step_makespans(timeline).min()),
            makespan_self=float(simulate(program, calibrate(timeline, warmup_steps=0)).metrics.makespan),
        ))
    return predictions


def error_table(predictions: list[Prediction]) -> pd.DataFrame:
    rows = []
    for p in predictions:
        errors = overlay_errors(p.predicted, p.measured)
        rows.append({
            "schedule": p.schedule, "calibrated from": f"{CALIBRATED_FROM[p.schedule]}, m=4",
            "predicted makespan (ms)": 1e3 * p.makespan_predicted,
            "measured makespan (ms, median)": 1e3 * p.makespan_measured,
            "makespan error": p.error,
            "fastest measured step (ms)": 1e3 * p.makespan_fastest,
            "error vs fastest": (p.makespan_predicted - p.makespan_fastest) / p.makespan_fastest,
            "self-calibrated error": (p.makespan_self - p.makespan_measured) / p.makespan_measured,
            "start error median (ms)": 1e3 * errors.start_error_median,
            "start error p90 (ms)": 1e3 * errors.start_error_p90,
        })
    return pd.DataFrame(rows)


def draw(predictions: list[Prediction]):
    fig, axes = plt.subplots(2 * len(predictions), 1, figsize=(PAGE_WIDTH_IN, 1.15 * 2 * len(predictions) + 0.6),
                             sharex=True, squeeze=False)
    end = max(max(p.measured["end"].max(), p.predicted["end"].max()) for p in predictions) * 1e3
    ops: set[str] = set()
    for index, p in enumerate(predictions):
        for row, (label, frame) in enumerate((("measured", p.measured), ("predicted", p.predicted))):
            ax = axes[2 * index + row, 0]
            in_ms = frame.assign(start=frame["start"] * 1e3, end=frame["end"] * 1e3)
            draw_gantt(ax, in_ms, time_unit="ms")
            ops |= set(visible_ops(frame))
            ax.set_xlim(0, end)
            ax.set_ylabel(label, fontsize=7)
            ax.tick_params(axis="y", labelsize=6)
            if row == 0:
                ax.set_title(f"{p.schedule}, pp=2, m=8: predicted makespan {p.error:+.1%} vs measured "
                             f"(calibrated from {CALIBRATED_FROM[p.schedule]}, m=4)", loc="left")
            if index < len(predictions) - 1 or row == 0:
                ax.set_xlabel("")
    axes[-1, 0].legend(handles=legend_handles(ops, chunks=True), loc="upper center", bbox_to_anchor=(0.5, -0.9),
                       ncol=6, frameon=False)
    fig.tight_layout()
    return fig


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    if args.fast:
        predictions = predict_all(FAST_MODEL, calibration_mb=2, target_mb=4, steps=2, rounds=1)
    else:
        predictions = predict_all(FULL_MODEL)
    table = error_table(predictions)
    shown = as_percent(table, ["makespan error", "error vs fastest", "self-calibrated error"])
    print(shown.to_markdown(index=False, floatfmt=".3g") if _has_tabulate() else shown.to_string(index=False))
    table.to_csv(args.out / "predicted_vs_measured.csv", index=False)
    save_pdf_png(draw(predictions), args.out, "predicted_vs_measured")


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
