"""The CPU time of a command and of every process it started, orphans included: how docs/tests.md measures the
suite. ``python -m tests.cpu_time python3 -m pytest -q -n 2`` prints, after the command's own output, one line
``cpu_time: exit E, wall W s, cpu C s (user U, sys S), load L`` on stderr and exits with the command's status.

``/usr/bin/time`` counts only the descendants that their parents waited for. The forkserver that
executors.harness starts ranks from is waited for by nobody (its parent exits first), so its CPU time and that
of every rank it forked would be missing. This process becomes a child subreaper (Linux ``prctl``
``PR_SET_CHILD_SUBREAPER``, see prctl(2)): orphaned descendants are re-parented to it instead of to init, it
reaps them, and their CPU time lands in its ``RUSAGE_CHILDREN`` (getrusage(2)). The load is the one-minute
load average when the command ends: the machine's other work, which the CPU time excludes and the wall time
does not.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed: needs Linux 3.4 or later")


def _reap_all() -> None:
    """Wait for every descendant re-parented here (a forkserver exits once its parent has)."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tests.cpu_time COMMAND [ARGS...]", file=sys.stderr)
        return 2
    if not sys.platform.startswith("linux"):
        print("tests.cpu_time: error: needs Linux (prctl PR_SET_CHILD_SUBREAPER)", file=sys.stderr)
        return 2
    _become_subreaper()
    start = time.monotonic()
    try:
        code = subprocess.call(argv)
    except FileNotFoundError:
        print(f"tests.cpu_time: error: {argv[0]}: no such command", file=sys.stderr)
        return 2
    _reap_all()
    wall = time.monotonic() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = used.ru_utime + used.ru_stime
    print(
        f"cpu_time: exit {code}, wall {wall:.1f} s, cpu {cpu:.1f} s (user {used.ru_utime:.1f}, sys "
        f"{used.ru_stime:.1f}), load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
