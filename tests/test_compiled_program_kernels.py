"""The compiled kernels of the Program layer agree with the numpy passes they stand in for, compiled and as
plain Python: validation's yes/no pass (:mod:`pipesim.program.fast_checks`) with the numpy checks that name
faults, and the table's link, message and input columns (:mod:`pipesim.program.table`) with their numpy
forms. On every built-in schedule, and on Programs mutated every way a hand edit or a buggy schedule could
(an instruction dropped, repeated, moved, or one of its fields changed)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipesim.errors import ScheduleError
from pipesim.program import fast_checks
from pipesim.program import table as program_table
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


def _mutated(config, mutation, data) -> Program:
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
    return Program(program.name, program.shape, tuple(tuple(c) for c in ranks))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), st.sampled_from(MUTATIONS), st.data())
def test_mutated_programs_get_the_numpy_checks_verdict(config, mutation, data):
    mutated = _mutated(config, mutation, data)
    expected = _numpy_verdict(mutated)
    assert _both_forms(mutated) == (expected, expected), (config, mutation)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), st.sampled_from(["none", *MUTATIONS]), st.data())
def test_table_kernel_equals_the_numpy_columns(config, mutation, data):
    program = build_program(*config).program if mutation == "none" else _mutated(config, mutation, data)
    columns, pp = program.columns, program.shape.pp
    rank = np.repeat(np.arange(pp, dtype=np.int64), columns.rank_lengths)
    kind = program_table._KIND_BY_CODE[columns.op]
    link, message, num_links = program_table._links_numpy(kind, rank, columns.peer, pp)
    inputs = program_table._input_receives(columns.op, rank, columns.microbatch, columns.chunk)
    fields = (columns.op, kind, rank, columns.peer, columns.microbatch, columns.chunk, pp)
    for kernel in (program_table._LINKS_KERNEL.compiled(), program_table._links_kernel):
        got = [np.empty(len(kind), dtype=np.int64) for _ in range(3)]
        links = kernel(*fields, *got)
        if mutation == "none":
            assert links >= 0  # a valid Program is always in the kernel's range
        if links >= 0:  # else: out of its dense range, left to the numpy passes
            assert links == num_links
            for mine, expected in zip(got, (link, message, inputs), strict=True):
                np.testing.assert_array_equal(mine, expected)
