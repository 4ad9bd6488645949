"""Failures end the job, fast and named: a raising or killed rank under torchrun, and bad input before any
communication (world size that does not factor, a schedule the validator rejects)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from executors.launch import run_torchrun

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.distributed


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def _torchrun(*args, nproc=2, timeout=90):
    return run_torchrun(["--nproc-per-node", str(nproc), "-m", "executors.run", *args], cwd=ROOT, env=_env(),
                        timeout=timeout)


@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_failing_rank_ends_the_job_and_is_named(mode):
    proc = _torchrun("1f1b", "--steps", "2", "--fail-at", "1:B mb=1 chunk=0", "--fail-mode", mode)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    # Ended by the failure, not by a peer waiting out the 60 s process-group timeout (gloo's "Timed out waiting
    # ..."; the interpreter's line carries the error's first line). A hang fails _torchrun's 90 s timeout. Not
    # a wall-clock bound: on a loaded machine two torch imports alone can take tens of seconds.
    assert "Timed out" not in out, out
    if mode == "raise":
        assert "rank 1 (pp rank 1) failed at B mb=1 chunk=0" in out, out
    else:
        # The killed rank says nothing: its peer names itself and the instruction it was blocked in, unless
        # torchrun stopped the peer first, in which case torchrun names the killed rank and the signal.
        named_by_peer = "rank 0 (pp rank 0) failed at RECV_B mb=" in out
        named_by_torchrun = "rank      : 1" in out and "SIGKILL" in out
        assert named_by_peer or named_by_torchrun, out


def _direct(*args, world=2):
    """Run executors.run without torchrun and without a rendezvous: reaching communication would fail."""
    env = _env(WORLD_SIZE=str(world), RANK="0", MASTER_ADDR="", MASTER_PORT="")
    return subprocess.run(
        [sys.executable, "-m", "executors.run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def in_process(monkeypatch, capsys):
    """``executors.run.main`` in this process, as rank RANK of WORLD_SIZE, its stderr captured: the refusals
    below happen before any communication, so what a process adds (an interpreter, torch's import) is not
    what they test — the process-level exit status and line are checked by _direct and _torchrun above and
    below. Reaching init_process_group fails the test at once instead of waiting for peers."""
    import torch.distributed as dist

    from executors import run as run_cli

    def reached(*args, **kwargs):
        raise AssertionError("executors.run reached init_process_group: the input was not refused")

    monkeypatch.setattr(dist, "init_process_group", reached)

    def call(*args, world=2, rank=0):
        monkeypatch.setenv("WORLD_SIZE", str(world))
        monkeypatch.setenv("RANK", str(rank))
        capsys.readouterr()  # only what this call prints
        try:
            code = run_cli.main(list(args))
        except SystemExit as stop:  # --help
            code = stop.code
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(["executors.run", *args], code, captured.out, captured.err)

    return call


def test_world_size_that_does_not_factor_fails_before_communication():
    proc = _direct("1f1b", "--tp", "2", world=3)  # as a process: exit status 2, one line, no traceback
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "world size 3" in proc.stderr and "--tp" in proc.stderr


def test_rejected_schedule_fails_before_communication(in_process):
    proc = in_process(str(ROOT / "tests" / "schedules" / "deadlock_1f1b.py"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "deadlock: rank 0 waits at B mb=0 chunk=0 for rank 1 (RECV_B" in proc.stderr


def test_cp_sequence_that_does_not_split_fails_before_communication(in_process):
    proc = in_process("1f1b", "--cp", "2", "--seq-len", "6", world=4)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--seq-len 6 is not divisible by 2·cp = 4" in proc.stderr


def _one_error_line(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("executors.run: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--lr", "nan"), ("--lr", "finite")),
        (("--lr", "-5"), ("--lr", "> 0")),
        (("--fail-at", "5:F mb=0 chunk=0"), ("rank 5", "ranks 0..1")),
        (("--fail-at", "1:F mb=99 chunk=0"), ("never executes", "F mb=99")),
        (("--timeline", "no_such_folder/t.csv"), ("--timeline", "does not exist")),
        (("--mb", "0"), ("--mb",)),
        (("--schedule", "zb-v", "1f1b"), ("two schedules",)),
    ],
)
def test_bad_input_is_one_line_on_a_non_zero_rank_before_communication(in_process, args, needles):
    """Rank 1, not only rank 0, says what is wrong (torchrun may stop rank 0 before it prints)."""
    _one_error_line(in_process(*args, rank=1), *needles)


def test_emulation_needs_costs_in_seconds(in_process, tmp_path):
    costs = tmp_path / "costs.yaml"
    costs.write_text("default: {forward: 1, backward: 2}\n")  # abstract units
    _one_error_line(in_process("1f1b", "--emulate", str(costs)), "--emulate", "seconds")


def test_under_torchrun_bad_input_reaches_the_user_with_exit_code_2():
    proc = _torchrun("--lr", "nan")  # a hang fails its timeout
    assert proc.returncode != 0
    assert "executors.run: error: argument --lr: nan must be a finite number > 0" in proc.stderr, proc.stderr
    assert "exitcode  : 2" in proc.stderr, proc.stderr  # torchrun's report names our exit status


# Builds both executors' parsers, parses a bad flag, and reports whether torch was imported on the way.
_PARSE_WITHOUT_TORCH = """
import sys
from executors import run, torch_runtime
from pipesim.errors import PipesimError
try:
    run.parser().parse_args(["--lr", "nan"])
except PipesimError:
    pass
torch_runtime.parser().parse_args(["order.csv"])
print("torch imported" if "torch" in sys.modules else "no torch")
"""


def test_flags_are_parsed_before_torch_is_imported():
    """--help and a bad flag answer before torch loads (about 1.5 CPU-s a process: every rank of a launch)."""
    proc = subprocess.run(
        [sys.executable, "-c", _PARSE_WITHOUT_TORCH], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "no torch", proc.stdout + proc.stderr


def test_help_names_every_schedule_and_every_default(in_process):
    from pipesim.program.loader import builtin_names

    proc = in_process("--help")  # .ci/run runs `python -m executors.run --help` as a process
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for name in builtin_names():
        assert name in text
    for flag in ("--schedule", "-s", "--mb", "--pp", "--tp", "--steps", "--lr", "--emulate", "--timeline"):
        assert flag in text
    assert "else 8, as pipesim simulate)" in text
    # Every option's help states its default.
    from executors.run import parser

    for action in parser()._actions:
        if action.option_strings and action.dest != "help":
            assert "default" in (action.help or ""), action.option_strings


def _csv_order(tmp_path, pp=2, mb=6):
    from pipesim.cli.main import main

    path = tmp_path / "order.csv"
    assert (
        main(["export", "-s", "1f1b", "--pp", str(pp), "--mb", str(mb), "--format", "torch-csv", "-o", str(path)]) == 0
    )
    return path


def test_torch_csv_order_takes_its_microbatches_without_mb(tmp_path):
    """Without --mb the CSV's own count is used; the executor's default is not the user's flag (#23)."""
    from executors.run import config_from_args, parser
    from executors.runtime import plan

    path = _csv_order(tmp_path, mb=6)
    program = plan(config_from_args(parser().parse_args([str(path)]), 2), 2)
    assert program.shape.microbatches == 6 and program.shape.pp == 2


def test_torch_csv_order_with_an_explicit_other_mb_is_refused(in_process, tmp_path):
    from executors.run import config_from_args, parser
    from executors.runtime import plan

    path = _csv_order(tmp_path, mb=6)
    _one_error_line(in_process(str(path), "--mb", "8"), "--mb 8 disagrees with torch CSV", "--mb 6")
    agreeing = plan(config_from_args(parser().parse_args([str(path), "--mb", "6"]), 2), 2)  # planning passes
    assert agreeing.shape.microbatches == 6


def test_more_pipeline_ranks_than_layers_is_refused_before_communication(in_process):
    line = _one_error_line(in_process("1f1b", world=8), "--layers 4", "pipeline rank 4", "--layers 8 or more")
    assert "empty parameter list" not in line


def test_enough_layers_for_every_rank_passes_planning():
    from executors.model import ModelConfig
    from executors.runtime import RunConfig, plan
    from pipesim.topology import Topology

    plan(RunConfig(topology=Topology(pp=8), model=ModelConfig(layers=7)), 8)  # rank 7 holds the head
    with pytest.raises(Exception, match="--layers 6 leaves pipeline rank 6"):
        plan(RunConfig(topology=Topology(pp=8), model=ModelConfig(layers=6)), 8)
