"""Validation: every built-in schedule passes; mutated or hand-broken programs fail with one clear line."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipesim.errors import DeadlockError, ScheduleError
from pipesim.program.build import build_program
from pipesim.program.ir import B, F, Instruction, Op, Program, Schedule
from pipesim.program.loader import builtin_names, load_schedule
from pipesim.program.lowering import lower
from pipesim.program.validate import CommSemantics, validate
from tests.schedule_cases import schedule_shapes

SCHEDULES = builtin_names()


def configurations():
    """A built-in schedule with a (pp, microbatches, chunks) it accepts."""
    return schedule_shapes(SCHEDULES, max_pp=6, max_chunks=3, max_microbatches=16)


@settings(max_examples=150, deadline=None)
@given(configurations())
def test_every_builtin_schedule_validates(config):
    name, pp, mb, chunks = config
    built = build_program(name, pp, mb, chunks)  # validates
    assert built.program.shape.pp == pp


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), st.sampled_from(["drop", "duplicate", "swap"]), st.data())
def test_mutated_program_is_valid_or_rejected_cleanly(config, mutation, data):
    program = build_program(*config).program
    ranks = [list(code) for code in program.ranks]
    rank = data.draw(st.integers(0, len(ranks) - 1))
    code = ranks[rank]
    i = data.draw(st.integers(0, len(code) - 1))
    if mutation == "drop":
        del code[i]
    elif mutation == "duplicate":
        code.insert(i, code[i])
    else:
        j = data.draw(st.integers(0, len(code) - 1))
        code[i], code[j] = code[j], code[i]
    mutated = Program(program.name, program.shape, tuple(tuple(c) for c in ranks))
    try:
        validate(mutated)
    except ScheduleError as err:
        message = str(err)
        assert message and "\n" not in message
    if mutation in ("drop", "duplicate"):
        # Removing or repeating any instruction always breaks a complete program.
        with pytest.raises(ScheduleError):
            validate(mutated)


def _two_rank(orders) -> Program:
    return lower(Schedule.from_orders("hand", orders, microbatches=2))


def test_deadlock_names_the_cycle():
    program = _two_rank([[F(0), B(0), F(1), B(1)], [F(0), F(1), B(0), B(1)]])
    with pytest.raises(DeadlockError) as err:
        validate(program)
    message = str(err.value)
    assert "rank 0 waits at B mb=0 chunk=0 for rank 1 (RECV_B mb=0 chunk=0 peer=1)" in message
    assert "rank 1 waits at F mb=1 chunk=0 for rank 0 (RECV_F mb=1 chunk=0 peer=0)" in message
    assert "cycle" in message


def test_fifo_mismatch_is_reported():
    """Receives posted out of the sender's order on one link: the k-th message is not what is expected."""
    program = _two_rank([[F(0), F(1), B(0), B(1)], [F(0), F(1), B(0), B(1)]])
    code = list(program.ranks[1])
    first, second = (i for i, ins in enumerate(code) if ins.op is Op.RECV_F)
    code[first], code[second] = code[second], code[first]
    code[first + 1], code[second + 1] = code[second + 1], code[first + 1]  # keep each F right after its RECV
    swapped = Program(program.name, program.shape, (program.ranks[0], tuple(code)))
    with pytest.raises(ScheduleError, match=r"link 0→1 is FIFO: message #1 rank 0 sends is the activation of stage 0 "
                                            r"for mb 0, but rank 1's receive #1"):
        validate(swapped)


def test_lowering_posts_receives_in_send_order():
    """Rank 0 runs B1 before B0, rank 1 sends the gradients as B0, B1: both receives are posted before B1."""
    program = _two_rank([[F(0), F(1), B(1), B(0)], [F(0), F(1), B(0), B(1)]])
    validate(program)
    text = [str(ins) for ins in program.ranks[0]]
    assert text.index("RECV_B mb=0 chunk=0 peer=1") < text.index("RECV_B mb=1 chunk=0 peer=1") < text.index(
        "B mb=1 chunk=0")


