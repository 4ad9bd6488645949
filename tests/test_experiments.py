"""Every experiment script runs end to end in its fast mode and writes its PDF and PNG into ./pipesim-figures
of the directory it runs in (never into the checkout's docs/figures unless told to with --update-docs)."""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Scripts that run the executor need torch; without it they are skipped, not failed.
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
# Scripts that spawn gloo worlds: run_here imports them as modules (experiments.SCRIPT) rather than running them
# as ``__main__``, so that their ranks can unpickle the script's functions by that name.
SPAWNING = {"predicted_vs_measured", "cp_ring_share", "bench_executor_vs_torch"}
# Modules whose atexit hooks belong to the process, not to a script run in it (run_here).
LIBRARY_EXIT_HOOKS = {"multiprocessing.util", "multiprocessing.forkserver", "multiprocessing.resource_tracker"}
FIGURE_SCRIPTS = [
    "rank_correlation",
    "mlperf_rounds",
    "bubble_vs_microbatches",
    "memory_per_rank",
    "gantt_gallery",
    "dualpipe_overlap",
    # Spawns a 2-process gloo world, measures, calibrates and predicts.
    pytest.param("predicted_vs_measured", marks=[pytest.mark.distributed, needs_torch]),
]


@pytest.fixture
def run_here(monkeypatch, capsys):
    """A script run in this process as ``python experiments/SCRIPT.py ARGS`` would run it (``__main__``, its
    argv, in ``cwd``): what the tests check is its output, not a process, and a new interpreter would pay the
    imports (numpy, pandas, torch, matplotlib) again. A script that spawns a gloo world (SPAWNING) is imported
    as ``experiments.SCRIPT`` and its ``main()`` called, what its ``if __name__ == "__main__"`` line does: its
    ranks then find the functions it hands them (executors.harness forks them from a server that imports
    them by module name; a function of a ``__main__`` run by runpy has no importable name)."""

    def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
        path = ROOT / "experiments" / f"{script}.py"
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "argv", [str(path), *args])
        monkeypatch.setenv("MPLBACKEND", "Agg")
        at_exit: list = []  # what the script leaves for interpreter exit (record_output closes its file)
        register = atexit.register

        def defer(fn, *a, **k):
            # Only the script's own exit work runs when it ends; a library imported for the first time during
            # the run (multiprocessing's, which removes the forkserver's socket) keeps its hook for this
            # process's real exit, as it would have had the library been imported before.
            if getattr(fn, "__module__", None) in LIBRARY_EXIT_HOOKS:
                return register(fn, *a, **k)
            at_exit.append((fn, a, k))
            return fn

        monkeypatch.setattr(atexit, "register", defer)
        code = 0
        try:
            if script in SPAWNING:
                importlib.import_module(f"experiments.{script}").main()
            else:
                runpy.run_path(str(path), run_name="__main__")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        finally:
            for fn, a, k in reversed(at_exit):  # as the interpreter would, last registered first
                fn(*a, **k)
            import matplotlib.pyplot as plt

            plt.close("all")  # a script's figures must not pile up in this process
        captured = capsys.readouterr()
        return subprocess.CompletedProcess([str(path), *args], code, captured.out, captured.err)

    return run


