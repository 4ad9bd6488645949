"""Orders PyTorch itself generates (``torch.distributed.pipelining``) import, validate and simulate; pipesim's
V schedules run PyTorch's compute orders. Skipped cleanly where torch is not installed."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

import torch.distributed.pipelining.schedules as schedules  # noqa: E402 — only after torch is known present

from pipesim.errors import ScheduleError  # noqa: E402
from pipesim.io.torch_csv import import_rows, rows_to_text  # noqa: E402
from pipesim.program.validate import validate  # noqa: E402
from pipesim.sim.simulator import simulate  # noqa: E402


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
    PyTorch's implementations — DualPipe-V's overlapped pairs included: PyTorch's ``OVERLAP_F_B`` actions
    import as pipesim's pairs and land exactly where pipesim's DualPipe-V puts its own."""
    theirs = import_rows(_rows(_torch_schedule(getattr(schedules, cls_name), pp, m, 2).pipeline_order)).program
    ours = program_of(name, pp, m)
    for rank in range(pp):
        assert [i for i in theirs.ranks[rank] if i.op.is_compute] == [i for i in ours.ranks[rank] if i.op.is_compute]


@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 12), (2, 3), (4, 6), (4, 10)])
def test_interleaved_matches_pytorchs_interleaved_1f1b(program_of, pp, m):
    """pipesim's interleaved 1F1B runs PyTorch's ScheduleInterleaved1F1B's compute order on every rank — where pp
    divides m (groups of pp) and where it does not (m = 3, 6, 10: PyTorch's rounds of m/⌊m/pp⌋ are the least group
    Megatron-Core accepts, which pipesim takes)."""
    theirs = import_rows(_rows(_torch_schedule(schedules.ScheduleInterleaved1F1B, pp, m, 2).pipeline_order)).program
    ours = program_of("interleaved", pp, m, 2)
    for rank in range(pp):
        assert [i for i in theirs.ranks[rank] if i.op.is_compute] == [i for i in ours.ranks[rank] if i.op.is_compute]
