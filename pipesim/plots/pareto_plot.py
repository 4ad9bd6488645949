"""The planner's figure: step time against peak memory per GPU, the Pareto front drawn, chosen points labelled.

Input is the planner's results table (:meth:`pipesim.plan.search.PlanResult.frame`): every simulated
configuration that fits is a grey dot, the front's points carry their schedule's colour and marker
(:data:`pipesim.plots.sweep_plot.SCHEDULE_STYLES`), and the ``labelled`` rows (the top of the ranking) are
numbered at their points, with their short labels in a key. The memory cap is a dashed vertical line.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipesim.plots.gantt import check_figure_path, plt, save_figure
from pipesim.plots.sweep_plot import style_of


def plot_pareto(frame: pd.DataFrame, path: str | Path, *, cap_gib: float, labelled: list[str], title: str) -> None:
    """Write the figure; ``labelled`` are the ``label`` values to annotate (at most a handful)."""
    check_figure_path(path)
    ok = frame[(frame["status"] == "simulated") & frame["fits"]]
    front = ok[ok["pareto"]].sort_values("peak_gib")
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    ax.scatter(ok["peak_gib"], ok["step_time_s"], s=8, color="#BBBBBB", label="simulated, fits", zorder=1)
    ax.step(front["peak_gib"], front["step_time_s"], where="post", color="#444444", lw=0.8, zorder=2)
    for i, (schedule, rows) in enumerate(front.groupby("schedule")):
        colour, marker = style_of(schedule, i)
        ax.scatter(rows["peak_gib"], rows["step_time_s"], s=28, color=colour, marker=marker,
                   edgecolor="black", linewidth=0.4, label=f"Pareto: {schedule}", zorder=3)
    # Numbers at the points and the labels in one box: long labels next to close points would overlap.
    chosen = ok.set_index("label").loc[[lab for lab in labelled if lab in set(ok["label"])]]
    for k, (_, row) in enumerate(chosen.iterrows(), 1):
        ax.annotate(f"#{k}", (row["peak_gib"], row["step_time_s"]), xytext=(5, 2 + 8 * ((k - 1) % 3)),
                    textcoords="offset points", fontsize=7, fontweight="bold")
    if len(chosen):
        key = "\n".join(f"#{k} {lab}" for k, lab in enumerate(chosen.index, 1))
        ax.text(0.0, -0.14, key, transform=ax.transAxes, ha="left", va="top", fontsize=6, family="monospace")
    ax.axvline(cap_gib, color="#D55E00", ls="--", lw=0.8, label=f"memory cap {cap_gib:g} GiB")
    ax.set_xlabel("peak memory per GPU (GiB, worst rank)")
    ax.set_ylabel("step time (s)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
    save_figure(fig, path)
