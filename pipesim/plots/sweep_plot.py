"""Figures from sweep results: one metric against one axis, a line per group, a panel per facet value.

Meant for papers: a legend entry per schedule *and* chunk count (``interleaved v=2``), ticks at the swept
values, the costs the sweep assumed written under the axes, and the title, labels, size, y-limits and a
percent axis settable from the command line (:class:`PlotOptions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.ticker import PercentFormatter

from pipesim.analysis.sweep import RESULT_COLUMNS
from pipesim.errors import PipesimError
from pipesim.plots.gantt import check_figure_path, plt, save_figure

# One colour and marker per schedule in every figure (Okabe–Ito, colour-blind safe; no yellow, which
# vanishes on white paper and projectors).
SCHEDULE_STYLES = {
    "gpipe": ("#E69F00", "o"), "1f1b": ("#0072B2", "s"), "interleaved": ("#009E73", "^"),
    "zb-h1": ("#D55E00", "D"), "zb-h2": ("#CC79A7", "v"), "zb-v": ("#56B4E9", "P"),
    "looped-bfs": ("#332288", "X"), "dualpipe-v": ("#000000", "*"), "dualpipe": ("#661100", "h"),
}
LABELS = {
    "bubble_fraction": "bubble fraction  1 − Σbusy/(pp·T)", "bubble_overhead": "bubble overhead  (T − ideal)/ideal",
    "microbatches": "microbatches per step (m)", "makespan": "makespan (cost units)", "pp": "pipeline ranks (p)",
    "chunks": "chunks per rank (v)",
    "peak_activations_max": "peak activations, worst rank\n(microbatches through a rank's share of the model)",
}
ALTERNATE_COLOURS = ("#882255", "#44AA99", "#999933")  # Paul Tol's muted: further v of one schedule
RATIO_COLUMNS = ("bubble_fraction", "bubble_overhead")  # what a percent axis makes sense for


# The order figures present schedules in: by the idea each adds, not alphabetically — fill-drain, one-forward-
# one-backward, more chunks per rank, then the split-backward (zero-bubble) family, its V placements and
# DualPipe's two model copies.
READING_ORDER = ("gpipe", "1f1b", "interleaved", "looped-bfs", "zb-h1", "zb-h2", "zb-v", "dualpipe-v", "dualpipe")


def in_reading_order(names) -> list[str]:
    """``names`` in :data:`READING_ORDER`; schedules it does not know (new files) follow, alphabetically."""
    names = list(names)
    known = [n for n in READING_ORDER if n in names]
    return known + sorted(n for n in names if n not in READING_ORDER)


def style_of(name: str, index: int = 0) -> tuple[str, str]:
    fallback = ["#999999", "#882255", "#88CCEE", "#44AA99"]
    return SCHEDULE_STYLES.get(name, (fallback[index % len(fallback)], "o"))


@dataclass(frozen=True)
class PlotOptions:
    """What a paper figure needs beyond the data; ``None`` keeps pipesim's default."""

    title: str | None = None
    xlabel: str | None = None
    ylabel: str | None = None
    size: tuple[float, float] | None = None  # inches, width × height of the whole figure
    ylim: tuple[float, float] | None = None
    percent: bool = False  # y axis as 0–100 %, for fractions
    costs_note: bool = True  # write the costs the sweep assumed under the axes


def read_results(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise PipesimError(f"sweep results {path} do not exist; write them with 'pipesim sweep -o {path.name}'")
    try:
        if path.suffix.lower() == ".csv":
            frame = pd.read_csv(path)
        elif path.suffix.lower() == ".parquet":
            frame = pd.read_parquet(path)
        else:
            raise PipesimError(f"sweep results {path}: unknown format {path.suffix or '(none)'}; use .csv or .parquet")
    except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise PipesimError(f"sweep results {path} cannot be read: {first}") from None
    if frame.empty:
        raise PipesimError(f"sweep results {path} hold no rows")
    missing = [c for c in ("schedule", "pp", "microbatches", "bubble_fraction") if c not in frame.columns]
    if missing:
        raise PipesimError(f"{path} is not a pipesim sweep result: missing column(s) {', '.join(missing)}")
    return frame


def series_label(frame: pd.DataFrame, hue: str) -> pd.Series:
    """The legend label of each row: a schedule with several chunks per rank says so (``interleaved v=2``)."""
    labels = frame[hue].astype(str)
    if hue == "schedule" and "chunks" in frame.columns:
        chunked = frame["chunks"] > 1
        labels = labels.where(~chunked, labels + " v=" + frame["chunks"].astype(str))
    return labels


def costs_note(frame: pd.DataFrame) -> str:
    """The costs a sweep assumed, e.g. ``F=1 B=2 p2p latency=0``, with the convention they follow."""
    parts = []
    for column, name in (("forward", "F"), ("backward", "B"), ("p2p_latency", "p2p latency")):
        if column in frame.columns:
            values = ", ".join(f"{v:g}" for v in sorted(frame[column].unique()))
            parts.append(f"{name}={values}" if "," not in values else f"{name}∈{{{values}}}")
    if not parts:
        return ""
    return "costs: " + " ".join(parts) + " per microbatch through a rank's share of the model (a chunk of v takes 1/v)"


#: The columns a sweep varies: a point of the figure stands for one value of each, or for their mean.
GRID_COLUMNS = ("schedule", "pp", "microbatches", "chunks", "forward", "backward", "backward_input",
                "backward_weight", "p2p_latency")


def averaged_columns(frame: pd.DataFrame, *, x: str, hue: str, facet: str | None) -> dict[str, list]:
    """Grid columns that take several values within one plotted point (panel, line, x): the figure shows their
    mean there. Returns each such column with its values."""
    shown = {x, hue, *([facet] if facet else []), *(["chunks"] if hue == "schedule" else [])}
    out = {}
    keys = [c for c in shown if c in frame.columns]
    for column in GRID_COLUMNS:
        if column in shown or column not in frame.columns:
            continue
        if (frame.groupby(keys)[column].nunique() > 1).any():
            out[column] = sorted(frame[column].unique().tolist())
    return out


def averaged_note(averaged: dict[str, list]) -> str:
    """``mean over microbatches ∈ {8, 16}`` for the figure and the command's note; empty when nothing is."""
    def values(vs) -> str:
        return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in vs)

    if not averaged:
        return ""
    return "mean over " + ", ".join(f"{column} ∈ {{{values(vs)}}}" for column, vs in averaged.items())


