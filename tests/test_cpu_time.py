"""tests.cpu_time counts the CPU time of an orphaned grandchild, which /usr/bin/time would miss (the
forkserver of executors.harness is one)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The parent forks and exits at once; the orphaned child works until it has used 0.3 s of CPU, then exits.
ORPHAN = """
import os, time
if os.fork() == 0:
    while time.process_time() < 0.3:
        pass
    os._exit(0)
os._exit(3)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_CHILD_SUBREAPER) is Linux's")
def test_an_orphans_cpu_time_is_counted_and_the_exit_status_passed_on():
    proc = subprocess.run(
        [sys.executable, "-m", "tests.cpu_time", sys.executable, "-c", ORPHAN],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    match = re.fullmatch(
        r"cpu_time: exit 3, wall [\d.]+ s, cpu ([\d.]+) s \(user [\d.]+, sys [\d.]+\), load [\d.]+", line
    )
    assert match, line
    assert float(match.group(1)) >= 0.3, line  # the orphan's 0.3 s are in, though its parent never waited


def test_no_command_is_a_usage_error():
    proc = subprocess.run(
        [sys.executable, "-m", "tests.cpu_time"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stderr.startswith("usage: python -m tests.cpu_time"), proc.stderr
