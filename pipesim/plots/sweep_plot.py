"""Figures from sweep results: one metric against one axis, a line per group, a panel per facet value."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipesim.analysis.sweep import RESULT_COLUMNS
from pipesim.errors import PipesimError
from pipesim.plots.gantt import check_figure_path, plt, save_figure

# One colour and marker per schedule in every figure (Okabe–Ito, colour-blind safe).
SCHEDULE_STYLES = {
    "gpipe": ("#E69F00", "o"), "1f1b": ("#0072B2", "s"), "interleaved": ("#009E73", "^"),
    "zb-h1": ("#D55E00", "D"), "zb-h2": ("#CC79A7", "v"), "zb-v": ("#56B4E9", "P"),
    "looped-bfs": ("#F0E442", "X"), "dualpipe-v": ("#000000", "*"),
}
LABELS = {
    "bubble_fraction": "bubble fraction  1 − Σbusy/(pp·T)", "bubble_overhead": "bubble overhead  (T − ideal)/ideal",
    "microbatches": "microbatches per step (m)", "makespan": "makespan (cost units)", "pp": "pipeline ranks (p)",
    "peak_activations_max": "peak activations, worst rank (microbatch-stages)",
}


def style_of(name: str, index: int = 0) -> tuple[str, str]:
    fallback = ["#999999", "#332288", "#88CCEE", "#44AA99"]
    return SCHEDULE_STYLES.get(name, (fallback[index % len(fallback)], "o"))


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


def plot_sweep(frame: pd.DataFrame, path: str | Path, *, x: str, y: str, hue: str = "schedule",
               facet: str | None = "pp", logx: bool = False) -> None:
    check_figure_path(path, flag="-o")
    for flag, column in (("--x", x), ("--y", y), ("--hue", hue), ("--facet", facet)):
        if column is not None and column not in frame.columns:
            known = ", ".join(RESULT_COLUMNS)
            raise PipesimError(f"{flag} {column} is not a column of the results; use one of {known}")
    if not pd.api.types.is_numeric_dtype(frame[y]) or pd.api.types.is_bool_dtype(frame[y]):
        numeric = ", ".join(c for c in frame.columns
                            if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]))
        raise PipesimError(f"--y {y} is not a numeric column, so it cannot be plotted; use one of {numeric}")
    panels = sorted(frame[facet].unique()) if facet else [None]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.3 * len(panels), 2.8), sharey=True, squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        data = frame if panel is None else frame[frame[facet] == panel]
        for index, (group, rows) in enumerate(data.groupby(hue, sort=True)):
            colour, marker = style_of(str(group), index)
            series = rows.groupby(x)[y].mean().sort_index()
            ax.plot(series.index, series.to_numpy(), marker=marker, color=colour, label=str(group), markersize=4)
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(LABELS.get(x, x))
        if panel is not None:
            ax.set_title(f"{facet} = {panel}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(LABELS.get(y, y))
    axes[0][-1].legend(fontsize=7, title=hue, title_fontsize=7)
    save_figure(fig, path)
