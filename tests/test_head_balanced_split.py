"""The split chosen against the LM head's stage (stage_split.head_balanced_split) and the planner that proposes it
beside the framework's own split: worked by hand from the stage costs, then through plan, simulate and the launch
line it prints."""

import pytest

from pipesim.analytic.layout import Recompute
from pipesim.analytic.pipeline_layout import layout_string, parse_pipeline_layout
from pipesim.analytic.stage_split import head_balanced_split
from pipesim.api.planning import plan_request
from pipesim.cli.main import main
from pipesim.plan.evaluate import evaluate
from pipesim.plan.launch import megatron_argv, megatron_split_flags
from pipesim.plan.space import enumerate_candidates


def test_the_ends_take_what_the_head_would_have_made_the_last_stage_wait_for():
    # 32 layers over 4, a head worth 2.28 layers: even is 8, 8, 8, 8 + 2.28 = 10.28 at the last stage. Ends of
    # 9, 9, 9, 5 and 8, 9, 9, 6 both leave 9 as the busiest (9, 8, 8, 7 leaves 7 + 2.28 = 9.28); the second has
    # two stages that busy, not three (the middle ones: 6 + 2.28 = 8.28 at the last)
    assert head_balanced_split(32, 4, 1.0, 2.28) == (8, 9, 9, 6)
    # two stages: first and last alone, 17 and 15 + 2 = 17
    assert head_balanced_split(32, 2, 1.0, 2.0) == (17, 15)
    # a head worth 6.25 layers (a 256k vocabulary on a 4B model, Yeung et al. 2024): the last stage gives up every
    # layer, 2, 5 × 6, 0 (busiest 6.25); with a layer on every stage, 1, 5 × 6, 1 (busiest 7.25)
    assert head_balanced_split(32, 8, 1.0, 6.25) == (2,) + (5,) * 6 + (0,)
    assert head_balanced_split(32, 8, 1.0, 6.25, least=1) == (1,) + (5,) * 6 + (1,)


def test_interleaved_ends_move_by_slice_or_by_whole_chunks_and_the_head_sits_on_the_last_ranks_last_slice():
    # 32 layers over 4 ranks × 2 chunks (slice s on rank s mod 4), a head worth 2.28 layers: even, each rank holds 8
    # and the last 8 + 2.28 = 10.28. In whole chunks (Megatron's per-rank flags: a multiple of 2 at each end, the
    # middle ranks even) the best is 10, 8, 8, 6 a rank, 10 at its busiest; moving the end slices alone (a layout
    # string) does better: 5, 4 × 6, 3 puts 5 + 4 = 9 on the first rank and 4 + 3 + 2.28 = 9.28 on the last
    assert head_balanced_split(32, 8, 1.0, 2.28, chunks=2) == (5, 4, 4, 4, 4, 4, 4, 3)
    # four chunks a rank: no whole-chunk split is lighter (12, 8, 8, 4 or 4, 12, 12, 4), but 3, 2 × 14, 1 leaves
    # 3 + 6 = 9 on the first rank and 6 + 1 + 2.28 = 9.28 on the last
    assert head_balanced_split(32, 16, 1.0, 2.28, chunks=4) == (3,) + (2,) * 14 + (1,)
    # 30 layers, a head worth 1.5: the default's lighter end slices (3, 4 × 6, 3) leave 4 + 3 + 1.5 = 8.5 on the last
    # rank; whole chunks 8, 8, 8, 6 and end slices 4, 4 × 6, 2 both leave 8 on three ranks: the tie goes to whole
    # chunks, whose flags count ranks
    assert head_balanced_split(30, 8, 1.0, 1.5, least=1, chunks=2) == (4, 4, 4, 3, 4, 4, 4, 3)
    assert megatron_split_flags((4, 4, 4, 3, 4, 4, 4, 3), 30, 4) == [
        "--decoder-first-pipeline-num-layers", "8", "--decoder-last-pipeline-num-layers", "6"]
    assert megatron_split_flags((5, 4, 4, 4, 4, 4, 4, 3), 32, 4) == ["--pipeline-model-parallel-layout",
                                                                     "Et*5|(t*4|)*6t*3L"]
    assert head_balanced_split(32, 9, 1.0, 2.28, chunks=2) is None  # 9 slices are not 2 a rank


def test_a_layout_string_reads_back_as_the_split_it_writes():
    for split in [(3,) + (2,) * 14 + (1,), (5, 4, 4, 3, 5, 4, 4, 3), (8, 9, 9, 6), (0, 2, 2, 0), (4,), (12, 13, 11)]:
        assert parse_pipeline_layout(layout_string(split)).stage_layers == split
    layout = parse_pipeline_layout(layout_string((4, 3), mtp_layers=1))  # the MTP layer before the loss, last
    assert layout.stage_layers == (4, 3) and layout.mtp_stage == 1
    assert layout_string((3,) + (2,) * 14 + (1,)) == "Et*3|(t*2|)*14tL"  # as Megatron-LM's documentation writes one


