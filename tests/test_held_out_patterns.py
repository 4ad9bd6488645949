"""Issue #24's held-out groups carried to this release (pipesim/validation/held_out_patterns.py)."""

from __future__ import annotations

import pytest

from pipesim.analytic.allocator import RESERVED_SHARE
from pipesim.cli.main import main as cli_main
from pipesim.validation.held_out_patterns import (
    H100_BF16,
    H100_BF16_PLAIN,
    TORCHTITAN_3D_MEMORY,
    Measure,
    PatternGroup,
    Representative,
    carried_error,
    cli_flags,
    load_baseline,
    predict_now,
    representatives,
    runs_as_named,
    standings,
)


def test_carried_error_scales_the_prediction_not_the_error():
    # 25 % too fast, then a prediction 1.2× longer: 0.75 · 1.2 = 0.9 of the published step
    assert carried_error(-0.25, 1.2) == pytest.approx(-0.10)
    assert carried_error(+0.10, 1.0) == pytest.approx(+0.10)
    assert carried_error(0.0, 0.8) == pytest.approx(-0.20)


def test_cli_flags_spell_the_options_as_simulate_flags():
    flags = cli_flags({"schedule": "interleaved", "seq_len": 8192, "sequence_parallel": True, "fp8": False,
                       "cp": None})
    assert flags == ["--schedule", "interleaved", "--seq-len", "8192", "--sequence-parallel"]


def test_every_representative_has_its_recorded_baseline_and_nothing_else_is_recorded():
    keys = [rep.key for rep in representatives()]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(load_baseline())


def test_the_flags_mean_today_what_the_api_computes(capsys):
    """The baseline release ran the representatives as flags; today's CLI, given the same flags, predicts what
    predict_now (through the API) does, so the ratio compares one configuration."""
    import json

    rep = next(r for r in representatives() if r.group is H100_BF16)
    assert cli_main(["simulate", *cli_flags(rep.options), "--json"]) in (0, None)
    step = json.loads(capsys.readouterr().out)["model_report"]["step_time_s"]
    assert step == pytest.approx(predict_now(rep), rel=1e-9)


def test_standings_take_the_median_ratio_and_refuse_an_unrecorded_run():
    group = PatternGroup("g", Measure.STEP, -0.30, -0.10, "")
    reps = [Representative(group, f"r{i}", {}) for i in range(3)]
    baseline = {rep.key: 1.0 for rep in reps}
    now = {"r0": 1.1, "r1": 1.3, "r2": 1.2}
    (s,) = standings(reps, baseline, now=lambda rep, as_run=False: now[rep.label], fits=lambda rep: True)
    assert s.ratios == (1.1, 1.3, 1.2) and s.median_ratio == pytest.approx(1.2)
    assert s.carried == pytest.approx((0.7 * 1.2 - 1, 0.9 * 1.2 - 1))
    assert s.carried_as_run is None  # the group names no framework and no reserved peak
    with pytest.raises(KeyError, match=r"g \| r0"):
        standings(reps, {}, now=lambda rep, as_run=False: 1.0, fits=lambda rep: True)


def test_a_representative_that_would_not_fit_is_left_out_unless_none_fits():
    group = PatternGroup("g", Measure.STEP, -0.30, -0.10, "")
    reps = [Representative(group, f"r{i}", {}) for i in range(3)]
    baseline = {rep.key: 1.0 for rep in reps}
    now = {"r0": 1.1, "r1": 1.3, "r2": 1.2}
    (s,) = standings(reps, baseline, now=lambda rep, as_run=False: now[rep.label], fits=lambda rep: rep.label != "r1")
    assert (s.ratios, s.unfit) == ((1.1, 1.2), 1)
    (s,) = standings(reps, baseline, now=lambda rep, as_run=False: now[rep.label], fits=lambda rep: False)
    assert (s.ratios, s.unfit) == ((1.1, 1.3, 1.2), 0)


def test_the_single_node_sweeps_8b_at_dp8_does_not_fit_and_its_1b_does():
    """Llama 3.1 8B replicated over 8 GPUs with nanotron's ZeRO-0 holds 18 bytes a parameter, 144 GB before any
    activation: no such run was measured. The 1B's fits."""
    from pipesim.validation.held_out_patterns import SINGLE_NODE, fits_as_run

    reps = {rep.label: rep for rep in representatives() if rep.group is SINGLE_NODE}
    assert not fits_as_run(reps["8b dp8 tp1 pp1 mbs1"])
    assert fits_as_run(reps["1b dp8 tp1 pp1 mbs1"]) and fits_as_run(reps["8b dp1 tp8 pp1 mbs1"])


