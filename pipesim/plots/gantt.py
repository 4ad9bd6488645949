"""Paper figures: the Gantt chart of a timeline, with one style per op shared by every figure pipesim draws.

Colours are Okabe–Ito (colour-blind safe) and chosen so F, B, I and W also differ in lightness and hatch,
so a grayscale print still tells them apart. Output format follows the file suffix (vector PDF/SVG, or PNG).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from pipesim.io.atomic import write_with
from pipesim.io.timeline import RING_OP, pair_halves
from pipesim.plots.paths import FIGURE_SUFFIXES, check_figure_path

__all__ = ["FIGURE_SUFFIXES", "check_figure_path", "draw_gantt", "legend_handles", "plot_gantt", "save_figure",
           "time_label", "visible_ops"]
from pipesim.sim.costs import TimeUnit


@dataclass(frozen=True)
class OpStyle:
    label: str
    face: str
    hatch: str
    text: str  # label colour that stays readable on the face


OP_STYLES: dict[str, OpStyle] = {
    "F": OpStyle("forward (F)", "#56B4E9", "", "black"),  # sky blue, light
    "B": OpStyle("backward (B)", "#0072B2", "", "white"),  # blue, dark
    "I": OpStyle("input grad (I)", "#E69F00", "//", "black"),  # orange, mid
    "W": OpStyle("weight grad (W)", "#009E73", "xx", "white"),  # green, dark
    "REDUCE_GRAD": OpStyle("grad reduce", "#CC79A7", "..", "black"),
    "STEP": OpStyle("optimizer step", "#999999", "", "black"),
    # Measured only: a ring-attention hop the rank waited for, drawn as a thin band inside its F/B/I.
    RING_OP: OpStyle("ring attention wait (CP_RING)", "#D55E00", "", "white"),  # vermillion
}
DRAWN_OPS = tuple(OP_STYLES)
CHUNK_HATCH = "\\\\"


LABEL_FONT_SIZE = 6.5


def pair_lanes(compute: pd.DataFrame) -> pd.Series:
    """Which lane each compute box takes: 0 the whole row; for the two halves of an overlapped F-and-B pair
    (:func:`~pipesim.io.timeline.pair_halves`) 1 for the forward (upper half of the row) and 2 for the
    backward (lower half). Measured CPU timelines run a pair's halves one after the other: ordinary boxes."""
    lanes = pd.Series(0, index=compute.index)
    halves = pair_halves(compute)
    lanes[halves] = (compute.loc[halves, "op"] != "F").astype(int) + 1
    return lanes


LANES = {0: (-0.4, 0.8), 1: (-0.4, 0.4), 2: (0.0, 0.4)}  # (offset from the rank's centre, height)


def time_label(time_unit: str | None) -> str:
    """The time axis label: abstract costs are "cost units", not seconds."""
    return "time (cost units)" if time_unit == TimeUnit.UNIT else f"time ({time_unit or TimeUnit.SECONDS})"


