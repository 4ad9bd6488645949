"""Expert parallelism in the cost and memory model: all-to-all bytes and time inside and across nodes, the
imbalance factor, grouped expert GEMMs, the a2a fields of StageCosts, EP memory sharding, and the refusals."""

import json
from dataclasses import replace

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import dp_grad_sync, moe_all_to_all_bytes, moe_all_to_all_time, moe_layer_a2a
from pipesim.analytic.kernels import gemm_time, layer_gemms, layer_times, tokens_per_expert
from pipesim.analytic.layout import Layout, Precision, Recompute, ZeroStage
from pipesim.analytic.memory_gib import static_bytes
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind
from pipesim.analytic.params import layer_expert_params
from pipesim.analytic.time_breakdown import rank_times
from pipesim.analytic.to_costs import build_cost_model, rank_expert_params, rank_params, stage_breakdown
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.program.ir import PipelineShape
from pipesim.sim.costs import CostModel, StageCosts

H100 = CHIP_PRESETS["h100-sxm"]
MIXTRAL = MODEL_PRESETS["mixtral-8x7b"].with_shape(seq_len=4096)
V3 = MODEL_PRESETS["deepseek-v3"]


def test_a2a_bytes_by_hand():
    # 4096 tokens, each to 2 experts, 4096 wide, BF16; 7 of 8 shares leave the rank
    assert moe_all_to_all_bytes(MIXTRAL, Layout(dp=8, ep=8)) == 2 * 4096 * 2 * 4096 * 7 / 8
    assert moe_all_to_all_bytes(MIXTRAL, Layout(dp=8, ep=1)) == 0
    assert moe_all_to_all_bytes(MIXTRAL, Layout(dp=4, cp=2, ep=8)) == 2 * 2048 * 2 * 4096 * 7 / 8  # s/cp tokens
    assert moe_all_to_all_bytes(MIXTRAL, Layout(dp=8, ep=8, moe_imbalance=1.25)) == 1.25 * 2 * 4096 * 2 * 4096 * 7 / 8


def test_a2a_inside_one_node_runs_on_nvlink_at_its_measured_share():
    """All 7 peers in the node: NVLink at the share OpenXLA's H100 table measures for an 8-GPU all-to-all
    (0.76), plus the base latency and one NVLink hop; the A100, which takes the H100's shares, the same share of
    its own link. A chip without a table takes the whole link."""
    n = 2 * 4096 * 2 * 4096 * 7 / 8
    expected = n / (450e9 * 0.76) + 8.4e-6 + 3.4e-6
    assert moe_all_to_all_time(MIXTRAL, Layout(dp=8, ep=8), H100) == pytest.approx(expected)
    a100 = CHIP_PRESETS["a100-80gb"]
    a2a = moe_all_to_all_time(MIXTRAL, Layout(dp=8, ep=8), a100)
    assert a2a == pytest.approx(n / (300e9 * 0.76) + 8.4e-6 + 3.4e-6)
    tableless = replace(a100, nvlink_collective_shares=None)
    assert moe_all_to_all_time(MIXTRAL, Layout(dp=8, ep=8), tableless) == pytest.approx(n / 300e9 + 8.4e-6 + 3.4e-6)


def test_a2a_across_nodes_is_bound_by_the_nic():
    model = V3
    layout = Layout(dp=16, ep=16)  # 16 ranks: 8 in this node, 8 in the next
    n = 2 * 4096 * 8 * 7168 * 15 / 16
    intra, inter = n * 7 / 15, n * 8 / 15
    expected = max(intra / (450e9 * 0.76), inter / 50e9) + 8.4e-6 + 9.6e-6  # 8 of them in one node: 0.76
    assert moe_all_to_all_time(model, layout, H100) == pytest.approx(expected)
    # tp = 2 puts only 4 members of an ep = 8 group in one node: that group crosses nodes too
    two = moe_all_to_all_time(model, Layout(tp=2, dp=8, ep=8), H100)
    n8 = 2 * 4096 * 8 * 7168 * 7 / 8
    assert two == pytest.approx(max(n8 * 3 / 7 / (450e9 * 0.79), n8 * 4 / 7 / 50e9) + 8.4e-6 + 9.6e-6)  # 4: 0.79


