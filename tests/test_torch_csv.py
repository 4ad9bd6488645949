"""PyTorch action CSVs: pipesim's export reads back to the same Program; PyTorch's own orders import, validate
and simulate, or fail with a precise reason. Torch is used only here, to generate PyTorch's orders."""

from __future__ import annotations

import types

import pytest

from pipesim.cli.main import main
from pipesim.errors import ScheduleError
from pipesim.io.torch_csv import CsvFormat, export_rows, import_rows, rows_to_text
from pipesim.program.validate import validate
from pipesim.sim.simulator import simulate

BUILTINS = [("gpipe", None), ("1f1b", None), ("interleaved", 2), ("zb-h1", None), ("zb-h2", None)]


@pytest.mark.parametrize(("name", "chunks"), BUILTINS)
@pytest.mark.parametrize("fmt", list(CsvFormat))
def test_export_then_import_gives_the_same_program(program_of, name, chunks, fmt):
    program = program_of(name, 4, 8, chunks)
    imported = import_rows(export_rows(program, fmt), name=program.name)
    assert imported.program == program
    assert imported.format is fmt


def test_cli_export_and_simulate_csv(tmp_path, capsys):
    path = tmp_path / "order.csv"
    assert main(["export", "--schedule", "zb-h1", "--pp", "4", "--mb", "8", "--format", "torch-csv",
                 "-o", str(path)]) == 0
    first = path.read_text().splitlines()[0]
    assert first.startswith("0F0,0F1,0F2,0F3,0I0,0W0")
    assert main(["simulate", "--schedule", str(path), "--json"]) == 0
    assert main(["simulate", "--schedule", str(path), "--pp", "2"]) == 2
    assert "--pp 2 disagrees with torch CSV" in capsys.readouterr().err


def test_unknown_action_names_the_cell():
    with pytest.raises(ScheduleError, match=r"cell '1X3' at rank 1 \(row 2\), column 2 is not a PyTorch action"):
        import_rows([["0F0"], ["1F0", "1X3"]])


def test_comm_cells_must_be_what_lowering_derives():
    rows = [["0F0", "0SEND_F0", "0RECV_B0", "0B0"], ["1RECV_F0", "1F0", "1B0"]]  # rank 1 lacks 1SEND_B0
    with pytest.raises(ScheduleError, match="rank 1 lacks 1SEND_B0"):
        import_rows(rows)


def test_placement_is_read_from_the_rows():
    program = import_rows([["0F0", "3F0", "3B0", "0B0"], ["1F0", "2F0", "2B0", "1B0"]]).program
    assert program.shape.placement.value == "v" and program.shape.chunks == 2
    validate(program)


# --- orders PyTorch itself generates ------------------------------------------------------------------------

import torch  # noqa: E402 — torch is a test dependency (CI installs it); only these tests need it
import torch.distributed.pipelining.schedules as schedules  # noqa: E402


def _torch_schedule(cls, pp: int, microbatches: int, local_stages: int):
    """Construct a PyTorch schedule class without a process group: dummy stages carry what __init__ reads."""
    v_shaped = cls in (schedules.ScheduleZBVZeroBubble, schedules.ScheduleDualPipeV)
    num_stages = pp * local_stages
    indices = [0, num_stages - 1] if v_shaped else [k * pp for k in range(local_stages)]
    stages = [
        types.SimpleNamespace(num_stages=num_stages, group_size=pp, group_rank=0, stage_index=i,
                              submod=torch.nn.Linear(1, 1), is_first=i == 0, is_last=i == num_stages - 1)
        for i in indices
    ]
    if issubclass(cls, schedules.PipelineScheduleSingle):
        return cls(stages[0], microbatches)
    return cls(stages, microbatches)


def _rows(order: dict) -> list[list[str]]:
    # What PyTorch's _dump_csv writes: csv.writer over the actions, None as an empty cell.
    return [["" if a is None else str(a) for a in order[rank]] for rank in sorted(order)]