def test_as_run_predicts_what_the_named_framework_prints():
    """torchtitan logs max_reserved: the as-run memory is the reserved peak under --framework torchtitan, at least
    the allocator's median share above that framework's allocated peak."""
    rep = next(r for r in representatives() if r.group is TORCHTITAN_3D_MEMORY)
    assert runs_as_named(rep.group) and runs_as_named(H100_BF16) and not runs_as_named(H100_BF16_PLAIN)
    allocated = predict_now(Representative(rep.group, rep.label,
                                           {**rep.options, **rep.group.settings, "framework": "torchtitan"}))
    assert predict_now(rep, as_run=True) == pytest.approx(allocated * (1 + RESERVED_SHARE), rel=1e-9)


def test_inferred_frameworks_run_as_their_framework_and_the_weak_scaling_ends_are_two_groups():
    """The A100 group runs as Megatron-DeepSpeed and the single-node sweep as nanotron (both inferred, said in
    their basis); the as-run step is that framework's prediction. Megatron-LM's weak-scaling runs are given by
    the two ends of their range, each a group of its own with its own signed error."""
    from pipesim.validation.held_out_patterns import A100_RECOMPUTE, MEGATRON_SMALL, MEGATRON_TP8, SINGLE_NODE

    for group, framework in ((A100_RECOMPUTE, "megatron-deepspeed"), (SINGLE_NODE, "nanotron")):
        assert runs_as_named(group) and group.basis.startswith("inferred:")
        rep = next(r for r in representatives() if r.group is group)
        named = predict_now(Representative(group, rep.label, {**rep.options, **group.settings,
                                                              "framework": framework}))
        assert predict_now(rep, as_run=True) == pytest.approx(named, rel=1e-9)
        assert predict_now(rep, as_run=True) != pytest.approx(predict_now(rep), rel=1e-3)
    assert A100_RECOMPUTE.settings == {"attention": "unfused"}  # the era's attention, said in its basis
    assert "unfused attention" in A100_RECOMPUTE.basis
    assert (MEGATRON_SMALL.low, MEGATRON_TP8.low) == (-0.26, +0.24)
    assert all(rep.options["tp"] == 8 and rep.options["pp"] == 1
               for rep in representatives() if rep.group is MEGATRON_TP8)


def test_the_small_llama_model_files_are_the_presets_fields():
    """The single-node group's 1B and 3B runs read model files (the baseline release has no such preset): each
    holds its preset's values, and today's prediction from the file is the preset's."""
    import json

    from pipesim.analytic.model_presets import MODEL_PRESETS
    from pipesim.validation.held_out_patterns import SINGLE_NODE, SMALL_MODEL_FILES

    for name, path in SMALL_MODEL_FILES.items():
        preset = MODEL_PRESETS[name]
        assert json.loads(path.read_text()) == {key: getattr(preset, key) for key in json.loads(path.read_text())}
        rep = next(r for r in representatives() if r.group is SINGLE_NODE and r.options["model"] == str(path))
        assert predict_now(rep) == pytest.approx(predict_now(Representative(SINGLE_NODE, rep.label,
                                                                            {**rep.options, "model": name})),
                                                 rel=1e-12)


def test_settings_the_baseline_had_no_flag_for_apply_as_run():
    """A group's ``settings`` (flags the baseline's CLI lacked, said why in its basis) are added as run, and only
    then: Megatron-LM's weak-scaling runs with their data-parallel sync overlapped as its H100 example sets it,
    which shortens the TP-8 step (its sync crosses 32 nodes); the distributed-optimizer memory with BF16
    gradients, which lowers the peak by a BF16 gradient a parameter (2 bytes of the 18). NeMo's FP8 recipes run as
    --framework nemo, the same as Megatron's flags for what they set."""
    from pipesim.validation.held_out_patterns import (
        DISTRIBUTED_OPTIMIZER_MEMORY_BF16,
        H100_FP8,
        MEGATRON_TP8,
    )

    assert MEGATRON_TP8.as_run_flags == "--overlap-grad-reduce, --overlap-param-gather"
    rep = next(r for r in representatives() if r.group is MEGATRON_TP8)
    flagged = predict_now(Representative(MEGATRON_TP8, rep.label, {**rep.options, **MEGATRON_TP8.settings}))
    assert predict_now(rep, as_run=True) == pytest.approx(flagged, rel=1e-12)
    assert predict_now(rep, as_run=True) < 0.95 * predict_now(rep)

    rep = next(r for r in representatives() if r.group is DISTRIBUTED_OPTIMIZER_MEMORY_BF16)
    assert rep.options["tp"] == rep.options["pp"] == 1  # one rank holds the whole 6.7B model's gradients
    saved = predict_now(rep) - predict_now(rep, as_run=True)
    assert saved == pytest.approx(6.74e9 * 2 / 2**30, rel=0.01)

    rep = next(r for r in representatives() if r.group is H100_FP8)
    assert H100_FP8.as_run_flags == "--framework nemo" and H100_FP8.basis.startswith("stated:")
    megatron = predict_now(Representative(H100_FP8, rep.label, {
        **rep.options, "overlap_grad_reduce": True, "overlap_param_gather": True, "loss": "megatron-fused",
        "fp8_params": "both"}))
    assert predict_now(rep, as_run=True) == pytest.approx(megatron, rel=1e-12)
