"""Every experiment script runs end to end in its fast mode and writes its PDF and PNG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SIMULATOR_FIGURES = {
    "bubble_vs_microbatches": "bubble_vs_microbatches",
    "memory_per_rank": "memory_per_rank",
    "gantt_gallery": "gantt_gallery",
    "predicted_vs_measured": "predicted_vs_measured",  # spawns a 2-process gloo world
}


@pytest.mark.parametrize("script", list(SIMULATOR_FIGURES))
def test_experiment_fast_mode_writes_figures(script, tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / f"{script}.py"), "--fast", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    stem = SIMULATOR_FIGURES[script]
    assert (tmp_path / f"{stem}.pdf").read_bytes()[:4] == b"%PDF"
    assert (tmp_path / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [
        ("published_runs", [], "mean |error|"),
        # Tiny sizes: checks our executor and torch.distributed.pipelining both run every schedule.
        ("bench_executor_vs_torch", ["--pp", "2", "--mb", "2", "--steps", "2", "--repeats", "1", "--layers", "2",
                                     "--hidden", "32"], "interleaved"),
    ],
)
def test_table_experiments_run(script, args, expect):
    result = subprocess.run([sys.executable, str(ROOT / "experiments" / f"{script}.py"), *args],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert expect in result.stdout
