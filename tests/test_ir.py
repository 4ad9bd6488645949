"""IR: instruction and program text forms round-trip; malformed text gets a one-line error."""

from __future__ import annotations

import pytest

from pipesim.errors import ScheduleError
from pipesim.program.ir import Instruction, Op, PipelineShape, Placement, Program


@pytest.mark.parametrize(
    ("name", "pp", "mb", "chunks"), [("gpipe", 3, 5, 1), ("1f1b", 4, 8, 1), ("interleaved", 4, 8, 3)]
)
def test_program_text_round_trip(program_of, name, pp, mb, chunks):
    program = program_of(name, pp, mb, chunks)
    assert Program.from_text(program.to_text()) == program


def test_instruction_text_form():
    ins = Instruction(Op.SEND_F, 3, 1, 2)
    assert str(ins) == "SEND_F mb=3 chunk=1 peer=2"
    assert Instruction.parse(str(ins)) == ins
    assert str(Instruction(Op.STEP)) == "STEP"
    assert Instruction.parse("REDUCE_GRAD chunk=0") == Instruction(Op.REDUCE_GRAD, chunk=0)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("X mb=1", "unknown op"), ("F mb=1", "lacks chunk"), ("F mb=a chunk=0", "not an integer"),
     ("F mb=1 chunk=0 peer=2", "bad field"), ("", "empty")],
)
def test_instruction_parse_errors(text, fragment):
    with pytest.raises(ScheduleError, match=fragment) as err:
        Instruction.parse(text)
    assert "\n" not in str(err.value)


def test_program_text_errors_name_the_line(program_of):
    text = program_of("1f1b", 2, 2).to_text().replace("F mb=1 chunk=0", "F mb=1 chunk=zero", 1)
    with pytest.raises(ScheduleError, match=r"line \d+"):
        Program.from_text(text)


@pytest.mark.parametrize("pp", [1, 2, 3, 5])
@pytest.mark.parametrize("chunks", [1, 2, 3, 4])
@pytest.mark.parametrize("placement", list(Placement))
def test_placement_is_a_bijection(pp, chunks, placement):
    if placement is Placement.DUAL and chunks != 2:
        with pytest.raises(ScheduleError, match="dual placement holds two chunks"):
            PipelineShape(pp, 2, chunks, placement)
        return
    shape = PipelineShape(pp, 2, chunks, placement)
    stages = {shape.stage(r, c): (r, c) for r in range(pp) for c in range(chunks)}
    assert sorted(stages) == list(range(pp * chunks))
    for stage, (rank, chunk) in stages.items():
        assert shape.rank_of(stage) == rank
        assert shape.chunk_of(stage) == chunk


def test_dual_placement_runs_two_pipelines_over_v_stage_numbers():
    """Stage numbers as V's, but two pipelines: stage pp+s copies slice s, and each half of the microbatches
    passes its own pipeline only (DeepSeek-V3 §3.2.1)."""
    shape = PipelineShape(4, 6, 2, Placement.DUAL)
    assert [shape.stage(r, 1) for r in range(4)] == [7, 6, 5, 4]
    assert [shape.slice_of(s) for s in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [s for s in range(8) if shape.is_first_stage(s)] == [0, 4]
    assert [s for s in range(8) if shape.is_last_stage(s)] == [3, 7]
    assert [shape.visits(mb, 0) for mb in range(6)] == [True] * 3 + [False] * 3
    assert [shape.visits(mb, 5) for mb in range(6)] == [False] * 3 + [True] * 3
    assert (shape.num_slices, shape.chunk_share, shape.pipelines) == (4, 1, 2)
    v = PipelineShape(4, 6, 2, Placement.V)
    assert (v.num_slices, v.chunk_share, v.pipelines) == (8, 2, 1)
    with pytest.raises(ScheduleError, match="even number of microbatches"):
        PipelineShape(4, 5, 2, Placement.DUAL)


def test_v_placement_folds_back():
    shape = PipelineShape(4, 1, 2, Placement.V)
    assert [shape.stage(r, 1) for r in range(4)] == [7, 6, 5, 4]
