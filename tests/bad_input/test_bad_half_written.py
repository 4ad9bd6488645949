"""Class 4 — no half-written outputs: every output path of every command is checked as its flag is parsed, so a
bad one (missing folder, a folder, unknown format) fails before any work and before any other file is written."""

from __future__ import annotations

import pytest

from tests.bad_input.helpers import call, refused, snapshot
from tests.bad_input.inputs import prepare

# (command line, the output flag under test, a good suffix for it, other outputs the same run would write)
COMMANDS = [
    (["simulate", "--pp", 2, "--mb", 2], "--timeline", ".csv", ["--trace", "trace.json", "--plot", "g.png"]),
    (["simulate", "--pp", 2, "--mb", 2], "--trace", ".json", ["--timeline", "t.csv", "--plot", "g.svg"]),
    (["simulate", "--pp", 2, "--mb", 2], "--plot", ".png", ["--timeline", "t.parquet", "--plot", "g.pdf"]),
    (["lower", "--pp", 2, "--mb", 2], "-o", ".txt", []),
    (["export", "--pp", 2, "--mb", 2], "-o", ".csv", []),
    (["sweep", "-s", "1f1b", "--pp", 2, "--mb", 2, "-q"], "-o", ".csv", []),
    (["plot", "{results}"], "-o", ".png", []),
    (["calibrate", "{timeline}"], "-o", ".json", []),
    (["overlay", "{timeline}", "{timeline}"], "-o", ".png", []),
    (["fit", "{runs}", "--hardware", "h100-sxm"], "-o", ".yaml", []),
]
BAD_TARGETS = {
    "missing-folder": lambda d, suffix: d / "no" / "such" / f"out{suffix}",
    "is-a-folder": lambda d, suffix: d / f"folder{suffix}",
    "unknown-format": lambda d, suffix: d / "out.unknown",
    "parent-is-a-file": lambda d, suffix: d / "good" / "timeline.csv" / f"out{suffix}",
}


def _argv(argv: list, folder) -> list:
    good = folder / "good"
    return [str(a).format(results=good / "results.csv", timeline=good / "timeline.csv", runs=good / "runs.yaml")
            for a in argv]


@pytest.fixture
def folder(tmp_path):
    prepare(tmp_path)
    code, _, err = call(["sweep", "-s", "1f1b", "--pp", 2, "--mb", 2, "-q", "-o", tmp_path / "good" / "results.csv"])
    assert code == 0, err
    (tmp_path / "folder.csv").mkdir()
    for suffix in (".json", ".png", ".txt", ".yaml"):
        (tmp_path / f"folder{suffix}").mkdir()
    return tmp_path


FREE_FORMAT = {"lower", "export"}  # text to any file name: no suffix to get wrong
CASES = [pytest.param(*command, bad, id=f"{command[0][0]}{command[1]}-{bad}")
         for command in COMMANDS for bad in sorted(BAD_TARGETS)
         if not (bad == "unknown-format" and command[0][0] in FREE_FORMAT)]


@pytest.mark.parametrize(("argv", "flag", "suffix", "others", "bad"), CASES)
def test_bad_output_path_fails_before_any_output_is_written(argv, flag, suffix, others, bad, folder):
    target = BAD_TARGETS[bad](folder, suffix)
    outputs = [folder / "out" / o if i % 2 else o for i, o in enumerate(others)]
    # The bad path comes last, so a command that checked paths only as it wrote would already have written.
    refused([*_argv(argv, folder), *outputs, flag, target], folder, names=(flag, str(target)))
    assert list((folder / "out").iterdir()) == []


def test_every_repeated_plot_is_written(tmp_path):
    figures = [tmp_path / f"gantt.{ext}" for ext in ("png", "pdf", "svg")]
    code, out, err = call(["simulate", "--pp", 2, "--mb", 2, *[a for f in figures for a in ("--plot", f)]])
    assert code == 0, err
    for figure in figures:
        assert figure.stat().st_size > 0
        assert f"wrote plot {figure}" in out


def test_successful_run_writes_nothing_but_its_outputs(tmp_path):
    before = snapshot(tmp_path)
    code, _, err = call(["simulate", "--pp", 2, "--mb", 2, "--timeline", tmp_path / "t.csv"])
    assert code == 0, err
    assert set(snapshot(tmp_path)) - set(before) == {"t.csv"}  # no temporary file left behind
