"""Class 2 — no bad input hangs: user code that loops (in ``build``, at import, in Python or in C) ends in a
timeout error naming the file; work that cannot finish is refused up front. Real processes, generous bounds."""

from __future__ import annotations

import textwrap
import time

import pytest

from pipesim.errors import ScheduleError
from pipesim.program.user_code import run_user_code
from tests.bad_input.helpers import check_refusal, run_process

LOOPS = {
    "python-loop-in-build": "def build(pp, microbatches, chunks=1):\n    while True:\n        pass\n",
    "python-loop-on-import": "while True:\n    pass\n\ndef build(pp, microbatches, chunks=1):\n    pass\n",
    "swallowed-interrupt": textwrap.dedent("""
        def build(pp, microbatches, chunks=1):
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass
    """),
}


# The user-code time bound these processes run under: short, as the loops never end anyway and each burns a core
# until it (the watchdog's grace after it is fixed, pipesim/program/user_code.py).
TIMEOUT_S = "0.2"


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_schedule_file_that_never_finishes_ends_in_a_timeout_error(name, tmp_path):
    schedule = tmp_path / f"{name.replace('-', '_')}.py"
    schedule.write_text(LOOPS[name])
    started = time.monotonic()
    result = run_process(
        ["simulate", "--schedule", schedule, "--timeline", tmp_path / "t.csv"],
        tmp_path,
        env={"PIPESIM_USER_CODE_TIMEOUT_S": TIMEOUT_S},
    )
    line = check_refusal(
        result.returncode, result.stderr, names=(str(schedule), f"did not finish within {TIMEOUT_S} s")
    )
    assert "PIPESIM_USER_CODE_TIMEOUT_S" in line  # the fix: which knob allows longer
    assert not (tmp_path / "t.csv").exists()
    assert time.monotonic() - started < 100  # the timeout (0.2 s) plus the watchdog's grace, not forever


def test_loop_in_c_that_holds_the_interpreter_still_ends_naming_the_file(tmp_path):
    # sum() over a huge range runs in C and never returns to the interpreter: no Python code can run, so the
    # C-level last resort ends the process with Python's traceback (exit 1) instead of a one-line error.
    schedule = tmp_path / "c_loop.py"
    schedule.write_text("def build(pp, microbatches, chunks=1):\n    return sum(range(10**18))\n")
    result = run_process(["simulate", "--schedule", schedule], tmp_path, env={"PIPESIM_USER_CODE_TIMEOUT_S": TIMEOUT_S})
    assert result.returncode != 0
    assert str(schedule) in result.stderr


def test_timeout_in_process_is_an_ordinary_error():
    # The CLI run in-process (as most tests do) gets an exception, not an exit, for Python-level loops.
    def spin():
        while True:
            pass

    with pytest.raises(ScheduleError, match=r"did not finish within 0\.2 s"):
        run_user_code(spin, "schedule file spin.py", timeout_s=0.2)


def test_bad_timeout_setting_is_refused(tmp_path):
    result = run_process(["simulate"], tmp_path, env={"PIPESIM_USER_CODE_TIMEOUT_S": "forever"})
    check_refusal(result.returncode, result.stderr, names="PIPESIM_USER_CODE_TIMEOUT_S")


@pytest.mark.parametrize(
    "degrees", [["--tp", "1000", "--cp", "1000", "--dp", "1000", "--pp", "1000"], ["--dp", "99999999999999999999"]]
)
def test_topology_too_large_to_list_is_refused_at_once(degrees, tmp_path):
    result = run_process(["topology", *degrees], tmp_path)
    check_refusal(result.returncode, result.stderr, names="tp·cp·dp·pp")
    assert result.stdout == ""
