"""Conventions shared by the scripts in ``experiments/``: their flags (--fast, --out) and saving PDF + PNG.

Every figure is written as vector PDF (for papers) and PNG (for the README), at column width, with the op
and schedule colours of :mod:`pipesim.plots.gantt` and :mod:`pipesim.plots.sweep_plot`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipesim.plots.gantt import plt, save_figure

COLUMN_WIDTH_IN = 3.5  # one column of a two-column paper
PAGE_WIDTH_IN = 7.0

plt.rcParams.update({"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
                     "xtick.labelsize": 7, "ytick.labelsize": 7, "pdf.fonttype": 42, "svg.fonttype": "none"})


def experiment_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--fast", action="store_true", help="tiny sizes: checks the script end to end in seconds")
    parser.add_argument("--out", type=Path, default=Path("docs/figures"), help="output folder (default docs/figures)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def save_pdf_png(fig, out: Path, stem: str) -> list[Path]:
    """Write ``stem.pdf`` and ``stem.png`` into ``out``; returns the paths."""
    paths = [out / f"{stem}.pdf", out / f"{stem}.png"]
    for path in paths:
        save_figure(fig, path, close=False)
    plt.close(fig)
    for path in paths:
        print(f"wrote {path}")
    return paths
