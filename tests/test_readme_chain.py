"""The manual's measure → calibrate → simulate → overlay block runs top to bottom as written.

The block is read from docs/calibration.md (after its ``readme-chain`` marker), so the test follows the page
rather than a copy of it. Scaled down for a 2-core machine: 2 ranks instead of 4 (``--nproc-per-node 4`` and
``--pp 4`` become 2). ``torchrun`` runs as ``python -m torch.distributed.run`` on a free port and ``pipesim``
as ``python -m pipesim.cli``, so the checkout under test is what runs. Then the mismatch the README warns
about: the same costs file with half the stages fails with one line naming the file, the cause and the fix.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from executors.launch import run_torchrun

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "calibration.md"
MARKER = "<!-- readme-chain:"


def readme_chain() -> list[str]:
    text = PAGE.read_text()
    after = text[text.index(MARKER):]
    block = re.search(r"```bash\n(.*?)```", after, re.S)
    assert block, f"{PAGE}: no ```bash block after the readme-chain marker"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def run_scaled_down(command: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """One README command on two processes instead of four, as this machine runs it."""
    command = command.replace("--nproc-per-node 4", "--nproc-per-node 2").replace("--pp 4", "--pp 2")
    argv = shlex.split(command)
    if argv[0] == "torchrun":
        return run_torchrun(argv[1:], cwd=cwd, env=env, timeout=240)
    if argv[0] == "pipesim":
        return subprocess.run([sys.executable, "-m", "pipesim.cli", *argv[1:]], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=240)
    raise AssertionError(f"README chain: unexpected command {command!r}")


def test_readme_calibrate_simulate_overlay_chain(tmp_path):
    commands = readme_chain()
    assert [c.split()[0] for c in commands] == ["torchrun", "pipesim", "pipesim", "pipesim"], commands
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    outputs = []
    for command in commands:
        result = run_scaled_down(command, tmp_path, env)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        outputs.append(result.stdout)
    for name in ("measured.csv", "trace.json", "costs.json", "predicted.csv", "overlay.pdf"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert "makespan" in outputs[-1]

    # The costs file knows its 2 stages: a 1-stage pipeline is refused with the cause and the fix.
    wrong = subprocess.run(
        [sys.executable, "-m", "pipesim.cli", "simulate", "--costs", "costs.json", "--pp", "1", "--mb", "8"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert wrong.returncode == 2
    message = wrong.stderr.strip()
    assert message.count("\n") == 0, message
    assert "costs file costs.json was calibrated on a pipeline of 2 stages" in message
    assert "--stage-cost" not in message
