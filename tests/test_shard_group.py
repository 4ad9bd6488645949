"""Hybrid sharding (--shard-group N). ZeRO-1: the optimizer state divided over groups of N data-parallel ranks, the
gradients all-reduced over all of them and each group's updated weights gathered within it (InternEvo's zero1=N).
ZeRO-2/3: PyTorch FSDP's HYBRID_SHARD: gathers and reduce-scatters within the group, each reduced shard all-reduced
across the replicas."""

import json

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import (
    collective_time,
    dp_grad_sync,
    fsdp_layer_comm,
    optimizer_step_time,
    replica_weight_gather,
)
from pipesim.analytic.layout import Layout, ZeroCollectives, ZeroStage
from pipesim.analytic.measured import CollectiveOp
from pipesim.analytic.memory_gib import static_bytes
from pipesim.cli.main import main
from pipesim.errors import PipesimError

A100 = CHIP_PRESETS["a100-80gb"].with_overrides(inter_node_gbps=50)
PARAMS = 7e9


def _layouts(group: int | None) -> Layout:
    return Layout(dp=128, zero=ZeroStage.OPTIMIZER, shard_group=group)


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


def test_megatrons_instances_reduce_scatter_within_the_group_and_all_reduce_the_shard_across():
    # 128 ranks in 4 instances of 32 (16 nodes of 8): each bucket reduce-scattered over the instance's 32 ranks,
    # the reduced 1/32 all-reduced over the 4 instances (32 ranks apart), the weights gathered within the 32
    layout = Layout(dp=128, zero=ZeroStage.OPTIMIZER, shard_group=32, zero_collectives=ZeroCollectives.HIERARCHICAL)
    sync = dp_grad_sync(PARAMS, layout, A100)
    grads, weights = PARAMS * layout.param_bytes.grads, PARAMS * layout.gathered_weight_bytes
    across = collective_time(CollectiveOp.ALL_REDUCE, grads / 32, 4, A100, 128, stride=32)
    assert sync.reduce == pytest.approx(collective_time(CollectiveOp.REDUCE_SCATTER, grads, 32, A100, 32) + across)
    assert sync.gather == collective_time(CollectiveOp.ALL_GATHER, weights, 32, A100, 32)
    # what crosses the instances is a 32nd of InternEvo's whole-gradient all-reduce over every rank
    internevo = dp_grad_sync(PARAMS, _layouts(32), A100)
    assert sync.reduce < internevo.reduce
    # the memory is hybrid ZeRO-1's either way: the optimizer state over the instance's ranks
    assert static_bytes(PARAMS, layout) == static_bytes(PARAMS, _layouts(32))


def test_the_hierarchical_reduce_needs_zero1_and_a_group():
    with pytest.raises(PipesimError, match="needs --zero 1 or --distributed-optimizer"):
        Layout(dp=128, zero=ZeroStage.GRADIENTS, shard_group=8, zero_collectives=ZeroCollectives.HIERARCHICAL)
    with pytest.raises(PipesimError, match="give the group with --shard-group"):
        Layout(dp=128, zero=ZeroStage.OPTIMIZER, zero_collectives=ZeroCollectives.HIERARCHICAL)


