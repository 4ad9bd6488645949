"""Figure 3: the Gantt chart of every schedule at pp=4, m=8 on one page, on the same time axis.

Schedules appear in reading order (fill-drain, 1F1B, more chunks, then the zero-bubble family and its V
placements), not alphabetically; a microbatch number is written only in a box wide enough for it.

Unit costs (F=1, B=2; split backward I=W=1) per microbatch through one rank's share of the model, pipesim's
one convention: a schedule with v chunks per rank takes 1/v of them per chunk, so every schedule does the same
work. Boxes carry microbatch numbers; op colours and hatches are pipesim's shared styles (grayscale-safe).
Run: ``python experiments/gantt_gallery.py [--fast] [--out DIR | --update-docs]``.
"""

from __future__ import annotations

from pipesim.errors import ScheduleError
from pipesim.plots.figures import PAGE_WIDTH_IN, experiment_args, save_pdf_png
from pipesim.plots.gantt import draw_gantt, legend_handles, plt, visible_ops
from pipesim.plots.sweep_plot import in_reading_order
from pipesim.program.build import build_program
from pipesim.program.loader import builtin_names
from pipesim.sim.costs import CostModel, TimeUnit
from pipesim.sim.simulator import simulate


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    pp, microbatches = (2, 4) if args.fast else (4, 8)
    results = []
    for name in in_reading_order(builtin_names()):
        try:
            built = build_program(name, pp, microbatches)
        except ScheduleError as err:
            print(f"skipped {name}: {err}")
            continue
        results.append((built, simulate(built.program, CostModel(), check=False)))
    end = max(r.metrics.makespan for _, r in results)
    fig, axes = plt.subplots(len(results), 1, figsize=(PAGE_WIDTH_IN, 1.05 * len(results) * pp / 4 + 0.8),
                             sharex=True, squeeze=False)
    ops: set[str] = set()
    chunked = False
    for ax, (built, result) in zip(axes[:, 0], results, strict=True):
        frame = result.timeline
        ops |= set(visible_ops(frame))
        chunked |= bool((frame["chunk"] > 0).any())
        draw_gantt(ax, frame, time_unit=TimeUnit.UNIT, xlim=(0, end))
        shape = built.program.shape
        ax.set_title(f"{built.name} (v={shape.chunks}, {shape.placement.value} placement): makespan "
                     f"{result.metrics.makespan:.3g}, bubble {result.metrics.bubble_fraction:.1%}", loc="left")
        ax.tick_params(axis="y", labelsize=6)
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")
    axes[-1, 0].legend(handles=legend_handles(ops, chunks=chunked), loc="upper center", bbox_to_anchor=(0.5, -0.9),
                       ncol=6, frameon=False)
    fig.tight_layout()
    save_pdf_png(fig, args.out, "gantt_gallery")


if __name__ == "__main__":
    main()
