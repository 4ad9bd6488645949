"""Every command shown in the README and the manual (docs/*.md) still parses, so examples cannot rot.

Each fenced ``bash``/``console``/``shell`` block is read as a user would copy it: backslash continuations
joined, ``$`` prompts stripped (in console blocks only prompted lines are commands, the rest is output),
``&&`` chains split, ``# comments`` dropped, here-documents skipped. Then, without running anything:

- ``pipesim ...`` goes through pipesim's own argument parser (output paths are checked there, in a scratch
  folder); an example followed by ``pipesim: error: argument ...`` must be refused by the parser, as shown;
- ``torchrun ... -m executors.run ...`` and ``python -m executors.run ...`` through the executor's parser
  (``-m pipesim.profile`` through ``pipesim profile``'s);
- ``python experiments/NAME.py ...``: the script exists and every flag given is one it defines.

Inline examples in the prose count too: `` `pipesim simulate -s zb-v --pp 4 --mb 32` `` and
`` `python experiments/NAME.py --flag` ``.

The Python example at the top of docs/api.md is run, and prints what the page says.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipesim.cli.main import build_parser
from pipesim.errors import PipesimError

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(bash|console|shell)\n(.*?)^```", re.S | re.M)
# Inline experiment commands (`python experiments/NAME.py --flag`), which name the script behind a figure or table.
INLINE_EXPERIMENT = re.compile(r"`(python3? experiments/\w+\.py[^`]*)`")
# Inline pipesim examples in the prose (`pipesim simulate -s zb-v --pp 4 --mb 32`): a subcommand and at least
# two arguments (shorter spans name a command or a flag, not an example), no ellipsis.
INLINE_PIPESIM = re.compile(r"`(pipesim [a-z]+(?: [^`…]+){2,})`")
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
# Commands that are not pipesim's and need no check here (CI runs the install and the suite themselves).
FOREIGN = {"cat", "dask", "mkdocs", "cd", "export"}
ENV_ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=\S*$")
# Flags every experiment script takes through the shared helper (pipesim/plots/figures.py).
SHARED_EXPERIMENT_FLAGS = {"--help", "--fast", "--out", "--update-docs"}


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    argv: tuple[str, ...]
    shown_error: str | None  # the console output's "pipesim: error: ..." line right after it, if any

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join(self.argv)}"


def logical_lines(body: str, console: bool):
    """(line number within the block, command text, the output lines shown after it up to the next command: a
    console block's) for each command of a block."""
    raw = body.splitlines()
    index, heredoc_end = 0, None
    while index < len(raw):
        start, text = index, raw[index]
        index += 1
        if heredoc_end is not None:
            heredoc_end = None if text.strip() == heredoc_end else heredoc_end
            continue
        if console:
            if not text.startswith("$ "):
                continue
            text = text[2:]
        while text.rstrip().endswith("\\") and index < len(raw):
            text = text.rstrip()[:-1] + " " + raw[index].strip()
            index += 1
        shown = []
        while console and index + len(shown) < len(raw) and not raw[index + len(shown)].startswith("$ "):
            shown.append(raw[index + len(shown)])
        if match := HEREDOC.search(text):
            heredoc_end = match.group(1)
        yield start, text, shown


def examples() -> list[Example]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in FENCE.finditer(text):
            first_line = text[: block.start()].count("\n") + 2
            for offset, command, output in logical_lines(block.group(2), block.group(1) == "console"):
                following = output[0] if output else ""
                for part in command.split("&&"):
                    argv = tuple(shlex.split(part, comments=True))
                    if argv:
                        shown = following.strip() if following.startswith("pipesim: error:") else None
                        found.append(Example(page.relative_to(ROOT).as_posix(), first_line + offset, argv, shown))
        for match in INLINE_PIPESIM.finditer(text):
            if "..." not in match.group(1):
                found.append(
                    Example(
                        page.relative_to(ROOT).as_posix(),
                        text[: match.start()].count("\n") + 1,
                        tuple(shlex.split(match.group(1))),
                        None,
                    )
                )
        for match in INLINE_EXPERIMENT.finditer(text):
            argv = tuple(a for a in shlex.split(match.group(1)) if not a.startswith(("[", "|")) and a != "DIR")
            found.append(Example(page.relative_to(ROOT).as_posix(), text[: match.start()].count("\n") + 1, argv, None))
    return found


EXAMPLES = examples()


def _module_argv(argv: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """``-m MODULE args`` inside a python/torchrun command: (MODULE, args)."""
    if "-m" in argv:
        at = argv.index("-m")
        return argv[at + 1], list(argv[at + 2 :])
    return None


def _experiment_flags(script: Path) -> set[str]:
    return set(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", script.read_text())) | SHARED_EXPERIMENT_FLAGS


def check(example: Example) -> None:
    argv = example.argv
    while argv and ENV_ASSIGNMENT.match(argv[0]):  # `PIPESIM_FULL_MATRIX=1 python3 -m pytest ...`
        argv = argv[1:]
    program = Path(argv[0]).name
    if program in FOREIGN:
        return
    if program == "pipesim":
        parse = build_parser().parse_args
        args = list(argv[1:])
    elif program in {"python", "python3", "torchrun"} and (module := _module_argv(argv)):
        name, args = module
        if name in {"pip", "pytest"}:
            return
        if name == "tests.cpu_time":  # a wrapper (python -m tests.cpu_time COMMAND): the command it measures
            assert args, f"{example}: tests.cpu_time needs a command to measure"
            check(Example(example.page, example.line, tuple(args), example.shown_error))
            return
        if name.startswith("tests."):  # a test helper's own entry (python -m tests.synth_cache), no flags
            assert (ROOT / (name.replace(".", "/") + ".py")).is_file() and not args, example
            return
        if name == "executors.run":
            if importlib.util.find_spec("torch") is None:
                return  # the executor's parser imports torch; without it only the other examples are checked
            from executors.run import parser

            parse = parser().parse_args
        elif name == "pipesim.profile":
            parse = build_parser().parse_args
            args = ["profile", *args]
        elif name in {"pipesim", "pipesim.cli"}:
            parse = build_parser().parse_args
        else:
            raise AssertionError(f"{example}: no check for module {name}; add one to tests/test_docs_commands.py")
    elif program in {"python", "python3"} and argv[1].startswith("experiments/"):
        script = ROOT / argv[1]
        assert script.is_file(), f"{example}: {argv[1]} does not exist"
        unknown = {a.split("=")[0] for a in argv[2:] if a.startswith("--")} - _experiment_flags(script)
        assert not unknown, f"{example}: {argv[1]} takes no {sorted(unknown)}"
        return
    else:
        raise AssertionError(f"{example}: unknown program {argv[0]}; add a check to tests/test_docs_commands.py")
    if example.shown_error and example.shown_error.startswith("pipesim: error: argument"):
        with pytest.raises(PipesimError) as refused:
            parse(args)
        assert str(refused.value).split(" (see")[0] in example.shown_error, example
        return
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            parse(args)
        except SystemExit as err:  # --help prints and exits 0; anything else is argparse refusing it
            if err.code not in (0, None):
                raise AssertionError(f"{example}: the parser exits {err.code}") from None
        except PipesimError as err:
            raise AssertionError(f"{example}: the parser refuses it: {err}") from None


def test_the_pages_hold_examples():
    pages = {e.page for e in EXAMPLES}
    assert {"README.md", "docs/simulate.md", "docs/executor.md", "docs/plan.md"} <= pages, pages
    assert sum(e.argv[0] == "pipesim" for e in EXAMPLES) >= 30
    assert sum(e.argv[1:2] == ("experiments/gantt_gallery.py",) for e in EXAMPLES) >= 2


def test_every_documented_command_parses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # output paths are checked against the current folder, as a user's would be
    for folder in ("docs/figures",):  # folders the pages write into, relative to the checkout root
        (tmp_path / folder).mkdir(parents=True)
    failures = []
    for example in EXAMPLES:
        try:
            check(example)
        except (AssertionError, pytest.fail.Exception) as err:
            failures.append(str(err))
    assert not failures, "\n".join(failures)


def test_a_broken_example_is_caught():
    with pytest.raises(AssertionError, match="the parser refuses it"):
        check(Example("x.md", 1, ("pipesim", "simulate", "--pp", "four"), None))
    with pytest.raises(AssertionError, match="takes no"):
        check(Example("x.md", 1, ("python", "experiments/gantt_gallery.py", "--no-such-flag"), None))
    with pytest.raises(AssertionError, match="does not exist"):
        check(Example("x.md", 1, ("python", "experiments/missing.py"), None))


def test_api_page_example_runs():
    page = (ROOT / "docs" / "api.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    assert importlib.util.find_spec("pandas")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/api.md", "exec"), {})
    makespan, bubble = out.getvalue().split()
    assert float(makespan) == 57.0 and bubble.startswith("0.157")
