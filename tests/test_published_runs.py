"""pipesim against published measured runs (experiments/published_runs.py): each row's signed error, and the
table's mean, for step time and for memory separately. Nothing is fitted per row. Rows known to miss the
15 % bar are strict xfails that name why, so the day they pass the test says so."""

import json

import pytest

from experiments.p2p_sync_overhead import derived_overhead, sync_gaps
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.cli.main import main
from pipesim.validation.runs import cli_args, predict
from pipesim.validation.sources import PUBLISHED_RUNS

# (model, source, GPUs, microbatches for Qi's interleaved rows else cp): why the row misses the 15 % bar. Empty
# since the P2P synchronisation overhead (chip field p2p_sync_overhead) took Qi et al.'s 14.6B interleaved rows
# from -16 % to -6 %; a row that misses again is listed here with its reason, as a strict xfail.
KNOWN_STEP_MISSES: dict[tuple, str] = {}


def _miss(run):
    key = (run.model, run.source.split(" ")[0], run.gpus)
    if run.schedule == "interleaved" and run.source.startswith("Qi"):
        return KNOWN_STEP_MISSES.get((*key, run.microbatches))
    return KNOWN_STEP_MISSES.get((*key, run.cp))


def _id(run):
    return f"{run.source.split(' ')[0]}-{run.label.replace(' ', '_')}-{run.schedule}-{run.recompute.value}"


_COMPARISONS: dict[int, object] = {}


def _comparison(run):
    """Each row predicted once per process, on first use: a worker predicts only the rows it tests (the ZB-2p
    rows synthesise zb-auto for their costs, the slow part), the table test all of them."""
    if id(run) not in _COMPARISONS:
        _COMPARISONS[id(run)] = predict(run)
    return _COMPARISONS[id(run)]


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=_miss(r)))
                                 if _miss(r) else r for r in PUBLISHED_RUNS], ids=_id)
def test_step_time_within_15_percent(run):
    error = _comparison(run).step_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


@pytest.mark.parametrize("run", [r for r in PUBLISHED_RUNS if r.memory_gib is not None], ids=_id)
def test_memory_within_15_percent(run):
    error = _comparison(run).memory_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


def test_the_p2p_sync_overhead_is_the_one_qi_et_al_measure():
    """The chips' constant is the median gap per synchronising call between Qi et al.'s Table 4 and Table 9."""
    assert derived_overhead() == pytest.approx(CHIP_PRESETS["a100-80gb"].p2p_sync_overhead, abs=0.05e-3)
    assert all(0 < gap.per_call_ms < 3 for gap in sync_gaps())  # present in every cell, and of one size


def test_table_size_and_mean_errors():
    comparisons = [_comparison(run) for run in PUBLISHED_RUNS]
    steps = [abs(c.step_error) for c in comparisons]
    memory = [abs(c.memory_error) for c in comparisons if c.memory_error is not None]
    assert len(steps) >= 20 and len(memory) >= 20
    assert sum(steps) / len(steps) <= 0.08
    assert sum(memory) / len(memory) <= 0.08


@pytest.mark.parametrize("run", PUBLISHED_RUNS[::10], ids=_id)
def test_every_configuration_is_expressible_on_the_command_line(run, capsys):
    assert main([*cli_args(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    expected = _comparison(run).report
    assert report["step_time_s"] == pytest.approx(expected.step_time, rel=1e-9)
    assert report["memory"]["peak_gib"] == pytest.approx(expected.memory.peak.total / 2**30, rel=1e-9)
