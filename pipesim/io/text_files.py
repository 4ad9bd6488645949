"""Reading a user's text input file (costs, model, chip, program text, torch CSV): UTF-8 text of a sane size,
or a one-line error naming the file and what it is instead (missing, a folder, binary, another encoding)."""

from __future__ import annotations

from pathlib import Path

from pipesim.errors import PipesimError

# Every text input pipesim reads is a few kilobytes to a few megabytes; a bigger file is a wrong path (a model
# checkpoint, a log) and reading it whole would only stall.
MAX_TEXT_BYTES = 64 * 2**20


def read_text_file(path: str | Path, what: str) -> str:
    """The text of ``path``; ``what`` names the input in errors (e.g. ``"costs file"``, ``"--program"``)."""
    path = Path(path)
    if path.is_dir():
        raise PipesimError(f"{what} {path} is a folder; give the file inside it")
    if not path.is_file():
        raise PipesimError(f"{what} {path} does not exist; check the path")
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise PipesimError(f"{what} {path} is {size / 2**20:.0f} MiB, more than the {MAX_TEXT_BYTES // 2**20} "
                               "MiB a text input may have; is it the right file?")
        data = path.read_bytes()
    except OSError as err:
        raise PipesimError(f"{what} {path} cannot be read: {err.strerror or err}") from None
    if b"\0" in data:
        raise PipesimError(f"{what} {path} is a binary file, not text; give the .yaml/.json/.csv/.txt it should be")
    try:
        return data.decode("utf-8-sig")  # tolerate the byte-order mark some editors write
    except UnicodeDecodeError as err:
        raise PipesimError(f"{what} {path} is not UTF-8 text (byte {err.start} is 0x{data[err.start]:02x}); "
                           "save it as UTF-8") from None
