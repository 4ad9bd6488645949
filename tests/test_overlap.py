"""Overlapped forward-and-backward pairs (torch's OVERLAP_F_B, DualPipe's overlapped chunks): the IR, its
cost model, both engines against the naive model, validation, memory, metrics and the schedules using it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.cli.main import main
from pipesim.errors import DeadlockError, PipesimError, ScheduleError
from pipesim.io.torch_csv import CsvFormat, export_rows, import_rows
from pipesim.program.build import build_program
from pipesim.program.grouped import grouped_program, relabel
from pipesim.program.ir import B, F, I, Instruction, Op, Program, Schedule, W, instruction, overlap
from pipesim.program.lowering import lower
from pipesim.program.table import KIND_RECV
from pipesim.program.validate import CommSemantics, validate
from pipesim.sim.closed_forms import interleaved_bubble
from pipesim.sim.costs import CostModel, StageCosts, pair_duration
from pipesim.sim.simulator import Engine, simulate
from tests.naive_simpy import naive_simulate

PAIR_SCHEDULES = [("dualpipe-v", 2), ("interleaved-overlap", 1), ("interleaved-overlap", 2),
                  ("interleaved-overlap", 3)]


def _microbatches(name: str, pp: int, groups: int) -> int:
    return 2 * pp + 2 * (groups - 1) if name == "dualpipe-v" else pp * groups


def _sequential(schedule: Schedule) -> Schedule:
    """The same compute order with every pair's halves run one after the other."""
    plain = tuple(tuple(instruction(i.op, i.mb, i.chunk) for i in order) for order in schedule.orders)
    return Schedule(schedule.name, schedule.shape, plain)


# --- the pair's cost ------------------------------------------------------------------------------------

def test_pair_without_all_to_all_costs_forward_plus_backward():
    plain = StageCosts(forward=1.5, backward=2.5, backward_input=1.2)
    assert pair_duration(plain, plain) == 4.0
    assert pair_duration(plain, plain, Op.I) == pytest.approx(2.7)


def test_pair_hides_each_all_to_all_behind_the_other_half():
    # c_f = 4 − 1 = 3, c_b = 6 − 2 = 4: both all-to-alls hide, the pair is the compute, 7 instead of 10.
    f = StageCosts(forward=4, a2a_forward=1)
    b = StageCosts(forward=4, backward=6, a2a_backward=2)
    assert pair_duration(f, b) == 7.0
    # 10% slowdown from the SMs the communication takes: 7·1.1; the larger of the two stages' counts.
    assert pair_duration(f, StageCosts(backward=6, a2a_backward=2, overlap_slowdown=0.1)) == pytest.approx(7.7)


def test_pair_exposes_the_all_to_all_compute_cannot_cover():
    # c_f = 0.5, c_b = 0.5; a2a_f 1.5 exceeds c_b by 1.0, a2a_b 2.5 exceeds c_f by 2.0: 1 + 1 + 2.
    f = StageCosts(forward=2, a2a_forward=1.5)
    b = StageCosts(backward=3, a2a_backward=2.5)
    assert pair_duration(f, b) == pytest.approx(4.0)
    # An I carries the backward's all-to-all, capped at its own length: c_b = 0, all of I exposed beyond c_f.
    split = StageCosts(backward=3, backward_input=1, a2a_backward=2.5)
    assert pair_duration(f, split, Op.I) == pytest.approx(0.5 + max(0, 1.5 - 0) + max(0, 1 - 0.5))


def test_costs_file_fields_round_trip_and_are_checked(tmp_path):
    model = CostModel(StageCosts(forward=2, backward=4, a2a_forward=0.5, a2a_backward=1, overlap_slowdown=0.15),
                      overrides={1: {"a2a_forward": 0.25}})
    path = tmp_path / "costs.yaml"
    model.save(path)
    assert CostModel.load(path) == model
    # a chunk of v holds 1/v of the all-to-all as of the compute; the slowdown is a fraction, not shared
    half = model.chunk_costs(0, 2)
    assert (half.a2a_forward, half.a2a_backward, half.overlap_slowdown) == (0.25, 0.5, 0.15)
    with pytest.raises(PipesimError, match="a2a_forward=3 exceeds forward=2"):
        CostModel.from_dict({"default": {"forward": 2, "a2a_forward": 3}})
    with pytest.raises(PipesimError, match=r"stages.0: a2a_backward=5 exceeds backward=4"):
        CostModel.from_dict({"default": {"backward": 4}, "stages": {0: {"a2a_backward": 5}}})
    with pytest.raises(PipesimError, match=r"overlap_slowdown=1.5 must be a fraction"):
        CostModel.from_dict({"default": {"overlap_slowdown": 1.5}})
    with pytest.raises(PipesimError, match="a2a_forward"):
        CostModel.from_dict({"default": {"a2a_forward": -1}})