VALID = [
    ("ScheduleGPipe", 1, (2, 4)), ("ScheduleGPipe", 1, (4, 8)),
    ("ScheduleLoopedBFS", 2, (2, 4)), ("ScheduleLoopedBFS", 2, (4, 8)),
    ("ScheduleInterleaved1F1B", 2, (2, 4)), ("ScheduleInterleaved1F1B", 2, (4, 8)),
    ("ScheduleInterleavedZeroBubble", 2, (4, 8)),
    ("ScheduleDualPipeV", 2, (2, 4)),
]


@pytest.mark.parametrize(("cls_name", "local", "shape"), VALID)
def test_pytorch_orders_import_validate_and_simulate(tmp_path, cls_name, local, shape):
    pp, m = shape
    schedule = _torch_schedule(getattr(schedules, cls_name), pp, m, local)
    for attr in ("pipeline_order", "pipeline_order_with_comms"):
        order = getattr(schedule, attr, None)
        if not order:
            continue
        path = tmp_path / f"{attr}.csv"
        path.write_text(rows_to_text(_rows(order)))
        imported = import_rows(_rows(order), source=str(path))
        assert (imported.schedule.shape.pp, imported.schedule.shape.microbatches) == (pp, m)
        validate(imported.program)
        result = simulate(imported.program)
        assert 0 <= result.metrics.bubble_fraction < 1


def test_pytorch_1f1b_pipeline_order_is_off_by_one_on_the_last_rank():
    """Schedule1F1B.pipeline_order (a display-only order) runs the last stage on microbatches 1..m."""
    order = _torch_schedule(schedules.Schedule1F1B, 4, 8, 1).pipeline_order
    with pytest.raises(ScheduleError, match=r"stage 3 \(rank 3\) forwards microbatches 1\.\.8, but stage\(s\) "
                                            r"0, 1, 2 forward 0\.\.7"):
        import_rows(_rows(order))


@pytest.mark.parametrize(("cls_name", "shape"), [
    ("ScheduleZBVZeroBubble", (4, 8)), ("ScheduleDualPipeV", (4, 8)), ("ScheduleInterleavedZeroBubble", (2, 4)),
])
def test_pytorch_orders_whose_links_carry_two_kinds_of_message(cls_name, shape):
    """On these orders a link carries activations of one chunk and gradients of another, consumed in a
    different order than sent; lowering posts the receives in the sender's order, as PyTorch does, and the
    consumers wait for their data — so they validate, and nothing waits on a message queued behind another."""
    pp, m = shape
    order = _torch_schedule(getattr(schedules, cls_name), pp, m, 2).pipeline_order
    imported = import_rows(_rows(order))
    validate(imported.program)
    program = imported.program
    for rank, code in enumerate(program.ranks):
        for ins in code:
            if ins.op.is_recv:  # every receive is posted at or before its consumer
                consumer = next(i for i, c in enumerate(code) if c.op.is_compute and c.mb == ins.mb
                                and c.chunk == ins.chunk and (c.op.value == "F") == (ins.op.value == "RECV_F"))
                assert code.index(ins) < consumer, (rank, ins)
    assert simulate(program).metrics.bubble_fraction < 0.5


@pytest.mark.parametrize(("name", "cls_name"), [("dualpipe-v", "ScheduleDualPipeV"), ("zb-v", "ScheduleZBVZeroBubble")])
@pytest.mark.parametrize(("pp", "m"), [(2, 4), (2, 7), (4, 8), (4, 13), (8, 16)])
def test_v_schedules_match_pytorchs_orders(program_of, name, cls_name, pp, m):
    """pipesim's ZB-V and DualPipe-V, written from the papers, run the same compute order per rank as
    PyTorch's implementations (whose overlapped F&B pairs import as F then B)."""
    theirs = import_rows(_rows(_torch_schedule(getattr(schedules, cls_name), pp, m, 2).pipeline_order)).program
    ours = program_of(name, pp, m)
    for rank in range(pp):
        assert [i for i in theirs.ranks[rank] if i.op.is_compute] == [i for i in ours.ranks[rank] if i.op.is_compute]
