"""MoE parallel folding (``--expert-tp 1`` under tp > 1; Megatron-Core's ``--expert-tensor-parallel-size 1``): each
rank routes its own 1/tp of the tokens to whole experts, the expert-parallel group folded over tp·dp·cp. Each term by
hand against the same layout with the experts split over tp."""

import json
from dataclasses import replace

import pytest

from pipesim.analytic import to_costs
from pipesim.analytic.activations import layer_activation_bytes
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import all_to_all_time, moe_all_to_all_bytes, moe_all_to_all_time, tp_layer_comm
from pipesim.analytic.flops import layer_flops
from pipesim.analytic.kernels import attention_shapes, layer_gemms
from pipesim.analytic.layout import Layout
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind
from pipesim.analytic.params import layer_expert_params
from pipesim.cli.main import main
from pipesim.errors import PipesimError

H100 = CHIP_PRESETS["h100-sxm"]
QWEN = MODEL_PRESETS["qwen3-30b-a3b"]  # 128 experts of 768, top-8, no shared expert
SPLIT = Layout(tp=2, dp=8, ep=8, sequence_parallel=True)  # the experts split over tp, ep over dp
FOLDED = replace(SPLIT, expert_tp=1)


def test_what_folding_needs_and_what_it_shards_over():
    assert FOLDED.etp == 1 and SPLIT.etp == 2 and FOLDED.expert_token_share == 0.5
    assert SPLIT.expert_shards == 1 and FOLDED.expert_shards == 2  # tp·dp·cp/ep = 16/8
    assert Layout(tp=2, dp=8, ep=16, sequence_parallel=True, expert_tp=1).expert_shards == 1  # ep over tp·dp
    with pytest.raises(PipesimError, match="needs --sequence-parallel"):
        replace(FOLDED, sequence_parallel=False)
    with pytest.raises(PipesimError, match="must divide tp·dp·cp"):
        Layout(tp=2, dp=8, ep=32, sequence_parallel=True, expert_tp=1)
    with pytest.raises(PipesimError, match="equal to --tp"):
        Layout(tp=4, dp=8, ep=8, sequence_parallel=True, expert_tp=2)
    with pytest.raises(PipesimError, match="must divide dp·cp"):
        Layout(tp=2, dp=8, ep=16, sequence_parallel=True)  # without folding, ep stays within dp·cp


def test_the_router_and_experts_see_the_ranks_own_tokens_whole():
    tokens = 4096
    split, folded = layer_gemms(QWEN, SPLIT, tokens, LayerKind.MOE), layer_gemms(QWEN, FOLDED, tokens, LayerKind.MOE)
    attention = len(attention_shapes(QWEN, SPLIT))
    assert split[:attention] == folded[:attention]
    assert split[attention] == (4096, 128, 2048, 1) and folded[attention] == (2048, 128, 2048, 1)  # the router
    # 16 local experts: 4096·8·8/128 = 2048 rows of a 768-wide expert split over tp, or 1024 rows of it whole
    assert split[attention + 1:] == [(2048, 2 * 768 // 2, 2048, 16), (2048, 2048, 768 // 2, 16)]
    assert folded[attention + 1:] == [(1024, 2 * 768, 2048, 16), (1024, 2048, 768, 16)]
    # the experts' FLOPs the same either way (the router's rows: pipesim counts the split case's gathered tokens)
    def flops(gemms):
        return sum(2 * m * n * k * c for m, n, k, c in gemms)

    assert flops(split[attention + 1:]) == flops(folded[attention + 1:])
    assert layer_flops(QWEN, SPLIT, LayerKind.MOE) == layer_flops(QWEN, FOLDED, LayerKind.MOE)


def test_the_all_to_all_carries_half_the_tokens_between_adjacent_ranks():
    model = QWEN.with_shape(seq_len=4096)
    assert moe_all_to_all_bytes(model, FOLDED) == moe_all_to_all_bytes(model, SPLIT) / 2
    # ep 8 members tp = 2 apart span two nodes; folded they are adjacent, one node
    assert moe_all_to_all_time(model, SPLIT, H100) == all_to_all_time(moe_all_to_all_bytes(model, SPLIT), 8, 2, H100)
    assert moe_all_to_all_time(model, FOLDED, H100) == all_to_all_time(moe_all_to_all_bytes(model, FOLDED), 8, 1,
                                                                       H100)


def test_the_moe_block_has_no_tp_collective_unless_shared_experts_need_one():
    model = QWEN.with_shape(seq_len=4096)
    split, folded = tp_layer_comm(model, SPLIT, H100, LayerKind.MOE), tp_layer_comm(model, FOLDED, H100,
                                                                                    LayerKind.MOE)
    assert folded.forward == pytest.approx(split.forward / 2) and folded.backward == pytest.approx(split.backward / 2)
    assert tp_layer_comm(model, FOLDED, H100) == tp_layer_comm(model, SPLIT, H100)  # dense layers as before
    shared = replace(MODEL_PRESETS["deepseek-v2-lite"], name="shared")  # two shared experts, split over tp
    assert tp_layer_comm(shared, FOLDED, H100, LayerKind.MOE) == tp_layer_comm(shared, SPLIT, H100, LayerKind.MOE)


def test_whole_experts_per_rank_and_the_same_activations():
    one = to_costs.stage_breakdowns(QWEN, SPLIT)[0]
    folded = to_costs.stage_breakdowns(QWEN, FOLDED)[0]
    routed = QWEN.layers * layer_expert_params(QWEN, LayerKind.MOE)
    assert one.expert_params == pytest.approx(routed / (2 * 8)) and folded.expert_params == pytest.approx(routed / 8)
    assert folded.params - one.params == pytest.approx(routed / 8 - routed / 16)
    # half the tokens a rank, experts twice as wide: the same bytes kept
    assert layer_activation_bytes(QWEN, FOLDED, LayerKind.MOE) == layer_activation_bytes(QWEN, SPLIT, LayerKind.MOE)


def test_megatrons_flag_through_the_command_line(capsys):
    run = ["simulate", "--json", "--model", "qwen3-30b-a3b", "--gpus", "16", "--tp", "2", "--sequence-parallel",
           "--pp", "1", "--mb", "8", "--ep", "16"]
    assert main([*run, "--expert-tensor-parallel-size", "1"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    assert report["layout"]["expert_tp"] == 1 and report["layout"]["ep"] == 16
    assert main([*run, "--expert-tp", "2"]) == 2  # ep 16 over dp 8 without folding
    assert "must divide dp·cp" in capsys.readouterr().err
    assert main([*run[:-2], "--ep", "8", "--expert-tp", "2", "--json"]) == 0  # --expert-tp = --tp: the default
    assert json.loads(capsys.readouterr().out)["model_report"]["layout"]["expert_tp"] == 2
