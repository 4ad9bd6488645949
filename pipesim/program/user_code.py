"""Running a user's schedule file (its import and its ``build``): bounded in time, and unable to end pipesim.

A schedule file is arbitrary Python. Two things it can do would otherwise look like pipesim's fault: loop
forever (the CLI or every executor rank hangs with no output) and call ``sys.exit`` (the command ends with
whatever status the file chose, often 0, having printed nothing). Both become a :class:`ScheduleError` naming
the file.

The time bound has three layers. In the main thread a ``SIGALRM`` timer interrupts Python code where it is,
so the error is an ordinary exception (tests call the CLI in-process). Code that swallows the interruption
(``except BaseException``) is caught by a watchdog thread a few seconds later, which prints the same one-line
error and ends the process with exit status 2. Code that never returns to the interpreter (one long C call,
e.g. ``sum(range(10**18))``) holds the GIL, so no Python thread can run: :mod:`faulthandler`'s C-level timer
ends the process a few seconds after that, printing Python's traceback (which names the file) and exit status
1. A hang is never the outcome.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from pipesim.errors import PipesimError, ScheduleError

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
TIMEOUT_ENV = "PIPESIM_USER_CODE_TIMEOUT_S"
# How long after the timer the watchdog waits for the interrupted code to unwind before ending the process.
_WATCHDOG_GRACE_S = 2.0
EXIT_USAGE = 2


class _Timeout(BaseException):
    """Raised into the user's code by the timer; a BaseException so ``except Exception`` there cannot keep it."""


def user_code_timeout() -> float:
    """Seconds a schedule file's import or ``build`` may take: ``$PIPESIM_USER_CODE_TIMEOUT_S`` or 60."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86_400:
        raise PipesimError(f"{TIMEOUT_ENV}={text!r} must be a number of seconds in (0, 86400]; unset it for 60")
    return value


def run_user_code(call: Callable[[], T], what: str, timeout_s: float | None = None) -> T:
    """``call()`` under the time bound; ``what`` names it in errors (``schedule file x.py: build(pp=4, …)``)."""
    timeout_s = user_code_timeout() if timeout_s is None else timeout_s
    fix = f"it may loop forever; fix it, or set {TIMEOUT_ENV} to allow more than {timeout_s:g} s"
    message = f"{what} did not finish within {timeout_s:g} s; {fix}"
    finished = threading.Event()
    watchdog = threading.Thread(target=_watch, args=(finished, timeout_s + _WATCHDOG_GRACE_S, message),
                                name="pipesim-user-code-watchdog", daemon=True)
    watchdog.start()
    timer = _start_timer(timeout_s)
    last_resort = _start_last_resort(timeout_s + 2 * _WATCHDOG_GRACE_S)
    try:
        return call()
    except _Timeout:
        raise ScheduleError(message) from None
    except SystemExit as stop:
        raise ScheduleError(f"{what} called sys.exit({stop.code!r}); a schedule file must define build() and "
                            "return a Schedule, or raise an exception saying what is wrong") from None
    finally:
        finished.set()
        if timer is not None:
            _stop_timer(timer)
        if last_resort:
            faulthandler.cancel_dump_traceback_later()


def _watch(finished: threading.Event, seconds: float, message: str) -> None:
    if not finished.wait(seconds):
        sys.stderr.write(f"pipesim: error: {message}\n")
        sys.stderr.flush()
        os._exit(EXIT_USAGE)


def _start_last_resort(seconds: float) -> bool:
    """Arm faulthandler's C timer (it runs without the GIL) unless stderr has no file descriptor to write to."""
    try:
        faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__)
    except (AttributeError, ValueError, OSError, RuntimeError):  # no real stderr (embedded, closed)
        return False
    return True


def _start_timer(seconds: float):
    """Arm SIGALRM in the main thread; returns what :func:`_stop_timer` needs to restore, or None.

    An outer timer (pytest-timeout, a caller's alarm) that fires first is left alone; one that fires later is
    paused and re-armed with its remaining time afterwards.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return None
    outer_remaining = signal.getitimer(signal.ITIMER_REAL)[0]
    if 0 < outer_remaining <= seconds:
        return None

    def interrupt(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return previous, outer_remaining, time.monotonic()


def _stop_timer(timer) -> None:
    previous, outer_remaining, started = timer
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
    if outer_remaining > 0:
        signal.setitimer(signal.ITIMER_REAL, max(outer_remaining - (time.monotonic() - started), 1e-3))
