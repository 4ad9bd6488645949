"""Error types: every user-facing failure is one of these and carries a one-line message."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class PipesimError(Exception):
    """A user-facing error: the message names the bad input and the fix, on one line."""


class ScheduleError(PipesimError):
    """A schedule or Program is malformed, incomplete, mis-ordered or can deadlock."""


class DeadlockError(ScheduleError):
    """The Program can hang: the message names the cycle of waiting instructions."""


def parse_choice(name: str, kind: type, value: object) -> object:
    """``value`` as ``kind`` (an enum, or bool), or a one-line error naming the option and what it takes."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(member.value) for member in kind)
        raise PipesimError(f"{name}={value!r} is not one of {choices}; choose one of those") from None


@contextlib.contextmanager
def naming(source: str) -> Iterator[None]:
    """Inside, a :class:`PipesimError` is raised again with ``source`` (the file or flag it came from) in front."""
    try:
        yield
    except PipesimError as err:
        raise PipesimError(f"{source}: {err}") from None
