"""Published runs, one module per source. Each module defines ``SOURCE`` (the citation every row carries,
or several) and ``ROWS``; :data:`PUBLISHED_RUNS` is all of them in this order.

A source is the unit of leave-one-out validation (:mod:`pipesim.validation.loso`): one paper or one
benchmark report, measured on one system by one team, so its rows share whatever that system did that the
model does not know.
"""

from __future__ import annotations

from importlib import import_module

from pipesim.validation.runs import PublishedRun

SOURCE_MODULES: tuple[str, ...] = ("narayanan2021", "korthikanti2023", "llama3_2024", "nemo2407", "qi2024")


def _load() -> list[PublishedRun]:
    rows: list[PublishedRun] = []
    for name in SOURCE_MODULES:
        rows += import_module(f"{__name__}.{name}").ROWS
    return rows


PUBLISHED_RUNS: list[PublishedRun] = _load()


def runs_by_source() -> dict[str, list[PublishedRun]]:
    """Rows grouped by source module (the unit left out in validation), in :data:`SOURCE_MODULES` order."""
    return {name: list(import_module(f"{__name__}.{name}").ROWS) for name in SOURCE_MODULES}


def source_title(name: str) -> str:
    """A source module's short citation, e.g. ``Qi et al. 2024``."""
    return import_module(f"{__name__}.{name}").SOURCE.split(",")[0]
