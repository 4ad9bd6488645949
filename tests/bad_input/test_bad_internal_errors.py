"""Class 1 — no bad input reaches pipesim's "internal error" (exit 1): every input file kind with unreadable
contents, costs of the wrong shape, absurd integers and extreme numbers are refused where they enter."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.bad_input.helpers import never_internal, refused
from tests.bad_input.inputs import INPUT_KINDS, prepare

UNREADABLE = {
    "binary": b"\x00\x01\x02PK\x03\x04\xff\xfe\x00",
    "not-utf8": "default: {forward: caf\xe9}\n".encode("latin-1"),
    "empty": b"",
    "utf16": "default: {forward: 1}\n".encode("utf-16"),
}


@pytest.mark.parametrize("kind", INPUT_KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("contents", sorted(UNREADABLE))
def test_unreadable_input_file_is_refused_naming_it(kind, contents, tmp_path):
    prepare(tmp_path)
    bad = tmp_path / f"input{kind.suffix}"
    bad.write_bytes(UNREADABLE[contents])
    refused(kind.argv(tmp_path, bad), tmp_path, names=str(bad))


@pytest.mark.parametrize("kind", INPUT_KINDS, ids=lambda k: k.name)
def test_input_path_that_is_a_folder_is_refused(kind, tmp_path):
    prepare(tmp_path)
    folder = tmp_path / f"input{kind.suffix}"
    folder.mkdir()
    refused(kind.argv(tmp_path, folder), tmp_path, names=str(folder))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), kind_index=st.integers(0, len(INPUT_KINDS) - 1))
def test_random_bytes_in_any_input_never_cause_an_internal_error(data, kind_index):
    kind = INPUT_KINDS[kind_index]
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        prepare(folder)
        path = folder / f"input{kind.suffix}"
        path.write_bytes(data)
        never_internal(kind.argv(folder, path))


# --- costs files: any JSON-like value in any position of the schema ---------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats() | st.text(max_size=8)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
stage_keys = st.sampled_from(["forward", "backward", "backward_input", "backward_weight", "reduce_grad",
                              "activation", "weight_grad_activation", "activation_bytes", "p2p_bytes", "bogus"])
costs_documents = st.fixed_dictionaries({}, optional={
    "time_unit": json_values | st.sampled_from(["unit", "s", "ms"]),
    "p2p_latency": json_values, "p2p_bandwidth": json_values, "optimizer_step": json_values,
    "default": json_values | st.dictionaries(stage_keys, json_values, max_size=3),
    "stages": json_values | st.dictionaries(st.integers(-3, 5) | st.text(max_size=3),
                                            st.dictionaries(stage_keys, json_values, max_size=2), max_size=3),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=costs_documents, as_yaml=st.booleans())
def test_generated_costs_files_are_read_or_refused_never_crash(document, as_yaml):
    import json

    import yaml

    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / ("costs.yaml" if as_yaml else "costs.json")
        try:
            path.write_text(yaml.safe_dump(document) if as_yaml else json.dumps(document))
        except ValueError:  # NaN keys and the like that the writer itself refuses: nothing to test
            return
        code, out = never_internal(["simulate", "--pp", 2, "--mb", 2, "--costs", path, "--json"])
        if code == 0:  # accepted: then the result is made of finite numbers
            result = json.loads(out)
            assert all(abs(v) < float("inf") for v in (result["metrics"]["makespan"], result["metrics"]["ideal"]))


# --- numbers on the command line: absurd integers, NaN, inf, subnormals, huge --------------------------------

extreme_floats = st.sampled_from(["1e308", "1e-320", "nan", "inf", "-inf", "-0", "5e-324", "1e16", "0x10", "1_0"])


@settings(max_examples=40, deadline=None)
@given(flag=st.sampled_from(["--forward", "--backward", "--backward-input", "--backward-weight", "--comm",
                             "--activation-bytes"]),
       value=extreme_floats | st.floats().map(repr))
def test_extreme_cost_flags_simulate_finitely_or_are_refused(flag, value):
    import json

    code, out = never_internal(["simulate", "--pp", 2, "--mb", 2, "-s", "zb-h1", flag, value, "--json"])
    if code == 0:
        metrics = json.loads(out)["metrics"]
        assert 0 <= metrics["makespan"] < float("inf") and metrics["bubble_fraction"] == metrics["bubble_fraction"]


@settings(max_examples=40, deadline=None)
@given(value=st.integers(-10**40, 10**40).map(str) | st.sampled_from(["9" * 5000, "1e3", "", " ", "0x10"]),
       argv=st.sampled_from([["simulate", "--pp", "{}"], ["topology", "--tp", "{}", "--pp", "{}"],
                             ["sweep", "--pp", "{}", "-o", "/nonexistent/x.csv"],
                             ["calibrate", "missing.csv", "--warmup-steps", "{}", "-o", "/nonexistent/c.json"],
                             ["overlay", "missing.csv", "missing.csv", "--step", "{}"], ["export", "--mb", "{}"]]))
def test_absurd_integer_flags_never_cause_an_internal_error(value, argv):
    if argv[0] in ("simulate", "export") and value.strip().isdigit() and len(value.strip()) < 100:
        return  # a large but well-formed size: refusing work too big to finish is the speed limit's (issue 12)
    never_internal([a.replace("{}", value) for a in argv])


def test_costs_of_the_wrong_shape_name_the_key(tmp_path):
    cases = {"default: 5": "'default'", "stages: [1, 2]": "'stages'", "stages: {0: 3}": "stages.0",
             "p2p_latency: [1]": "p2p_latency", "default: {forward: {a: 1}}": "default.forward"}
    for text, key in cases.items():
        path = tmp_path / "costs.yaml"
        path.write_text(text + "\n")
        refused(["simulate", "--costs", path], tmp_path, names=(str(path), key))


def test_plot_of_a_text_column_is_refused(tmp_path):
    results = tmp_path / "results.csv"
    assert never_internal(["sweep", "-s", "1f1b", "--pp", "2", "--mb", "2", "-q", "-o", results])[0] == 0
    refused(["plot", results, "--y", "schedule", "-o", tmp_path / "figure.png"], tmp_path, names="--y schedule")
