"""The simulator against an independent naive SimPy model, and its timeline, memory and cost handling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.io.timeline import COLUMNS
from pipesim.program.build import build_program
from pipesim.program.ir import F, I, Schedule, W
from pipesim.program.lowering import lower
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate
from tests.naive_simpy import naive_simulate

costs_strategy = st.builds(
    lambda f, b, lat, byts, bw, slow: CostModel(
        StageCosts(forward=f, backward=b, p2p_bytes=byts), overrides={0: {"forward": f * slow}},
        p2p_latency=lat, p2p_bandwidth=bw,
    ),
    st.floats(0.1, 3), st.floats(0.1, 5), st.floats(0, 2), st.floats(0, 100), st.floats(10, 1000), st.floats(1, 3),
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 3)]),
    st.integers(1, 6), st.integers(1, 4), costs_strategy,
)
def test_identical_to_naive_simpy_model(schedule, pp, groups, costs):
    name, chunks = schedule
    program = build_program(name, pp, pp * groups, chunks).program
    result = simulate(program, costs)
    naive = np.array([pair for rank in naive_simulate(program, costs) for pair in rank])
    np.testing.assert_allclose(result.start, naive[:, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.end, naive[:, 1], rtol=1e-12, atol=1e-12)


def test_timeline_schema_and_order(program_of):
    program = program_of("1f1b", 3, 4)
    frame = simulate(program).timeline
    assert list(frame.columns) == COLUMNS
    assert len(frame) == program.num_instructions
    for rank, code in enumerate(program.ranks):
        rows = frame[frame["rank"] == rank]
        assert list(rows["seq"]) == list(range(len(code)))
        assert list(rows["op"]) == [ins.op.value for ins in code]
    assert set(frame["source"]) == {"predicted"}
    # A rank's compute never overlaps itself.
    for _, rows in frame[frame["op"].isin(["F", "B"])].groupby("rank"):
        assert (rows["start"].to_numpy()[1:] >= rows["end"].to_numpy()[:-1] - 1e-12).all()


def test_communication_latency_delays_the_pipeline(program_of):
    gpipe = program_of("gpipe", 4, 8)
    base = simulate(gpipe).metrics.makespan
    slow = simulate(gpipe, CostModel(p2p_latency=0.5)).metrics.makespan
    # GPipe: the forward wave and the backward wave each cross 3 boundaries once.
    assert slow == pytest.approx(base + 2 * 3 * 0.5)
    # 1F1B's steady state also waits for each gradient's round trip, so it pays more.
    one_f_one_b = program_of("1f1b", 4, 8)
    assert simulate(one_f_one_b, CostModel(p2p_latency=0.5)).metrics.makespan > base + 2 * 3 * 0.5


def test_link_serializes_transfers(program_of):
    """Bandwidth-bound transfers queue on their link: arrivals on a link are spaced by the transfer time."""
    program = program_of("gpipe", 2, 4)
    costs = CostModel(StageCosts(forward=0.1, p2p_bytes=100.0), p2p_bandwidth=50.0)  # 2 time units per transfer
    frame = simulate(program, costs).timeline
    sends = frame[(frame["op"] == "SEND_F") & (frame["rank"] == 0)]
    assert np.diff(sends["end"].to_numpy()) == pytest.approx([2.0, 2.0, 2.0])


def test_stage_overrides_make_a_bottleneck(program_of):
    program = program_of("1f1b", 4, 16)
    costs = CostModel(overrides={3: {"forward": 2.0, "backward": 4.0}})
    metrics = simulate(program, costs).metrics
    assert metrics.ideal == 16 * 6.0
    assert metrics.ranks[3].busy == 96.0 and metrics.ranks[0].busy == 48.0


def test_split_backward_memory_accounting():
    """I frees M_B − M_W, W frees M_W (Zero Bubble's accounting)."""
    schedule = Schedule.from_orders("split", [[F(0), F(1), I(0), I(1), W(0), W(1)]], microbatches=2)
    costs = CostModel(StageCosts(activation=1.0, weight_grad_activation=0.25, activation_bytes=1000.0))
    result = simulate(lower(schedule), costs)
    assert list(result.memory.curve["activations"]) == [1.0, 2.0, 1.25, 0.5, 0.25, 0.0]
    assert result.memory.peak_activations == (2.0,)
    assert result.memory.peak_bytes == (2000.0,)
    assert result.metrics.makespan == 1 + 1 + 1 + 1 + 1 + 1


def test_costs_file_round_trip(tmp_path):
    costs = CostModel(StageCosts(forward=0.5), overrides={2: {"backward": 3.0}}, p2p_latency=0.1, time_unit="s")
    for name in ("c.json", "c.yaml"):
        costs.save(tmp_path / name)
        assert CostModel.load(tmp_path / name) == costs


@pytest.mark.parametrize(("name", "pp", "mb", "chunks"), [("1f1b", 4, 8, 1), ("1f1b", 3, 2, 1),
                                                          ("interleaved", 4, 8, 2), ("interleaved", 2, 6, 3)])
def test_naive_whole_job_agrees(name, pp, mb, chunks):
    """The benchmark's yardstick builds the schedule itself: it must compute what pipesim computes."""
    import json

    from tests.naive_simpy import naive_whole_job

    costs = CostModel(StageCosts(forward=1.3, backward=2.2), p2p_latency=0.4, optimizer_step=0.3,
                      overrides={0: {"reduce_grad": 0.5}})
    naive = json.loads(naive_whole_job(name, pp, mb, chunks, costs))
    result = simulate(build_program(name, pp, mb, chunks).program, costs)
    assert naive["makespan"] == pytest.approx(result.metrics.makespan, abs=1e-9)
    assert naive["busy"] == pytest.approx([r.busy for r in result.metrics.ranks], abs=1e-9)
    assert naive["peak_activations"] == pytest.approx(list(result.memory.peak_activations), abs=1e-9)


def test_metrics_of_rows_in_any_order_are_the_metrics_of_the_timeline(program_of):
    """A simulated table holds each rank's rows in program order, which metrics read without sorting; a measured
    timeline may come in any order, and the same rows shuffled give the same busy times and bubble."""
    from pipesim.sim.metrics import metrics_from_arrays

    result = simulate(program_of("dualpipe-v", 4, 8), steps=2)
    table = result.table
    in_order = metrics_from_arrays(table.rank, table.op, result.start, result.end, 4)
    shuffle = np.random.default_rng(0).permutation(table.num_rows)
    shuffled = metrics_from_arrays(table.rank[shuffle], table.op[shuffle], result.start[shuffle],
                                   result.end[shuffle], 4)
    assert shuffled == in_order
    assert in_order.bubble_fraction == result.metrics.bubble_fraction
