"""The split chosen against the LM head's stage (stage_split.head_balanced_split) and the planner that proposes it
beside the framework's own split: worked by hand from the stage costs, then through plan, simulate and the launch
line it prints."""

import pytest

from pipesim.analytic.layout import Recompute
from pipesim.analytic.stage_split import head_balanced_split
from pipesim.api.planning import plan_request
from pipesim.cli.main import main
from pipesim.plan.evaluate import evaluate
from pipesim.plan.launch import megatron_argv
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


def test_interleaved_ranks_take_whole_chunks_and_the_head_sits_on_the_last_ranks_last_slice():
    # 32 layers over 4 ranks × 2 chunks (slice s on rank s mod 4), a head worth 2.28 layers: even, each rank holds 8
    # and the last 8 + 2.28 = 10.28. Megatron's per-rank flags take a multiple of the 2 chunks at each end and the
    # middle ranks even, each a multiple of 2 too: 10, 8, 8, 6 leaves 10 on the first rank alone (6, 10, 10, 6 and
    # 8, 10, 10, 4 leave it on two), each rank's count split evenly over its two slices
    assert head_balanced_split(32, 8, 1.0, 2.28, chunks=2) == (5, 4, 4, 3, 5, 4, 4, 3)
    # four chunks a rank: the ends move by 4 and the middle ranks by multiples of 4 (12, 8, 8, 4 or 4, 12, 12, 4),
    # none lighter than 8, 8, 8, 8 + 2.28 at its busiest
    assert head_balanced_split(32, 16, 1.0, 2.28, chunks=4) is None
    assert head_balanced_split(32, 9, 1.0, 2.28, chunks=2) is None  # 9 slices are not 2 a rank


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
    v2 = [c for c in _pp4(request) if c.chunks == 2]
    balanced = request.head_balanced_split(8, Recompute.NONE, chunks=2)
    assert balanced == (5, 4, 4, 3, 5, 4, 4, 3) and {c.stage_layers for c in v2} == {None, balanced}
    step = {c.stage_layers: evaluate(request.model_of(c), request.chip, request.layout_of(c), c.schedule).step_time
            for c in v2}
    assert step[balanced] < 0.98 * step[None]
    ends = next(c for c in v2 if c.stage_layers is not None)
    argv = megatron_argv(ends, request.model, 256)
    # Megatron-LM counts the first and last rank's layers over their chunks: 5 + 5 and 3 + 3
    at = argv.index("--decoder-first-pipeline-num-layers")
    assert argv[at:at + 4] == ["--decoder-first-pipeline-num-layers", "10", "--decoder-last-pipeline-num-layers", "6"]
    assert argv[argv.index("--num-virtual-stages-per-pipeline-rank") + 1] == "2"
    assert main(["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--dp", "8", *argv]) == 0
    assert "layers per stage 5,4,4,3,5,4,4,3;" in capsys.readouterr().out
    # four chunks a rank leave no lighter split: only the even one is tried
    assert {c.stage_layers for c in _pp4(request) if c.chunks == 4} == {None}
