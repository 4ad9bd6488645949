"""Kinds of run issue #24's held-out runs showed pipesim off by more than its band, and the record a prediction of
such a run carries (pipesim/analytic/held_out_kinds.py): the predicates by hand at their thresholds, the record's
words, the generated ranges against the experiment that writes them, and what simulate and plan print."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pipesim.analytic.error_band import error_band, memory_band
from pipesim.analytic.held_out_kinds import (
    LONG_CONTEXT_TOKENS,
    HeldOutKind,
    HeldOutRecord,
    RunTraits,
    held_out_records,
)
from pipesim.analytic.layout import Precision, Recompute, ZeroStage
from pipesim.cli.main import main as cli_main

# an H100 run of none of the kinds: 70B-sized, 64 GPUs, tp 4 pp 4, 8k tokens, no recomputation, ZeRO-0
PLAIN = RunTraits("hopper", 8192, 70e9, 64, 4, 4, Recompute.NONE, ZeroStage.NONE, 4.0)


def _kinds(traits: RunTraits) -> frozenset[HeldOutKind]:
    return traits.kinds(of_memory=False) | traits.kinds(of_memory=True)


def test_a_run_of_no_kind_hears_nothing():
    assert _kinds(PLAIN) == frozenset()


@pytest.mark.parametrize(("change", "kind"), [
    (dict(seq_len=LONG_CONTEXT_TOKENS), HeldOutKind.LONG_CONTEXT),
    (dict(gpus=8, params=8.03e9), HeldOutKind.SMALL_MODEL_ONE_NODE),
    (dict(family="a100", recompute=Recompute.FULL, pp=12), HeldOutKind.A100_FULL_RECOMPUTE_AT_SCALE),
    (dict(tp=8, pp=1), HeldOutKind.TP8_WITHOUT_PIPELINE),
    (dict(sharding=ZeroStage.OPTIMIZER), HeldOutKind.DISTRIBUTED_OPTIMIZER_MEMORY),
    (dict(sharding=ZeroStage.PARAMETERS), HeldOutKind.ZERO3_TP_MEMORY),
])
def test_each_kind_at_its_threshold(change, kind):
    assert _kinds(replace(PLAIN, **change)) == {kind}


@pytest.mark.parametrize("change", [
    dict(seq_len=LONG_CONTEXT_TOKENS - 1),  # under the long-context group's shortest sequence
    dict(gpus=16, params=8.03e9),  # two nodes
    dict(gpus=8, params=13e9),  # a 13B model on one node
    dict(family="a100", recompute=Recompute.FULL, pp=11),  # a pipeline shorter than the group's
    dict(family="a100", recompute=Recompute.SELECTIVE, pp=12),  # not every layer recomputed
    dict(tp=8, pp=2),  # pipelined
    dict(tp=8, pp=1, gpus=8),  # one node: the single-node group's, not the weak-scaling one's
    dict(sharding=ZeroStage.OPTIMIZER, grad_bytes=2.0),  # BF16 gradients
    dict(sharding=ZeroStage.PARAMETERS, tp=1),  # FSDP alone
    dict(family="blackwell", seq_len=131072, tp=8, pp=1),  # a chip no held-out group ran on
])
def test_just_past_each_threshold_the_kind_does_not_hold(change):
    assert _kinds(replace(PLAIN, **change)) == frozenset()


def test_step_and_memory_kinds_are_asked_apart():
    traits = replace(PLAIN, seq_len=65536, sharding=ZeroStage.PARAMETERS)
    assert traits.kinds(of_memory=False) == {HeldOutKind.LONG_CONTEXT}
    assert traits.kinds(of_memory=True) == {HeldOutKind.ZERO3_TP_MEMORY}


def test_the_record_says_which_way_and_how_far_by_hand():
    fast = HeldOutRecord(HeldOutKind.LONG_CONTEXT, -0.51, -0.34, -0.385, -0.172, 3)
    assert ("came out with their step 34–51% too fast when it was filed; carried to this release, 17–38% too "
            "fast") in fast.text()
    median = HeldOutRecord(HeldOutKind.SMALL_MODEL_ONE_NODE, -0.42, -0.42, -0.241, -0.241, 35, median_only=True)
    assert "42% too fast at the median when it was filed; carried to this release, 24% too fast at the median" in (
        median.text())
    high = HeldOutRecord(HeldOutKind.DISTRIBUTED_OPTIMIZER_MEMORY, 0.17, 0.27, 0.17, 0.27, 5)
    assert "peak memory 17–27% too high" in high.text() and "--param-bytes 16" in high.text()
    one_end = HeldOutRecord(HeldOutKind.TP8_WITHOUT_PIPELINE, 0.24, 0.24, 0.2491, 0.2491, 2)
    assert "step 24% too slow when it was filed; carried to this release, 25% too slow" in one_end.text()
    mixed = HeldOutRecord(HeldOutKind.TP8_WITHOUT_PIPELINE, 0.24, 0.24, -0.06, 0.09, 2)
    assert "carried to this release, -6%…+9% off" in mixed.text()
    assert mixed.to_dict() == {"kind": "tp8-without-pipeline", "description": HeldOutKind.TP8_WITHOUT_PIPELINE.
                               description, "measure": "step time", "filed": [0.24, 0.24], "now": [-0.06, 0.09],
                               "runs": 2, "median_only": False}


def test_the_bands_carry_the_records_of_the_kinds_asked_and_no_others():
    step = error_band("h100-sxm", Precision.BF16, held_out=frozenset({HeldOutKind.LONG_CONTEXT}))
    assert [h.kind for h in step.held_out] == [HeldOutKind.LONG_CONTEXT]
    assert "issue #24's held-out H100 runs of 32k tokens or more" in step.text()
    assert step.to_dict()["held_out"][0]["kind"] == "long-context"
    assert error_band("h100-sxm", Precision.BF16).held_out == ()
    assert memory_band(held_out=frozenset({HeldOutKind.ZERO3_TP_MEMORY})).held_out[0].kind is (
        HeldOutKind.ZERO3_TP_MEMORY)
    assert held_out_records(None) == ()


def test_the_recorded_ranges_are_what_the_experiment_carries_now():
    """held_out_records.py is written by ``held_out_patterns.py --update-records``: a release that moves a group's
    representatives must write it again, or this fails."""
    from pipesim.analytic.held_out_records import HELD_OUT
    from pipesim.validation.held_out_patterns import kind_records, load_baseline, representatives, standings

    assert kind_records(standings(representatives(), load_baseline())) == HELD_OUT, (
        "the carried ranges moved: python experiments/held_out_patterns.py --update-records")
    assert set(HELD_OUT) == {k.value for k in HeldOutKind}


def test_each_group_of_a_kind_is_of_it_as_its_representatives_run():
    """The predicates are drawn from what the issue says of each group: its own representatives, as run, must be
    of its kind, or the record would never reach the runs it was carried for."""
    from pipesim.api.simulation import simulate
    from pipesim.validation.held_out_patterns import fits_as_run, representatives, simulate_arguments

    checked = set()
    for rep in representatives():
        kind = rep.group.kind
        if kind is None or rep.group.name in checked or not fits_as_run(rep):
            continue
        checked.add(rep.group.name)
        schedule, options = simulate_arguments(rep, as_run=True)
        report = simulate(schedule, **options).model_report
        band = report.memory.band if kind.of_memory else report.error_band
        assert kind in {h.kind for h in band.held_out}, rep.key
    assert len(checked) == 7  # the groups given a kind, one of them (ZeRO-3 with TP) twice


def test_simulate_prints_and_writes_the_record_of_a_long_context_run(capsys):
    args = ["simulate", "--model", "llama3.1-8b", "--tp", "8", "--pp", "2", "--dp", "1", "--mb", "4",
            "--seq-len", "32768", "--recompute", "full"]
    assert cli_main(args) in (0, None)
    text = capsys.readouterr().out
    assert "issue #24's held-out H100 runs of 32k tokens or more came out with their step" in text
    assert cli_main([*args, "--json"]) in (0, None)
    band = json.loads(capsys.readouterr().out)["model_report"]["step_time_band"]
    assert [h["kind"] for h in band["held_out"]] == ["long-context"]


def test_plan_marks_the_candidates_of_a_kind_and_quotes_its_record(capsys):
    args = ["plan", "--model", "llama3.1-8b", "--gpus", "8", "--global-batch", "32", "--top", "3",
            "--schedules", "1f1b"]
    assert cli_main(args) in (0, None)
    text = capsys.readouterr().out
    assert text.count(" 1node") >= 3
    assert "1node: 3 of the listed configurations are of this kind; issue #24's held-out H100 runs of 1B–8B" in text
    assert cli_main([*args, "--json"]) in (0, None)
    ranked = json.loads(capsys.readouterr().out)["ranked"]
    assert all("small-model-one-node" in row["held_out_kinds"] for row in ranked)
