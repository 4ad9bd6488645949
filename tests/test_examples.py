"""Each script in examples/ runs as a user would run it (a fresh interpreter, from the repository root) and prints
what it promises; CI runs this, so the examples cannot rot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def run_example(path: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, str(path), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_every_example_is_listed_here():
    assert {p.name for p in EXAMPLES} == {"from_framework_configs.py", "notebook_tour.py", "plan_a_job.py",
                                          "sweep_bubbles.py"}


def test_notebook_tour(tmp_path):
    out = run_example(ROOT / "examples" / "notebook_tour.py", "--out", str(tmp_path))
    assert "schedule 1f1b: pp=4 microbatches=8 chunks=1" in out  # the CLI's own summary text
    assert "1f1b   makespan 33 units, bubble 0.273" in out  # (p−1)/(m+p−1) = 3/11
    assert "[4.0, 3.5, 3.0, 2.5]" in out  # zb-h1's memory over time peaks where the report says
    assert "MFU" in out and "GiB on rank" in out
    for name in ("two_schedules.png", "zb_h1_memory.png", "llama_memory.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_plan_a_job(tmp_path):
    out = run_example(ROOT / "examples" / "plan_a_job.py", "--out", str(tmp_path))
    assert out.startswith("plan: gpt3-2.7b")
    assert "best: tp" in out and "executor: torchrun" in out
    assert (tmp_path / "pareto.png").stat().st_size > 1000


def test_from_framework_configs():
    out = run_example(ROOT / "examples" / "from_framework_configs.py")
    from_file = out.split("nanotron config: ")[1].split()[0]
    assert out.split("the same by options: ")[1].split()[0] == from_file  # the file is the options
    assert "dp 8, 8 chunks a rank, first and last stages 1 and 1 layers, the others 2" in out


def test_sweep_bubbles():
    out = run_example(ROOT / "examples" / "sweep_bubbles.py")
    worst = float(out.split("largest difference ")[1].split()[0])
    assert worst < 1e-9
    assert "0.2727" in out  # pp=4, m=8


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_say_how_to_run_them(path):
    assert f"examples/{path.name}" in path.read_text().split('"""')[1]
