"""Hybrid ZeRO-1 (--optimizer-shard-group N): the optimizer state divided over groups of N data-parallel ranks, the
gradients all-reduced over all of them and each group's updated weights gathered within it (InternEvo's zero1=N)."""

import json

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import collective_time, dp_grad_sync, optimizer_step_time
from pipesim.analytic.layout import Layout, ZeroStage
from pipesim.analytic.measured import CollectiveOp
from pipesim.analytic.memory_gib import static_bytes
from pipesim.cli.main import main
from pipesim.errors import PipesimError

A100 = CHIP_PRESETS["a100-80gb"].with_overrides(inter_node_gbps=50)
PARAMS = 7e9


def _layouts(group: int | None) -> Layout:
    return Layout(dp=128, zero=ZeroStage.OPTIMIZER, optimizer_shard_group=group)


def test_the_state_is_divided_over_the_group_and_replicated_across_groups():
    plain, hybrid = _layouts(None), _layouts(8)
    assert plain.shards == 128 and hybrid.shards == 8
    weights, grads, optimizer = static_bytes(PARAMS, hybrid)
    assert optimizer == pytest.approx(PARAMS * hybrid.param_bytes.optimizer / 8)
    assert (weights, grads) == static_bytes(PARAMS, plain)[:2]  # ZeRO-1: weights and gradients whole either way
    # the update runs over the rank's eighth: 16 times the dp-wide shard's
    assert optimizer_step_time(PARAMS, hybrid, A100) == pytest.approx(16 * optimizer_step_time(PARAMS, plain, A100))


def test_the_gradients_all_reduce_over_every_rank_and_the_weights_gather_within_the_group():
    hybrid = _layouts(8)
    sync = dp_grad_sync(PARAMS, hybrid, A100)
    grads, weights = PARAMS * hybrid.param_bytes.grads, PARAMS * hybrid.gathered_weight_bytes
    assert sync.reduce == collective_time(CollectiveOp.ALL_REDUCE, grads, 128, A100, 128)
    assert sync.gather == collective_time(CollectiveOp.ALL_GATHER, weights, 8, A100, 8)  # one node: NVLink
    plain = dp_grad_sync(PARAMS, _layouts(None), A100)
    assert plain.reduce == collective_time(CollectiveOp.REDUCE_SCATTER, grads, 128, A100, 128)
    assert sync.gather < plain.gather / 4  # in the node, not through four 100 Gb/s NICs


def test_a_group_that_does_not_fit_the_layout_is_refused():
    with pytest.raises(PipesimError, match="must divide dp·cp = 128"):
        _layouts(12)
    with pytest.raises(PipesimError, match="needs --distributed-optimizer or --zero 1"):
        Layout(dp=128, optimizer_shard_group=8)
    with pytest.raises(PipesimError, match="needs --distributed-optimizer or --zero 1"):
        Layout(dp=128, zero=ZeroStage.PARAMETERS, optimizer_shard_group=8)


def test_simulate_takes_the_flag_and_reports_it(capsys):
    argv = ["simulate", "--model", "llama3.1-8b", "--hardware", "a100-80gb", "--dp", "32", "--pp", "1", "--mb", "2",
            "--distributed-optimizer", "--json"]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)["model_report"]
    assert main([*argv, "--optimizer-shard-group", "8"]) == 0
    hybrid = json.loads(capsys.readouterr().out)["model_report"]
    assert hybrid["layout"]["optimizer_shard_group"] == 8 and plain["layout"]["optimizer_shard_group"] is None
    assert hybrid["memory"]["peak_gib"] > plain["memory"]["peak_gib"]  # the state over 8 ranks, not 32
    assert main([*argv, "--optimizer-shard-group", "3"]) == 2
    assert "--optimizer-shard-group 3 must divide dp·cp = 32" in capsys.readouterr().err


def test_plan_gives_the_group_to_its_zero1_candidates_over_more_ranks():
    from dataclasses import replace

    from pipesim.api.planning import plan_request
    from pipesim.plan.launch import megatron_gap
    from pipesim.plan.space import enumerate_candidates

    request = plan_request("llama3.1-8b", 64, 256, hardware="a100-80gb", zero=(0, 1), optimizer_shard_group=8,
                           schedules=("1f1b",), precision=("bf16",))
    candidates = list(enumerate_candidates(request))
    zero1 = next(c for c in candidates if c.zero is ZeroStage.OPTIMIZER and c.dp * c.cp > 8)
    assert request.layout_of(zero1).optimizer_shard_group == 8 and request.layout_of(zero1).shards == 8
    plain = next(c for c in candidates if c.zero is ZeroStage.NONE)
    assert request.layout_of(plain).optimizer_shard_group is None
    small = replace(zero1, dp=8 // zero1.cp)  # cp is a power of two up to 8: a group as large as dp·cp
    assert small.dp * small.cp == 8 and request.layout_of(small).optimizer_shard_group is None
    # Megatron-LM's instances reduce-scatter within themselves: no launch line claims to be this
    assert "--num-distributed-optimizer-instances" in megatron_gap(zero1, optimizer_shard_group=8)