# --- the IR ---------------------------------------------------------------------------------------------

def test_pair_text_round_trips():
    program = build_program("dualpipe-v", 3, 6).program
    text = program.to_text()
    assert "OVERLAP_F_B(F mb=" in text
    assert Program.from_text(text) == program
    # one instruction's own text form also carries the flag
    tail = next(i for i in program.ranks[0] if i.overlap)
    assert str(tail).endswith("overlap=1") and Instruction.parse(str(tail)) == tail
    with pytest.raises(ScheduleError, match="exactly two instructions"):
        Program.from_text(text.replace("; B mb=", "; B mb=0 chunk=0; B mb=", 1))


def test_pair_cli_round_trip(tmp_path):
    text = tmp_path / "p.txt"
    assert main(["lower", "--schedule", "dualpipe-v", "--pp", "2", "--mb", "4", "-o", str(text)]) == 0
    assert "OVERLAP_F_B(" in text.read_text()
    assert main(["validate", "--program", str(text)]) == 0


@pytest.mark.parametrize(("name", "chunks"), PAIR_SCHEDULES)
@pytest.mark.parametrize("fmt", list(CsvFormat))
def test_torch_csv_keeps_the_pairs(name, chunks, fmt):
    program = build_program(name, 4, 8, chunks).program
    rows = export_rows(program, fmt)
    assert any(cell.endswith(")OVERLAP_F_B") for row in rows for cell in row)
    assert import_rows(rows).program.ranks == program.ranks


def test_torch_csv_pair_either_order_and_bad_pairs():
    rows = [["0F0", "0F1", "(0B0;0F2)OVERLAP_F_B", "0B1", "0B2"]]
    order = import_rows(rows).schedule.orders[0]
    assert order[2:4] == overlap(F(2), B(0))
    with pytest.raises(ScheduleError, match="one forward and one backward"):
        import_rows([["0F0", "(0F1;0F2)OVERLAP_F_B"]])


def test_overlap_refuses_what_is_not_a_pair():
    with pytest.raises(ScheduleError, match="starts with a plain F"):
        overlap(B(0), B(1))
    with pytest.raises(ScheduleError, match="ends with a plain B or I"):
        overlap(F(0), W(1))
    with pytest.raises(ScheduleError, match="its own forward"):
        overlap(F(1), B(1))
    tail = overlap(F(1), B(0))[1]
    bad = Schedule.from_orders("bad", [[F(0), tail, F(1), B(1)]], microbatches=2)
    with pytest.raises(ScheduleError, match="second half of an overlapped pair"):
        lower(bad)


# --- lowering and validation ----------------------------------------------------------------------------

def test_lowering_puts_receives_before_and_sends_after_the_pair():
    program = build_program("interleaved-overlap", 3, 6, 2).program
    for code in program.ranks:
        for index, ins in enumerate(code):
            if not ins.overlap:
                continue
            head = code[index - 1]
            assert head.op is Op.F
            # both halves' receives sit before the pair, both halves' sends after it
            for half in (head, ins):
                recv = [j for j, c in enumerate(code) if c.op.is_recv and (c.mb, c.chunk) == (half.mb, half.chunk)
                        and (c.op is Op.RECV_F) == (half.op is Op.F)]
                send = [j for j, c in enumerate(code) if c.op.is_send and (c.mb, c.chunk) == (half.mb, half.chunk)
                        and (c.op is Op.SEND_F) == (half.op is Op.F)]
                assert all(j < index - 1 for j in recv) and all(j > index for j in send)


