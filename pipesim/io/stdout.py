"""Standard output whose reader may leave before the command ends (``pipesim plan … -o plan.parquet | head``).

When the reader of a pipe closes it, the next write raises :class:`BrokenPipeError`. Raised out of the
command, it would stop the command before it wrote the files it was asked for (``-o``, ``--plot``,
``--timeline``), and exit 0: a success that did not do what was asked. Instead the command's text goes
nowhere from then on and the command runs to its end.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO


def point_at_devnull(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null: the interpreter flushes standard output at exit, and a
    flush into a pipe with no reader would fail there."""
    with contextlib.suppress(OSError, ValueError):  # a stream with no descriptor (a test's capture)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


class ReaderMayLeave:
    """``stream``, except that once its reader has gone, writes and flushes are dropped instead of raising."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.reader_gone = False

    def _guarded(self, act) -> None:
        if self.reader_gone:
            return
        try:
            act()
        except BrokenPipeError:
            self.reader_gone = True
            point_at_devnull(self._stream)

    def write(self, text: str) -> int:
        self._guarded(lambda: self._stream.write(text))
        return len(text)

    def flush(self) -> None:
        self._guarded(self._stream.flush)

    def __getattr__(self, name: str):  # isatty, fileno, encoding, …: the stream's own
        return getattr(self._stream, name)


@contextlib.contextmanager
def tolerate_leaving_reader() -> Iterator[ReaderMayLeave]:
    """Standard output as :class:`ReaderMayLeave` for the duration, then as it was (flushed)."""
    original = sys.stdout
    guarded = ReaderMayLeave(original)
    sys.stdout = guarded
    try:
        yield guarded
    finally:
        guarded.flush()
        sys.stdout = original
