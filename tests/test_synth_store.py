"""The on-disk store of synthesised orders (pipesim/synth/store.py): a stored order is the one synthesis gives,
a bad entry or a switched-off store falls back to synthesising, and only deterministic results are kept."""

from __future__ import annotations

import pytest

from pipesim.program.ir import PipelineShape
from pipesim.sim.costs import CostModel
from pipesim.synth import search, store
from pipesim.synth.problem import SynthesisProblem


def _problem() -> SynthesisProblem:
    return SynthesisProblem.from_costs(PipelineShape(4, 8), CostModel(), 8.0)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(store.CACHE_ENV, str(tmp_path))
    return tmp_path


def _forbid_synthesis(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("synthesised although the order was stored")

    monkeypatch.setattr(search, "synthesize", refuse)


def test_a_stored_order_is_the_synthesised_one_and_is_not_searched_again(cache_dir, monkeypatch):
    first = search.synthesize_schedule(4, 8, 1, None, 8.0)
    entries = list(cache_dir.rglob("*.json"))
    assert len(entries) == 1 and store.code_fingerprint()[:32] in str(entries[0])
    _forbid_synthesis(monkeypatch)
    again = search.synthesize_schedule(4, 8, 1, None, 8.0)
    assert again.orders == first.orders
    assert again.name == first.name


def test_a_different_problem_is_a_different_entry(cache_dir):
    search.synthesize_schedule(4, 8, 1, None, 8.0)
    search.synthesize_schedule(4, 8, 1, None, 6.0)
    assert len(list(cache_dir.rglob("*.json"))) == 2


@pytest.mark.parametrize(
    "text", ["not json", '{"origin": "x"}', '{"origin": "x", "orders": [{"kinds": "F", "stages": [0], "mbs": [0]}]}']
)
def test_a_bad_entry_is_treated_as_absent(cache_dir, text):
    problem = _problem()
    path = store.entry_path(problem, search.Method.LOCAL.value)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert store.load(problem, search.Method.LOCAL.value) is None
    schedule = search.synthesize_schedule(4, 8, 1, None, 8.0)  # synthesised, and the entry rewritten whole
    assert store.load(problem, search.Method.LOCAL.value)[0] is not None
    assert sum(len(order) for order in schedule.orders) == 3 * 4 * 8


def test_an_empty_variable_switches_the_store_off(tmp_path, monkeypatch):
    monkeypatch.setenv(store.CACHE_ENV, "")
    monkeypatch.chdir(tmp_path)
    assert store.cache_root() is None
    search.synthesize_schedule(4, 8, 1, None, 8.0)
    assert not list(tmp_path.rglob("*.json"))


def test_an_unwritable_folder_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(store.CACHE_ENV, str(blocker))  # a file where the folder should be
    schedule = search.synthesize_schedule(4, 8, 1, None, 8.0)
    assert schedule.orders


def test_exact_solutions_are_not_kept(cache_dir):
    search.synthesize_schedule(2, 2, 1, None, 4.0, method=search.Method.EXACT)
    assert not list(cache_dir.rglob("*.json"))


def test_the_default_folder_is_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(store.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert store.cache_root() == tmp_path / "pipesim" / "synth"
