"""Atomic file output: write to a temporary file beside the target, then rename, so no file is half-written."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from pipesim.errors import PipesimError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success it replaces ``path``, on error it vanishes."""
    path = Path(path)
    if not path.parent.exists():
        raise PipesimError(f"cannot write {path}: folder {path.parent} does not exist; create it first")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_with(path: str | Path, writer: Callable[[Path], None]) -> None:
    """Run ``writer(tmp_path)`` and move the result into place only if it succeeded."""
    with atomic_path(path) as tmp:
        writer(tmp)


def write_or_print(text: str, path: str | Path | None) -> None:
    """Write ``text`` atomically to ``path`` and say so, or print it when no path is given."""
    if path:
        write_text_atomic(path, text)
        print(f"wrote {path}")
    else:
        sys.stdout.write(text)
