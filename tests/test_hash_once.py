"""Layouts and models hash once per instance (pipesim.hash_once): the same hash a dataclass gives, never carried
across processes in a pickle."""

import dataclasses
import os
import pickle
import subprocess
import sys

from pipesim.analytic.layout import Layout, Precision, Recompute, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS


def _dataclass_hash(value) -> int:
    return hash(tuple(getattr(value, f.name) for f in dataclasses.fields(value) if f.compare))


def test_the_hash_is_the_dataclass_hash_and_equal_values_share_it():
    a = Layout(tp=2, dp=4, recompute=Recompute.FULL, precision=Precision.FP8)
    b = Layout(tp=2, dp=4, recompute=Recompute.FULL, precision=Precision.FP8)
    assert a is not b and a == b
    assert hash(a) == hash(b) == _dataclass_hash(a)
    assert hash(a) != hash(dataclasses.replace(a, dp=8))
    model = MODEL_PRESETS["llama3.1-8b"]
    assert hash(model) == _dataclass_hash(model) == hash(dataclasses.replace(model))
    assert {a: 1}[b] == 1


def test_a_pickle_carries_the_fields_only():
    layout = Layout(tp=2, dp=4, zero=ZeroStage.OPTIMIZER)
    hash(layout), layout.sharding  # both kept beside the fields now
    state = pickle.loads(pickle.dumps(layout)).__dict__
    assert set(state) == {f.name for f in dataclasses.fields(Layout)}


def test_an_unpickled_layout_finds_its_equal_in_another_process():
    # str hashes differ between processes: a hash computed here and pickled with the layout would not be the one
    # an equal layout gets there, and a dict keyed by one would miss the other
    layout = Layout(tp=2, dp=4, recompute=Recompute.SELECTIVE)
    hash(layout)
    script = ("import pickle, sys\nfrom pipesim.analytic.layout import Layout, Recompute\n"
              "sent = pickle.loads(sys.stdin.buffer.read())\n"
              "print(hash(sent) == hash(Layout(tp=2, dp=4, recompute=Recompute.SELECTIVE)))")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(layout), capture_output=True,
                             check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        assert out.stdout.decode().strip() == "True"
