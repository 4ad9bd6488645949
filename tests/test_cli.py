"""The command line as a person meets it: summaries, files, and one-line errors with a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from pipesim.cli.main import main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipesim.cli.main", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def cli(capsys):
    """``pipesim ARGS`` through main() in this process, its status and output as a process's would be: an
    interpreter per refusal would test Python's start, not pipesim; test_a_refusal_is_the_process_exit_status
    checks the process itself once."""

    def call(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()  # only what this call prints
        try:
            code = main(list(args))
        except SystemExit as stop:  # --help
            code = stop.code
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(["pipesim", *args], code, captured.out, captured.err)

    return call


def test_a_refusal_is_the_process_exit_status():
    result = run("simulate", "--pp", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pipesim: error: argument --pp: 0 must be a positive integer")


def test_simulate_prints_summary_and_terminal_timeline(capsys):
    assert main(["simulate", "--pp", "4", "--mb", "16"]) == 0
    out = capsys.readouterr().out
    assert "bubble_fraction" in out and "simulated 0.1579" in out and "analytic 0.1579" in out
    assert "bubble_overhead" in out and "0.1875" in out
    assert "rank  0 |F0" in out  # the drawn timeline


def test_simulate_json(capsys):
    assert main(["simulate", "--pp", "4", "--mb", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["pp"] == 4
    assert data["metrics"]["bubble_fraction"] == pytest.approx(3 / 11)
    assert data["analytic"]["bubble_fraction"] == pytest.approx(3 / 11)
    assert data["memory"]["peak_activations"] == [4, 3, 2, 1]
    assert "bubble_fraction" in data["metrics"]["conventions"]


def test_simulate_writes_files(tmp_path, capsys):
    csv, parquet, trace = tmp_path / "t.csv", tmp_path / "t.parquet", tmp_path / "trace.json"
    figures = [tmp_path / f"g.{ext}" for ext in ("png", "pdf", "svg")]
    assert main(["simulate", "--schedule", "interleaved", "--pp", "2", "--mb", "4", "--timeline", str(csv),
                 "--trace", str(trace), "--plot", str(figures[0])]) == 0
    assert main(["simulate", "--pp", "2", "--mb", "4", "--timeline", str(parquet), "--plot", str(figures[1])]) == 0
    assert main(["simulate", "--pp", "2", "--mb", "4", "--plot", str(figures[2])]) == 0
    frame = pd.read_csv(csv)
    assert set(frame["op"]) >= {"F", "B", "SEND_F", "RECV_B", "STEP"}
    assert len(pd.read_parquet(parquet)) > 0
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "F0" and e["ph"] == "X" for e in events)
    assert figures[0].read_bytes()[:4] == b"\x89PNG"
    assert figures[1].read_bytes()[:4] == b"%PDF"
    assert b"<svg" in figures[2].read_bytes()[:2000]


def test_costs_flags_and_file(tmp_path, capsys):
    costs = tmp_path / "costs.yaml"
    costs.write_text("default: {forward: 2.0, backward: 4.0}\n")
    assert main(["simulate", "--pp", "2", "--mb", "2", "--costs", str(costs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["makespan"] == pytest.approx(3 * 6.0)
    assert main(["simulate", "--pp", "2", "--mb", "2", "--costs", str(costs), "--forward", "1", "--stage-cost",
                 "1:backward=8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["metrics"]["ranks"][1]["busy"] == pytest.approx(2 * (1 + 8))


DEADLOCKING = textwrap.dedent("""
    from pipesim.program.ir import B, F, Schedule

    def build(pp, microbatches, chunks=1):
        return Schedule.from_orders("hangs", [[F(0), B(0), F(1), B(1)], [F(0), F(1), B(0), B(1)]], microbatches=2)
