"""Activation memory over time, one step function per rank: what each rank holds while the step runs.

Drawn on the caller's axes when given (a notebook's subplot), else on a new figure written to a file. The
values are the simulator's own (:mod:`pipesim.sim.memory`): in microbatches through one rank's share of the
model, or GiB when the costs give activation bytes.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

from pipesim.plots.gantt import save_figure, time_label
from pipesim.plots.paths import check_figure_path

__all__ = ["draw_memory", "plot_memory"]


def _steps(rows: pd.DataFrame, value: str, end: float) -> tuple[list[float], list[float]]:
    """A rank's step function, from 0 at time 0 to ``end``; of several changes at one instant only the last
    is drawn (a B that frees and an F that stores at the same time are one change, not a spike)."""
    last = rows.groupby("time", sort=True)[value].last()
    times = [0.0, *last.index.tolist(), end]
    values = [0.0, *last.tolist()]
    values.append(values[-1])
    return times, values


def draw_memory(ax: Axes, over_time: pd.DataFrame, *, value: str, ylabel: str, time_unit: str = "s",
                end: float | None = None, ranks=None) -> None:
    """One step line per rank of ``over_time[value]`` (columns rank, time, ``value``; ``ranks`` picks some),
    from 0 at time 0 to ``end`` (default the last change). The axes' limits are left to matplotlib (shared
    or user axes keep theirs); only unlabelled axes get labels."""
    end = float(over_time["time"].max()) if end is None else end
    for rank, rows in over_time.groupby("rank", sort=True):
        if ranks is not None and rank not in ranks:
            continue
        times, values = _steps(rows, value, end)
        ax.step(times, values, where="post", linewidth=1.2, label=f"rank {rank}", color=f"C{int(rank) % 10}")
    if not ax.get_xlabel():
        ax.set_xlabel(time_label(time_unit))
    if not ax.get_ylabel():
        ax.set_ylabel(ylabel)


def plot_memory(over_time: pd.DataFrame, path: str | Path, *, value: str, ylabel: str, title: str,
                time_unit: str = "s", end: float | None = None) -> None:
    """Write the memory-over-time figure to ``path`` (.png/.pdf/.svg): one panel per rank, rank 0 on top, on
    one time axis and one memory scale."""
    check_figure_path(path, flag="--plot-memory")
    ranks = sorted(int(r) for r in over_time["rank"].unique())
    end = float(over_time["time"].max()) if end is None else end
    fig, axes = plt.subplots(len(ranks), 1, sharex=True, sharey=True, squeeze=False,
                             figsize=(7.0, 0.75 * len(ranks) + 1.0))
    for ax, rank in zip(axes[:, 0], ranks, strict=True):
        draw_memory(ax, over_time, value=value, ylabel=f"rank {rank}", time_unit=time_unit, end=end,
                    ranks={rank})
        ax.set_ylabel(f"rank {rank}", fontsize=7, rotation=0, ha="right", va="center")
        ax.tick_params(labelsize=7)
        ax.set_xlabel("")
    axes[-1, 0].set_xlim(0, end)
    axes[-1, 0].set_ylim(bottom=0)
    axes[-1, 0].set_xlabel(time_label(time_unit))
    axes[0, 0].set_title(f"{title}\n{ylabel} held per rank", fontsize=9)
    save_figure(fig, path)