def test_no_split_is_proposed_where_the_default_is_as_light():
    # Llama 3.1 405B's 126 layers over 8, a head worth 0.61: the default's lighter ends, 15, 16 × 6, 15, leave 16
    # as the busiest, and the middle stages cannot go under 16 while the ends take the rest
    assert head_balanced_split(126, 8, 1.0, 0.61) is None
    assert head_balanced_split(32, 8, 1.0, 0.3) is None  # 4 + 0.3 against 4: a tenth of a stage, not worth a split
    assert head_balanced_split(3, 4, 1.0, 1.0) is None  # fewer layers than stages: no split at all


def _request(**space):
    space = {"zero": [1], "schedules": ["1f1b"], **space}
    return plan_request("llama3.1-8b", 32, 256, hardware="h100-sxm", recompute=["none"], precision=["bf16"], cp=[1],
                        micro_batch_sizes=[1], **space)


def _pp4(request):
    return [c for c in enumerate_candidates(request)
            if (c.tp, c.pp, c.dp, c.sequence_parallel) == (1, 4, 8, False)]


def test_plan_tries_the_head_balanced_split_beside_the_even_one_and_it_is_faster():
    request = _request()
    splits = {c.stage_layers for c in _pp4(request)}
    # costed by pipesim's own times on the H100 of a layer and of the head (Llama 3's 128k vocabulary, the FP32 loss)
    balanced = request.head_balanced_split(4, Recompute.NONE)
    assert splits == {None, balanced} and balanced == (8, 9, 9, 6)
    even, ends = sorted(_pp4(request), key=lambda c: c.stage_layers is not None)
    step = {c.stage_layers: evaluate(request.model_of(c), request.chip, request.layout_of(c), c.schedule).step_time
            for c in (even, ends)}
    assert step[balanced] < 0.93 * step[None]  # the last stage no longer sets every microbatch's pace
    assert ends.label().split()[5] == "ends8/6"
    argv = megatron_argv(ends, request.model, 256)
    at = argv.index("--decoder-first-pipeline-num-layers")
    assert argv[at:at + 4] == ["--decoder-first-pipeline-num-layers", "8", "--decoder-last-pipeline-num-layers", "6"]
    assert "--account-for-loss-in-pipeline-split" not in argv


def test_the_launch_line_runs_the_split_the_plan_simulated(capsys):
    request = _request()
    ends = next(c for c in _pp4(request) if c.stage_layers is not None)
    argv = megatron_argv(ends, request.model, 256)
    assert main(["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--dp", "8", *argv]) == 0
    printed = capsys.readouterr().out
    assert "layers per stage 8,9,9,6;" in printed


@pytest.mark.parametrize("space", [dict(even_ends=True), dict(framework="torchtitan", zero=[0])])
def test_no_balanced_split_where_asked_for_none_or_the_framework_splits_its_own_way(space):
    request = _request(**space)
    assert request.head_balanced_split(4, Recompute.NONE) is None
    assert len({c.stage_layers for c in _pp4(request)}) == 1


def test_plan_flag_even_ends_turns_it_off(capsys):
    args = ["plan", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "32", "--global-batch", "256",
            "--schedules", "1f1b", "--recompute", "none", "--zero", "1", "--precision", "bf16", "--cp", "1",
            "--micro-batch-sizes", "1", "--top", "40", "-q"]
    assert main(args) == 0
    assert "ends8/6" in capsys.readouterr().out
    assert main([*args, "--even-ends"]) == 0
    assert "ends8/6" not in capsys.readouterr().out


def test_a_model_whose_layers_differ_gets_no_balanced_split():
    request = plan_request("deepseek-v3", 256, 512, hardware="h100-sxm", schedules=["1f1b"], recompute=["full"],
                           zero=[1], precision=["bf16"], cp=[1], micro_batch_sizes=[1])
    assert request.head_balanced_split(8, Recompute.FULL) is None


def test_plan_balances_the_head_of_an_interleaved_pipeline_and_its_launch_line_runs_that_split(capsys):
    request = _request(schedules=["interleaved"])
    for chunks, balanced, layout in [(2, (5,) + (4,) * 6 + (3,), "Et*5|(t*4|)*6t*3L"),
                                     (4, (3,) + (2,) * 14 + (1,), "Et*3|(t*2|)*14tL")]:
        shapes = [c for c in _pp4(request) if c.chunks == chunks]
        assert request.head_balanced_split(4 * chunks, Recompute.NONE, chunks=chunks) == balanced
        assert {c.stage_layers for c in shapes} == {None, balanced}
        step = {c.stage_layers: evaluate(request.model_of(c), request.chip, request.layout_of(c),
                                         c.schedule).step_time for c in shapes}
        assert step[balanced] < 0.95 * step[None]  # 8.24 against 8.99 s at v 2, 8.10 against 8.85 at v 4
        ends = next(c for c in shapes if c.stage_layers is not None)
        argv = megatron_argv(ends, request.model, 256)
        # Megatron-LM's layout string names every virtual stage, and takes the place of the virtual-stage flags
        assert argv[argv.index("--pipeline-model-parallel-layout") + 1] == layout
        assert not any("virtual" in a for a in argv)
        assert main(["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--dp", "8", *argv]) == 0
        printed = capsys.readouterr().out
        assert f"layers per stage {','.join(map(str, balanced))};" in printed and f"chunks={chunks}" in printed
