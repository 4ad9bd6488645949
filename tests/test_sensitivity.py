"""pipesim.sensitivity / simulate --sensitivity: each setting a published run leaves unstated, flipped alone."""

import json

import pytest

import pipesim
from pipesim.api.sensitivity import Sensitivity, SettingFlip, sensitivity, unstated_flips
from pipesim.cli.main import main

# Megatron-LM's tp-8 weak-scaling shape over 32 nodes, as issue #24's held-out group: no overlap flag given
TP8 = dict(model="gpt-18.4b", tp=8, dp=32, pp=1, mb=8, seq_len=4096, distributed_optimizer=True,
           sequence_parallel=True)


def test_each_flip_is_the_prediction_with_that_one_option_changed():
    s = sensitivity(**TP8)
    assert s.step_time == pytest.approx(pipesim.simulate(**TP8).model_report.step_time, rel=1e-12)
    for flip in s.flips:
        again = pipesim.simulate(**{**TP8, **flip.options}).model_report
        assert flip.step_time == pytest.approx(again.step_time, rel=1e-12), flip.flag
    flags = {f.flag for f in s.flips}
    # the switches that act here, and none that has nothing to act on (pp 1: no sends to overlap)
    assert {"--overlap-grad-reduce", "--overlap-param-gather", "--async-tp", "--param-bytes 16",
            "--attention unfused", "--zero 0", "--recompute selective"} == flags
    by_flag = {f.flag: f for f in s.flips}
    # the overlaps shorten the step and hold the memory; BF16 gradients free 2 bytes a parameter of a tp-8 shard
    for flag in ("--overlap-grad-reduce", "--overlap-param-gather", "--async-tp"):
        assert s.step_change(by_flag[flag]) < -0.03 and s.memory_change(by_flag[flag]) == pytest.approx(0)
    shard = pipesim.simulate(**TP8).to_dict()["model_report"]["parameters"] / 8
    assert s.peak_gib - by_flag["--param-bytes 16"].peak_gib == pytest.approx(2 * shard / 2**30, rel=0.01)
    low, high = s.step_range
    assert low == by_flag["--async-tp"].step_time and high == by_flag["--attention unfused"].step_time
    assert s.ranked()[0].flag == "--attention unfused"


def test_a_flip_that_would_not_fit_is_marked_and_left_out_of_the_range():
    s = Sensitivity(10.0, 70.0, (SettingFlip("--a", "a", {}, 8.0, 90.0, fits=False),
                                 SettingFlip("--b", "b", {}, 11.0, 60.0)))
    assert s.step_range == (10.0, 11.0)
    assert "(does not fit)" in s.text() and "most from --b (+10.0%)" in s.text()
    assert [f["fits"] for f in s.to_dict()["flips"]] == [False, True]


def test_the_flips_follow_the_layout_and_the_framework():
    """On a pipeline the sends' overlap is flipped; a setting already on is flipped off; FP8 with a sharded
    optimizer flips its FP8 weights; Megatron-Core's selective recomputation is not flipped under torchtitan, nor
    ZeRO-1, which it does not offer (nanotron does)."""
    setup = pipesim.simulate("interleaved", pp=4, mb=8, chunks=2, model="llama3.1-8b", tp=2, dp=2, fp8=True,
                             framework="nemo").model_report
    flags = [flag for flag, *_ in unstated_flips(setup.layout, setup.framework, setup.model)]
    assert {"--no-overlap-p2p", "--no-overlap-grad-reduce", "--no-overlap-param-gather", "--fp8-params off",
            "--zero 0"} <= set(flags)
    titan = pipesim.simulate(pp=1, mb=4, model="llama3.1-8b", dp=8, framework="torchtitan").model_report
    titan_flags = [flag for flag, *_ in unstated_flips(titan.layout, titan.framework, titan.model)]
    assert not any(flag.startswith("--recompute") or flag.startswith("--zero") for flag in titan_flags)
    assert "--repeat-kv" in titan_flags  # Llama 3.1 8B's 8 KV heads for 32 query heads
    mha = pipesim.simulate(pp=1, mb=4, model="llama2-13b", dp=8).model_report  # a K and V for every head
    assert not any("repeat-kv" in flag for flag, *_ in unstated_flips(mha.layout, mha.framework, mha.model))
    nano = pipesim.simulate(pp=1, mb=4, model="llama3.2-1b", dp=8, framework="nanotron").model_report
    assert "--zero 1" in [flag for flag, *_ in unstated_flips(nano.layout, nano.framework, nano.model)]


def test_a_refused_flip_is_listed_with_its_reason():
    """nanotron's engine sends one tensor at a time and waits for each: overlapping the sends is refused, and the
    refusal is listed rather than raised."""
    s = sensitivity(pp=2, mb=4, model="llama3.2-1b", dp=4, framework="nanotron")
    refused = dict(s.refused)
    assert "--p2p-calls sequential" in refused.get("--overlap-p2p", "")
    assert "--overlap-p2p" not in {f.flag for f in s.flips}


def test_the_command_prints_the_table_and_its_json(capsys):
    argv = ["simulate", "--model", "gpt-18.4b", "--tp", "8", "--dp", "32", "--pp", "1", "--mb", "8", "--seq-len",
            "4096", "--distributed-optimizer", "--sequence-parallel", "--sensitivity"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "unstated settings, each flipped alone (the run as given: 1.657 s a step" in out
    assert "the step over those that fit: 1.417–1.974 s" in out
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sensitivity"]["step_time_s"] == pytest.approx(data["model_report"]["step_time_s"])
    assert len(data["sensitivity"]["flips"]) == 7


def test_without_a_model_it_is_a_one_line_error(capsys):
    assert main(["simulate", "--pp", "4", "--mb", "8", "--sensitivity"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == ("pipesim: error: --sensitivity flips the settings of a model on a chip: give "
                                    "--model (and --hardware)")