def plot_sweep(frame: pd.DataFrame, path: str | Path, *, x: str, y: str, hue: str = "schedule",
               facet: str | None = "pp", logx: bool = False, options: PlotOptions | None = None) -> dict[str, list]:
    """Write the figure; returns the grid columns each point averages over (see :func:`averaged_columns`), which
    the line under the axes also states."""
    options = options or PlotOptions()
    check_figure_path(path, flag="-o")
    for flag, column in (("--x", x), ("--y", y), ("--hue", hue), ("--facet", facet)):
        if column is not None and column not in frame.columns:
            known = ", ".join(RESULT_COLUMNS)
            raise PipesimError(f"{flag} {column} is not a column of the results; use one of {known}")
    if not pd.api.types.is_numeric_dtype(frame[y]) or pd.api.types.is_bool_dtype(frame[y]):
        numeric = ", ".join(c for c in frame.columns
                            if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]))
        raise PipesimError(f"--y {y} is not a numeric column, so it cannot be plotted; use one of {numeric}")
    if options.percent and y not in RATIO_COLUMNS:
        raise PipesimError(f"--percent needs a fraction on the y axis ({', '.join(RATIO_COLUMNS)}), not --y {y}")
    if options.ylim and options.ylim[0] >= options.ylim[1]:
        raise PipesimError(f"--ylim {options.ylim[0]:g},{options.ylim[1]:g}: the lower limit must be below the upper")
    averaged = averaged_columns(frame, x=x, hue=hue, facet=facet)
    frame = frame.assign(_series=series_label(frame, hue))
    panels = sorted(frame[facet].unique()) if facet else [None]
    size = options.size or (3.3 * len(panels), 2.8)
    fig, axes = plt.subplots(1, len(panels), figsize=size, sharey=True, squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        data = frame if panel is None else frame[frame[facet] == panel]
        seen: dict[str, int] = {}
        for index, (label, rows) in enumerate(data.groupby("_series", sort=True)):
            base = str(rows[hue].iloc[0])
            colour, marker = style_of(base, index)
            repeat = seen[base] = seen.get(base, -1) + 1
            if repeat:  # the same schedule at another v: its own colour, the schedule's marker
                colour = ALTERNATE_COLOURS[(repeat - 1) % len(ALTERNATE_COLOURS)]
            series = rows.groupby(x)[y].mean().sort_index()
            ax.plot(series.index, series.to_numpy(), marker=marker, color=colour, label=label, markersize=4)
        if logx:
            ax.set_xscale("log", base=2)
        swept = sorted(data[x].unique())
        if pd.api.types.is_numeric_dtype(data[x]) and len(swept) <= 12:
            ax.set_xticks(swept)  # ticks at the values the sweep ran, not matplotlib's round numbers
            ax.set_xticklabels([f"{v:g}" for v in swept])
            ax.minorticks_off()
        ax.set_xlabel(options.xlabel if options.xlabel is not None else LABELS.get(x, x))
        if panel is not None:
            ax.set_title(f"{facet} = {panel}", fontsize=9)
        if options.percent:
            ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
        if options.ylim:
            ax.set_ylim(*options.ylim)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(options.ylabel if options.ylabel is not None else LABELS.get(y, y))
    # Outside the axes: a legend inside hides the lines it names.
    axes[0][-1].legend(fontsize=7, title=hue, title_fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5),
                       frameon=False)
    if options.title:
        fig.suptitle(options.title, fontsize=10)
    note = costs_note(frame) if options.costs_note else ""
    if averaged:  # said even without the costs note: a mean the reader is not told about misleads
        note = "\n".join(filter(None, [note, f"each point: {averaged_note(averaged)}"]))
    fig.tight_layout()
    if note:
        fig.text(0.5, -0.02, note, ha="center", va="top", fontsize=6.5)
    save_figure(fig, path)
    return averaged
