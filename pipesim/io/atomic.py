"""Atomic file output: write to a temporary file beside the target, then rename, so no file is half-written.

Outputs are checked before any work starts (:func:`check_output_path`), get the permissions a plain ``open``
would give them (the user's umask, not ``mkstemp``'s private 0600), and a target that is a symlink is written
through: the link stays and the file it points to is replaced.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from pipesim.errors import PipesimError


def _current_umask() -> int:
    # os.umask can only be read by setting it; restore it at once (single-threaded CLI start-up and writes).
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_output_path(path: str | Path, what: str = "output") -> Path:
    """Fail now, with the fix, if ``path`` cannot be written later: empty, a folder, missing or read-only folder."""
    if str(path).strip() == "":
        raise PipesimError(f"the {what} path is empty: give a file name, e.g. out.csv")
    path = Path(path)
    target = path.resolve() if path.is_symlink() else path
    if target.is_dir():
        raise PipesimError(f"cannot write {what} {path}: it is a folder; give a file name inside it")
    folder = target.parent
    if not folder.exists():
        raise PipesimError(f"cannot write {what} {path}: folder {folder} does not exist; create it first")
    if not folder.is_dir():
        raise PipesimError(f"cannot write {what} {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PipesimError(f"cannot write {what} {path}: folder {folder} is not writable; choose another place")
    if target.exists() and not os.access(target, os.W_OK):
        raise PipesimError(f"cannot write {what} {path}: the file is read-only; remove it or choose another name")
    return path


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success it replaces ``path``, on error it vanishes."""
    path = check_output_path(path)
    target = path.resolve() if path.is_symlink() else path  # write through a symlink, keep the link
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        mode = (target.stat().st_mode & 0o7777) if target.exists() else (0o666 & ~_current_umask())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_with(path: str | Path, writer: Callable[[Path], None]) -> None:
    """Run ``writer(tmp_path)`` and move the result into place only if it succeeded."""
    with atomic_path(path) as tmp:
        writer(tmp)


def write_table(frame, path: str | Path) -> None:
    """A DataFrame to ``path`` atomically: CSV for a ``.csv`` name, Parquet otherwise (the commands checked the
    suffix as their flags were parsed)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        write_with(path, lambda tmp: frame.to_csv(tmp, index=False))
    else:
        write_with(path, lambda tmp: frame.to_parquet(tmp, index=False))


def write_or_print(text: str, path: str | Path | None) -> None:
    """Write ``text`` atomically to ``path`` and say so, or print it when no path is given."""
    if path is not None:
        write_text_atomic(path, text)
        print(f"wrote {path}")
    else:
        sys.stdout.write(text)
