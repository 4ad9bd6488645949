"""Published mixture-of-experts runs (pipesim/validation/sources: deepseek_v3_2024, megatron_moe2024), held
out of every fit. Each row is a test: within 15 % of the published step time, or a strict xfail that states
the measured error and why, so the day the model (or the overlapped F&B instruction) closes the gap the test
says so."""

import json

import pytest

from pipesim.cli.main import main
from pipesim.validation.runs import cli_args, predict
from pipesim.validation.sources import MOE_MODULES, MOE_RUNS, PUBLISHED_RUNS, SOURCE_MODULES, module_of

# Source module → why it misses the 15 % bar (a strict xfail). Megatron-Core's Mixtral 8x7B row went from -15 %
# (MFU 56 % predicted where 47 % was measured) to -5 % with Hopper's training GEMM ratio, held out of that fit too.
KNOWN_MISSES: dict[str, str] = {
    "deepseek_v3_2024": ("+17%, pipesim too slow: +16% at the GPU spread's earlier 0.02, +15% before the "
                         "slowest-GPU factor, +13% before "
                         "FlashAttention-2's H100 rates at 4k tokens (5-8% below the 16k rate the attention "
                         "efficiencies stand for) slowed its attention; DeepSeek's own kernels for MLA (query-key "
                         "heads of 192) are not published, so that table is a guess for them, and the overlapped "
                         "pairs' exposed all-to-all is a third of the step"),
}
_CACHE: dict[int, object] = {}


def _comparison(run):
    if id(run) not in _CACHE:
        _CACHE[id(run)] = predict(run)
    return _CACHE[id(run)]


def _param(run):
    reason = KNOWN_MISSES.get(module_of(run))
    return pytest.param(run, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else run


@pytest.mark.parametrize("run", [_param(r) for r in MOE_RUNS], ids=lambda r: module_of(r))
def test_step_time_within_15_percent(run):
    error = _comparison(run).step_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


def test_the_moe_rows_are_held_out_of_the_fitted_table():
    assert not set(MOE_MODULES) & set(SOURCE_MODULES)
    assert not any(run in PUBLISHED_RUNS for run in MOE_RUNS)


def test_deepseek_v3_dualpipe_pairs_hide_half_of_its_large_all_to_all():
    """The all-to-all is a large part of the step (DeepSeek built DualPipe to hide it). DualPipe's overlapped
    pairs hide about half of it; without the part still exposed, the step would be faster than published."""
    (run,) = [r for r in MOE_RUNS if module_of(r) == "deepseek_v3_2024"]
    c = _comparison(run)
    assert c.published_step_s == pytest.approx(15360 * 4096 / (2048 * 1e12 / (180_000 * 3600)))
    busiest = c.report.busiest
    assert (busiest.a2a + busiest.a2a_hidden) / c.report.step_time > 0.3
    assert busiest.a2a_hidden > 0.4 * (busiest.a2a + busiest.a2a_hidden)
    assert c.report.step_time - busiest.a2a < c.published_step_s


@pytest.mark.parametrize("run", MOE_RUNS, ids=lambda r: module_of(r))
def test_every_moe_row_is_expressible_on_the_command_line(run, capsys):
    assert main([*cli_args(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    expected = _comparison(run).report
    assert report["step_time_s"] == pytest.approx(expected.step_time, rel=1e-9)
    assert report["memory"]["peak_gib"] == pytest.approx(expected.memory.peak.total / 2**30, rel=1e-9)
