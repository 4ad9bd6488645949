"""PyTorch action CSVs: pipesim's export reads back to the same Program; hand-written rows import or fail with a
precise reason. No torch needed here (PyTorch's own orders: test_torch_orders.py)."""

from __future__ import annotations

import pytest

from pipesim.cli.main import main
from pipesim.errors import ScheduleError
from pipesim.io.torch_csv import CsvFormat, export_rows, import_rows
from pipesim.program.validate import validate

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


@pytest.mark.parametrize(("argv", "expected"), [
    (["-s", "zb-v", "--pp", "2", "--mb", "4"], 'pipeline_parallel_schedule = "ZBVZeroBubble" (places stages v-style'),
    (["-s", "1f1b", "--pp", "4", "--mb", "8"], 'num_pp_microbatches = 8, pipeline_parallel_schedule = '
                                               '"PipelineScheduleSingle"'),
    (["-s", "interleaved", "--pp", "2", "--mb", "4", "--chunks", "3"], "module_fqns_per_model_part with 6 lists"),
    (["-s", "zb-h1", "--pp", "2", "--mb", "4", "--with-comms"], "torchtitan's pipeline_parallel_schedule_csv loads "
                                                                 "compute_only only"),
])
def test_export_names_the_torchtitan_settings_in_one_line(tmp_path, capsys, argv, expected):
    assert main(["export", *argv, "-o", str(tmp_path / "order.csv")]) == 0
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err