def draw_gantt(ax: Axes, frame: pd.DataFrame, *, time_unit: str | None = None, outline: bool = False,
               label_boxes: bool = True, xlim: tuple[float, float] | None = None) -> None:
    """Draw one row per rank (rank 0 on top) on ``ax``.

    ``time_unit`` labels the time axis (default: the frame's ``attrs["time_unit"]``, which pipesim's results
    set, else seconds; abstract costs read "time (cost units)"). ``outline`` draws unfilled boxes (for
    overlays). ``xlim`` fixes the time axis (several charts on one scale); without it the axis spans the
    timeline, unless ``ax`` shares its x axis with other axes: then the caller's limits are kept and only
    widened by autoscaling. An x label already on the axes is kept. An overlapped pair is one box split in
    two lanes, its forward above its backward (:func:`pair_lanes`).
    """
    if time_unit is None:
        time_unit = frame.attrs.get("time_unit", TimeUnit.SECONDS.value)
    pp = int(frame["rank"].max()) + 1
    compute = frame[frame["op"].isin(DRAWN_OPS)]
    makespan = float(frame["end"].max() - frame["start"].min()) or 1.0
    shared = len(ax.get_shared_x_axes().get_siblings(ax)) > 1
    set_xlim = xlim is not None or not shared
    if xlim is None:
        xlim = (float(frame["start"].min()), float(frame["start"].min()) + makespan)
    points_per_unit = _points_per_unit(ax, xlim[1] - xlim[0])
    lane_of = pair_lanes(compute)
    for op, rows in compute.groupby("op"):
        style = OP_STYLES[op]
        bars = [(s, e - s) for s, e in zip(rows["start"], rows["end"], strict=True)]
        for rank, chunk, bar, lane in zip(rows["rank"], rows["chunk"], bars, lane_of[rows.index], strict=True):
            # Later chunks of a rank (interleaved, V) get a sparse hatch so chunk 0 and 1 read apart.
            hatch = style.hatch + (CHUNK_HATCH if chunk % 2 == 1 else "")
            kwargs = (
                {"facecolor": "none", "edgecolor": style.face, "linewidth": 1.5}
                if outline
                else {"facecolor": style.face, "edgecolor": "black", "linewidth": 0.4, "hatch": hatch}
            )
            offset, height = LANES[int(lane)]
            ax.broken_barh([bar], (rank + 0.15, 0.25) if op == RING_OP else (rank + offset, height), **kwargs)
        if label_boxes and not outline and op != RING_OP:
            for row, lane in zip(rows.itertuples(index=False), lane_of[rows.index], strict=True):
                width = row.end - row.start
                text = str(row.microbatch)
                offset, height = LANES[int(lane)]
                # Only where the digits fit inside the box (≈0.62 em per digit plus a margin): narrow chunk
                # boxes of V schedules would otherwise print over their neighbours.
                if row.microbatch >= 0 and width * points_per_unit >= (0.62 * len(text) + 0.5) * LABEL_FONT_SIZE:
                    ax.text(row.start + width / 2, row.rank + offset + height / 2, text, ha="center",
                            va="center", fontsize=LABEL_FONT_SIZE * (1 if lane == 0 else 0.8), color=style.text)
    ax.set_ylim(pp - 0.5, -0.5)
    ax.set_yticks(range(pp))
    ax.set_yticklabels([f"rank {r}" for r in range(pp)])
    if not ax.get_xlabel():
        ax.set_xlabel(time_label(time_unit))
    if set_xlim:
        ax.set_xlim(*xlim)


def _points_per_unit(ax: Axes, span: float) -> float:
    """Typographic points per unit of time on ``ax`` when it shows ``span`` (from the figure's layout now)."""
    fig = ax.get_figure()
    width_in = ax.get_position().width * fig.get_figwidth()
    return 72.0 * width_in / (span or 1.0)


def legend_handles(ops, *, chunks: bool = False) -> list[Patch]:
    """Legend entries for ``ops`` (pass only ops that take time), plus the odd-chunk hatch if ``chunks``."""
    handles = [Patch(facecolor=OP_STYLES[o].face, edgecolor="black", hatch=OP_STYLES[o].hatch,
                     label=OP_STYLES[o].label) for o in DRAWN_OPS if o in set(ops)]
    if chunks:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=CHUNK_HATCH, label="odd chunk"))
    return handles


def visible_ops(frame: pd.DataFrame) -> list[str]:
    """Ops with at least one box of non-zero width: zero-cost ops get no legend entry."""
    timed = frame[frame["end"] > frame["start"]]
    return sorted(set(timed["op"]) & set(DRAWN_OPS))


def save_figure(fig, path: str | Path, *, close: bool = True) -> None:
    path = Path(path)
    write_with(path, lambda tmp: fig.savefig(tmp, format=path.suffix[1:].lower(), bbox_inches="tight", dpi=200))
    if close:
        plt.close(fig)


def plot_gantt(frame: pd.DataFrame, path: str | Path, *, title: str, time_unit: str | None = None) -> None:
    """Write a Gantt chart of ``frame`` to ``path`` (.png/.pdf/.svg)."""
    check_figure_path(path)
    pp = int(frame["rank"].max()) + 1
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * pp + 1.2))
    draw_gantt(ax, frame, time_unit=time_unit)
    ax.set_title(title, fontsize=9)
    ax.legend(handles=legend_handles(visible_ops(frame), chunks=bool((frame["chunk"] > 0).any())),
              loc="upper center", bbox_to_anchor=(0.5, -0.25 - 0.4 / pp),
              ncol=4, fontsize=7, frameon=False)
    save_figure(fig, path)
