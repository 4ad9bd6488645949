"""Class 3 — no wrong successes: a bad value is refused where it enters (costs files, schedule files, timelines,
program text, torch CSVs, output paths), never read as something else, ignored, or carried into NaN results."""

from __future__ import annotations

import json
import math
import tempfile
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.bad_input.helpers import call, check_refusal, refused, run_process

STAGE_FIELDS = ["forward", "backward", "backward_input", "backward_weight", "reduce_grad", "activation",
                "weight_grad_activation", "p2p_bytes"]
# Values no costs field takes: the wrong type, a boolean (not 0/1), outside [1e-12, 1e15] or not finite.
BAD_NUMBERS = [True, False, "1.0", [1], {"a": 1}, -1, -1e-9, 1e-320, 5e-13, 1e16, 1e308, math.inf, math.nan]


def write(path: Path, document: dict) -> Path:
    if path.suffix == ".json":
        path.write_text(json.dumps(document))
    else:
        path.write_text(yaml.safe_dump(document))
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(["default", "stage", "top"]), field=st.sampled_from(STAGE_FIELDS),
       top=st.sampled_from(["p2p_latency", "optimizer_step", "p2p_bandwidth"]), value=st.sampled_from(BAD_NUMBERS),
       suffix=st.sampled_from([".json", ".yaml"]))
def test_costs_value_outside_the_schema_is_refused_naming_its_key(where, field, top, value, suffix):
    document: dict = {"default": {"forward": 1.0}, "stages": {"1": {"backward": 3.0}}}
    if where == "default":
        document["default"][field] = value
        key = f"default.{field}"
    elif where == "stage":
        document["stages"]["1"][field] = value
        key = f"stages.1.{field}"
    else:
        document[top] = value
        key = top
    with tempfile.TemporaryDirectory() as name:
        path = write(Path(name) / f"costs{suffix}", document)
        line = refused(["simulate", "--pp", 2, "--mb", 2, "--costs", path], Path(name), names=str(path))
        assert key in line or field in line or top in line, line


@pytest.mark.parametrize("stage", ["-1", "1.5", "x", "", " 1e2"])
def test_stage_key_that_is_not_an_index_is_refused(stage, tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"stages": {stage: {"forward": 3}}}))
    refused(["simulate", "--costs", path], tmp_path, names=("stage", "integer ≥ 0"))


@pytest.mark.parametrize("text", ["stages: {-1: {forward: 3}}", "stages: {true: {forward: 3}}",
                                  "stages: {1.5: {forward: 3}}", "stages: {[1]: {forward: 3}}"])
def test_yaml_stage_key_that_is_not_an_index_is_refused(text, tmp_path):
    path = tmp_path / "costs.yaml"
    path.write_text(text + "\n")
    refused(["simulate", "--costs", path], tmp_path, names=str(path))


@pytest.mark.parametrize("unit", [{"a": 1}, 1, "ms", None, ["s"]])
def test_time_unit_outside_the_schema_is_refused(unit, tmp_path):
    path = write(tmp_path / "costs.yaml", {"time_unit": unit})
    refused(["simulate", "--costs", path], tmp_path, names="time_unit")


def test_weight_grad_activation_above_activation_is_refused_per_stage(tmp_path):
    path = write(tmp_path / "a.yaml", {"default": {"activation": 1.0, "weight_grad_activation": 1.5}})
    refused(["simulate", "--costs", path], tmp_path, names="weight_grad_activation")
    path = write(tmp_path / "b.yaml", {"stages": {0: {"activation": 0.25}}})  # default M_W 0.5 > stage 0's M_B
    refused(["simulate", "--costs", path], tmp_path, names=("stages.0", "weight_grad_activation"))
    refused(["simulate", "--stage-cost", "1:activation=0.1"], tmp_path, names=("--stage-cost", "stages.1"))


def test_zero_bandwidth_is_refused_not_free(tmp_path):
    path = write(tmp_path / "costs.yaml", {"p2p_bandwidth": 0, "default": {"p2p_bytes": 100}})
    refused(["simulate", "--costs", path], tmp_path, names=("p2p_bandwidth", "null"))


