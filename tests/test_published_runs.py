"""pipesim against published measured runs (experiments/published_runs.py): each row's signed error, and the
table's mean, for step time and for memory separately. Nothing is fitted per row. Rows known to miss the
15 % bar are strict xfails that name why, so the day they pass the test says so."""

import json

import pytest

from experiments.published_runs import PUBLISHED_RUNS, cli_args, predict
from pipesim.cli.main import main

KNOWN_STEP_MISSES = {
    # H100 rows without tensor parallelism are predicted too fast (FP8 rows of NeMo, and the Llama 3 405B run
    # on 8192 GPUs): the Hopper kernel constants (MAMF, FlashAttention-3) are short-run ceilings, not kernels
    # under a training run's power limit.
    ("llama2-7b", "NVIDIA", 8, 1): "H100 FP8 tp=1 predicted too fast",
    ("llama2-13b", "NVIDIA", 16, 1): "H100 FP8 tp=1 predicted too fast",
    ("llama3.1-8b", "NVIDIA", 8, 2): "H100 FP8 + context parallel predicted too fast",
    ("llama3.1-405b", "Llama", 8192, 1): "H100 BF16 405B on 8192 GPUs predicted too fast",
    ("llama3.1-405b", "Llama", 16384, 16): "H100 BF16 405B, 131k tokens with cp 16, predicted too fast",
    # Interleaved with one layer per chunk across two nodes: 48 P2P hops per microbatch; the profiled T_comm
    # (Qi et al. Table 9) is an average, and the cross-node hop costs more than the model gives it.
    ("zb-14.6b", "Qi", 16, 48): "interleaved 1F1B over 2 nodes, one layer per chunk: predicted too fast",
    ("zb-14.6b", "Qi", 16, 64): "interleaved 1F1B over 2 nodes, one layer per chunk: predicted too fast",
}


def _miss(run):
    key = (run.model, run.source.split(" ")[0], run.gpus)
    if run.schedule == "interleaved" and run.source.startswith("Qi"):
        return KNOWN_STEP_MISSES.get((*key, run.microbatches))
    return KNOWN_STEP_MISSES.get((*key, run.cp))


def _id(run):
    return f"{run.source.split(' ')[0]}-{run.label.replace(' ', '_')}-{run.schedule}-{run.recompute.value}"


@pytest.fixture(scope="module")
def comparisons():
    return {id(run): predict(run) for run in PUBLISHED_RUNS}


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=_miss(r)))
                                 if _miss(r) else r for r in PUBLISHED_RUNS], ids=_id)
def test_step_time_within_15_percent(run, comparisons):
    error = comparisons[id(run)].step_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


@pytest.mark.parametrize("run", [r for r in PUBLISHED_RUNS if r.memory_gib is not None], ids=_id)
def test_memory_within_15_percent(run, comparisons):
    error = comparisons[id(run)].memory_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


def test_table_size_and_mean_errors(comparisons):
    steps = [abs(c.step_error) for c in comparisons.values()]
    memory = [abs(c.memory_error) for c in comparisons.values() if c.memory_error is not None]
    assert len(steps) >= 20 and len(memory) >= 20
    assert sum(steps) / len(steps) <= 0.08
    assert sum(memory) / len(memory) <= 0.08


@pytest.mark.parametrize("run", PUBLISHED_RUNS[::10], ids=_id)
def test_every_configuration_is_expressible_on_the_command_line(run, comparisons, capsys):
    assert main([*cli_args(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    expected = comparisons[id(run)].report
    assert report["step_time_s"] == pytest.approx(expected.step_time, rel=1e-9)
    assert report["memory"]["peak_gib"] == pytest.approx(expected.memory.peak.total / 2**30, rel=1e-9)
