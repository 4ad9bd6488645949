"""Figure 2: peak activation memory per rank for each schedule — 1F1B's first-stage imbalance made visible.

pp = 4 (8 in full mode), m = 2·pp·2 microbatches, unit costs; memory in pipesim's one unit, one microbatch through one
rank's share of the model, so schedules with v chunks per rank compare fairly (a chunk holds 1/v of it). Every built-in
schedule is drawn, zero-bubble family included.
Run: ``python experiments/memory_per_rank.py [--fast] [--out DIR | --update-docs]``.
"""

from __future__ import annotations

import numpy as np

from pipesim.errors import ScheduleError
from pipesim.plots.figures import COLUMN_WIDTH_IN, experiment_args, save_pdf_png
from pipesim.plots.gantt import plt
from pipesim.plots.sweep_plot import in_reading_order, style_of
from pipesim.program.build import build_program
from pipesim.program.loader import builtin_names
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import simulate


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    pp = 4 if args.fast else 8
    microbatches = 4 * pp
    names = ["gpipe", "1f1b", "interleaved"] if args.fast else in_reading_order(builtin_names())
    peaks: dict[str, np.ndarray] = {}
    for name in names:
        try:
            built = build_program(name, pp, microbatches)
        except ScheduleError as err:
            print(f"skipped {name}: {err}")
            continue
        result = simulate(built.program, CostModel(), check=False)
        peaks[built.name] = np.array(result.memory.peak_activations)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN * 1.4, 2.9))
    width = 0.8 / len(peaks)
    for index, (name, values) in enumerate(peaks.items()):
        colour, _ = style_of(name, index)
        ax.bar(np.arange(pp) + (index - (len(peaks) - 1) / 2) * width, values, width, color=colour,
               edgecolor="black", linewidth=0.3, label=name, hatch=["", "//", "..", "xx", "\\\\", "++", "--", "oo"][
                   index % 8])
    ax.set_xticks(range(pp))
    ax.set_xticklabels([f"rank {r}" for r in range(pp)])
    ax.set_ylabel("peak activations (microbatches\nthrough a rank's share of the model)")
    ax.set_title(f"Peak activation memory per rank, pp={pp}, m={microbatches}")
    ax.legend(fontsize=6, ncol=4, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_pdf_png(fig, args.out, "memory_per_rank")


if __name__ == "__main__":
    main()
