"""Every experiment script runs end to end in its fast mode and writes its PDF and PNG into ./pipesim-figures
of the directory it runs in (never into the checkout's docs/figures unless told to with --update-docs)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Scripts that run the executor need torch; without it they are skipped, not failed.
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
FIGURE_SCRIPTS = [
    "rank_correlation",
    "bubble_vs_microbatches",
    "memory_per_rank",
    "gantt_gallery",
    "dualpipe_overlap",
    # Spawns a 2-process gloo world, measures, calibrates and predicts.
    pytest.param("predicted_vs_measured", marks=[pytest.mark.distributed, needs_torch]),
]


def run_script(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "experiments" / f"{script}.py"), *args],
                          capture_output=True, text=True, timeout=240, cwd=cwd, env=ENV)


@pytest.mark.parametrize("script", FIGURE_SCRIPTS)
def test_experiment_fast_mode_writes_figures(script, tmp_path):
    result = run_script(script, "--fast", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "pipesim-figures"
    assert (out / f"{script}.pdf").read_bytes()[:4] == b"%PDF"
    assert (out / f"{script}.png").read_bytes()[:4] == b"\x89PNG"


def test_update_docs_refuses_smoke_figures(tmp_path, monkeypatch, capsys):
    from pipesim.plots.figures import DOCS_FIGURES, experiment_args

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        experiment_args("x", ["--fast", "--update-docs"])
    assert stop.value.code == 2 and "--update-docs with --fast" in capsys.readouterr().err
    assert not (tmp_path / "pipesim-figures").exists()
    assert experiment_args("x", ["--update-docs"]).out == DOCS_FIGURES == ROOT / "docs" / "figures"
    assert experiment_args("x", []).out.resolve() == (tmp_path / "pipesim-figures").resolve()


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [
        ("published_runs", ["--fast"], "mean |error|"),
        ("validation_loso", ["--fast", "--markdown"], "| all sources"),
        ("plan_narayanan2021", ["--fast"], "| gpt-1.7b | 32 | 512 | (1, 1) |"),
        ("p2p_sync_overhead", [], "median per call: 1.18 ms"),
        ("sweep_floor", ["--points", "20"], "× the floor"),
        # A 2-process cp world: the measured ring share beside the simulator's.
        pytest.param("cp_ring_share", ["--fast"], "ring share of F+B: measured",
                     marks=[pytest.mark.distributed, needs_torch]),
        # Tiny sizes: checks our executor and torch.distributed.pipelining both run every schedule.
        pytest.param("bench_executor_vs_torch", ["--pp", "2", "--mb", "2", "--steps", "2", "--repeats", "1",
                                                 "--layers", "2", "--hidden", "32"], "interleaved",
                     marks=[pytest.mark.distributed, needs_torch]),
    ],
)
def test_table_experiments_run(script, args, expect, tmp_path):
    result = run_script(script, *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert expect in result.stdout


SCRIPTS = sorted(p for p in (ROOT / "experiments").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_script_takes_the_shared_flags(script):
    """--help, --fast and --out come from one helper, so every script spells and means them alike."""
    source = script.read_text()
    assert "experiment_parser(" in source or "experiment_args(" in source, \
        f"{script.name}: parse its flags with pipesim.plots.figures.experiment_parser / experiment_args"
    assert "argparse.ArgumentParser(" not in source, f"{script.name}: a parser of its own"


def test_shared_parser_flags(tmp_path):
    from pipesim.plots.figures import experiment_parser, parse_experiment_args

    tables = experiment_parser("x", figures=False)
    args = parse_experiment_args(tables, ["--fast", "--out", str(tmp_path / "o")])
    assert args.fast and args.out == tmp_path / "o" and args.out.is_dir()
    with pytest.raises(SystemExit):  # a table script has no docs copy to update
        parse_experiment_args(experiment_parser("x", figures=False), ["--update-docs"])
    assert "--update-docs" in experiment_parser("x").format_help()


def test_a_table_script_writes_its_table_into_out(tmp_path):
    result = run_script("grouped_step_time", "--fast", "--out", "tables", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "tables" / "grouped_step_time_comm0.md").read_text()
    assert "| interleaved | 4 | 8 | 28.5 | hangs | 28.5 | reordered |" in written
    assert written in result.stdout  # the file holds what was printed
