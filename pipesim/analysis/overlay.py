"""Predicted vs measured: match two Timelines instruction by instruction and measure how far apart they are.

Rows match on (rank, seq) — the same instruction of the same Program — within one step of the measured run
(the last one by default: warm-up excluded). Errors: the makespan's relative error, and the start-time
errors |measured − predicted| of the instructions that occupy a rank (compute, REDUCE_GRAD, STEP), in the
measured run's time unit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from pipesim.errors import PipesimError
from pipesim.io.timeline import RING_OP
from pipesim.plots.gantt import check_figure_path, draw_gantt, legend_handles, plt, save_figure, visible_ops


@dataclass(frozen=True)
class OverlayErrors:
    makespan_predicted: float
    makespan_measured: float
    makespan_error: float  # (predicted − measured) / measured
    start_error_median: float  # median |measured − predicted| start, per instruction
    start_error_p90: float
    start_error_max: float
    instructions: int

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        return (
            f"makespan predicted {self.makespan_predicted:.6g} vs measured {self.makespan_measured:.6g} "
            f"({self.makespan_error:+.1%}); per-instruction start error median {self.start_error_median:.3g}, "
            f"p90 {self.start_error_p90:.3g}, max {self.start_error_max:.3g} over {self.instructions} instructions"
        )


def one_step(frame: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    """Rows of one step (the last one by default), with times shifted to start at 0."""
    chosen = int(frame["step"].max()) if step is None else step
    rows = frame[frame["step"] == chosen]
    if rows.empty:
        steps = ", ".join(str(int(s)) for s in sorted(frame["step"].unique()))
        raise PipesimError(f"timeline has no step {chosen}; it holds step(s) {steps}: pick one with --step")
    return rows.assign(start=rows["start"] - rows["start"].min(), end=rows["end"] - rows["start"].min())


def match(predicted: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Join the two timelines on (rank, seq); refuse timelines of different Programs."""
    for name, frame in (("predicted", predicted), ("measured", measured)):
        if frame.empty:
            raise PipesimError(f"the {name} timeline is empty")
    ranks_p, ranks_m = predicted["rank"].nunique(), measured["rank"].nunique()
    if ranks_p != ranks_m:
        raise PipesimError(f"timelines have different rank counts (predicted {ranks_p}, measured {ranks_m}); "
                           "overlay runs of the same pp")
    # Ring-attention hops (CP_RING) are measured inside an instruction and have no predicted row of their own.
    predicted, measured = (f[f["op"] != RING_OP] for f in (predicted, measured))
    keys = ["rank", "seq"]
    joined = predicted.merge(measured, on=keys, suffixes=("_pred", "_meas"), how="outer", indicator=True)
    same = (joined["_merge"] == "both") & (joined["op_pred"] == joined["op_meas"]) & (
        joined["microbatch_pred"] == joined["microbatch_meas"]) & (joined["chunk_pred"] == joined["chunk_meas"])
    if not same.all():
        bad = joined[~same].iloc[0]
        raise PipesimError(
            f"timelines are of different programs: rank {int(bad['rank'])} instruction {int(bad['seq'])} is "
            f"{bad.get('op_pred')} in one and {bad.get('op_meas')} in the other; overlay the same schedule, pp, "
            "microbatches and chunks"
        )
    return joined


def overlay_errors(predicted: pd.DataFrame, measured: pd.DataFrame) -> OverlayErrors:
    joined = match(predicted, measured)
    # Start errors of what occupies a rank; a RECV's start is when it was posted, which the executor may
    # do for the whole step at once, and a SEND's is a transfer on the predicted side.
    busy = joined[~joined["op_pred"].isin(["SEND_F", "SEND_B", "RECV_F", "RECV_B"])]
    start_error = np.abs(busy["start_meas"] - busy["start_pred"]).to_numpy()
    span_p = float(predicted["end"].max() - predicted["start"].min())
    span_m = float(measured["end"].max() - measured["start"].min())
    return OverlayErrors(
        makespan_predicted=span_p,
        makespan_measured=span_m,
        makespan_error=(span_p - span_m) / span_m if span_m else 0.0,
        start_error_median=float(np.median(start_error)),
        start_error_p90=float(np.percentile(start_error, 90)),
        start_error_max=float(start_error.max()),
        instructions=len(busy),
    )


def plot_overlay(predicted: pd.DataFrame, measured: pd.DataFrame, errors: OverlayErrors, path, *,
                 title: str, time_unit: str = "s") -> None:
    """Two aligned panels on one time axis: measured (top) and predicted (bottom), errors in the title."""
    check_figure_path(path, flag="-o")
    pp = int(measured["rank"].max()) + 1
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7.0, 0.8 * pp + 1.8))
    draw_gantt(top, measured, time_unit=time_unit)
    draw_gantt(bottom, predicted, time_unit=time_unit)
    end = max(measured["end"].max(), predicted["end"].max())
    for ax, label in ((top, "measured"), (bottom, "predicted")):
        ax.set_xlim(0, end)
        ax.set_ylabel(label, fontsize=8)
    top.set_xlabel("")
    top.set_title(f"{title}\nmakespan error {errors.makespan_error:+.1%}, start error median "
                  f"{errors.start_error_median:.3g} {time_unit} (p90 {errors.start_error_p90:.3g})", fontsize=9)
    handles = legend_handles(visible_ops(measured), chunks=bool((measured["chunk"] > 0).any()))
    bottom.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=4, fontsize=7, frameon=False)
    save_figure(fig, path)
