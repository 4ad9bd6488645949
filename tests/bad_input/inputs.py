"""Every kind of input file pipesim reads, with a command line that reads it: the suite feeds each one bad
contents. ``make(folder, path)`` returns the argv; ``folder`` holds good companions (a timeline, results)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.bad_input.helpers import call


@dataclass(frozen=True)
class InputKind:
    name: str
    suffix: str
    argv: Callable[[Path, Path], list]  # (folder, bad file) → command line


INPUT_KINDS = [
    InputKind("costs-yaml", ".yaml", lambda d, p: ["simulate", "--pp", 2, "--mb", 2, "--costs", p]),
    InputKind("costs-json", ".json", lambda d, p: ["simulate", "--pp", 2, "--mb", 2, "--costs", p]),
    InputKind("model", ".yaml", lambda d, p: ["simulate", "--pp", 2, "--mb", 2, "--model", p]),
    InputKind("chip", ".json", lambda d, p: ["simulate", "--pp", 2, "--mb", 2, "--model", "gpt3-2.7b",
                                             "--hardware", p]),
    InputKind("program-text", ".txt", lambda d, p: ["validate", "--program", p]),
    InputKind("torch-csv", ".csv", lambda d, p: ["simulate", "--schedule", p]),
    InputKind("timeline-calibrate", ".csv", lambda d, p: ["calibrate", p, "-o", d / "out" / "costs.json"]),
    InputKind("timeline-parquet", ".parquet", lambda d, p: ["calibrate", p, "-o", d / "out" / "costs.json"]),
    InputKind("timeline-overlay", ".csv", lambda d, p: ["overlay", d / "good" / "timeline.csv", p]),
    InputKind("sweep-results", ".csv", lambda d, p: ["plot", p, "-o", d / "out" / "figure.png"]),
]


def prepare(folder: Path) -> None:
    """Good companion files under ``folder/good`` and an empty output folder ``folder/out``."""
    (folder / "good").mkdir(exist_ok=True)
    (folder / "out").mkdir(exist_ok=True)
    timeline = folder / "good" / "timeline.csv"
    if not timeline.exists():
        code, _, err = call(["simulate", "--pp", 2, "--mb", 2, "--timeline", timeline])
        assert code == 0, err
    # two measured steps for pipesim fit (any positive seconds: the file is good, the fit's quality aside)
    (folder / "good" / "runs.yaml").write_text(
        "runs:\n"
        "- {model: llama3.2-1b, pp: 2, mb: 4, step_s: 0.5}\n"
        "- {model: llama3.2-1b, pp: 1, mb: 4, dp: 2, step_s: 0.3}\n")
