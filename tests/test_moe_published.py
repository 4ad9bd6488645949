"""Published mixture-of-experts runs (pipesim/validation/sources: deepseek_v3_2024, megatron_moe2024), held
out of every fit. Each row is a test: within 15 % of the published step time, or a strict xfail that states
the measured error and why, so the day the model (or the overlapped F&B instruction) closes the gap the test
says so."""

import json
from dataclasses import replace

import pytest

from pipesim.analytic.layout import MoeDispatcher
from pipesim.cli.main import main
from pipesim.validation.runs import cli_args, predict
from pipesim.validation.sources import MOE_MODULES, MOE_RUNS, PUBLISHED_RUNS, SOURCE_MODULES, module_of

# Source module → why it misses the 15 % bar (a strict xfail). Megatron-Core's Mixtral 8x7B row went from -15 %
# (MFU 56 % predicted where 47 % was measured) to -5 % with Hopper's training GEMM ratio, held out of that fit too;
# DeepSeek-V3's from +17 % to +6 % with what its report states it trained with and pipesim had not modelled
# (node-limited routing, DeepEP's per-node dispatch, FP8 dispatch, the multi-token-prediction module, its
# recomputation), none of it fitted.
KNOWN_MISSES: dict[str, str] = {}
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


def test_deepseek_v3s_dispatch_and_dualpipes_pairs_take_its_all_to_all_down():
    """DeepSeek built DualPipe and DeepEP to hide and shrink the all-to-all. Sent a copy per node (4 of 8 nodes a
    token) and in FP8 one way, it takes under half of what NCCL's all-to-all of a copy per expert would; DualPipe's
    overlapped pairs hide about half of what is left on the ranks whose slices hold only MoE layers; and without
    the part still exposed, the step would be faster than published."""
    (run,) = [r for r in MOE_RUNS if module_of(r) == "deepseek_v3_2024"]
    c = _comparison(run)
    assert c.published_step_s == pytest.approx(15360 * 4096 / (2048 * 1e12 / (180_000 * 3600)))
    plain = predict(replace(run, moe_dispatcher=MoeDispatcher.ALLTOALL, moe_dispatch_fp8=False))
    middle, plain_middle = c.report.rank_times[1], plain.report.rank_times[1]
    assert middle.a2a + middle.a2a_hidden < 0.5 * (plain_middle.a2a + plain_middle.a2a_hidden)
    assert middle.a2a_hidden > 0.4 * (middle.a2a + middle.a2a_hidden)
    assert c.report.step_time < plain.report.step_time
    assert c.report.step_time - c.report.busiest.a2a < c.published_step_s


@pytest.mark.parametrize("run", MOE_RUNS, ids=lambda r: module_of(r))
def test_every_moe_row_is_expressible_on_the_command_line(run, capsys):
    assert main([*cli_args(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    expected = _comparison(run).report
    assert report["step_time_s"] == pytest.approx(expected.step_time, rel=1e-9)
    assert report["memory"]["peak_gib"] == pytest.approx(expected.memory.peak.total / 2**30, rel=1e-9)


@pytest.mark.parametrize("run", MOE_RUNS, ids=lambda r: module_of(r))
def test_the_docs_quote_what_pipesim_predicts(run):
    """README's and docs/moe.md's tables of these rows are written by hand from ``published_runs.py --moe``; a change
    that moves a prediction must move them too (a refit of the GPU spread once left both a point and a half stale)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    c = _comparison(run)
    predicted, error = f"{c.report.step_time:.3g}", c.step_error * 100
    model_rows = {"deepseek_v3_2024": ("DeepSeek-V3", "deepseek-v3"), "megatron_moe2024": ("Mixtral 8x7B", "mixtral")}
    readme_name, moe_name = model_rows[module_of(run)]
    readme = [line for line in (root / "README.md").read_text().splitlines() if line.startswith(f"| {readme_name},")]
    moe = [line for line in (root / "docs" / "moe.md").read_text().splitlines()
           if line.startswith("| ") and f"| {moe_name}" in line]
    assert len(readme) == 1 and len(moe) == 1
    assert f"| {predicted} | {error:+.1f} %".replace("-", "−") in readme[0]
    assert f"| {predicted} | {error:+.1f}%".replace("-", "−") in moe[0]
