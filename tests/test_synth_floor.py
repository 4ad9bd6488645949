"""The floor under a synthesis key (pipesim.synth.problem.key_floor) and the early stop it allows: no complete
order goes below the floor, and a search that stops on it returns exactly what the full search returns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.program.ir import PipelineShape, Placement
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.synth import search
from pipesim.synth.candidates import sequential_orders
from pipesim.synth.evaluate import evaluate
from pipesim.synth.greedy import Infeasible
from pipesim.synth.problem import SynthesisProblem, key_floor


def _problem(pp: int, m: int, chunks: int, f: int, i: int, w: int, comm: int, limit: float | None):
    stage = StageCosts(forward=f, backward=i + w, backward_input=i, backward_weight=w)
    # Bandwidth 1 B/s and comm-byte boundaries: the transfer is `comm` seconds, an integer like the passes.
    costs = CostModel(default=replace_bytes(stage, comm), p2p_latency=0.0, p2p_bandwidth=1.0 if comm else None)
    shape = PipelineShape(pp, m, chunks, Placement.LOOP if chunks == 1 else Placement.V)
    return SynthesisProblem.from_costs(shape, costs, limit)


def replace_bytes(stage: StageCosts, comm: int) -> StageCosts:
    from dataclasses import replace

    return replace(stage, p2p_bytes=float(comm)) if comm else stage


problems = st.builds(
    _problem,
    pp=st.integers(2, 4),
    m=st.integers(1, 6),
    chunks=st.sampled_from([1, 2]),
    f=st.integers(1, 3),
    i=st.integers(1, 3),
    w=st.integers(1, 3),
    comm=st.integers(0, 2),
    limit=st.sampled_from([None, 2.0, 4.0, 8.0]),
)


@settings(max_examples=60, deadline=None)
@given(problems)
def test_no_complete_order_goes_below_the_floor(problem):
    floor = key_floor(problem)
    assert floor is not None  # integer costs (halves on the V placement): exact
    orders = [sequential_orders(problem)]
    for make, _ in search._heuristic_candidates(problem):
        try:
            orders.append(make())
        except Infeasible:
            continue
    for order in orders:
        result = evaluate(problem, order)
        if not result.completes:
            continue
        key = (round(result.max_span, 9), round(result.makespan, 9), round(result.total_span, 9))
        assert all(k >= f for k, f in zip(key, floor, strict=True)), (key, floor)


@settings(max_examples=25, deadline=None)
@given(problems)
def test_stopping_on_the_floor_gives_the_full_search_result(problem):
    full = _without_floor(problem)
    early = search.synthesize(problem)
    assert early.orders == full.orders
    assert early.origin == full.origin
    assert early.evaluation.key == full.evaluation.key


def _without_floor(problem):
    original = search.key_floor
    search.key_floor = lambda p: None
    try:
        return search.synthesize(problem)
    finally:
        search.key_floor = original


def test_unit_costs_stop_at_zb_h2_when_it_has_no_bubble():
    problem = _problem(8, 32, 1, 1, 1, 1, 0, 16.0)
    result = search.synthesize(problem)
    assert result.evaluation.key == key_floor(problem) == (96.0, 103.0, 768.0)
    assert result.origin == "built-in zb-h2"
    assert "local search" not in result.timings  # stopped before it


def test_no_floor_where_sums_are_not_exact():
    tenth = SynthesisProblem.from_costs(PipelineShape(2, 4), CostModel(default=StageCosts(forward=0.1)), None)
    assert key_floor(tenth) is None  # 0.1 is no multiple of a power of two: sums round
    huge = SynthesisProblem.from_costs(PipelineShape(2, 8), CostModel(default=StageCosts(forward=2.0**49)), None)
    assert key_floor(huge) is None  # whole, but their sums pass 2^53
    assert key_floor(_problem(2, 4, 2, 1, 1, 1, 0, None)) is not None  # V halves: exact


@pytest.mark.parametrize("chunks", [1, 2])
def test_floor_makespan_counts_the_warm_up(chunks):
    # pp 4, unit passes per rank, 2 s transfers: rank 3's first stage starts after F through the stages before
    # it. LOOP: stages 0-2, one per rank (F = 1), 3 crossings. V: stages 0-2 of 1/2 each, 3 crossings.
    problem = _problem(4, 4, chunks, 1, 1, 1, 2, None)
    floor = key_floor(problem)
    work = 4 * 3.0  # 4 microbatches of F + I + W through one rank's share
    warm_up = 3 * (1.0 / chunks + 2)
    assert floor == (work, warm_up + work, 4 * work)
