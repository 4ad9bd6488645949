"""``pipesim synthesize`` writes an order every other command reads back; ``--memory-limit`` reaches zb-auto;
a schedule file's build may take the optional keyword-only ``costs`` / ``memory_limit``."""

from __future__ import annotations

import json
import textwrap

import pytest

from pipesim.cli.main import main
from pipesim.program.ir import Program


def _json(capsys, *args):
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_synthesize_csv_round_trips_through_simulate_validate_export(tmp_path, capsys):
    order = tmp_path / "order.csv"
    cost_flags = ["--comm", "0.1", "--backward-input", "1", "--backward-weight", "0.5"]
    summary = _json(capsys, "synthesize", "--pp", "4", "--mb", "8", "--memory-limit", "6", *cost_flags,
                    "-o", str(order), "--json")
    assert max(summary["peak_activations"]) <= 6 + 1e-9
    assert main(["validate", "-s", str(order)]) == 0
    assert "ok:" in capsys.readouterr().out
    simulated = _json(capsys, "simulate", "-s", str(order), *cost_flags, "--json")
    assert simulated["metrics"]["makespan"] == pytest.approx(summary["makespan"])
    assert main(["export", "-s", str(order), "-o", str(tmp_path / "again.csv")]) == 0
    assert (tmp_path / "again.csv").read_text() == order.read_text()


def test_synthesize_program_text_and_v_placement(tmp_path, capsys):
    text = tmp_path / "order.txt"
    assert main(["synthesize", "--pp", "2", "--mb", "4", "--chunks", "2", "-o", str(text)]) == 0
    program = Program.from_text(text.read_text())
    assert program.shape.placement.value == "v"
    assert main(["validate", "--program", str(text)]) == 0


def test_simulate_zb_auto_with_limit_reports_it(capsys):
    assert main(["simulate", "-s", "zb-auto", "--pp", "4", "--mb", "8", "--memory-limit", "4"]) == 0
    out = capsys.readouterr().out
    assert "memory limit 4 activation units per rank" in out and "within the limit" in out


@pytest.mark.parametrize(("args", "fragment"), [
    (["simulate", "-s", "1f1b", "--memory-limit", "4"], "takes no --memory-limit"),
    (["simulate", "-s", "zb-auto", "--memory-limit", "-1"], "--memory-limit"),
    (["synthesize", "--pp", "3", "--mb", "4", "--memory-limit", "0.5"], "raise --memory-limit"),
])
def test_bad_limits_are_one_line_errors(args, fragment, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("pipesim: error:") and fragment in err and err.count("\n") == 1


def test_schedule_file_receives_costs_only_when_it_asks(tmp_path, capsys):
    aware = tmp_path / "aware.py"
    aware.write_text(textwrap.dedent("""
        from pipesim import B, F, Schedule

        def build(pp, microbatches, chunks=1, *, costs=None):
            assert costs is not None and costs.default.forward == 3.0
            order = [F(m) for m in range(microbatches)] + [B(m) for m in range(microbatches)]
            return Schedule.from_orders("aware", [order] * pp, microbatches=microbatches)
    """))
    assert main(["simulate", "-s", str(aware), "--forward", "3", "--json"]) == 0
    capsys.readouterr()
    assert main(["simulate", "-s", str(aware), "--forward", "3", "--memory-limit", "2"]) == 2