@pytest.mark.parametrize(("suffix", "text"), [
    (".json", '{"p2p_latency": 1, "p2p_latency": 2}'),
    (".json", '{"default": {"forward": 1, "forward": 5}}'),
    (".yaml", "p2p_latency: 1\np2p_latency: 2\n"),
    (".yaml", "default:\n  forward: 1\n  forward: 5\n"),
])
def test_duplicate_keys_are_refused_not_last_wins(suffix, text, tmp_path):
    path = tmp_path / f"costs{suffix}"
    path.write_text(text)
    refused(["simulate", "--costs", path], tmp_path, names=(str(path), "twice"))


def test_yaml_exponent_numbers_are_numbers(tmp_path):
    # YAML 1.1 reads 2e0 and 989.4e12 as strings; pipesim reads them as the numbers they look like.
    path = tmp_path / "costs.yaml"
    path.write_text("default: {forward: 2e0, backward: 4.0e0, activation_bytes: 989.4e12}\n")
    code, out, err = call(["simulate", "--pp", 2, "--mb", 2, "--costs", path, "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["costs"]["default"]["forward"] == 2.0 and data["costs"]["default"]["activation_bytes"] == 989.4e12


def test_merge_keys_may_override_in_yaml(tmp_path):
    path = tmp_path / "costs.yaml"
    path.write_text("base: &b {forward: 1.0, backward: 2.0}\n"[:0] + "default: {forward: 1.0}\n"
                    "stages:\n  0: &s {forward: 2.0, backward: 2.0}\n  1:\n    <<: *s\n    forward: 3.0\n")
    code, out, err = call(["simulate", "--pp", 2, "--mb", 2, "--costs", path, "--json"])
    assert code == 0, err
    assert json.loads(out)["costs"]["stages"]["1"] == {"forward": 3.0, "backward": 2.0}


# --- schedule files ------------------------------------------------------------------------------------------------

EXITS = {
    "exit-0-in-build": "import sys\n\ndef build(pp, microbatches, chunks=1):\n    sys.exit(0)\n",
    "exit-on-import": "raise SystemExit\n",
    "exit-3-in-build": "def build(pp, microbatches, chunks=1):\n    raise SystemExit(3)\n",
}


@pytest.mark.parametrize("name", sorted(EXITS))
def test_schedule_file_cannot_end_pipesim(name, tmp_path):
    schedule = tmp_path / f"{name.replace('-', '_')}.py"
    schedule.write_text(EXITS[name])
    result = run_process(["simulate", "--schedule", schedule], tmp_path)
    check_refusal(result.returncode, result.stderr, names=(str(schedule), "sys.exit"))


IDS = {"string": '"0"', "float": "0.0", "bool": "False", "negative": "-1", "none": "None", "too-large": "99"}


@pytest.mark.parametrize("kind", sorted(IDS))
def test_microbatch_ids_that_are_not_ints_in_range_are_refused(kind, tmp_path):
    schedule = tmp_path / "ids.py"
    schedule.write_text(textwrap.dedent(f"""
        from pipesim.program.ir import B, F, Schedule

        def build(pp, microbatches, chunks=1):
            order = [F(mb) for mb in range(1, microbatches)] + [B(mb) for mb in range(1, microbatches)]
            return Schedule.from_orders("ids", [[F({IDS[kind]}), B({IDS[kind]})] + order] * pp,
                                        microbatches=microbatches)
    """))
    line = refused(["simulate", "--schedule", schedule, "--pp", 2, "--mb", 2], tmp_path, names=str(schedule))
    assert "microbatch" in line and ("int ≥ 0" in line or "int in 0..1" in line) and "mb -1" not in line


# --- timelines -----------------------------------------------------------------------------------------------------

BAD_CELLS = {
    "rank": ["", "x", "0.5", "-1", "nan", "1e300"], "microbatch": ["", "abc", "1.5", "-2"],
    "start": ["", "nan", "inf", "-inf", "t"], "end": ["", "nan", "inf", "x"], "op": ["", "FWD", "f"],
    "step": ["", "-1", "0.5"], "seq": ["x", "-1"], "bytes": ["nan", "-5"],
}


@pytest.fixture(scope="module")
def good_timeline(tmp_path_factory) -> pd.DataFrame:
    path = tmp_path_factory.mktemp("timeline") / "t.csv"
    code, _, err = call(["simulate", "--pp", 2, "--mb", 2, "--timeline", path])
    assert code == 0, err
    return pd.read_csv(path, dtype=str, keep_default_na=False)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(sorted(BAD_CELLS)), data=st.data(), command=st.sampled_from(["calibrate", "overlay"]))
def test_timeline_cell_outside_the_schema_is_refused_naming_row_and_column(good_timeline, column, data, command):
    value = data.draw(st.sampled_from(BAD_CELLS[column]))
    row = data.draw(st.integers(0, len(good_timeline) - 1))
    frame = good_timeline.copy()
    frame.loc[row, column] = value
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        bad = folder / "bad.csv"
        frame.to_csv(bad, index=False)
        good = folder / "good.csv"
        good_timeline.to_csv(good, index=False)
        argv = (["calibrate", bad, "-o", folder / "costs.json"] if command == "calibrate"
                else ["overlay", good, bad, "-o", folder / "overlay.png"])
        line = refused(argv, folder, names=str(bad))
        assert f"row {row + 2}" in line or "end" in line, line  # the row, or the end < start pair it breaks


def test_timeline_that_ends_before_it_starts_is_refused(good_timeline, tmp_path):
    frame = good_timeline.copy()
    frame.loc[3, "end"] = "-1.0"
    frame.to_csv(tmp_path / "bad.csv", index=False)
    refused(["calibrate", tmp_path / "bad.csv", "-o", tmp_path / "c.json"], tmp_path, names=("row 5", "before"))


# --- program text and torch CSVs with absurd integers ----------------------------------------------------------

huge = st.integers(10**6, 10**40) | st.integers(-10**40, -1)


@settings(max_examples=40, deadline=None)
@given(field=st.sampled_from(["pp", "microbatches", "chunks", "mb", "chunk", "peer", "rank"]), value=huge)
def test_program_text_with_absurd_integers_is_refused(field, value):
    code, text, err = call(["lower", "--pp", 2, "--mb", 2])
    assert code == 0, err
    if field in ("pp", "microbatches", "chunks"):
        text = text.replace(f"\n{field}: ", f"\n{field}: {value}  # was ", 1).replace(f"{value}  # was 2", str(value))
        text = text.replace(f"{value}  # was 1", str(value))
    elif field == "rank":
        text = text.replace("rank 1:", f"rank {value}:", 1)
    else:
        text = text.replace(f" {field}=", f" {field}={value} x=", 1).replace(" x=0", "").replace(" x=1", "")
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "program.txt"
        path.write_text(text)
        refused(["validate", "--program", path], Path(name), names=str(path))


@settings(max_examples=30, deadline=None)
@given(value=st.integers(10, 10**60), where=st.sampled_from(["stage", "microbatch"]))
def test_torch_csv_with_absurd_integers_is_refused(value, where):
    cells = [["0F0", "0B0"], ["1F0", "1B0"]]
    cells[1][0] = f"{value}F0" if where == "stage" else f"1F{value}"
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "schedule.csv"
        path.write_text("\n".join(",".join(row) for row in cells) + "\n")
        refused(["simulate", "--schedule", path], Path(name), names=(str(path), where))


# --- output paths ------------------------------------------------------------------------------------------------

OUTPUT_FLAGS = [
    (["simulate", "--pp", 2, "--mb", 2], "--timeline"), (["simulate", "--pp", 2, "--mb", 2], "--trace"),
    (["simulate", "--pp", 2, "--mb", 2], "--plot"), (["lower"], "-o"), (["export"], "-o"),
    (["sweep", "-s", "1f1b", "--pp", 2, "--mb", 2], "-o"), (["plot", "results.csv"], "-o"),
    (["calibrate", "t.csv"], "-o"), (["overlay", "t.csv", "t.csv"], "-o"),
]


@pytest.mark.parametrize(("argv", "flag"), OUTPUT_FLAGS, ids=lambda x: x if isinstance(x, str) else x[0])
@pytest.mark.parametrize("path", ["", "   "])
def test_empty_output_path_is_refused(argv, flag, path, tmp_path):
    refused([*argv, flag, path], tmp_path, names=(flag, "empty"))
