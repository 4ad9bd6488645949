"""pipesim against published measured runs (experiments/published_runs.py): each row's signed error, and the
table's mean. Nothing is fitted per row. Rows known to miss the 15 % bar are strict xfails that name why, so
the day they pass the test says so."""

import pytest

from experiments.published_runs import PUBLISHED_RUNS, predict

KNOWN_MISSES = {
    # Small GPT models at tp ≤ 4 on A100 with 2021 unfused attention: predicted too slow. The per-chip GEMM
    # efficiency (0.80) is assumed for Ampere, not measured, and the unfused softmax bytes weigh most here.
    ("gpt-1.7b", 1): "A100 small-model unfused attention too slow",
    ("gpt-3.6b", 2): "A100 small-model unfused attention too slow",
    ("gpt-7.5b", 4): "A100 small-model unfused attention too slow",
    ("llama3.1-8b", 1): "FP8 + context parallel on one node predicted too fast",
}


def _id(run):
    return f"{run.source.split(' ')[0]}-{run.label.replace(' ', '_')}-{run.recompute.value}"


@pytest.mark.parametrize("run", [
    pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[(r.model, r.tp)]))
    if (r.model, r.tp) in KNOWN_MISSES else r for r in PUBLISHED_RUNS], ids=_id)
def test_step_time_within_15_percent(run):
    comparison = predict(run)
    assert abs(comparison.step_error) <= 0.15, f"{run.label}: {comparison.step_error:+.1%}"


def test_table_has_twenty_rows_and_mean_error_below_ten_percent():
    errors = [abs(predict(run).step_error) for run in PUBLISHED_RUNS]
    assert len(errors) >= 20
    assert sum(errors) / len(errors) <= 0.10