def test_a2a_per_layer_two_each_way_and_again_under_full_recompute():
    one = moe_all_to_all_time(MIXTRAL, Layout(dp=8, ep=8), H100)
    comm = moe_layer_a2a(MIXTRAL, Layout(dp=8, ep=8), H100)
    assert (comm.forward, comm.backward) == (2 * one, 2 * one)
    full = moe_layer_a2a(MIXTRAL, Layout(dp=8, ep=8, recompute=Recompute.FULL), H100)
    assert full.backward == pytest.approx(4 * one)


def test_grouped_expert_gemms_by_hand():
    layout = Layout(dp=8, ep=8)
    tokens = 4096
    assert tokens_per_expert(MIXTRAL, layout, tokens) == 4096 * 2 * 8 / 8
    groups = layer_gemms(MIXTRAL, layout, tokens, LayerKind.MOE)
    # one local expert of 8 over 8 ranks: up/gate (2·14336 × 4096) and down (4096 × 14336), 8192 rows each
    assert (8192, 2 * 14336, 4096, 1) in groups and (8192, 4096, 14336, 1) in groups
    small = replace(layout, ep=1)
    expert_rows = tokens_per_expert(MIXTRAL, small, tokens)
    assert expert_rows == 1024  # 8 local experts of 1024 rows
    times = layer_times(MIXTRAL, small, H100, LayerKind.MOE)
    dense_equivalent = layer_times(MIXTRAL, layout, H100, LayerKind.MOE)
    # the same FLOPs cut into 8 small GEMMs are never faster (waves, weights read per expert)
    assert times.forward >= dense_equivalent.forward
    assert 8 * gemm_time(1024, 2 * 14336, 4096, H100, Precision.BF16) >= gemm_time(8192, 2 * 14336, 4096, H100,
                                                                                   Precision.BF16)


def test_imbalance_scales_the_expert_compute_and_the_a2a():
    base = Layout(dp=8, ep=8)
    skew = replace(base, moe_imbalance=1.5)
    assert layer_times(MIXTRAL, skew, H100, LayerKind.MOE).forward > layer_times(MIXTRAL, base, H100,
                                                                                 LayerKind.MOE).forward
    assert moe_all_to_all_time(MIXTRAL, skew, H100) > moe_all_to_all_time(MIXTRAL, base, H100)
    assert layer_times(MIXTRAL, skew, H100, LayerKind.DENSE) == layer_times(MIXTRAL, base, H100, LayerKind.DENSE)


def test_stage_costs_carry_the_a2a_inside_the_passes():
    layout = Layout(dp=8, pp=4, ep=8, microbatches=8, chunks=2)
    costs = build_cost_model(MIXTRAL, H100, layout)
    one = moe_all_to_all_time(MIXTRAL, layout, H100)
    stage = costs.stage(1)  # 4 layers, all MoE; a rank's share is 2 chunks of them
    assert stage.a2a_forward == pytest.approx(2 * 4 * 2 * one)
    assert stage.a2a_backward == pytest.approx(2 * 4 * 2 * one)
    assert stage.forward > stage.a2a_forward and stage.backward_input > stage.a2a_backward
    assert costs.chunk_costs(1, 2).a2a_forward == pytest.approx(stage.a2a_forward / 2)
    without = build_cost_model(MIXTRAL, H100, replace(layout, ep=1))
    assert without.stage(1).a2a_forward == 0.0
    dense = build_cost_model(MODEL_PRESETS["llama2-7b"], H100, Layout(dp=8, pp=4, microbatches=8))
    assert dense.default.a2a_forward == dense.default.a2a_backward == 0.0


