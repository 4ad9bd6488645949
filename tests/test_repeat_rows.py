"""Several steps are timed by repeating one step's durations (pipesim.program.table.repeat_rows): the same
values as timing the repeated table row by row, for every built-in, overlapped pairs included."""

from __future__ import annotations

import numpy as np
import pytest

from pipesim.errors import PipesimError
from pipesim.program.build import build_program
from pipesim.program.loader import builtin_names, load_schedule
from pipesim.program.table import first_step_rows, repeat_rows, repeat_steps, steps_table, table_of
from pipesim.sim.costs import CostModel, StageCosts

COSTS = CostModel(
    default=StageCosts(
        forward=1.3, backward=2.9, backward_input=1.7, backward_weight=1.2, reduce_grad=0.4, p2p_bytes=5.0
    ),
    overrides={0: {"forward": 2.1}},
    p2p_latency=0.1,
    p2p_bandwidth=3.0,
    optimizer_step=0.7,
)


def _programs():
    """Every built-in at its own chunk count and, where it takes them, at 2 chunks."""
    shapes = []
    for name in builtin_names():
        for chunks in sorted({load_schedule(name).default_chunks, 2}):
            try:
                build_program(name, 4, 8, chunks)
            except PipesimError:
                continue  # this schedule fixes another chunk count
            shapes.append((name, chunks))
    return shapes


@pytest.mark.parametrize(("name", "chunks"), _programs())
def test_repeated_durations_are_the_repeated_table_timed(name, chunks):
    from pipesim.sim.simulator import durations_of

    single = table_of(build_program(name, 4, 8, chunks).program)
    for steps in (1, 2, 3):
        expected = durations_of(repeat_steps(single, steps), COSTS)
        assert np.array_equal(repeat_rows(durations_of(single, COSTS), single, steps), expected)


def test_a_small_programs_repeated_table_is_kept_and_equal_to_a_fresh_one():
    program = build_program("1f1b", 4, 8).program
    kept = steps_table(program, 3)
    assert steps_table(program, 3) is kept
    fresh = repeat_steps(table_of(program), 3)
    assert np.array_equal(kept.input_recv, fresh.input_recv) and np.array_equal(kept.message, fresh.message)


@pytest.mark.parametrize(("name", "chunks"), [s for s in _programs() if s[0].startswith(("zb", "dualpipe"))])
def test_under_post_validation_the_first_step_is_the_lone_step(name, chunks):
    """The planner reads the lone step out of the steady-state run for post-validation schedules."""
    from pipesim.sim.simulator import StepBoundary, simulate

    program = build_program(name, 4, 8, chunks).program
    lone = simulate(program, COSTS, check=False)
    steps = simulate(program, COSTS, check=False, steps=3, boundary=StepBoundary.POST_VALIDATION)
    first = first_step_rows(table_of(program), 3)
    assert np.array_equal(steps.start[first], lone.start) and np.array_equal(steps.end[first], lone.end)
    assert (steps.table.step[first] == 0).all()