""")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["simulate", "--pp", "0"], "--pp: 0 must be a positive integer"),
        (["simulate", "--mb", "-3"], "--mb: -3 must be a positive integer"),
        (["simulate", "--schedule", "nosuch"], "unknown schedule 'nosuch': use one of"),
        (["simulate", "--schedule", "missing/file.py"], "does not exist"),
        (["simulate", "--schedule", "interleaved", "--pp", "4", "--mb", "3"], "use --mb 4 or more"),
        (["simulate", "--pp", "2", "--mb", "2", "--stage-cost", "7:forward=1"], "stages 0..1"),
        (["simulate", "--timeline", "out.txt"], "use .csv, .parquet"),
        (["simulate", "--costs", "nosuch.json"], "costs file nosuch.json does not exist"),
        (["simulate", "--forward", "-1"], "-1 must be 0 or a number in [1e-12, 1e+15]"),
        (["validate", "--schedule", "1f1b", "--semantics", "rendezvous"], "deadlock: rank 0 waits at SEND_F"),
        (["topology", "--tp", "0"], "--tp: 0 must be a positive integer"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(cli, args, fragment):
    result = cli(*args)
    assert result.returncode == 2
    assert fragment in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_schedule_file_errors(cli, tmp_path):
    syntax = tmp_path / "broken.py"
    syntax.write_text("def build(pp, microbatches, chunks:\n")
    raises = tmp_path / "raises.py"
    raises.write_text("def build(pp, microbatches, chunks=1):\n    raise ValueError('no luck')\n")
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def build(pp, microbatches, chunks=1):\n    return [[1, 2]]\n")
    hangs = tmp_path / "hangs.py"
    hangs.write_text(DEADLOCKING)
    cases = [
        (syntax, "has a syntax error at line 1"),
        (raises, "raised ValueError in build(pp=2, microbatches=2, chunks=1): no luck"),
        (wrong, "returned list, expected pipesim.program.ir.Schedule"),
        (hangs, "deadlock: rank 0 waits at B mb=0 chunk=0 for rank 1 (RECV_B mb=0 chunk=0 peer=1); rank 1 waits at F"),
    ]
    for path, fragment in cases:
        result = cli("simulate", "--schedule", str(path), "--pp", "2", "--mb", "2")
        assert result.returncode == 2, result.stderr
        assert fragment in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_failed_run_leaves_no_file(cli, tmp_path):
    out = tmp_path / "t.csv"
    figure = tmp_path / "g.png"
    result = cli("simulate", "--schedule", "interleaved", "--pp", "4", "--mb", "3", "--timeline", str(out),
                 "--plot", str(figure))
    assert result.returncode == 2
    assert list(tmp_path.iterdir()) == []


def test_custom_schedule_file_runs(tmp_path, capsys):
    own = tmp_path / "mine.py"
    own.write_text(textwrap.dedent("""
        '''All forwards, then all backwards in order: GPipe without the reversal.'''
        from pipesim.program.ir import B, F, Schedule

        def build(pp, microbatches, chunks=1):
            order = [F(m) for m in range(microbatches)] + [B(m) for m in range(microbatches)]
            return Schedule.from_orders("mine", [order] * pp, microbatches=microbatches)
    """))
    assert main(["simulate", "--schedule", str(own), "--pp", "3", "--mb", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["bubble_fraction"] == pytest.approx(2 / 6)


def test_a_schedule_file_edited_in_one_process_is_read_again(tmp_path):
    """A notebook iterating on its own schedule: the file edited between two calls is imported and built again
    (it once answered with the first version, cached by the file's path: the edit silently ignored)."""
    import pipesim

    own = tmp_path / "mine.py"
    header = "from pipesim import B, F, Schedule\n\ndef build(pp, microbatches, chunks=1):\n"
    own.write_text(header + "    order = [F(m) for m in range(microbatches)] + [B(m) for m in range(microbatches)]\n"
                   "    return Schedule.from_orders('mine', [order] * pp, microbatches=microbatches)\n")
    assert pipesim.simulate(str(own), pp=3, mb=4).memory.peak_activations == (4, 4, 4)  # every forward first
    own.write_text(header + textwrap.indent(textwrap.dedent("""
        orders = []
        for rank in range(pp):  # 1F1B: pp - rank forwards in flight at most
            warm = min(pp - rank, microbatches)
            order = [F(m) for m in range(warm)]
            for i in range(microbatches - warm):
                order += [B(i), F(warm + i)]
            orders.append(order + [B(m) for m in range(microbatches - warm, microbatches)])
        return Schedule.from_orders('mine', orders, microbatches=microbatches)
    """), "    "))
    assert pipesim.simulate(str(own), pp=3, mb=4).memory.peak_activations == (3, 2, 1)


def test_lower_and_validate_program_text(tmp_path, capsys):
    text = tmp_path / "p.txt"
    assert main(["lower", "--schedule", "1f1b", "--pp", "3", "--mb", "3", "-o", str(text)]) == 0
    assert main(["validate", "--program", str(text)]) == 0
    assert "ok: program" in capsys.readouterr().out
    text.write_text(text.read_text().replace("  SEND_F mb=0 chunk=0 peer=1\n", "", 1))
    assert main(["validate", "--program", str(text)]) == 2


def test_topology_prints_groups(capsys):
    assert main(["topology", "--tp", "2", "--cp", "2", "--dp", "2", "--pp", "2"]) == 0
    out = capsys.readouterr().out
    assert "tp groups (8): {0,1}" in out and "cp groups (8): {0,2}" in out
    assert "dp groups (8): {0,4}" in out and "pp groups (8): {0,8}" in out
    # The grid: per pp rank, a row per dp rank (a cp group), a column per cp rank, each cell a tp group.
    assert "    dp 0   [0 1]   [2 3]" in out and "    dp 1 [12 13] [14 15]" in out


def test_help_mentions_units(cli):
    result = cli("simulate", "--help")
    assert result.returncode == 0
    assert "cost units" in result.stdout and "microbatches per step" in result.stdout


def test_no_help_text_shows_an_unfilled_placeholder():
    # An f-string written without its f prints "{NAME}" to the user instead of the value it names.
    import re

    from pipesim.cli.main import NAMES, build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and set(NAMES) <= set(a.choices))
    for name in NAMES:
        text = subparsers.choices[name].format_help()
        assert not re.search(r"\{[A-Z_]+\}", text), f"pipesim {name} --help: {re.search(r'.{40}[{][A-Z_]+[}]', text)}"


@pytest.mark.parametrize("argv, written", [
    (["simulate", "--pp", "4", "--mb", "16", "--timeline", "t.csv", "--plot", "g.png"], ["t.csv", "g.png"]),
    (["plan", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--gpus", "8", "--global-batch", "32",
      "--schedules", "1f1b", "-o", "plan.csv", "--plot", "p.png"], ["plan.csv", "p.png"]),
])
def test_a_reader_that_leaves_does_not_stop_the_files(argv, written, tmp_path):
    """`pipesim plan … -o plan.parquet | head`: the reader closes the pipe before the command has printed
    everything; the command still writes every file it was asked for, and says success only then."""
    proc = subprocess.Popen([sys.executable, "-m", "pipesim.cli.main", *argv], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert err == b""
    for name in written:
        assert (tmp_path / name).stat().st_size > 0, name


@pytest.mark.parametrize("module", ["pipesim", "pipesim.cli"])
def test_python_dash_m_runs_the_command(module):
    """`python -m pipesim simulate …`, the way many tools are run, is the `pipesim` command."""
    result = subprocess.run([sys.executable, "-m", module, "simulate", "--pp", "4", "--mb", "16"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "makespan 57 units" in result.stdout
