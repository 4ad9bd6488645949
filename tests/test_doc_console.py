"""The manual's console excerpts are what the commands print today.

Every ```` ```console ```` block of README.md and docs/*.md is a session: ``$ pipesim …`` lines (continued by a
trailing ``\\``, a trailing ``# comment`` dropped) each followed by the output the page shows. Each command that
shows output is run, in order, in a fresh folder, and every shown line must appear in what it printed, in the
same order: ``...`` stands for anything (a whole line of it for lines left out, inside a line for text cut),
and runs of spaces count as one. A command that shows nothing (it writes a file, or needs one the reader
brings) is not run. Commands of other programs (``torchrun``) and ``pipesim profile``, whose output is this machine's
measurement, are not run, and neither is the rest of their block, which reads what they write.

Files a session reads are the page's own code blocks, named here (:data:`PAGE_FILES`). A figure that drifted
from the code fails here with the first line that no longer appears.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipesim.cli.main import main
from tests.test_docs_commands import FENCE, PAGES, logical_lines

# files a page's sessions read, written from the page's own code blocks: (language, index among that page's
# blocks of the language)
PAGE_FILES = {"calibration.md": {"runs.yaml": ("yaml", 0)}}
SKIPPED_COMMANDS = ("profile",)  # measures the machine it runs on: nothing to hold it to


@dataclass(frozen=True)
class Command:
    argv: list[str]
    shown: list[str]  # the output lines the page shows

    @property
    def expects_failure(self) -> bool:
        return any("error:" in line for line in self.shown)


@dataclass(frozen=True)
class Session:
    page: Path
    line: int  # where the block starts, 1-based
    commands: list[Command]

    def __str__(self) -> str:
        return f"{self.page.name}:{self.line}"


def sessions() -> list[Session]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in FENCE.finditer(text):
            if block.group(1) != "console":
                continue
            parsed = [(shlex.split(command, comments=True), shown)
                      for _, command, shown in logical_lines(block.group(2), console=True)]
            if any(argv[0] != "pipesim" or argv[1] in SKIPPED_COMMANDS for argv, _ in parsed):
                continue  # what the later commands read, a skipped one made
            commands = [Command(argv[1:], shown) for argv, shown in parsed]
            if any(c.shown for c in commands):
                found.append(Session(page, text[: block.start()].count("\n") + 1, commands))
    return found


def page_files(page: Path) -> dict[str, str]:
    """The files ``page``'s sessions read, from its own code blocks (:data:`PAGE_FILES`)."""
    text = page.read_text(encoding="utf-8")
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    return {name: [body for lang, body in blocks if lang == language][index]
            for name, (language, index) in PAGE_FILES.get(page.name, {}).items()}


def _squeeze(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def line_matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is what ``shown`` shows: its pieces between ``...`` in order, anchored at the ends
    that have no ``...``."""
    pieces = [_squeeze(p) for p in shown.split("...")]
    printed = _squeeze(printed)
    if not printed.startswith(pieces[0]):
        return False
    at = len(pieces[0])
    for piece in pieces[1:-1]:
        found = printed.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    if len(pieces) == 1:
        return at == len(printed)
    return printed.endswith(pieces[-1]) and len(printed) - len(pieces[-1]) >= at


def first_missing(shown: list[str], printed: list[str]) -> str | None:
    """The first shown line that does not appear, in order, among the printed ones; None where all do."""
    i = 0
    for line in shown:
        if _squeeze(line) in ("", "..."):
            continue
        while i < len(printed) and not line_matches(line, printed[i]):
            i += 1
        if i == len(printed):
            return line
        i += 1
    return None


def test_the_matcher_by_hand():
    assert line_matches("step time 4.735 s ± 16% (left-out ...)", "step time 4.735 s ± 16% (left-out error, x)")
    assert not line_matches("step time 4.735 s ± 16% (left-out ...)", "step time 4.736 s ± 16% (left-out error)")
    assert line_matches("rank   0   48", "rank 0 48")
    assert not line_matches("rank 0 48", "rank 0 480")  # no "..." at the end: the whole line
    assert line_matches("a ... c ... e", "a b c d e") and not line_matches("a ... c ... e", "a b e d c")
    assert first_missing(["x", "...", "z"], ["x", "y", "z"]) is None
    assert first_missing(["z", "x"], ["x", "y", "z"]) == "x"  # in order


def test_the_pages_have_sessions_to_check():
    names = {s.page.name for s in sessions()}
    assert {"README.md", "simulate.md", "models.md", "plan.md", "communication.md", "calibration.md"} <= names


@pytest.mark.parametrize("session", sessions(), ids=str)
def test_a_console_excerpt_is_what_the_command_prints(session, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name, body in page_files(session.page).items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    for command in session.commands:
        if not command.shown:
            continue
        try:
            status = main(command.argv)
        except SystemExit as exit_:  # argparse's errors
            status = exit_.code
        captured = capsys.readouterr()
        printed = (captured.out + captured.err).splitlines()
        assert (status != 0) == command.expects_failure, f"pipesim {' '.join(command.argv)}: exit {status}"
        missing = first_missing(command.shown, printed)
        assert missing is None, (f"{session}: `pipesim {' '.join(command.argv)}` no longer "
                                 f"prints\n  {missing}")
