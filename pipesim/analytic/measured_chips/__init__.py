"""Measured chip files committed to the repository (``pipesim profile`` output, e.g. from
``experiments/gpu_check.py`` on a CUDA machine): ``--hardware NAME`` takes a file's stem, ``pipesim chips``
lists them as measured with their provenance."""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def measured_chip_files() -> dict[str, Path]:
    """File stem (lower case) → path of every committed measured chip file."""
    return {p.stem.lower(): p for p in sorted(FOLDER.glob("*.yaml"))}
