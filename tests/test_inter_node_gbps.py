"""--inter-node-gbps: a cluster's network in place of the chip preset's, for simulate, plan and published rows."""

import json

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import collective_time
from pipesim.analytic.measured import CollectiveOp
from pipesim.cli.main import main

# 8B on four nodes of eight A100, plain data parallelism: the gradient all-reduce crosses the NICs
ARGV = ["simulate", "--model", "llama3.1-8b", "--hardware", "a100-80gb", "--dp", "32", "--pp", "1", "--mb", "2",
        "--param-bytes", "16", "--json"]


def test_the_override_is_each_gpus_share_of_the_network_in_gbps():
    a100 = CHIP_PRESETS["a100-80gb"]
    assert a100.with_overrides(inter_node_gbps=50).inter_node_bandwidth == 50e9 / 8
    assert a100.with_overrides().inter_node_bandwidth == a100.inter_node_bandwidth
    # four 100 Gb/s NICs for eight GPUs: a ring over four nodes moves its bytes at a quarter of DGX A100's rate
    slow = a100.with_overrides(inter_node_gbps=50)
    nbytes = 16e9
    fast_s = collective_time(CollectiveOp.ALL_REDUCE, nbytes, 32, a100, 32)
    slow_s = collective_time(CollectiveOp.ALL_REDUCE, nbytes, 32, slow, 32)
    assert slow_s == pytest.approx(4 * fast_s, rel=0.01)


def test_simulate_and_plan_take_the_flag(capsys):
    from pipesim.api.planning import plan_request

    assert main(ARGV) == 0
    preset = json.loads(capsys.readouterr().out)["model_report"]
    assert main([*ARGV, "--inter-node-gbps", "50"]) == 0
    slow = json.loads(capsys.readouterr().out)["model_report"]
    assert slow["chip"]["inter_node_bandwidth"] == 50e9 / 8
    assert slow["step_time_s"] > preset["step_time_s"]  # the all-reduce after the step, four times longer
    assert main([*ARGV, "--inter-node-gbps", "0"]) == 2
    assert "--inter-node-gbps: 0 must be a finite number > 0" in capsys.readouterr().err
    assert plan_request("llama3.1-8b", 16, 64, inter_node_gbps=50).chip.inter_node_bandwidth == 50e9 / 8


def test_a_published_row_states_its_network_and_its_command_line_carries_it():
    from dataclasses import replace

    from pipesim.validation.runs import PublishedRun, cli_args, predict

    row = PublishedRun("test", "llama3.1-8b", "a100-80gb", 32, 64, micro_batch=1, seq_len=8192, step_s=1.0,
                       fp16_grads=True)
    slow = replace(row, inter_node_gbps=50)
    assert "--inter-node-gbps" not in cli_args(row) and cli_args(slow)[-2:] == ["--inter-node-gbps", "50"]
    assert predict(slow).report.chip.inter_node_bandwidth == 50e9 / 8
    assert predict(slow).report.step_time > predict(row).report.step_time
