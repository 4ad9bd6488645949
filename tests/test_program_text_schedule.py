"""Program text (``synthesize -o order.txt``, ``lower -o``) is a schedule source: simulate, export, lower and the
executor read it through the loader, as their --help says (#23)."""

from __future__ import annotations

import pytest

from pipesim.cli.main import main
from pipesim.program.build import build_program
from pipesim.program.loader import load_schedule


@pytest.fixture
def order_txt(tmp_path):
    path = tmp_path / "order.txt"
    assert main(["synthesize", "--pp", "2", "--mb", "4", "-o", str(path)]) == 0
    return path


def test_synthesized_program_text_reads_back_as_the_same_program(order_txt):
    from pipesim.io.program_text import read_program_file

    built = build_program(str(order_txt), None, None)
    assert built.program.ranks == read_program_file(order_txt).ranks
    assert load_schedule(str(order_txt)).fixed_shape.microbatches == 4


def test_simulate_and_export_take_program_text(order_txt, tmp_path, capsys):
    assert main(["simulate", "-s", str(order_txt), "--json"]) == 0
    assert main(["export", "-s", str(order_txt), "--format", "torch-csv", "-o", str(tmp_path / "o.csv")]) == 0
    assert (tmp_path / "o.csv").read_text().startswith("0F0")
    assert main(["simulate", "-s", str(order_txt), "--mb", "8"]) == 2
    assert "--mb 8 disagrees with program text" in capsys.readouterr().err


def test_program_text_whose_communication_lowering_would_change_is_refused(order_txt, tmp_path, capsys):
    lines = order_txt.read_text().splitlines()
    sends = [i for i, line in enumerate(lines) if line.strip().startswith("SEND_F")]
    lines.insert(sends[0] + 2, lines.pop(sends[0]))  # move a send after the next instruction
    edited = tmp_path / "edited.txt"
    edited.write_text("\n".join(lines) + "\n")
    assert main(["simulate", "-s", str(edited)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "communication is not what pipesim lowers" in err


def test_executor_plans_program_text(order_txt):
    pytest.importorskip("torch")
    from executors.run import config_from_args, parser
    from executors.runtime import plan

    program = plan(config_from_args(parser().parse_args([str(order_txt)]), 2), 2)
    assert program.shape.microbatches == 4 and program.name == "zb-auto"
