"""The planner's figure: step time against peak memory per GPU, the Pareto front drawn, chosen points labelled.

Input is the planner's results table (:meth:`pipesim.plan.search.PlanResult.frame`): every simulated
configuration that fits is a grey dot, the front's points carry their schedule's colour and marker
(:data:`pipesim.plots.sweep_plot.SCHEDULE_STYLES`), and the ``labelled`` rows (the top of the ranking) are
numbered beside their points (joined by a line, never on another label), with their short labels
in a key; a configuration with pp = 1 is labelled as having no pipeline, not by the 1F1B it is simulated as.
Step time is on a log axis when it spans more than 3×. The memory cap is a dashed vertical line.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.ticker import FuncFormatter, LogLocator

from pipesim.plots.gantt import check_figure_path, plt, save_figure
from pipesim.plots.sweep_plot import style_of

NO_PIPELINE = "no pipeline (pp=1)"  # pp = 1 is simulated as 1F1B on one rank, but it is no pipeline schedule
LABEL_W_PT, LABEL_H_PT = 15.0, 9.0  # the extent of a "#k" label at fontsize 7, in points
# Where a label may go around its point, tried in order at growing distances (unit vectors, roughly).
_DIRECTIONS = [(0.7, 0.7), (0.7, -0.7), (-0.7, 0.7), (-0.7, -0.7), (0.0, 1.0), (0.0, -1.0), (1.0, 0.0),
               (-1.0, 0.0)]


def schedule_group(row: pd.Series) -> str:
    """The legend entry of a configuration: its schedule, or that it has no pipeline."""
    return NO_PIPELINE if int(row.get("pp", 2)) == 1 else str(row["schedule"])


def label_offsets(points_pt: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """An offset (points) for each point's label so that no two labels overlap and no label covers one of
    the points: the first free spot among eight directions at 14, 24, 34, … points. Greedy, in the order
    given (rank order: #1 gets the best spot). Points are in display points (x right, y up)."""
    def overlaps(a, b) -> bool:
        return abs(a[0] - b[0]) < (a[2] + b[2]) / 2 and abs(a[1] - b[1]) < (a[3] + b[3]) / 2

    marks = [(x, y, 7.0, 7.0) for x, y in points_pt]  # the markers themselves
    placed: list[tuple[float, float, float, float]] = []
    offsets = []
    for x, y in points_pt:
        choice = None
        for radius in (14.0, 24.0, 34.0, 44.0, 54.0):
            for dx, dy in _DIRECTIONS:
                box = (x + dx * radius * 1.3, y + dy * radius, LABEL_W_PT, LABEL_H_PT)
                if not any(overlaps(box, other) for other in placed + marks):
                    choice = box
                    break
            if choice:
                break
        if choice is None:  # crowded beyond reason: stack above, still joined by its line
            choice = (x, y + 14.0 + LABEL_H_PT * len(placed), LABEL_W_PT, LABEL_H_PT)
        placed.append(choice)
        offsets.append((choice[0] - x, choice[1] - y))
    return offsets


def plot_pareto(frame: pd.DataFrame, path: str | Path, *, cap_gib: float, labelled: list[str], title: str) -> None:
    """Write the figure; ``labelled`` are the ``label`` values to annotate (at most a handful)."""
    check_figure_path(path)
    ok = frame[(frame["status"] == "simulated") & frame["fits"]]
    front = ok[ok["pareto"]].sort_values("peak_gib")
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    ax.scatter(ok["peak_gib"], ok["step_time_s"], s=8, color="#BBBBBB", label="simulated, fits", zorder=1)
    ax.step(front["peak_gib"], front["step_time_s"], where="post", color="#444444", lw=0.8, zorder=2)
    groups = front.assign(group=[schedule_group(r) for _, r in front.iterrows()]) if len(front) else front
    for i, (group, rows) in enumerate(groups.groupby("group") if len(front) else []):
        colour, marker = ("#777777", "s") if group == NO_PIPELINE else style_of(group, i)
        ax.scatter(rows["peak_gib"], rows["step_time_s"], s=28, color=colour, marker=marker,
                   edgecolor="black", linewidth=0.4, label=f"Pareto: {group}", zorder=3)
    ax.axvline(cap_gib, color="#D55E00", ls="--", lw=0.8, label=f"memory cap {cap_gib:g} GiB")
    # Step times span an order of magnitude (tiny pipelines are slow): a log axis keeps the fast region,
    # where the choice is made, from being squashed under the slow outliers.
    if len(ok) and ok["step_time_s"].max() / ok["step_time_s"].min() > 3:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))
        ax.yaxis.set_minor_locator(LogLocator(subs=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlabel("peak memory per GPU (GiB, worst rank)")
    ax.set_ylabel("step time (s)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
    # Numbers beside the points, each joined to its point by a line and placed where no other label or
    # labelled point is; the labels themselves go in one key under the axes.
    chosen = ok.set_index("label").loc[[lab for lab in labelled if lab in set(ok["label"])]]
    if len(chosen):
        ax.scatter(chosen["peak_gib"], chosen["step_time_s"], s=70, facecolor="none", edgecolor="black",
                   linewidth=0.8, zorder=4)
        fig.canvas.draw()  # fixes the limits, so data → display is final
        to_pt = 72.0 / fig.dpi
        display = ax.transData.transform(chosen[["peak_gib", "step_time_s"]].to_numpy(dtype=float))
        offsets = label_offsets([(x * to_pt, y * to_pt) for x, y in display])
        for k, ((_, row), offset) in enumerate(zip(chosen.iterrows(), offsets, strict=True), 1):
            ax.annotate(f"#{k}", (row["peak_gib"], row["step_time_s"]), xytext=offset, textcoords="offset points",
                        ha="center", va="center", fontsize=7, fontweight="bold", zorder=5,
                        arrowprops={"arrowstyle": "-", "lw": 0.6, "color": "black", "shrinkA": 1, "shrinkB": 4})
        key = "\n".join(f"#{k} {lab}" for k, lab in enumerate(chosen.index, 1))
        ax.text(0.0, -0.14, key, transform=ax.transAxes, ha="left", va="top", fontsize=6, family="monospace")
    save_figure(fig, path)
