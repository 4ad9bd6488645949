"""A framework's own split of the layers over its pipeline stages (FrameworkKnobs.stage_split): torchtitan's
effective layers, nanotron's cost thresholds, DeepSpeed's balanced count. Each expected split is worked by hand
from the framework's rule; a split the framework makes unasked is never refused, and a given split still wins."""

import pytest

from pipesim.analytic.frameworks import Framework, knobs
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.stage_split import (
    SplitPolicy,
    balanced_count_split,
    cost_threshold_split,
    effective_layer_split,
)
from pipesim.api.planning import plan_request
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.plan.space import grid_layouts


def test_torchtitan_counts_the_embedding_and_the_head_as_a_layer_each():
    # 32 + 2 = 34 effective layers over 4: 9, 9, 8, 8; the first gives one to the embedding, the last one to the head
    assert effective_layer_split(32, 4) == (8, 9, 8, 7)
    # 28 + 2 = 30 over 8: 4 × 6 then 3 × 2, less one at each end
    assert effective_layer_split(28, 8) == (3, 4, 4, 4, 4, 4, 3, 2)
    # 126 + 2 = 128 over 8: 16 each, so Llama 3 405B's lighter ends (Llama Team 2024 §3.3.2)
    assert effective_layer_split(126, 8) == (15,) + (16,) * 6 + (15,)
    assert effective_layer_split(32, 2) == (16, 16) and effective_layer_split(5, 1) == (5,)
    with pytest.raises(PipesimError, match="at least one"):
        effective_layer_split(1, 4)  # 3 effective layers cannot fill 4 stages


def test_nanotron_moves_to_the_next_rank_after_the_block_that_passes_its_share():
    # Llama 3.2 3B in nanotron's costs: a layer 4·3072² + 3·8192·3072 = 113,246,208, the head 128256·3072 =
    # 394,002,432 (3.5 layers). Over 8 ranks each share is 445.5M: 4 layers pass it (453M, 906M, … 3,171M > 3,118M),
    # so seven ranks take 4 layers each and the last holds the head alone.
    assert cost_threshold_split(28, 8, 113_246_208, 394_002_432) == ((4,) * 7 + (0,), 0)
    # 16 unit layers and a unit head over 2: the share is 8.5, passed by the 9th layer, which stays on rank 0
    assert cost_threshold_split(16, 2, 1, 1) == ((9, 7), 0)
    # the 4th layer passes the share 3.5; the head lands on rank 1 and passes its share (7), so the cast goes to
    # rank 2, passes that one's (10.5) at no cost of its own, and the loss goes to rank 3
    assert cost_threshold_split(4, 4, 1, 10) == ((4, 0, 0, 0), 2)
    # Llama 3.2 1B: a layer 4·2048² + 3·8192·2048 = 67,108,864, the head 128256·2048 (3.9 layers); the shares of
    # 2.49 layers alternate 3 and 2 layers, the 16th and the head land on rank 6, the cast and the loss on 7
    assert cost_threshold_split(16, 8, 67_108_864, 262_668_288) == ((3, 2, 3, 2, 3, 2, 1, 0), 1)
    with pytest.raises(PipesimError, match="stage 4 would hold nothing"):  # head on rank 1 of 5: rank 4 empty
        cost_threshold_split(4, 5, 1, 10)


def test_deepspeed_balances_the_transformer_layers_by_count_remainder_first():
    assert balanced_count_split(28, 8) == (4, 4, 4, 4, 3, 3, 3, 3)
    assert balanced_count_split(61, 8) == (8,) * 5 + (7,) * 3 and balanced_count_split(44, 4) == (11,) * 4


def test_each_framework_names_its_policy_and_megatron_keeps_pipesims_default():
    model = MODEL_PRESETS["llama3.2-3b"]
    assert knobs(Framework.MEGATRON).stage_split is SplitPolicy.EVEN_OR_LIGHTER_ENDS
    assert knobs(Framework.MEGATRON).split_layers(model, 8) is None  # resolved (or refused) as before
    assert knobs(Framework.TORCHTITAN).split_layers(model, 8) == (3, 4, 4, 4, 4, 4, 3, 2)
    assert knobs(Framework.NANOTRON).split_layers(model, 8) == (4,) * 7 + (0,)
    assert knobs(Framework.MEGATRON_DEEPSPEED).split_layers(model, 8) == (4, 4, 4, 4, 3, 3, 3, 3)
    assert all(knobs(f).split_layers(model, 1) is None for f in Framework)


def test_simulate_splits_as_the_framework_does_and_a_given_split_wins(capsys):
    base = ["simulate", "--model", "llama3.2-3b", "--pp", "8", "--mb", "16"]
    assert main(base) == 2  # Megatron-Core refuses 28 layers over 8 stages without a split
    assert "do not split evenly" in capsys.readouterr().err
    assert main([*base, "--framework", "nanotron"]) == 0
    assert "layers per stage 4,4,4,4,4,4,4,0;" in capsys.readouterr().out
    assert main([*base, "--framework", "torchtitan", "--stage-layers", "4,4,4,4,3,3,3,3"]) == 0
    assert "layers per stage 4,4,4,4,3,3,3,3;" in capsys.readouterr().out
    assert main(["simulate", "--model", "llama3.2-3b", "--pp", "32", "--mb", "32", "--framework", "torchtitan"]) == 2
    err = capsys.readouterr().err
    assert "fewer than the pp·v = 32 stages" in err and "--first-stage-layers 0" not in err  # 28 layers: no hint


def test_too_many_stages_names_the_ends_as_stages_where_that_fits(capsys):
    # Llama 3.1 405B's 126 layers over pp 16 × v 8 = 128 stages: refused unasked, and the hint the error gives
    # (the embedding and the loss as stages of their own) runs as Llama 3 ran it
    base = ["simulate", "--model", "llama3.1-405b", "--pp", "16", "--chunks", "8", "-s", "interleaved", "--mb", "32",
            "--tp", "8", "--dp", "64"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "fewer than the pp·v = 128 stages" in err and "--first-stage-layers 0 --last-stage-layers 0" in err
    assert main([*base, "--first-stage-layers", "0", "--last-stage-layers", "0"]) == 0
    assert "layers per stage 0,1,1," in capsys.readouterr().out


def test_the_planner_searches_the_pipelines_the_framework_can_split():
    # 28 layers: Megatron splits them over 2 or 4 stages (7 each), not 8; torchtitan and nanotron over 8 too
    def pps(framework):
        return {pp for _, _, pp, _ in grid_layouts(plan_request("llama3.2-3b", 8, 64, framework=framework))}

    assert 8 not in pps("megatron") and {2, 4} <= pps("megatron")
    assert 8 in pps("torchtitan") and 8 in pps("nanotron")
    titan = plan_request("llama3.2-3b", 8, 64, framework="torchtitan")
    assert titan.layer_split(4) == (7, 8, 7, 6)  # 30 effective: 8, 8, 7, 7, less one at each end
