"""What every bad-input test asserts: exit 2, one line on stderr that names the input, no traceback, nothing
written, and — for the tests that run a real process — an end within a generous time bound."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from pipesim.cli.main import main

# Generous: a bound on hangs, not a performance goal, so a loaded machine cannot fail a test.
PROCESS_TIMEOUT_S = 120
REPO = Path(__file__).resolve().parents[2]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder`` with its size and modification time: 'nothing written' compares two."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()}


def check_refusal(code: int, stderr: str, names: str | tuple[str, ...] = ()) -> str:
    """Exit 2 and one ``pipesim: error:`` line that mentions each of ``names``; returns the line."""
    lines = stderr.strip().splitlines()
    assert code == 2, f"exit {code}, stderr: {stderr!r}"
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    line = lines[0]
    assert line.startswith("pipesim: error: "), line
    assert "Traceback" not in stderr and "internal error" not in line, line
    for name in (names,) if isinstance(names, str) else names:
        assert name in line, f"{name!r} not named in {line!r}"
    return line


def call(argv: list) -> tuple[int, str, str]:
    """``pipesim argv`` in-process (fast: no interpreter start): exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def refused(argv: list, folder: Path, names: str | tuple[str, ...] = ()) -> str:
    """``pipesim argv`` must refuse (:func:`check_refusal`) and leave every file in ``folder`` as it was."""
    before = snapshot(folder)
    code, _, err = call(argv)
    line = check_refusal(code, err, names)
    assert snapshot(folder) == before, f"files changed in {folder} by {argv}"
    return line


def never_internal(argv: list) -> tuple[int, str]:
    """For generated inputs that may happen to be valid: success, or a clean refusal — never an internal error."""
    code, out, err = call(argv)
    assert code in (0, 2), f"exit {code} for {argv}: {err!r}"
    if code == 2:
        check_refusal(code, err)
    return code, out


def run_process(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m pipesim.cli argv`` as a real process (signals, exit status, stdout/stderr as a user sees)."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pipesim.cli", *map(str, argv)], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S)
