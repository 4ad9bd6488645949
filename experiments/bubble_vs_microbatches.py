"""Figure 1: bubble fraction against microbatches — simulated points on the analytic curves.

GPipe, 1F1B and interleaved 1F1B (v = 2, 4) at pp = 4, 8, 16 with uniform unit costs (F=1, B=2, no comm),
plus every other built-in schedule (zero-bubble family included) as simulated points. Curves are each
schedule's own closed form (``analytic_bubble``): ``(p−1)/(m+p−1)`` and ``(p−1)/(v·m+p−1)``.
Run: ``python experiments/bubble_vs_microbatches.py [--fast] [--out DIR | --update-docs]``.
"""

from __future__ import annotations

import numpy as np

from pipesim.errors import ScheduleError
from pipesim.plots.figures import PAGE_WIDTH_IN, experiment_args, save_pdf_png
from pipesim.plots.gantt import plt
from pipesim.plots.sweep_plot import style_of
from pipesim.program.build import build_program
from pipesim.program.loader import builtin_names, load_schedule
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import simulate


def series(fast: bool) -> list[tuple[str, str, int | None]]:
    """(label, schedule, chunks) to draw; interleaved twice, v = 2 and 4."""
    named = [("gpipe", "gpipe", None), ("1f1b", "1f1b", None), ("interleaved v=2", "interleaved", 2)]
    if not fast:
        named.append(("interleaved v=4", "interleaved", 4))
        known = {"gpipe", "1f1b", "interleaved"}
        named += [(name, name, None) for name in builtin_names() if name.replace("_", "-") not in known]
    return named


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    pps = [4] if args.fast else [4, 8, 16]
    costs = CostModel()
    fig, axes = plt.subplots(1, len(pps), figsize=(PAGE_WIDTH_IN, 2.4), sharey=True, squeeze=False)
    for ax, pp in zip(axes[0], pps, strict=True):
        micro = [pp, 2 * pp] if args.fast else [pp * k for k in (1, 2, 3, 4, 6, 8)]
        for index, (label, name, chunks) in enumerate(series(args.fast)):
            colour, marker = ("#882255", "<") if chunks == 4 else style_of(name, index)
            source = load_schedule(name)
            simulated, analytic = [], []
            for m in micro:
                try:
                    built = build_program(name, pp, m, chunks)
                except ScheduleError:
                    continue
                v = built.program.shape.chunks
                simulated.append((m, simulate(built.program, costs, check=False).metrics.bubble_fraction))
                closed = source.analytic(pp, m, v, costs.default)
                if closed and closed.bubble_fraction is not None:
                    analytic.append((m, closed.bubble_fraction))
            if analytic:
                dense = np.linspace(min(micro), max(micro), 100)
                v = chunks or source.default_chunks
                curve = [source.analytic(pp, float(m), v, costs.default).bubble_fraction for m in dense]
                ax.plot(dense, curve, color=colour, linewidth=0.9, alpha=0.8)
            if simulated:
                xs, ys = zip(*simulated, strict=True)
                # GPipe and 1F1B share their bubble: GPipe is drawn as a larger open marker around 1F1B's.
                hollow = name == "gpipe"
                ax.plot(xs, ys, linestyle="none", marker=marker, markersize=7 if hollow else 4, label=label,
                        color=colour, markerfacecolor="none" if hollow else colour)
        ax.set_title(f"pp = {pp}")
        ax.set_xlabel("microbatches per step (m)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("bubble fraction  1 − Σbusy/(pp·T)")
    axes[0][-1].legend(fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle("Bubble fraction: simulated (markers) on closed forms (lines); F=1, B=2, no communication",
                 fontsize=8)
    fig.tight_layout()
    save_pdf_png(fig, args.out, "bubble_vs_microbatches")


if __name__ == "__main__":
    main()
