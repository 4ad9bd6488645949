"""The graph engine (compiled and plain Python) against the SimPy reference, and multi-step simulation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipesim.errors import DeadlockError, ScheduleError
from pipesim.program.build import build_program
from pipesim.program.ir import OP_CODE, Op, Program
from pipesim.program.validate import CommSemantics, validate, validate_static
from pipesim.sim import graph_engine
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import Engine, StepBoundary, simulate
from tests.test_validate import configurations


@st.composite
def per_stage_costs(draw, num_stages: int) -> CostModel:
    """Random costs for every stage, random latency and bandwidth-bound transfers."""
    times = st.floats(0.01, 10, allow_nan=False)
    overrides = {
        stage: {"forward": draw(times), "backward": draw(times), "backward_input": draw(times),
                "backward_weight": draw(times), "reduce_grad": draw(st.floats(0, 2)),
                "reduce_grad_async": draw(st.sampled_from([0.0, 0.5, 4.0])), "p2p_bytes": draw(st.floats(0, 100))}
        for stage in range(num_stages)
    }
    return CostModel(overrides=overrides, p2p_latency=draw(st.floats(0, 3)),
                     p2p_bandwidth=draw(st.sampled_from([None, 10.0, 1000.0])),
                     optimizer_step=draw(st.floats(0, 2)))


def _assert_same(a, b) -> None:
    np.testing.assert_array_equal(a.start, b.start)  # float for float: both add the same numbers in order
    np.testing.assert_array_equal(a.end, b.end)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), st.data(), st.integers(1, 3), st.sampled_from([None, *StepBoundary]), st.floats(0, 1))
def test_graph_engine_equals_simpy_on_every_schedule(config, data, steps, boundary, sync):
    program = build_program(*config).program
    costs = data.draw(per_stage_costs(program.shape.num_slices))  # the cost model's stages (dualpipe: pp)
    options = {"steps": steps, "boundary": boundary, "sync_latency": sync}
    reference = simulate(program, costs, **options, engine=Engine.SIMPY)
    graph = simulate(program, costs, **options, engine=Engine.GRAPH)
    _assert_same(graph, reference)
    assert graph.step_times == reference.step_times
    if reference.waited is None:
        assert graph.waited is None
    else:
        np.testing.assert_array_equal(graph.waited, reference.waited)


@settings(max_examples=25, deadline=None)
@given(configurations(), st.data())
def test_plain_python_kernel_equals_compiled(config, data):
    program = build_program(*config).program
    costs = data.draw(per_stage_costs(program.shape.num_slices))  # the cost model's stages (dualpipe: pp)
    table = simulate(program, costs).table
    from pipesim.sim.simulator import _barriers, async_tails_of, durations_of

    args = (table.kind, table.link, table.message, table.num_links, table.input_recv, durations_of(table, costs),
            table.rank_bounds, _barriers(table, StepBoundary.SYNC), 1, 0.25)
    tails = async_tails_of(table, costs)
    drains = table.op == OP_CODE[Op.STEP]
    waits = np.zeros(table.num_rows), np.zeros(table.num_rows)
    # overlapped pairs (dualpipe-v, interleaved-overlap): the pair's F also waits for its second half's input
    compiled = graph_engine.run_longest_path(*args, compiled=True, partner_recv=table.partner_recv, tail=tails,
                                             drains=drains, waited=waits[0])
    plain = graph_engine.run_longest_path(*args, compiled=False, partner_recv=table.partner_recv, tail=tails,
                                          drains=drains, waited=waits[1])
    np.testing.assert_array_equal(compiled[0], plain[0])
    np.testing.assert_array_equal(compiled[1], plain[1])
    np.testing.assert_array_equal(*waits)


@pytest.mark.parametrize("engine", [Engine.SIMPY, Engine.GRAPH])
def test_asynchronous_gradient_sync_runs_beside_later_backwards_and_step_waits_for_it(engine):
    """By hand, one rank holding two chunks (F 1, B 2 each; the stage values are the rank's share, halved per
    chunk): F c0 [0,1], F c1 [1,2], B c1 [2,4], REDUCE_GRAD c1 holds the rank [4,4.5] and queues 2 on its
    channel [4.5,6.5], beside B c0 [4.5,6.5]; REDUCE_GRAD c0 [6.5,7], channel [7,9]; STEP waits 2 and ends at 9.
    The same seconds all synchronous (reduce_grad 2.5 a chunk): 11. A channel still busy queues the next
    reduce: 3 a chunk ends c1's at 7.5, so c0's runs [7.5,10.5] and STEP waits 3.5."""
    program = build_program("interleaved", 1, 1, 2).program
    run = simulate(program, CostModel(StageCosts(forward=2, backward=4, reduce_grad=1, reduce_grad_async=4)),
                   engine=engine)
    step = run.table.op == OP_CODE[Op.STEP]
    reduces = run.table.op == OP_CODE[Op.REDUCE_GRAD]
    assert run.start[reduces].tolist() == [4.0, 6.5] and run.end[reduces].tolist() == [4.5, 7.0]
    assert run.start[step].tolist() == [9.0] and run.metrics.makespan == 9.0
    assert run.gradient_sync_wait(0) == 2.0
    blocking = simulate(program, CostModel(StageCosts(forward=2, backward=4, reduce_grad=5)), engine=engine)
    assert blocking.metrics.makespan == 11.0 and blocking.waited is None and blocking.gradient_sync_wait(0) == 0.0
    queued = simulate(program, CostModel(StageCosts(forward=2, backward=4, reduce_grad=1, reduce_grad_async=6)),
                      engine=engine)
    assert queued.metrics.makespan == 10.5 and queued.gradient_sync_wait(0) == 3.5


def _outcome(program: Program, engine: Engine, steps: int):
    try:
        result = simulate(program, CostModel(p2p_latency=0.5), check=False, steps=steps, engine=engine)
    except DeadlockError as err:
        return "deadlock", str(err)
    return "ok", (result.start.tolist(), result.end.tolist())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(configurations(), st.data(), st.integers(1, 2))
def test_mutated_programs_deadlock_alike(config, data, steps):
    """Move one instruction of one rank elsewhere; statically valid results run or deadlock the same way."""
    program = build_program(*config).program
    ranks = [list(code) for code in program.ranks]
    rank = data.draw(st.integers(0, len(ranks) - 1))
    code = ranks[rank]
    i = data.draw(st.integers(0, len(code) - 1))
    j = data.draw(st.integers(0, len(code) - 1))
    code.insert(j, code.pop(i))
    mutated = Program(program.name, program.shape, ranks)
    try:
        validate_static(mutated)
    except ScheduleError:
        assume(False)
    graph, reference = _outcome(mutated, Engine.GRAPH, steps), _outcome(mutated, Engine.SIMPY, steps)
    assert graph == reference
    # And the validator's progress checks (compiled walk and the Python one) agree on which programs
    # deadlock, naming the same cycle.
    for check in (lambda: validate(mutated), lambda: validate_static(mutated).check_progress(CommSemantics.BUFFERED)):
        try:
            check()
            assert reference[0] == "ok"
        except DeadlockError as err:
            assert reference == ("deadlock", str(err))


def _move_before(code: list, what: tuple, anchor: tuple, count: int) -> None:
    """Move ``count`` instructions starting at the first (op, mb) ``what`` to just before ``anchor``."""
    def find(op, mb):
        return next(k for k, ins in enumerate(code) if ins.op.value == op and ins.mb == mb)

    start = find(*what)
    block = code[start:start + count]
    del code[start:start + count]
    at = find(*anchor)
    code[at:at] = block


def test_a_known_deadlock_is_named_by_both_engines(program_of):
    program = program_of("1f1b", 2, 2)
    ranks = [list(code) for code in program.ranks]
    # Rank 0 waits for mb 0's gradient before it sends mb 1's activation; rank 1 waits for mb 1's activation
    # before it computes (and sends) mb 0's gradient.
    _move_before(ranks[0], ("F", 1), ("B", 1), 2)  # F mb=1 and its SEND_F after B mb=0
    _move_before(ranks[1], ("RECV_F", 1), ("B", 0), 2)  # RECV_F mb=1 and F mb=1 before B mb=0
    mutated = Program(program.name, program.shape, ranks)
    validate_static(mutated)
    messages = set()
    for engine in (Engine.GRAPH, Engine.SIMPY):
        with pytest.raises(DeadlockError, match="cycle") as err:
            simulate(mutated, engine=engine)
        messages.add(str(err.value))
    assert len(messages) == 1


# --- several steps --------------------------------------------------------------------------------------

def test_one_step_is_the_single_step_timeline(program_of):
    program = program_of("zb-h1", 4, 8)
    costs = CostModel(StageCosts(forward=1.0, backward_input=1.0, backward_weight=1.0), optimizer_step=0.5)
    one = simulate(program, costs)
    _assert_same(simulate(program, costs, steps=1, boundary=StepBoundary.POST_VALIDATION), one)
    assert one.step_times == (one.metrics.makespan,)
    # SYNC holds every STEP until the last rank reaches its own, plus the synchronisation's latency.
    synced = simulate(program, costs, steps=1, boundary=StepBoundary.SYNC, sync_latency=0.25)
    step = synced.table.op == synced.table.op[-1]
    assert np.array_equal(synced.start[~step], one.start[~step])
    assert set(synced.start[step]) == {one.end[~step].max() + 0.25}
    assert synced.step_time == one.metrics.makespan + 0.25


def test_sync_steps_repeat_the_lone_step_exactly(program_of):
    """Under SYNC every step starts with all ranks idle, so each takes as long as a lone synced step."""
    program = program_of("1f1b", 4, 8)
    costs = CostModel(StageCosts(forward=1.0, backward=2.0), optimizer_step=0.5, p2p_latency=0.25)
    lone = simulate(program, costs, boundary=StepBoundary.SYNC, sync_latency=0.125).metrics.makespan
    result = simulate(program, costs, steps=3, boundary=StepBoundary.SYNC, sync_latency=0.125)
    assert result.step_times == pytest.approx((lone, lone, lone))
    assert result.step_time == pytest.approx(lone)
    frame = result.timeline
    assert sorted(set(frame["step"])) == [0, 1, 2]
    assert (frame.groupby(["step", "rank"])["seq"].min() == 0).all()
    assert len(frame) == 3 * program.num_instructions
    # All ranks start step 1 together, at the end of step 0.
    step1 = frame[(frame["step"] == 1) & (frame["seq"] == 0)]
    assert set(step1["start"]) == {lone}


def test_post_validation_lets_the_next_step_start_early(program_of):
    """ZB-H2 leaves rank 0 idle at the end of a step; without the sync the next step's warm-up fills it
    (Qi et al. 2024 §4), so its steady-state step is shorter than ZB-H1's, where a lone step cannot tell."""
    costs = CostModel(StageCosts(forward=1.0, backward_input=1.0, backward_weight=1.0))
    times = {}
    for name in ("zb-h1", "zb-h2"):
        program = program_of(name, 4, 8)
        sync = simulate(program, costs, steps=3, boundary=StepBoundary.SYNC)
        post = simulate(program, costs, steps=3, boundary=StepBoundary.POST_VALIDATION)
        assert post.step_time <= sync.step_time
        assert post.step_times[0] == sync.step_times[0]  # the first step has nothing before it
        times[name] = post.step_time
    assert times["zb-h2"] < times["zb-h1"]


def test_memory_of_several_steps_returns_to_zero(program_of):
    result = simulate(program_of("1f1b", 4, 8), steps=2, boundary=StepBoundary.POST_VALIDATION)
    curve = result.memory.curve
    assert curve.groupby("rank")["activations"].last().abs().max() < 1e-9
    assert result.memory.peak_activations == simulate(program_of("1f1b", 4, 8)).memory.peak_activations


@pytest.mark.parametrize("steps", [0, -1, 1.5, True])
def test_bad_step_count_is_refused(program_of, steps):
    with pytest.raises(Exception, match="steps="):
        simulate(program_of("1f1b", 2, 2), steps=steps)


def test_cli_engines_print_the_same_summary(capsys):
    from pipesim.cli.main import main

    outputs = []
    for engine in ("graph", "simpy", "auto"):
        assert main(["simulate", "-s", "zb-v", "--pp", "4", "--mb", "8", "--comm", "0.3", "--engine", engine,
                     "--json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2]