def test_a2a_fields_round_trip_and_are_checked(tmp_path):
    costs = build_cost_model(MIXTRAL, H100, Layout(dp=8, pp=4, ep=8, microbatches=8))
    path = tmp_path / "costs.json"
    costs.save(path)
    assert CostModel.load(path) == costs
    data = json.loads(path.read_text())
    data["default"]["a2a_forward"] = data["default"]["forward"] * 2
    path.write_text(json.dumps(data))
    with pytest.raises(PipesimError, match=r"a2a_forward=.* exceeds forward"):
        CostModel.load(path)
    assert StageCosts().a2a_forward == 0.0


def test_expert_weights_are_sharded_over_ep_and_their_state_over_dp_cp_over_ep():
    model = MIXTRAL
    shape = PipelineShape(4, 8)
    one, eight = Layout(dp=8, pp=4, microbatches=8), Layout(dp=8, pp=4, ep=8, microbatches=8)
    experts = 8 * layer_expert_params(model, LayerKind.MOE)  # 8 layers per stage
    assert rank_params(model, one, shape)[1] - rank_params(model, eight, shape)[1] == pytest.approx(experts * 7 / 8)
    assert rank_expert_params(model, eight, shape)[1] == pytest.approx(experts / 8)
    assert stage_breakdown(model, eight, 1).expert_params == pytest.approx(experts / 8)
    # ZeRO-1 over dp = 8: dense optimizer state / 8; the experts' expert-dp group is dp/ep = 1 rank
    zero = replace(eight, zero=ZeroStage.OPTIMIZER)
    params = rank_params(model, zero, shape)[1]
    dense = params - experts / 8
    weights, grads, optimizer = static_bytes(params, zero, model, experts / 8)
    assert (weights, grads) == (pytest.approx(2 * params), pytest.approx(4 * params))
    assert optimizer == pytest.approx(12 * dense / 8 + 12 * experts / 8)
    half = replace(zero, ep=4)  # expert dp = 2
    p4, e4 = rank_params(model, half, shape)[1], rank_expert_params(model, half, shape)[1]
    assert static_bytes(p4, half, model, e4)[2] == pytest.approx(12 * (p4 - e4) / 8 + 12 * e4 / 2)


def test_expert_gradients_sync_over_the_expert_data_parallel_group():
    layout = Layout(dp=8, ep=8)
    dense_only = dp_grad_sync(1e9, layout, H100)
    # the expert part has nobody to sync with (dp·cp/ep = 1): only the dense part moves
    assert dp_grad_sync(1e9, layout, H100, expert_params_per_rank=4e8).reduce == pytest.approx(
        dp_grad_sync(6e8, layout, H100).reduce)
    assert dp_grad_sync(1e9, layout, H100, expert_params_per_rank=4e8).reduce < dense_only.reduce


def test_time_breakdown_reports_the_a2a_and_what_an_overlap_hid():
    layout = Layout(dp=8, pp=2, ep=8, microbatches=4)
    model = MIXTRAL.with_shape(seq_len=2048)
    shape = PipelineShape(2, 4)
    one = moe_all_to_all_time(model, layout, H100)
    times = rank_times(model, H100, layout, shape, step_time=100.0)
    assert times[0].a2a == pytest.approx(4 * 16 * 4 * one)  # 4 microbatches × 16 MoE layers × 4 all-to-alls
    assert times[0].a2a_hidden == 0.0
    passes = [t.compute + t.exposed_comm + t.p2p_wire + t.p2p_sync + t.a2a for t in times]
    hid = rank_times(model, H100, layout, shape, step_time=100.0, simulated_busy=[passes[0] - 0.01, passes[1]])
    assert hid[0].a2a_hidden == pytest.approx(0.01) and hid[0].a2a == pytest.approx(times[0].a2a - 0.01)
    assert hid[1].a2a_hidden == 0.0
    assert "MoE all-to-all exposed" in hid[0].text()


def _error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pipesim: error: "), err
    return err