@pytest.mark.parametrize(("name", "chunks"), PAIR_SCHEDULES)
@pytest.mark.parametrize(("pp", "groups"), [(1, 2), (2, 1), (2, 3), (3, 2), (4, 2)])
def test_pair_schedules_validate_under_every_semantics(name, chunks, pp, groups):
    program = build_program(name, pp, _microbatches(name, pp, groups), chunks).program
    validate(program, CommSemantics.BUFFERED)
    grouped = grouped_program(program)  # what the executor runs on NCCL
    validate(grouped, CommSemantics.GROUPED)
    reordered = relabel(program)  # the grouped-safe order, safe even with each send on its own
    assert np.array_equal(reordered.columns.overlap_mask.nonzero()[0].size, program.columns.overlap_mask.sum())
    for semantics in CommSemantics:
        validate(reordered, semantics)


def _edit(program: Program, rank: int, edit) -> Program:
    ranks = [list(code) for code in program.ranks]
    edit(ranks[rank])
    return Program(program.name, program.shape, ranks)


def test_validator_names_broken_pairs():
    program = lower(Schedule.from_orders("p", [[F(0), F(1), *overlap(F(2), B(0)), B(1), B(2)],
                                               [F(0), B(0), F(1), B(1), F(2), B(2)]], microbatches=3))
    validate(program)
    code = program.ranks[0]
    tail = next(j for j, c in enumerate(code) if c.overlap)

    def detach(rows):  # the instruction before the pair moved between its F and its flagged half
        rows.insert(tail - 1, rows.pop(tail - 2))

    with pytest.raises(ScheduleError, match="not an F"):
        validate(_edit(program, 0, detach))


def test_a_pair_waiting_on_its_own_forward_deadlocks():
    # Rank 0 pairs F(1) with B(0), whose gradient comes from rank 1 only after rank 1 ran F(1): that F(1)
    # needs the activation rank 0's pair sends when it is done — a cycle through the pair.
    orders = [[F(0), *overlap(F(1), B(0)), B(1)], [F(1), F(0), B(0), B(1)]]
    program = lower(Schedule.from_orders("cycle", orders, microbatches=2))
    with pytest.raises(DeadlockError, match=r"rank 0 waits at F mb=1 chunk=0 for rank 1 .*RECV_B mb=0"):
        validate(program)
    with pytest.raises(DeadlockError):
        simulate(program)


# --- both engines against the naive model ---------------------------------------------------------------

pair_costs = st.builds(
    lambda f, b, af, ab, slow, lat, byts: CostModel(
        StageCosts(forward=f, backward=b, backward_input=b / 2, backward_weight=b / 2, a2a_forward=f * af,
                   a2a_backward=b * ab, overlap_slowdown=slow, p2p_bytes=byts),
        overrides={0: {"forward": f * 1.5, "a2a_forward": f * af}}, p2p_latency=lat, p2p_bandwidth=50.0,
    ),
    st.floats(0.1, 3), st.floats(0.1, 5), st.floats(0, 1), st.floats(0, 1), st.floats(0, 0.3),
    st.floats(0, 1), st.floats(0, 100),
)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PAIR_SCHEDULES), st.integers(1, 5), st.integers(1, 3), pair_costs,
       st.sampled_from([Engine.SIMPY, Engine.GRAPH]))
