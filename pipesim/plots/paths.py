"""Figure file names: which suffixes pipesim draws, checked before any work (no matplotlib import here, so
commands that only *check* a path start fast)."""

from __future__ import annotations

from pathlib import Path

from pipesim.errors import PipesimError

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def check_figure_path(path: str | Path, flag: str = "--plot") -> None:
    if Path(path).suffix.lower() not in FIGURE_SUFFIXES:
        raise PipesimError(f"{flag} {path}: unknown figure format; use .png, .pdf or .svg")