@pytest.mark.parametrize("instances", [1, 4])
def test_megatrons_flag_is_the_group_and_the_hierarchical_reduce(capsys, instances):
    common = ["simulate", "--model", "llama3.2-1b", "--hardware", "a100-80gb", "--dp", "32", "--pp", "1", "--mb",
              "2", "--distributed-optimizer", "--json"]
    assert main([*common, "--num-distributed-optimizer-instances", str(instances)]) == 0
    megatron = json.loads(capsys.readouterr().out)["model_report"]
    ours = ["--shard-group", str(32 // instances), "--zero-collectives", "hierarchical"] if instances > 1 else []
    assert main([*common, *ours]) == 0
    assert json.loads(capsys.readouterr().out)["model_report"] == megatron
    assert megatron["layout"]["shard_group"] == (8 if instances == 4 else None)


def test_instances_of_one_rank_each_shard_nothing_and_say_so(capsys):
    argv = ["simulate", "--model", "llama3.2-1b", "--hardware", "a100-80gb", "--dp", "32", "--pp", "1", "--mb", "2",
            "--distributed-optimizer", "--num-distributed-optimizer-instances", "32"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ZeRO 0," in out and "within groups" not in out
    assert "nothing to shard (shard groups of one rank of dp·cp = 32)" in out


def test_a_group_that_does_not_fit_the_layout_is_refused():
    with pytest.raises(PipesimError, match="--shard-group 12 must divide dp·cp = 128"):
        _layouts(12)
    with pytest.raises(PipesimError, match=r"--shard-group 8 .* needs --zero 1, 2 or 3"):
        Layout(dp=128, shard_group=8)


def test_simulate_takes_the_flag_and_reports_it(capsys):
    argv = ["simulate", "--model", "llama3.1-8b", "--hardware", "a100-80gb", "--dp", "32", "--pp", "1", "--mb", "2",
            "--distributed-optimizer", "--json"]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)["model_report"]
    assert main([*argv, "--optimizer-shard-group", "8"]) == 0  # the flag's first name, still taken
    hybrid = json.loads(capsys.readouterr().out)["model_report"]
    assert hybrid["layout"]["shard_group"] == 8 and plain["layout"]["shard_group"] is None
    assert hybrid["memory"]["peak_gib"] > plain["memory"]["peak_gib"]  # the state over 8 ranks, not 32
    assert main([*argv, "--shard-group", "3"]) == 2
    assert "--shard-group 3 must divide dp·cp = 32" in capsys.readouterr().err


def test_plan_gives_the_group_to_its_zero1_candidates_over_more_ranks():
    from dataclasses import replace

    from pipesim.api.planning import plan_request
    from pipesim.plan.launch import megatron_gap
    from pipesim.plan.space import enumerate_candidates

    request = plan_request("llama3.1-8b", 64, 256, hardware="a100-80gb", zero=(0, 1), shard_group=8,
                           schedules=("1f1b",), precision=("bf16",))
    candidates = list(enumerate_candidates(request))
    zero1 = next(c for c in candidates if c.zero is ZeroStage.OPTIMIZER and c.dp * c.cp > 8)
    assert request.layout_of(zero1).shard_group == 8 and request.layout_of(zero1).shards == 8
    plain = next(c for c in candidates if c.zero is ZeroStage.NONE)
    assert request.layout_of(plain).shard_group is None
    small = replace(zero1, dp=8 // zero1.cp)  # cp is a power of two up to 8: a group as large as dp·cp
    assert small.dp * small.cp == 8 and request.layout_of(small).shard_group is None
    # Megatron-LM's instances reduce-scatter within themselves: no launch line claims to be this
    assert "--num-distributed-optimizer-instances" in megatron_gap(zero1, shard_group=8)


# Hybrid ZeRO-3 (FSDP's HYBRID_SHARD) over 128 A100s of four 100 Gb/s NICs a node: shards within the node


def _fsdp(group: int | None, pp: int = 1) -> Layout:
    return Layout(dp=128, pp=pp, zero=ZeroStage.PARAMETERS, shard_group=group)


def test_hybrid_zero3_holds_the_state_once_per_group():
    hybrid, full = _fsdp(8), _fsdp(None)
    assert hybrid.shards == 8 and hybrid.shard_replicas == 16 and full.shard_replicas == 1
    weights, grads, optimizer = static_bytes(PARAMS, hybrid)
    assert weights == pytest.approx(PARAMS * hybrid.param_bytes.weights / 8)
    assert grads == pytest.approx(PARAMS * hybrid.param_bytes.grads / 8)
    assert optimizer == pytest.approx(16 * static_bytes(PARAMS, full)[2])


def test_hybrid_zero3_gathers_in_the_group_and_all_reduces_each_shard_across_the_replicas():
    layer = 2e8
    hybrid = fsdp_layer_comm(layer, _fsdp(8), A100)
    lay = _fsdp(8)
    gather = collective_time(CollectiveOp.ALL_GATHER, layer * lay.gathered_weight_bytes, 8, A100, 8)
    grads = layer * lay.param_bytes.grads
    scatter = collective_time(CollectiveOp.REDUCE_SCATTER, grads, 8, A100, 8)
    # each rank's eighth all-reduced with the same eighth of the 15 other nodes: ranks 8 apart, across all 128
    across = collective_time(CollectiveOp.ALL_REDUCE, grads / 8, 16, A100, 128, stride=8)
    assert hybrid.forward == pytest.approx(gather)
    assert hybrid.backward == pytest.approx(gather + scatter + across)  # gathered again for the backward
    full = fsdp_layer_comm(layer, _fsdp(None), A100)
    # ZeRO-3 over all 128 sends every gather through the NICs, the hybrid none: its forward waits on NVLink alone
    assert hybrid.forward < full.forward / 4
    # ... but its reduced shards cross the NICs twice (an all-reduce), the flat reduce-scatter's bytes once
    assert across > collective_time(CollectiveOp.REDUCE_SCATTER, grads, 128, A100, 128)


def test_hybrid_zero3_under_pipelining_syncs_once_a_step_the_same_way():
    lay = _fsdp(8, pp=2)
    sync = dp_grad_sync(PARAMS, lay, A100)
    grads = PARAMS * lay.param_bytes.grads
    assert sync.reduce == pytest.approx(collective_time(CollectiveOp.REDUCE_SCATTER, grads, 8, A100, 8)
                                        + collective_time(CollectiveOp.ALL_REDUCE, grads / 8, 16, A100, 128, 8))
    assert sync.gather == pytest.approx(
        collective_time(CollectiveOp.ALL_GATHER, PARAMS * lay.gathered_weight_bytes, 8, A100, 8))


def test_simulate_runs_hsdp_faster_than_full_sharding_on_a_thin_network_when_gradients_reduce_in_bf16(capsys):
    argv = ["simulate", "--model", "llama2-7b", "--hardware", "a100-80gb", "--dp", "128", "--pp", "1", "--mb", "1",
            "--micro-batch-size", "2", "--seq-len", "4096", "--zero", "3", "--inter-node-gbps", "50", "--json"]

    def report(*extra: str) -> dict:
        assert main([*argv, *extra]) == 0
        return json.loads(capsys.readouterr().out)["model_report"]

    full, hybrid = report("--param-bytes", "16"), report("--param-bytes", "16", "--shard-group", "8")
    assert hybrid["layout"]["shard_group"] == 8
    assert main([*argv[:-1], "--shard-group", "8"]) == 0  # the text report names the groups
    assert "ZeRO 3 within groups of 8 (16 replicas)" in capsys.readouterr().out
    # BF16 gradients: the all-reduced shards cross the NICs in fewer bytes than the flat gathers and reduce-scatter
    assert hybrid["step_time_s"] < full["step_time_s"]
    assert hybrid["memory"]["peak_gib"] > full["memory"]["peak_gib"]  # the state over 8 ranks, not 128
    # FP32 gradients all-reduced twice across the NICs outweigh the two BF16 gathers a flat ZeRO-3 sends there
    assert report("--shard-group", "8")["step_time_s"] > report()["step_time_s"]


def test_the_library_names_the_old_keyword_under_its_new_name():
    import pipesim

    with pytest.raises(PipesimError, match="optimizer_shard_group is now shard_group"):
        pipesim.simulate("1f1b", 1, 2, model="llama3.1-8b", dp=16, distributed_optimizer=True,
                         optimizer_shard_group=8)
    report = pipesim.simulate("1f1b", 1, 2, model="llama3.1-8b", dp=16, distributed_optimizer=True, shard_group=8)
    assert report.model_report.layout.shard_group == 8


def _hfsdp(group: int | None = 8, pp: int = 1, zero: ZeroStage = ZeroStage.PARAMETERS) -> Layout:
    return Layout(dp=128, pp=pp, zero=zero, shard_group=group, outer_optimizer_sharding=True)


def test_hybrid_fsdp_shards_the_optimizer_state_over_every_rank_and_the_rest_within_the_group():
    """Megatron-FSDP's HFSDP (--outer-dp-sharding-strategy optim): the weights and gradients as HSDP's, 1/8; the
    optimizer state (FP32 main weights and Adam's moments) over all 128, as full sharding's."""
    hfsdp, hsdp, full = _hfsdp(), _fsdp(8), _fsdp(None)
    assert hfsdp.optimizer_shards == 128 and hsdp.optimizer_shards == 8
    weights, grads, optimizer = static_bytes(PARAMS, hfsdp)
    assert (weights, grads) == static_bytes(PARAMS, hsdp)[:2]
    assert optimizer == pytest.approx(PARAMS * hfsdp.param_bytes.optimizer / 128) == static_bytes(PARAMS, full)[2]
    # Adam updates a 128th of the weights, not an eighth
    assert optimizer_step_time(PARAMS, hfsdp, A100) == pytest.approx(optimizer_step_time(PARAMS, full, A100))
    assert optimizer_step_time(PARAMS, hsdp, A100) == pytest.approx(16 * optimizer_step_time(PARAMS, hfsdp, A100))


def test_hybrid_fsdp_reduce_scatters_each_shard_across_the_replicas_and_gathers_the_update_after_the_step():
    layer = 2e8
    lay = _hfsdp()
    grads = layer * lay.param_bytes.grads
    scatter = collective_time(CollectiveOp.REDUCE_SCATTER, grads, 8, A100, 8)
    # each rank's eighth reduce-scattered over the 16 replicas (ranks 8 apart), where HSDP all-reduces it
    across = collective_time(CollectiveOp.REDUCE_SCATTER, grads / 8, 16, A100, 128, stride=8)
    gather = collective_time(CollectiveOp.ALL_GATHER, layer * lay.gathered_weight_bytes, 8, A100, 8)
    assert fsdp_layer_comm(layer, lay, A100).backward == pytest.approx(gather + scatter + across)
    assert across < collective_time(CollectiveOp.ALL_REDUCE, grads / 8, 16, A100, 128, stride=8)
    # after the step each rank's updated 128th gathered over the replicas into its group's eighth, in BF16
    shard = PARAMS / 8 * lay.param_bytes.weights
    assert replica_weight_gather(PARAMS, lay, A100) == pytest.approx(
        collective_time(CollectiveOp.ALL_GATHER, shard, 16, A100, 128, stride=8))
    assert replica_weight_gather(PARAMS, _fsdp(8), A100) == 0.0  # HSDP's optimizer is replicated: nothing to gather


@pytest.mark.parametrize(("layout", "fragment"), [
    (dict(group=None), "but there are none"),
    (dict(group=128), "but there are none"),  # one group over every rank: no replicas
    (dict(zero=ZeroStage.GRADIENTS), "needs ZeRO-3 within the groups without pipelining"),
    (dict(pp=2), "got --zero 3, --pp 2"),
])
def test_hybrid_fsdp_needs_replicas_and_zero3_without_a_pipeline(layout, fragment):
    with pytest.raises(PipesimError, match=fragment):
        _hfsdp(**layout)


def test_simulate_takes_hybrid_fsdp_and_says_so(capsys):
    base = ["simulate", "--model", "llama3.1-8b", "--dp", "16", "--pp", "1", "--mb", "4", "--zero", "3",
            "--shard-group", "8", "--json"]
    assert main(base) == 0
    hsdp = json.loads(capsys.readouterr().out)["model_report"]
    assert main([*base, "--outer-optimizer-sharding"]) == 0
    hfsdp = json.loads(capsys.readouterr().out)["model_report"]
    # the optimizer state halves (16 ranks over 2 groups of 8), the weights and gradients stay
    assert hfsdp["memory"]["ranks"][0]["optimizer_gib"] == pytest.approx(
        hsdp["memory"]["ranks"][0]["optimizer_gib"] / 2)
    assert hfsdp["memory"]["ranks"][0]["weights_gib"] == hsdp["memory"]["ranks"][0]["weights_gib"]
    assert main([*base[:-1], "--outer-optimizer-sharding"]) == 0
    assert "the optimizer state over all 16 (hybrid FSDP)" in capsys.readouterr().out
    # torchtitan's HSDP replicates its optimizer state across the groups
    assert main([*base, "--outer-optimizer-sharding", "--framework", "torchtitan"]) != 0
    assert "Megatron-FSDP's hybrid FSDP" in capsys.readouterr().err

