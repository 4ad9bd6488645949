"""Megatron-Core's --pipeline-model-parallel-layout (pipesim.analytic.pipeline_layout): the grammar by hand, what
a layout means for the stages and the multi-token-prediction modules' stage, and the refusals."""

import json
from dataclasses import replace

import pytest

from pipesim.analytic import to_costs
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import p2p_bytes, stage_output_bytes
from pipesim.analytic.layout import Layout
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.mtp import mtp_embedding_copy, mtp_module_params
from pipesim.analytic.pipeline_layout import LayoutSymbol, parse_pipeline_layout
from pipesim.api.model_options import ModelOptions
from pipesim.api.model_setup import model_setup
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.program.ir import PipelineShape

E, T, M, L = LayoutSymbol.EMBEDDING, LayoutSymbol.DECODER, LayoutSymbol.MTP, LayoutSymbol.LOSS
V3_LAYOUT = "Et*3|(tt|)*29,m|L"  # Megatron-LM's pipeline_parallel_layout.md, DeepSeek-V3 at pp 16, v 2


def test_megatrons_deepseek_example_by_hand():
    layout = parse_pipeline_layout(V3_LAYOUT)
    assert len(layout.stages) == 32 and layout.chunks(16) == 2
    assert layout.stages[0] == (E, T, T, T) and layout.stages[1] == (T, T)
    assert layout.stages[30] == (M,) and layout.stages[31] == (L,)
    assert layout.stage_layers == (3, *[2] * 29, 0, 0) and sum(layout.stage_layers) == 61
    assert layout.mtp_stage == 30
    layout.check(61, 1, "deepseek-v3")


@pytest.mark.parametrize(("text", "stages"), [
    ("E|t|tL", ((E,), (T,), (T, L))),
    ("E||t|L", ((E,), (), (T,), (L,))),  # an empty stage
    ("Et, t|((t)*2|)*2 L", ((E, T, T), (T, T), (T, T), (L,))),  # nested groups, commas and spaces
    ("Et*0t|L", ((E, T), (L,))),  # a repeat of nothing
])
def test_grammar(text, stages):
    assert parse_pipeline_layout(text).stages == stages


@pytest.mark.parametrize(("text", "fragment"), [
    ("Et|(tt|*2L", "a '(' without its ')'"), ("Et|tt)|L", "a ')' without its '('"), ("Ex|L", "cannot read 'x'"),
    ("*2t|L", "repeats nothing"), ("", "is empty"), ("t*99999999|L", "more than"),
])
def test_grammar_refusals(text, fragment):
    with pytest.raises(PipesimError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_pipeline_layout(text)


@pytest.mark.parametrize(("text", "fragment"), [
    ("Et*3|t*3|L", "builds 6 decoder layers"), ("Et*4|t*4m|mL", "builds 2 multi-token-prediction"),
    ("t*4|Et*4,m|L", "the embedding (E) once, first"), ("Et*4|t*4,m|L|", "the loss (L) once, last"),
    ("Et*4|t*3,m,t|L", "after the last decoder layer"), ("Et*4,m|t*4|L", "come after the last decoder"),
])
def test_layouts_pipesim_does_not_model_are_refused(text, fragment):
    with pytest.raises(PipesimError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_pipeline_layout(text).check(8, 1, "small")


SMALL = replace(MODEL_PRESETS["deepseek-v2-lite"], name="small-mtp", layers=8, mtp_layers=1)
H100 = CHIP_PRESETS["h100-sxm"]


def test_modules_on_an_earlier_stage_move_there_and_their_hidden_states_travel_to_the_loss():
    on_loss = Layout(dp=1, pp=4, stage_layers=(2, 2, 4, 0), overlap_p2p=True)  # (no send inside a pass)
    earlier = replace(on_loss, mtp_stage=2)
    at_loss, moved = to_costs.stage_breakdowns(SMALL, on_loss), to_costs.stage_breakdowns(SMALL, earlier)
    module = mtp_module_params(SMALL) + mtp_embedding_copy(SMALL, earlier)
    assert moved[2].params - at_loss[2].params == module and at_loss[3].params - moved[3].params == module
    costs = to_costs._layer_costs(SMALL, H100, on_loss)
    pace = to_costs.compute_pace(H100, on_loss)
    a, b = to_costs.build_cost_model(SMALL, H100, on_loss), to_costs.build_cost_model(SMALL, H100, earlier)
    layer = costs.passes[to_costs.mtp_kind(SMALL)]
    moved_time = (layer.forward + costs.mtp_module.forward) * pace
    assert b.stage(2).forward - a.stage(2).forward == pytest.approx(moved_time)
    assert a.stage(3).forward - b.stage(3).forward == pytest.approx(moved_time)  # the head's pass stays
    # the modules' hidden states cross the boundary between them and the loss, beside the model's
    assert stage_output_bytes(SMALL, earlier, 2) == 2 * p2p_bytes(SMALL, earlier)
    assert stage_output_bytes(SMALL, earlier, 1) == p2p_bytes(SMALL, earlier)
    with pytest.raises(PipesimError, match="follow the last layer, on stage 2"):
        to_costs.check_layout(SMALL, replace(on_loss, mtp_stage=1))
    with pytest.raises(PipesimError, match="has none"):
        to_costs.check_layout(replace(SMALL, mtp_layers=0), earlier)


def test_a_layout_string_sets_the_split_the_chunks_and_the_modules_stage(capsys):
    setup = model_setup("deepseek-v3", "h800", ModelOptions(dp=64, ep=64, pipeline_model_parallel_layout=V3_LAYOUT),
                        PipelineShape(16, 32, 2))
    assert setup.layout.stage_layers == (3, *[2] * 29, 0, 0) and setup.layout.mtp_stage == 30
    assert setup.layout.chunks == 2
    run = ["simulate", "--json", "--model", "deepseek-v3", "--hardware", "h800", "--gpus", "1024", "--pp", "16",
           "--ep", "64", "--mb", "32", "--pipeline-model-parallel-layout", V3_LAYOUT]
    assert main(run) == 0  # the chunks come from the layout: 32 stages over pp 16
    report = json.loads(capsys.readouterr().out)
    assert report["config"]["chunks"] == 2
    assert main(run[:1] + run[2:]) == 0  # the text report says where the modules run
    assert "1 multi-token-prediction module on stage 30" in capsys.readouterr().out
    for extra, fragment in ((["--stage-layers", ",".join(["2"] * 32)], "drop the other split flags"),
                            (["--chunks", "4"], "the pipeline has pp·v = 64"),
                            (["-s", "dualpipe-v"], "V or DualPipe placement")):
        assert main([*run, *extra]) == 2
        assert fragment in capsys.readouterr().err
