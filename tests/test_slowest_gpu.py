"""A synchronous step waits for its slowest GPU: the expected maximum by its closed forms, and the cost model's
compute slowed by exactly that factor (pipesim.analytic.slowest_gpu)."""

import math
from dataclasses import replace

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.layout import Layout
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.slowest_gpu import expected_max_standard_normal, slowest_gpu_factor
from pipesim.analytic.to_costs import build_cost_model, compute_pace, stage_time_parts

H100 = CHIP_PRESETS["h100-sxm"]
MODEL = MODEL_PRESETS["llama3.1-70b"]


def test_expected_maximum_matches_the_closed_forms():
    # E[max] of 2 and 3 standard normals are 1/√π and 3/(2√π); 5 and 10 are tabulated (Harter 1961)
    assert expected_max_standard_normal(1) == pytest.approx(0.0, abs=1e-9)
    assert expected_max_standard_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-6)
    assert expected_max_standard_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), abs=1e-6)
    assert expected_max_standard_normal(5) == pytest.approx(1.16296, abs=1e-5)
    assert expected_max_standard_normal(10) == pytest.approx(1.53875, abs=1e-5)
    values = [expected_max_standard_normal(n) for n in (1, 8, 64, 512, 8192, 65536)]
    assert values == sorted(values) and values[-1] < 4.5  # grows like √(2 ln n): slowly


def test_factor_by_hand():
    assert slowest_gpu_factor(1, 0.02) == 1.0  # one GPU is the typical GPU the rates describe
    assert slowest_gpu_factor(8, 0.0) == 1.0
    assert slowest_gpu_factor(8, 0.02) == pytest.approx(1 + 0.02 * expected_max_standard_normal(8))
    with pytest.raises(ValueError):
        expected_max_standard_normal(0)


def test_compute_slows_by_the_factor_of_the_whole_step():
    # tp 1, no sharding, overlapped sends: a stage's forward is its compute alone, so it grows by the factor
    layout = Layout(pp=8, dp=64, microbatches=8, overlap_p2p=True)  # 512 GPUs; no blocking sends in the passes
    spread = replace(H100, gpu_speed_spread=0.02)
    factor = 1 + 0.02 * expected_max_standard_normal(512)
    assert compute_pace(spread, layout) == pytest.approx(factor)
    alike_costs = build_cost_model(MODEL, replace(H100, gpu_speed_spread=0.0), layout)
    spread_costs = build_cost_model(MODEL, spread, layout)
    for stage in (0, 3, 7):
        assert spread_costs.stage(stage).forward == pytest.approx(alike_costs.stage(stage).forward * factor,
                                                                   rel=1e-12)
    # the time breakdown reads the same passes: its compute grows by the factor, its communication does not
    wide = Layout(tp=8, pp=4, dp=16, microbatches=8)
    alike_parts = stage_time_parts(MODEL, replace(H100, gpu_speed_spread=0.0), wide)
    spread_parts = stage_time_parts(MODEL, spread, wide)
    for a, b in zip(alike_parts, spread_parts, strict=True):  # (Megatron's fused accumulation: no pass of its own)
        assert b.compute == pytest.approx(a.compute * factor, rel=1e-12)
        assert b.exposed_comm == a.exposed_comm
    # one GPU is the typical GPU the kernel rates describe
    single = Layout(microbatches=1)
    assert (build_cost_model(MODEL, spread, single).stage(0).forward
            == build_cost_model(MODEL, replace(H100, gpu_speed_spread=0.0), single).stage(0).forward)


def test_an_achievable_fraction_is_the_run_as_a_whole():
    chip = replace(H100, achievable_fraction=0.4)
    layout = Layout(tp=8, pp=4, dp=16, microbatches=8)
    assert compute_pace(chip, layout) == 1.0
    assert (build_cost_model(MODEL, chip, layout).stage(1).forward
            == build_cost_model(MODEL, replace(chip, gpu_speed_spread=0.0), layout).stage(1).forward)


def test_the_flag_sets_the_spread_for_simulate_and_plan(capsys):
    import json

    from pipesim.api.planning import plan_request
    from pipesim.cli.main import main

    argv = ["simulate", "--model", "llama3.1-8b", "--tp", "2", "--pp", "2", "--dp", "2", "--mb", "4", "--json"]
    assert main(argv) == 0
    preset = json.loads(capsys.readouterr().out)["model_report"]
    assert preset["slowest_gpu_factor"] == pytest.approx(1 + 0.03 * expected_max_standard_normal(8))
    assert main([*argv, "--gpu-speed-spread", "0"]) == 0
    alike = json.loads(capsys.readouterr().out)["model_report"]
    assert alike["slowest_gpu_factor"] == 1.0 and alike["step_time_s"] < preset["step_time_s"]
    assert main([*argv, "--gpu-speed-spread", "0.5"]) == 2
    assert "--gpu-speed-spread: 0.5 must be in [0, 0.2]" in capsys.readouterr().err
    assert plan_request("llama3.1-8b", 8, 16, gpu_speed_spread=0.0).chip.gpu_speed_spread == 0.0
