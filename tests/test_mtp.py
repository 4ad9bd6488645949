"""Multi-token prediction (pipesim.analytic.mtp): the modules' parameters, time, activations and FLOPs on the
loss's stage, each by hand against the same model without them; the flags and config keys that set them."""

import json
from dataclasses import replace

import pytest

from pipesim.analytic import to_costs
from pipesim.analytic.activations import layer_activation_bytes, output_activation_bytes
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.flops import layer_flops, model_flops_per_microbatch, mtp_extra_flops
from pipesim.analytic.layout import Layout
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind
from pipesim.analytic.mtp import mtp_kind, mtp_module_activation_bytes, mtp_params
from pipesim.analytic.params import embedding_params, layer_params, total_params
from pipesim.cli.main import main
from pipesim.errors import PipesimError

H100 = CHIP_PRESETS["h100-sxm"]
V3 = MODEL_PRESETS["deepseek-v3"]
# a small MoE (8 layers, the first dense): its module is a MoE layer, as the last layer is
SMALL = replace(MODEL_PRESETS["deepseek-v2-lite"], name="small-mtp", layers=8, mtp_layers=1)
PLAIN = replace(SMALL, mtp_layers=0)


def test_params_by_hand():
    h, v = 7168, 129280
    module = layer_params(V3, LayerKind.MOE) + 2 * h * h + 3 * h  # the layer, eh_proj, three RMSNorms
    assert mtp_kind(V3) is LayerKind.MOE
    assert mtp_params(V3, Layout(dp=1, pp=16)) == module + v * h  # and the embedding's copy on the last stage
    assert mtp_params(V3, Layout(dp=1, pp=1)) == module  # one stage holds the table already
    # the model's count leaves the module out, as DeepSeek-V3's 671B does (the module is ~11.6B without copies)
    assert total_params(V3) == pytest.approx(671e9, rel=0.01)
    assert module == pytest.approx(11.6e9, rel=0.02)
    tied = replace(MODEL_PRESETS["llama3.2-1b"], mtp_layers=2)
    # tied: the head's weight is the table; on an earlier slice the modules need their own copy
    assert mtp_params(tied, Layout(dp=1, pp=4)) == 2 * (layer_params(tied) + 2 * 2048 * 2048 + 3 * 2048)
    assert mtp_params(tied, Layout(dp=1, pp=4, mtp_stage=2)) == mtp_params(tied, Layout(dp=1, pp=4)) + 128256 * 2048


def test_the_loss_stage_holds_the_module_and_no_other_stage_does():
    layout = Layout(dp=1, pp=4, stage_layers=(2, 2, 2, 2))
    with_mtp, without = to_costs.stage_breakdowns(SMALL, layout), to_costs.stage_breakdowns(PLAIN, layout)
    assert with_mtp[:3] == without[:3]
    assert with_mtp[3].params - without[3].params == mtp_params(SMALL, layout)
    assert with_mtp[3].end_params - without[3].end_params == embedding_params(SMALL)
    assert with_mtp[3].activation_bytes - without[3].activation_bytes == pytest.approx(
        layer_activation_bytes(SMALL, layout, mtp_kind(SMALL)) + mtp_module_activation_bytes(SMALL, layout)
        + output_activation_bytes(SMALL, layout))


def test_the_loss_stage_runs_one_more_layer_and_the_extras():
    layout = Layout(dp=1, pp=4, stage_layers=(2, 2, 2, 2))
    with_mtp = to_costs.build_cost_model(SMALL, H100, layout)
    without = to_costs.build_cost_model(PLAIN, H100, layout)
    assert [with_mtp.stage(s) for s in range(3)] == [without.stage(s) for s in range(3)]
    costs = to_costs._layer_costs(SMALL, H100, layout)
    pace = to_costs.compute_pace(H100, layout)
    layer, extra = costs.passes[mtp_kind(SMALL)], costs.mtp_module + costs.mtp_head
    assert extra.forward > 0 and extra.backward_weight > 0
    added = with_mtp.stage(3).forward - without.stage(3).forward  # (the host keeps up: no floor)
    assert added == pytest.approx((layer.forward + extra.forward) * pace, rel=1e-9)


def test_flops_count_the_module_as_megatron_does():
    layout = Layout(dp=1)
    d = model_flops_per_microbatch(SMALL, layout).forward - model_flops_per_microbatch(PLAIN, layout).forward
    t, h, v = SMALL.seq_len * SMALL.micro_batch, SMALL.hidden, SMALL.vocab
    assert mtp_extra_flops(SMALL).forward == 2 * t * 2 * h * h + 2 * t * h * v  # eh_proj and the logits again
    assert d == pytest.approx(layer_flops(SMALL, layout, mtp_kind(SMALL)).forward + mtp_extra_flops(SMALL).forward)


def _report(capsys, *argv):
    assert main(["simulate", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)["model_report"]


def test_megatron_flag_and_refusals(capsys):
    run = ["--model", "deepseek-v3", "--hardware", "h800", "--gpus", "256", "--pp", "8", "--ep", "32", "--mb", "8",
           "--stage-layers", "8,8,8,8,8,8,8,5"]
    assert _report(capsys, *run, "--mtp-num-layers", "1")["step_time_s"] == _report(capsys, *run)["step_time_s"]
    assert main(["simulate", *run, "--mtp-num-layers", "2"]) == 2
    assert "whose mtp_layers is 1" in capsys.readouterr().err
    with pytest.raises(PipesimError, match="stages-after-head"):
        to_costs.check_layout(SMALL, Layout(dp=1, pp=3, stage_layers=(4, 4, 0), stages_after_head=1))
    with pytest.raises(PipesimError, match="mtp_layers"):
        replace(SMALL, mtp_layers=-1)
