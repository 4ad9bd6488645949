"""The commands' progress bar: on standard error, so what a command prints to standard output (the plan, the
sweep's lines) reads and pipes the same with or without it, and only at a terminal, where it is seen."""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress


def progress_bar(quiet: bool) -> Progress:
    """A transient bar on standard error; off with ``quiet`` (``-q``) or where standard error is not a terminal
    (rich would still leave an empty line there when it stops)."""
    console = Console(stderr=True)
    return Progress(console=console, transient=True, disable=quiet or not console.is_terminal)
