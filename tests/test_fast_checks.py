"""The compiled yes/no pass of validation (:mod:`pipesim.program.fast_checks`) agrees with the numpy checks
that name faults: on every built-in schedule, and on Programs mutated every way a hand edit or a buggy
schedule could (an instruction dropped, repeated, moved, or one of its fields changed)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipesim.errors import ScheduleError
from pipesim.program import fast_checks
from pipesim.program.build import build_program
from pipesim.program.ir import Instruction, Program
from pipesim.program.table import table_of
from pipesim.program.validate import _Checker
from tests.test_validate import configurations


def _numpy_verdict(program: Program) -> bool:
    try:
        _Checker(table_of(program)).check_static()
    except ScheduleError:
        return False
    return True


def _both_forms(program: Program) -> tuple[bool, bool]:
    fast_checks.warm_up()
    table = table_of(program)
    return fast_checks.passes(table), fast_checks.passes(table, compiled=False)


@settings(max_examples=60, deadline=None)
@given(configurations())
def test_every_builtin_schedule_passes_both(config):
    program = build_program(*config).program
    assert _both_forms(program) == (True, True)


MUTATIONS = ["drop", "duplicate", "swap", "microbatch", "chunk", "peer"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), st.sampled_from(MUTATIONS), st.data())
def test_mutated_programs_get_the_numpy_checks_verdict(config, mutation, data):
    program = build_program(*config).program
    ranks = [list(code) for code in program.ranks]
    rank = data.draw(st.integers(0, len(ranks) - 1))
    code = ranks[rank]
    i = data.draw(st.integers(0, len(code) - 1))
    ins = code[i]
    if mutation == "drop":
        del code[i]
    elif mutation == "duplicate":
        code.insert(i, ins)
    elif mutation == "swap":
        j = data.draw(st.integers(0, len(code) - 1))
        code[i], code[j] = code[j], code[i]
    else:  # one field moved by a small step, possibly out of range
        delta = data.draw(st.sampled_from([-1, 1, 2]))
        mb, chunk, peer = ins.mb, ins.chunk, ins.peer
        if mutation == "microbatch" and mb is not None:
            mb += delta
        elif mutation == "chunk" and chunk is not None:
            chunk += delta
        elif mutation == "peer" and peer is not None:
            peer += delta
        code[i] = Instruction(ins.op, mb, chunk, peer)
    mutated = Program(program.name, program.shape, tuple(tuple(c) for c in ranks))
    expected = _numpy_verdict(mutated)
    assert _both_forms(mutated) == (expected, expected), (config, mutation, rank, i)
