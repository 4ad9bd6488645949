"""Conventions shared by the scripts in ``experiments/``: their flags (--fast, --out, --update-docs) and saving
PDF + PNG.

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


DEFAULT_OUT = Path("pipesim-figures")
# The README's figures live in the checkout; only --update-docs writes there, so running a script leaves
# `git status` clean.
DOCS_FIGURES = Path(__file__).resolve().parents[2] / "docs" / "figures"


def experiment_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--fast", action="store_true", help="tiny sizes: checks the script end to end in seconds")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=DEFAULT_OUT,
                       help=f"output folder (default ./{DEFAULT_OUT}, created if missing)")
    where.add_argument("--update-docs", action="store_true",
                       help="regenerate the README's figures in docs/figures of this checkout")
    args = parser.parse_args(argv)
    if args.update_docs:
        if args.fast:
            parser.error("--update-docs with --fast would put smoke-test figures into the README; drop --fast")
        args.out = DOCS_FIGURES
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
