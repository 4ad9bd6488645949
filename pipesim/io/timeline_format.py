"""The file formats a timeline is written in, by suffix. Apart from :mod:`pipesim.io.timeline` (which
re-exports it) so that a command can name the formats in its flags without importing pandas."""

from __future__ import annotations

import enum
from pathlib import Path

from pipesim.errors import PipesimError


class TimelineFormat(enum.Enum):
    CSV = ".csv"
    PARQUET = ".parquet"
    CHROME_TRACE = ".json"

    @classmethod
    def of(cls, path: str | Path, flag: str = "--timeline") -> TimelineFormat:
        suffix = Path(path).suffix.lower()
        for fmt in cls:
            if fmt.value == suffix:
                return fmt
        raise PipesimError(f"{flag} {path}: unknown format {suffix or '(none)'}; use .csv, .parquet or .json (trace)")