@pytest.mark.parametrize("script", FIGURE_SCRIPTS)
def test_experiment_fast_mode_writes_figures(script, tmp_path, run_here):
    result = run_here(script, "--fast", cwd=tmp_path)
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
        # each source from the sources published before it alone, beside the same rows left out
        ("validation_forward", ["--fast"], "all 88 rows: forward 8.0% (bias +2.5%), left out 7.3% (bias +1.4%)"),
        ("plan_narayanan2021", ["--fast"], "| gpt-1.7b | 32 | 512 | (1, 1) |"),
        ("p2p_sync_overhead", [], "median per call: 0.33 ms"),
        ("allocator_reserve", [], "27 runs: median reserved share +5.4%"),
        ("scale_drift", ["--fast"], "86 scaling groups: median -0.86 points per doubling of GPUs"),
        # No feature's sources lean one way since the last data-parallel bucket is counted (docs/validation-log.md)
        ("residual_groups", ["--fast"], "by 5% or more): none\n"),
        # The step's composition: communication-bound rows against their own source's others.
        ("residual_composition", ["--fast"], "come out more optimistic than their source's other rows in 12 of 17 "
         "sources"),
        # The A100's attention by shape (Dao 2023 Fig. 4) against its one earlier rate, on MosaicML's rows.
        ("attention_by_sequence", [], "the mean error moves +8.9% with the shape table, +25.9% with one rate"),
        ("gemm_overheads", [], "Fitted: 1.0 µs per output tile, 6.5 µs per kernel"),
        # pipesim fit on published systems, each row left out of its own system's fit (docs/calibration.md)
        ("own_runs_fit", ["--fast"], "2 systems, 8 rows: the presets 6.0% mean |error| (in sample), fitted to each "
         "system's other rows 3.0% (left out)"),
        # Issue #24's held-out groups carried to this release (docs/validation.md): the BF16 recipes' range.
        ("held_out_patterns", ["--fast"], "H100 BF16 70B-405B, NeMo/Megatron recipes        "
         "step time     -25% … -13%      1.279     -4% … +11%"),
        ("sweep_floor", ["--points", "20"], "× the floor"),
        # DeepSpeed's lockstep order costs nothing with uniform passes (docs/validation-log.md, GLM-130B).
        ("collective_shares", [], "| all_reduce | 8 | 202 | 260 | 309 | 350 | 372 | 386 | 398 | 402 | 0.902 |"),
        ("deepspeed_schedule", ["--fast"], "uniform stages               DeepSpeed blocking 1.0000 × ideal"),
        # Hagemann et al.'s rows under fewer NICs a node than the preset's eight (docs/validation-log.md)
        ("hagemann_network", ["--fast"], "12.50 GB/s (4 NICs a node): mean |e|"),
        # Which attention kernel the rows ran: Blackwell's shape, cuDNN on Hopper (docs/validation-log.md)
        ("attention_kernel_checks", ["--fast"], "cp 2: 8 rows, -6.4% → -5.1% (moved +1.3%)"),
        # One job on two networks: the published throughput ratio beside pipesim's (docs/validation-log.md)
        ("network_pairs", ["--fast"], "llama2-7b h100-sxm: 96 GPUs at 100 Gb/s → 464 at 400           1.008    1.006"),
        ("hagemann_pipeline_excess", ["--fast"], "aa-llama-13b s2048 64 GPUs tp1 pp2 full eager: m8: +5.7"),
        ("setting_pairs", ["--fast"], "attention kernel slower          106       2     1.049    1.071        -0.9%"),
        # A lever tried on the published rows (docs/validation-log.md): half the A100's GEMM rate, every sixth row.
        ("what_if", ["--fast", "--change", "gemm_efficiency*0.5", "--chips", "a100-80gb"],
         "all 166 rows: mean |e| 5.6% -> 43.8%, bias -0.6% -> +41.9%"),
        # Every simulate flag flipped on nine layouts: none is accepted and changes nothing without saying so
        ("inert_flags", [], "0 flag(s) accepted that changed nothing, unsaid"),
        # A 2-process cp world: the measured ring share beside the simulator's.
        pytest.param(
            "cp_ring_share", ["--fast"], "ring share of F+B: measured", marks=[pytest.mark.distributed, needs_torch]
        ),
        # Tiny sizes: checks our executor and torch.distributed.pipelining both run every schedule.
        pytest.param(
            "bench_executor_vs_torch",
            ["--pp", "2", "--mb", "2", "--steps", "2", "--repeats", "1", "--layers", "2", "--hidden", "32"],
            "interleaved",
            marks=[pytest.mark.distributed, needs_torch],
        ),
    ],
)
def test_table_experiments_run(script, args, expect, tmp_path, run_here):
    result = run_here(script, *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert expect in result.stdout


SCRIPTS = sorted(p for p in (ROOT / "experiments").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_script_takes_the_shared_flags(script):
    """--help, --fast and --out come from one helper, so every script spells and means them alike."""
    source = script.read_text()
    assert "experiment_parser(" in source or "experiment_args(" in source, (
        f"{script.name}: parse its flags with pipesim.plots.figures.experiment_parser / experiment_args"
    )
    assert "argparse.ArgumentParser(" not in source, f"{script.name}: a parser of its own"


def test_shared_parser_flags(tmp_path):
    from pipesim.plots.figures import experiment_parser, parse_experiment_args

    tables = experiment_parser("x", figures=False)
    args = parse_experiment_args(tables, ["--fast", "--out", str(tmp_path / "o")])
    assert args.fast and args.out == tmp_path / "o" and args.out.is_dir()
    with pytest.raises(SystemExit):  # a table script has no docs copy to update
        parse_experiment_args(experiment_parser("x", figures=False), ["--update-docs"])
    assert "--update-docs" in experiment_parser("x").format_help()


def test_a_table_script_writes_its_table_into_out(tmp_path, run_here):
    result = run_here("grouped_step_time", "--fast", "--out", "tables", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "tables" / "grouped_step_time_comm0.md").read_text()
    assert "| interleaved | 4 | 8 | 28.5 | hangs | 28.5 | reordered |" in written
    assert written in result.stdout  # the file holds what was printed


def test_a_table_script_piped_into_a_reader_that_stops_early_still_writes_its_table(tmp_path):
    """``python experiments/SCRIPT.py | head``: the reader goes after a line; the script ends without a traceback,
    status 0, and its table file is whole. A real process: the broken pipe is the operating system's."""
    script = ROOT / "experiments" / "grouped_step_time.py"
    proc = subprocess.Popen([sys.executable, str(script), "--fast", "--out", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline()
    proc.stdout.close()  # the reader is gone
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    assert "| interleaved | 4 | 8 | 28.5 | hangs | 28.5 | reordered |" in (
        tmp_path / "grouped_step_time_comm0.md").read_text()


def test_the_inert_flag_audit_fails_on_a_silent_flag():
    """Its control: with no equivalence known, a flag that spells the base's own ZeRO-1 again is reported."""
    from experiments.inert_flags import BASES, silent_flags

    found = silent_flags({"dp8 zero1": BASES["dp8 zero1"]}, {})
    assert [(f.flag, f.equivalent) for f in found] == [("--distributed-optimizer", None)]
    assert found[0].moved == {"distributed_optimizer": (False, True)}
