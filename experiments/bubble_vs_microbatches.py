"""Figure 1: bubble fraction against microbatches — simulated points on the analytic curves.

pp = 4, 8, 16 with uniform unit costs (F=1, B=2, split backward I=W=1, no communication; per microbatch through
a rank's share of the model, a chunk of v takes 1/v). Top row: schedules with a fused backward — GPipe, 1F1B,
interleaved 1F1B (v = 2, 4), looped BFS — with each schedule's own closed form (``analytic_bubble``) as a line:
``(p−1)/(m+p−1)`` and ``(p−1)/(v·m+p−1)``. Bottom row: the split-backward (zero-bubble) family, with 1F1B's
curve for reference. Series whose values coincide (GPipe = 1F1B; looped BFS = interleaved at the same v) are
told apart by hollow, larger markers and a small horizontal offset around each swept m (the x axis is log₂,
ticks at the swept values).
Run: ``python experiments/bubble_vs_microbatches.py [--fast] [--out DIR | --update-docs]``.
"""

from __future__ import annotations

import numpy as np

from pipesim.errors import ScheduleError
from pipesim.plots.figures import PAGE_WIDTH_IN, experiment_args, save_pdf_png
from pipesim.plots.gantt import plt
from pipesim.plots.sweep_plot import ALTERNATE_COLOURS, in_reading_order, style_of
from pipesim.program.build import build_program
from pipesim.program.loader import builtin_names, load_schedule
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import simulate

COSTS = CostModel()
HOLLOW = {"gpipe", "looped-bfs"}  # drawn around the schedule they coincide with


def series(fast: bool) -> list[tuple[str, str, int | None]]:
    """(label, schedule, chunks) to draw: every built-in at its default v, interleaved also at v = 4."""
    names = ["gpipe", "1f1b", "interleaved"] if fast else in_reading_order(builtin_names())
    named = []
    for name in names:
        v = load_schedule(name).default_chunks
        named.append((f"{name} v={v}" if v > 1 else name, name, None))
        if name == "interleaved" and not fast:
            named.append(("interleaved v=4", name, 4))
    return named


def split_backward(name: str) -> bool:
    return load_schedule(name).build(2, 4).split_backward


def draw_series(ax, pp: int, micro: list[int], label: str, name: str, chunks: int | None, index: int,
                offset: float) -> None:
    colour, marker = style_of(name, index)
    if chunks == 4:
        colour = ALTERNATE_COLOURS[0]
    source = load_schedule(name)
    points = []
    for m in micro:
        try:
            built = build_program(name, pp, m, chunks)
        except ScheduleError:
            continue
        points.append((m, simulate(built.program, COSTS, check=False).metrics.bubble_fraction))
    v = chunks or source.default_chunks
    closed = source.analytic(pp, micro[0], v, COSTS.default)
    if closed and closed.bubble_fraction is not None:
        dense = np.geomspace(min(micro), max(micro), 100)
        curve = [source.analytic(pp, float(m), v, COSTS.default).bubble_fraction for m in dense]
        ax.plot(dense, curve, color=colour, linewidth=0.9, alpha=0.8)
    if points:
        xs, ys = zip(*points, strict=True)
        hollow = name in HOLLOW
        ax.plot(np.array(xs) * 2**offset, ys, linestyle="none", marker=marker, markersize=6.5 if hollow else 4.5,
                label=label, color=colour, markerfacecolor="none" if hollow else colour,
                markeredgewidth=1.1 if hollow else 0.5, markeredgecolor=colour if hollow else "black")


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    pps = [4] if args.fast else [4, 8, 16]
    groups = [[s for s in series(args.fast) if split_backward(s[1]) == split] for split in (False, True)]
    groups = [g for g in groups if g]
    fig, axes = plt.subplots(len(groups), len(pps), figsize=(PAGE_WIDTH_IN, 2.3 * len(groups) + 0.5),
                             sharey=True, squeeze=False)
    for row, group in enumerate(groups):
        if row > 0:  # the zero-bubble row gets 1F1B's curve as the reference it beats
            group = [("1f1b (reference)", "1f1b", None), *group]
        for col, pp in enumerate(pps):
            ax = axes[row][col]
            micro = [pp, 2 * pp] if args.fast else [pp * k for k in (1, 2, 4, 8)]
            for index, (label, name, chunks) in enumerate(group):
                offset = 0.09 * (index - (len(group) - 1) / 2)  # dodge, in log₂ units, around each swept m
                draw_series(ax, pp, micro, label, name, chunks, index, offset)
            ax.set_xscale("log", base=2)
            ax.set_xticks(micro)
            ax.set_xticklabels([str(m) for m in micro])
            ax.minorticks_off()
            ax.set_title(f"pp = {pp}")
            ax.grid(alpha=0.3)
            if row == len(groups) - 1:
                ax.set_xlabel("microbatches per step (m)")
        axes[row][0].set_ylabel("bubble fraction\n1 − Σbusy/(pp·T)")
        axes[row][-1].legend(fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.02, 0.5),
                             title="fused backward" if row == 0 else "split backward (I, W)", title_fontsize=6)
    fig.suptitle("Bubble fraction: simulated (markers) on closed forms (lines); F=1, B=2, I=W=1 per microbatch "
                 "through a rank's share of the model, no communication", fontsize=7)
    fig.tight_layout()
    save_pdf_png(fig, args.out, "bubble_vs_microbatches")


if __name__ == "__main__":
    main()