@pytest.mark.parametrize("argv, words", [
    (["simulate", "--model", "llama2-7b", "--dp", "8", "--ep", "8", "--pp", "2", "--mb", "4"], "is dense"),
    (["simulate", "--model", "mixtral-8x7b", "--dp", "6", "--ep", "4", "--pp", "2", "--mb", "4"],
     "--ep 4 must divide dp·cp"),
    (["simulate", "--model", "mixtral-8x7b", "--dp", "16", "--ep", "16", "--pp", "2", "--mb", "4"],
     "8 experts per layer"),
    (["simulate", "--model", "mixtral-8x7b", "--moe-imbalance", "0.5", "--pp", "2", "--mb", "4"], "≥ 1"),
    (["simulate", "--model", "llama2-7b", "--moe-imbalance", "1.2", "--pp", "2", "--mb", "4"], "dense"),
    (["simulate", "--ep", "2", "--pp", "2", "--mb", "4"], "add --model"),
    (["plan", "--model", "llama2-7b", "--gpus", "8", "--global-batch", "16", "--ep", "2"], "is dense"),
    (["topology", "--dp", "3", "--ep", "2"], "--ep 2 must divide dp·cp"),
    (["simulate", "--model", "mixtral-8x7b", "--tp", "2", "--dp", "8", "--ep", "8", "--expert-tp", "1", "--pp", "2",
      "--mb", "4"], "needs --sequence-parallel"),
    (["simulate", "--model", "mixtral-8x7b", "--tp", "4", "--dp", "4", "--ep", "8", "--expert-tp", "2", "--pp", "2",
      "--mb", "4", "--sequence-parallel"], "equal to --tp (4) or 1"),
])
def test_bad_ep_is_refused_in_one_line(capsys, argv, words):
    assert words in _error(capsys, argv)


def test_topology_prints_ep_groups(capsys):
    assert main(["topology", "--tp", "2", "--dp", "4", "--ep", "2"]) == 0
    out = capsys.readouterr().out
    assert "ep (expert all-to-all, folded over dp×cp) groups (4): {0,2} {1,3} {4,6} {5,7}" in out
    assert "expert dp (expert gradient sync) groups (4): {0,4} {1,5} {2,6} {3,7}" in out


def test_simulate_deepseek_v3_prints_step_a2a_share_and_memory(capsys):
    layers = ",".join(["1"] + ["2"] * 30 + ["0"])
    argv = ["simulate", "--model", "deepseek-v3", "--hardware", "h800", "--pp", "16", "--dp", "128", "--ep", "64",
            "-s", "dualpipe-v", "--mb", "32", "--distributed-optimizer", "--stage-layers", layers, "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    assert report["layout"]["ep"] == 64 and report["active_parameters"] < report["parameters"] / 10
    busiest = min(report["time_per_rank"], key=lambda r: r["idle_s"])
    assert busiest["a2a_s"] > 0 and report["memory"]["peak_gib"] > 0 and report["step_time_s"] > 0


def test_zero3_gathers_only_the_ranks_share_of_the_experts():
    from pipesim.analytic.comm import fsdp_layer_comm
    from pipesim.analytic.params import layer_params
    from pipesim.analytic.to_costs import _layer_comm

    layout = Layout(dp=8, ep=8, zero=ZeroStage.PARAMETERS, microbatches=2)
    held = layer_params(MIXTRAL, LayerKind.MOE) - layer_expert_params(MIXTRAL, LayerKind.MOE) * 7 / 8
    whole = layer_params(MIXTRAL, LayerKind.MOE)
    # 1/8 of the 8 experts plus the attention and router: the gather moves that many bytes, not the whole layer
    assert fsdp_layer_comm(held, layout, H100).forward < fsdp_layer_comm(whole, layout, H100).forward / 4
    times = layer_times(MIXTRAL, layout, H100, LayerKind.MOE)
    comm = _layer_comm(MIXTRAL, H100, layout, times, LayerKind.MOE)
    wide = _layer_comm(MIXTRAL, H100, replace(layout, ep=1), times, LayerKind.MOE)
    assert wide.forward > comm.forward  # what the compute does not hide shrinks with ep
