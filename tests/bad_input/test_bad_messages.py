"""Class 5 — messages: one line that names the input and the fix, in the user's words (plain numbers, not numpy
reprs), and the same suffix rules in every command."""

from __future__ import annotations

import json

import pytest

from tests.bad_input.helpers import call, refused


@pytest.fixture
def timeline(tmp_path):
    path = tmp_path / "t.csv"
    code, _, err = call(["simulate", "--pp", 2, "--mb", 2, "--timeline", path])
    assert code == 0, err
    return path


def test_missing_step_lists_the_steps_as_plain_numbers(timeline, tmp_path):
    line = refused(["overlay", timeline, timeline, "--step", 99], tmp_path, names=("step 99", "--step"))
    assert "np." not in line and "int64" not in line
    assert "step(s) 0" in line


def test_upper_case_suffixes_are_accepted_everywhere(timeline, tmp_path):
    results, costs = tmp_path / "R.CSV", tmp_path / "C.JSON"
    for argv in (["simulate", "--pp", 2, "--mb", 2, "--timeline", tmp_path / "T.PARQUET", "--plot", tmp_path / "G.PNG",
                  "--trace", tmp_path / "TRACE.JSON"],
                 ["sweep", "-s", "1f1b", "--pp", 2, "--mb", 2, "-q", "-o", results],
                 ["plot", results, "-o", tmp_path / "P.SVG"],
                 ["calibrate", timeline, "-o", costs],
                 ["simulate", "--pp", 2, "--mb", 2, "--costs", costs],
                 ["overlay", timeline, tmp_path / "T.PARQUET", "-o", tmp_path / "O.PDF"]):
        code, _, err = call(argv)
        assert code == 0, (argv, err)
    assert json.loads(costs.read_text())["time_unit"] == "s"


@pytest.mark.parametrize("argv", [
    ["simulate", "--forward", "nan"], ["simulate", "--stage-cost", "0:forward=inf"], ["calibrate", "x.csv",
     "--warmup-steps", "-100", "-o", "c.json"], ["sweep", "--mb", "8,,-1", "-o", "x.csv"],
    ["simulate", "--stage-cost=-1:forward=1"], ["overlay", "a.csv", "b.csv", "--step", "-3"],
])
def test_flag_errors_name_the_flag_and_the_rule(argv, tmp_path):
    line = refused(argv, tmp_path)
    flag = next(a for a in argv if a.startswith("--")).partition("=")[0]
    assert f"argument {flag}" in line and ("must be" in line or "is not" in line), line


def test_costs_file_calibrated_for_more_stages_says_so(tmp_path):
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"stages": {"3": {"forward": 2.0}}}))
    line = refused(["simulate", "--pp", 2, "--mb", 2, "--costs", costs], tmp_path, names=(str(costs), "stage 3"))
    assert "--stage-cost" not in line  # the flag the user never passed is not blamed


@pytest.mark.parametrize(("argv", "names"), [
    (["simulate", "--model", "llama3.1-8b", "--recompute-layers", "2"], ("--recompute-layers 2", "--recompute full")),
    (["simulate", "--model", "llama3.1-8b", "--fp8-params"], ("--fp8-params", "add --fp8")),
    (["simulate", "--model", "llama3.1-8b", "--fp8", "--fp8-params"], ("--fp8-params", "--distributed-optimizer")),
    (["simulate", "--model", "llama3.1-8b", "--fp8", "--dp", "2", "--zero", "3", "--fp8-params", "rowwise"],
     ("--fp8-params under ZeRO-3", "drop it")),
    (["simulate", "--model", "llama3.1-8b", "--micro-batch-size", "100000"], ("--micro-batch-size 100000",
                                                                               "--seq-len 8192")),
    (["simulate", "--model", "llama3.1-8b", "--pp", "64"], ("32 layers", "pp·v = 64")),
])
def test_a_model_too_large_or_too_shallow_for_the_layout_names_the_input(argv, names, tmp_path):
    """A shape whose costs leave pipesim's range, or more stages than layers: one line naming what was given,
    not an internal field (``stages.3.activation_bytes``) nor a split with empty stages."""
    line = refused(argv, tmp_path)
    assert all(name in line for name in names), line


def test_plan_with_no_usable_cp_degree_says_which_flag_to_change(tmp_path):
    """Every asked --cp dropped (too few tokens a cp rank, or not dividing the GPUs): one line naming --cp and the
    fix, where plan once raised an internal error."""
    base = ["plan", "--model", "llama2-7b", "--gpus", 8, "--global-batch", 16]
    refused([*base, "--cp", 2, "--seq-len", 2048], tmp_path, names=("--cp 2", "--min-cp-tokens"))
    refused([*base, "--cp", 3, "--seq-len", 12288], tmp_path, names=("--cp 3", "--gpus 8"))
