"""The committed zb-auto orders (tests/synth_cache.py) are what synthesis gives today: fresh, feasible, and equal
to a live search — for the smallest published problem in the default run, for every one with
``PIPESIM_FULL_MATRIX=1`` (about two CPU-minutes)."""

from __future__ import annotations

import os

import pytest

from pipesim.synth.search import synthesize
from tests.synth_cache import (
    REBUILD,
    CachedOrders,
    decode,
    encode,
    load,
    problem_key,
    problem_of,
    synth_fingerprint,
    synthesised_runs,
)

DATA = load()
RUNS = synthesised_runs()
CHECKED_LIVE = RUNS if os.environ.get("PIPESIM_FULL_MATRIX") == "1" else RUNS[:1]


def test_the_cache_is_fresh_and_holds_every_synthesised_row():
    assert DATA["fingerprint"] == synth_fingerprint(), (
        f"pipesim/synth changed since tests/data/synth_orders.json.gz was written: rebuild it with {REBUILD} "
        "(until then the published-runs table synthesises live, about two CPU-minutes)"
    )
    assert len(RUNS) >= 21
    missing = [run.label for run in RUNS if problem_key(problem_of(run)) not in DATA["entries"]]
    assert not missing, f"not cached (costs changed?): {missing}; {REBUILD}"


def test_orders_round_trip_through_the_text_form():
    lines = next(iter(DATA["entries"].values()))["orders"]
    assert encode(decode(lines)) == lines


@pytest.mark.parametrize("run", CHECKED_LIVE, ids=lambda run: run.label.replace(" ", "_"))
def test_a_cached_order_is_what_synthesis_gives_now(run):
    problem = problem_of(run)
    cached = CachedOrders(DATA).result(problem)
    assert cached is not None, f"{run.label}: not in the cache, or its orders are infeasible; {REBUILD}"
    live = synthesize(problem)  # imported by name: the real search, not conftest's memo
    assert cached.orders == live.orders, f"{run.label}: the cached order is not today's; {REBUILD}"
    assert cached.evaluation.max_span == live.evaluation.max_span
