"""The GPU-count figure of ``pipesim plan --gpus A,B,... --plot``: each count's best configuration, its throughput per
GPU with the step time's error band as a shaded range, and, with a token budget, the days it takes against the
GPU-hours, on a base-2 GPU axis (the counts people compare double).

Input is :attr:`pipesim.api.scaling.ScalingResult.rows`: one dict per count; a count where nothing fits has no
``configuration`` and is left out of the lines (its absence is the figure's gap, its reason the table's).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from pipesim.plots.gantt import plt, save_figure
from pipesim.plots.paths import check_figure_path


def _band_limits(value: float, band: float | None) -> tuple[float, float]:
    """The measured value a prediction allows, ``[v/(1+b), v/(1−b)]`` for a time, here for a rate (its inverse):
    a rate ``r`` from a step time within ``t/(1+b)…t/(1−b)`` lies within ``r(1−b)…r(1+b)``."""
    if not band:
        return value, value
    return value * (1 - band), value * (1 + band)


def plot_scaling(rows: list[dict], path: str | Path, *, title: str, tokens_text: str | None) -> None:
    """Write the figure: throughput per GPU by GPU count (and, with ``tokens_text``, days and GPU-hours)."""
    check_figure_path(path)
    planned = [r for r in rows if r["configuration"] is not None]
    timed = tokens_text is not None and all("days" in r for r in planned)
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(9.0 if timed else 5.0, 3.4), squeeze=False)
    gpus = [r["gpus"] for r in planned]
    rate = [r["tokens_per_s_per_gpu"] for r in planned]
    low, high = zip(*(_band_limits(r["tokens_per_s_per_gpu"], r["step_time_band"]) for r in planned), strict=True)
    ax = axes[0][0]
    ax.fill_between(gpus, low, high, color="#0072B2", alpha=0.15, lw=0, label="the step's error band")
    ax.plot(gpus, rate, marker="o", color="#0072B2", lw=1.2, label="best configuration")
    for x, y, r in zip(gpus, rate, planned, strict=True):  # each count's layout under its point
        ax.annotate(r["layout"], (x, y), textcoords="offset points", xytext=(0, -12), ha="center", fontsize=6)
    ax.set_ylabel("tokens/s per GPU")
    ax.set_ylim(0, max(high) * 1.1)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.legend(fontsize=7, loc="lower left", frameon=False)
    if timed:
        days = axes[0][1]
        days.plot(gpus, [r["days"] for r in planned], marker="o", color="#D55E00", lw=1.2, label="days")
        days.fill_between(gpus, [r["days_low"] for r in planned],
                          [r["days_high"] if r["days_high"] is not None else r["days"] for r in planned],
                          color="#D55E00", alpha=0.15, lw=0)
        days.set_ylabel(f"days to train {tokens_text} tokens", color="#D55E00")
        hours = days.twinx()
        hours.plot(gpus, [r["gpu_hours"] for r in planned], marker="s", color="#555555", lw=1.0, ls="--")
        hours.set_ylabel("GPU-hours", color="#555555")
        hours.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        # both from zero: the GPU-hours of counts that scale well differ by a few percent, and a cropped axis
        # would draw that as a climb
        days.set_ylim(0, max(r["days_high"] or r["days"] for r in planned) * 1.1)
        hours.set_ylim(0, max(r["gpu_hours"] for r in planned) * 1.15)
    for axis in axes[0]:
        axis.margins(x=0.12)
        axis.set_xscale("log", base=2)
        axis.xaxis.set_major_locator(FixedLocator(gpus))
        axis.xaxis.set_minor_locator(NullLocator())
        axis.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        axis.set_xlabel("GPUs")
        axis.grid(alpha=0.3, lw=0.5)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