def test_missing_microbatch_is_reported():
    program = lower(Schedule.from_orders("hand", [[F(0), B(0)], [F(0), B(0)]], microbatches=2))
    with pytest.raises(ScheduleError, match="never runs F mb=1"):
        validate(program)


def test_backward_before_forward_is_reported():
    program = lower(Schedule.from_orders("hand", [[B(0), F(0)]], microbatches=1))
    with pytest.raises(ScheduleError, match="runs before F mb=0"):
        validate(program)


def test_rendezvous_semantics_catch_the_nccl_hazard():
    """Plain 1F1B hangs when sends block until received (unbatched NCCL P2P), but not with async sends."""
    program = build_program("1f1b", 4, 8).program
    validate(program, CommSemantics.BUFFERED)
    with pytest.raises(DeadlockError, match="waits at SEND_"):
        validate(program, CommSemantics.RENDEZVOUS)
    validate(build_program("gpipe", 4, 8).program, CommSemantics.RENDEZVOUS)


def test_lower_rejects_communication_in_a_schedule():
    schedule = Schedule.from_orders("hand", [[F(0), Instruction(Op.SEND_F, 0, 0, 1), B(0)]], microbatches=1)
    with pytest.raises(ScheduleError, match="derived by lower"):
        lower(schedule)


@pytest.mark.parametrize(("name", "safe"), [("gpipe", True), ("1f1b", True), ("zb-h1", True),
                                            ("interleaved", False), ("zb-v", False)])
def test_grouped_semantics_say_which_schedules_nccl_runs_safely(name, safe):
    """Grouping a run of SEND/RECV instructions (batch_isend_irecv) fixes 1F1B's rendezvous hazard; schedules
    whose ranks send to each other outside such pairs still wait on each other, and the error names it."""
    program = build_program(name, 4, 8).program
    validate(program, CommSemantics.BUFFERED)
    if safe:
        validate(program, CommSemantics.GROUPED)
    else:
        with pytest.raises(DeadlockError, match="to post the receive"):
            validate(program, CommSemantics.GROUPED)


def test_grouped_semantics_keep_a_pairs_stream_order():
    """On NCCL a pair's operations run in order: a receive posted early holds back the next send to that peer.
    GPipe with rank 0's first gradient receive moved up next to its first send: fine with buffered sends,
    but rank 0's next send waits for that gradient, which rank 1 sends only after the activation it holds
    back."""
    program = build_program("gpipe", 2, 2).program
    code = list(program.ranks[0])
    recv = next(i for i, ins in enumerate(code) if ins.op is Op.RECV_B and ins.mb == 1)  # GPipe: B1 first
    moved = code.pop(recv)
    code.insert(next(i for i, ins in enumerate(code) if ins.op is Op.SEND_F) + 1, moved)
    early = Program(program.name, program.shape, (tuple(code), program.ranks[1]))
    validate(early, CommSemantics.BUFFERED)
    validate(early, CommSemantics.RENDEZVOUS)  # one op at a time, with receives never blocking a stream
    with pytest.raises(DeadlockError, match=r"rank 0 waits for RECV_B mb=1 chunk=0 peer=1 to finish before its "
                                            r"next group to rank 1"):
        validate(early, CommSemantics.GROUPED)


@pytest.mark.parametrize("name", SCHEDULES)
def test_declared_limits_are_what_build_accepts(name):
    """A schedule's LIMITS and its build() agree on every small (pp, microbatches, chunks)."""
    source = load_schedule(name)
    for pp in range(1, 5):
        for mb in range(1, 10):
            for chunks in range(1, 4):
                accepted = source.limits.accepts(pp, mb, chunks)
                try:
                    source.build(pp, mb, chunks)
                    built = True
                except ScheduleError:
                    built = False
                assert built == accepted, (name, pp, mb, chunks)