def test_engines_identical_to_naive_model_with_pairs(schedule, pp, groups, costs, engine):
    name, chunks = schedule
    program = build_program(name, pp, _microbatches(name, pp, groups), chunks).program
    result = simulate(program, costs, engine=engine)
    naive = np.array([pair for rank in naive_simulate(program, costs) for pair in rank])
    # The naive model's receives block in program order, pipesim's only post: on a V placement, where
    # receives are posted ahead of their consumers, a RECV row's span differs; every other row is equal.
    kept = result.table.kind != KIND_RECV
    np.testing.assert_allclose(result.start[kept], naive[kept, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.end[kept], naive[kept, 1], rtol=1e-12, atol=1e-12)


def test_engines_agree_with_pairs_over_several_steps():
    program = build_program("dualpipe-v", 4, 10).program
    costs = CostModel(StageCosts(forward=1, backward=2, a2a_forward=0.4, a2a_backward=0.9), p2p_latency=0.1)
    results = [simulate(program, costs, steps=3, engine=e) for e in (Engine.SIMPY, Engine.GRAPH)]
    np.testing.assert_array_equal(results[0].start, results[1].start)
    np.testing.assert_array_equal(results[0].end, results[1].end)


# --- what the pairs do to a step ------------------------------------------------------------------------

def test_both_halves_span_the_pair_and_count_once():
    costs = CostModel(StageCosts(forward=1, backward=2, a2a_forward=0.5, a2a_backward=1.0))
    result = simulate(build_program("interleaved-overlap", 2, 4, 1).program, costs)
    frame = result.timeline
    tails = np.flatnonzero(result.table.overlap)
    assert len(tails)
    np.testing.assert_array_equal(result.start[tails], result.start[tails - 1])
    np.testing.assert_array_equal(result.end[tails], result.end[tails - 1])
    # F=1 and B=2 with those all-to-alls: c_f 0.5, c_b 1.0; a2a_f (0.5) hides behind c_b, a2a_b (1.0) only
    # for c_f's 0.5: the pair takes 1.5 + 0.5 = 2, against F + B = 3 one after the other
    assert (result.end[tails] - result.start[tails]) == pytest.approx(np.full(len(tails), 2.0))
    compute = frame[frame["op"].isin(["F", "B"])]
    for rank, rows in compute.groupby("rank"):
        pairs = np.count_nonzero(result.table.rank[tails] == rank)
        plain = len(rows) - 2 * pairs
        assert result.metrics.ranks[rank].busy == pytest.approx(pairs * 2.0 + (plain // 2) * 3.0)


@pytest.mark.parametrize(("pp", "chunks", "groups"), [(2, 1, 2), (3, 2, 2), (4, 2, 4), (4, 3, 2)])
def test_interleaved_overlap_keeps_interleaved_bubble_and_one_more_chunk_of_memory(pp, chunks, groups):
    """Without all-to-all a pair costs F + B and combined 1F1B is exactly as fast as interleaved 1F1B
    (Narayanan et al. 2021: overhead (p−1)/(v·m)); its extra warm-up forward holds one more chunk (1/v)."""
    m = pp * groups
    ours = simulate(build_program("interleaved-overlap", pp, m, chunks).program)
    theirs = simulate(build_program("interleaved", pp, m, chunks).program)
    assert ours.metrics.makespan == pytest.approx(theirs.metrics.makespan)
    closed = interleaved_bubble(pp, m, chunks, StageCosts())
    assert ours.metrics.bubble_overhead == pytest.approx(closed.bubble_overhead)
    expected = [min(peak + 1 / chunks, m) for peak in theirs.memory.peak_activations]
    assert list(ours.memory.peak_activations) == pytest.approx(expected)


@pytest.mark.parametrize(("pp", "extra"), [(2, 0), (4, 0), (4, 4), (6, 2)])
def test_pairs_win_exactly_when_there_is_all_to_all_to_hide(pp, extra):
    """DualPipe's point (DeepSeek-V3 §3.2.1): with all-to-all inside F and B, overlapping hides it and the
    step is shorter than running the same order one op at a time. Without any, a pair costs F + B but
    couples its halves (the F waits for the B's input; its output leaves after the pair), so it is never
    faster than the sequential order."""
    built = build_program("dualpipe-v", pp, 2 * pp + extra)
    sequential = lower(_sequential(built.schedule))
    heavy = CostModel(StageCosts(forward=1, backward=2, backward_input=1, backward_weight=1,
                                 a2a_forward=0.4, a2a_backward=0.8))
    assert simulate(built.program, heavy).metrics.makespan < simulate(sequential, heavy).metrics.makespan
    none = CostModel(StageCosts(forward=1, backward=2, backward_input=1, backward_weight=1))
    assert simulate(built.program, none).metrics.makespan >= simulate(sequential, none).metrics.makespan
    # and the overlap pays more as the all-to-all grows
    lighter = CostModel(StageCosts(forward=1, backward=2, backward_input=1, backward_weight=1,
                                   a2a_forward=0.2, a2a_backward=0.4))
    gain_heavy = simulate(sequential, heavy).metrics.makespan - simulate(built.program, heavy).metrics.makespan
    gain_light = simulate(sequential, lighter).metrics.makespan - simulate(built.program, lighter).metrics.makespan
    assert gain_heavy > gain_light


def test_dualpipe_v_pairs_sit_in_phases_four_and_five():
    """Per rank r: 2(m − 2p + r + 1) − [r = p−1] pairs in phase 4 and p − r − 1 in phase 5, all full B."""
    pp, m = 4, 12
    schedule = build_program("dualpipe-v", pp, m).schedule
    for rank, order in enumerate(schedule.orders):
        pairs = [i for i in order if i.overlap]
        expected = 2 * (m - 2 * pp + rank + 1) - (rank == pp - 1) + (pp - rank - 1)
        assert len(pairs) == expected
        assert {i.op for i in pairs} == {Op.B}
    assert not any(i.overlap and i.op is I for order in schedule.orders for i in order)


# --- drawing, overlay, calibration ----------------------------------------------------------------------

def test_pairs_draw_in_two_lanes_and_overlay_and_calibrate(tmp_path):
    from pipesim.analysis.calibrate import calibrate
    from pipesim.analysis.overlay import overlay_errors, plot_overlay
    from pipesim.io.timeline import pair_halves
    from pipesim.plots.gantt import pair_lanes, plot_gantt
    from pipesim.plots.terminal import render

    costs = CostModel(StageCosts(forward=1, backward=2, a2a_forward=0.4, a2a_backward=0.8))
    paired = simulate(build_program("interleaved-overlap", 2, 4, 1).program, costs).timeline
    tails = paired["op"].eq("B") & pair_halves(paired)
    heads = paired["op"].eq("F") & pair_halves(paired)
    assert tails.sum() == heads.sum() == 4  # warm-ups of 3 and 1 forwards: rank 0 one pair, rank 1 three
    lanes = pair_lanes(paired[paired["op"].isin(["F", "B"])])
    assert set(lanes[heads[heads].index]) == {1} and set(lanes[tails[tails].index]) == {2}
    drawing = render(paired)  # a pair is one box labelled F<mb>+B<mb> (cut to its width)
    assert "F3+B" in drawing.splitlines()[0] and "F1+B" in drawing.splitlines()[1]
    plot_gantt(paired, tmp_path / "pairs.png", title="pairs")
    assert (tmp_path / "pairs.png").stat().st_size > 0
    # The executor on CPU runs the same Program with each pair's halves one after the other: its timeline has
    # no pair rows, and overlays on the prediction instruction by instruction.
    measured = paired.copy()
    middle = (measured.loc[heads, "start"] + measured.loc[heads, "end"]).to_numpy() / 2
    measured.loc[heads, "end"] = middle
    measured.loc[tails, "start"] = middle
    assert not pair_halves(measured).any()
    errors = overlay_errors(paired, measured)
    assert errors is not None
    plot_overlay(paired, measured, errors, tmp_path / "overlay.png", title="overlay")
    assert (tmp_path / "overlay.png").stat().st_size > 0
    # Calibrating a predicted timeline with pairs reads F and B from the instructions that ran alone.
    notes: list[str] = []
    calibrated = calibrate(paired, warmup_steps=0, notes=notes)
    assert (calibrated.default.forward, calibrated.default.backward) == (1.0, 2.0)
    assert any("overlapped F-and-B pairs" in note for note in notes)


@pytest.mark.parametrize(("name", "chunks"), PAIR_SCHEDULES)
def test_compiled_graph_kernel_waits_for_both_halves(name, chunks):
    """The numba-compiled longest-path kernel and its plain-Python form agree on pairs, and agree with SimPy."""
    from pipesim.sim import graph_engine
    from pipesim.sim.simulator import _barriers, durations_of

    program = build_program(name, 3, 6, chunks).program
    costs = CostModel(StageCosts(forward=1, backward=2, a2a_forward=0.3, a2a_backward=0.9), p2p_latency=0.2)
    table = simulate(program, costs).table
    args = (table.kind, table.link, table.message, table.num_links, table.input_recv, durations_of(table, costs),
            table.rank_bounds, _barriers(table, None), 0, 0.0)
    compiled = graph_engine.run_longest_path(*args, compiled=True, partner_recv=table.partner_recv)
    plain = graph_engine.run_longest_path(*args, compiled=False, partner_recv=table.partner_recv)
    np.testing.assert_array_equal(compiled[0], plain[0])
    reference = simulate(program, costs, engine=Engine.SIMPY)
    heads = np.flatnonzero(table.overlap) - 1
    np.testing.assert_array_equal(compiled[0][heads], reference.start[heads])
    # without the partner the pair's F would start too early somewhere: the column matters
    alone = graph_engine.run_longest_path(*args, compiled=False)
    assert (alone[0][heads] <= compiled[0][heads]).all() and (alone[0][heads] < compiled[0][heads]).any()
