"""Synthesised orders kept on disk between processes, so a user iterating on a plan pays each synthesis once.

Synthesis is a pure function of its problem and method (a work budget, not a clock, bounds the search; a
result the safety time limit cut short is never stored) and of the code that searches: the sources of
``pipesim/synth``, the IR, and the built-in schedule files it starts from (:mod:`.candidates`; the whole
folder, for the helpers they import). So an entry is
keyed by a hash of the problem's repr (floats print exactly) and the method, inside a folder named by a hash
of those sources: an edit to any of them starts an empty folder, and a stale order can never be read.

Where: ``$PIPESIM_CACHE_DIR/synth`` when that variable is set (empty: no cache at all), else the user cache
folder (``$XDG_CACHE_HOME/pipesim``, default ``~/.cache/pipesim``; ``%LOCALAPPDATA%\\pipesim`` on Windows).
Writers may run at once (``--jobs``, several users of one home): each entry is written to a temporary file
in its folder and renamed over the target (``os.replace`` is atomic), so a reader sees a whole file or none.
The cache can make a run faster, never its answer different or the run fail: an unreadable, malformed or
unwritable entry is treated as absent.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from pipesim.synth.problem import Pass, SynthesisProblem, Task

CACHE_ENV = "PIPESIM_CACHE_DIR"
_FORMAT = 1  # bumped when the entry layout below changes
_IR = Path(__file__).resolve().parent.parent / "program" / "ir.py"


def cache_root() -> Path | None:
    """The folder entries live under, or None when the cache is switched off (``PIPESIM_CACHE_DIR=``)."""
    asked = os.environ.get(CACHE_ENV)
    if asked is not None:
        return Path(asked).expanduser() / "synth" if asked.strip() else None
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        base = Path(os.environ["LOCALAPPDATA"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pipesim" / "synth"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 over what a synthesis result depends on besides its problem (module docstring)."""
    from pipesim.program.loader import load_schedule
    from pipesim.synth.candidates import BUILTIN_NAMES

    folders = sorted({Path(load_schedule(name).path).resolve().parent for name in BUILTIN_NAMES})
    paths = [*sorted(Path(__file__).resolve().parent.glob("*.py")), _IR]
    paths += [p for folder in folders for p in sorted(folder.glob("*.py"))]
    digest = hashlib.sha256(str(_FORMAT).encode())
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def entry_path(problem: SynthesisProblem, method: str) -> Path | None:
    root = cache_root()
    if root is None:
        return None
    key = hashlib.sha256(f"{method}\0{problem!r}".encode()).hexdigest()
    return root / code_fingerprint()[:32] / f"{key}.json"


def _encode(orders: list[list[Task]]) -> list[dict]:
    # Per rank: the passes as one string and the stages and microbatches as lists (compact, exact ints).
    return [
        {"kinds": "".join(t.kind.name for t in order), "stages": [t.stage for t in order], "mbs": [t.mb for t in order]}
        for order in orders
    ]


def _decode(ranks: list[dict], problem: SynthesisProblem) -> list[list[Task]] | None:
    """The orders, or None when they are not one order per rank holding every task exactly once."""
    kinds = {p.name: p for p in Pass}
    orders = [
        [Task(kinds[k], int(s), int(mb)) for k, s, mb in zip(r["kinds"], r["stages"], r["mbs"], strict=True)]
        for r in ranks
    ]
    tasks = [t for order in orders for t in order]
    expected = 3 * problem.num_stages * problem.microbatches
    valid = all(0 <= t.stage < problem.num_stages and 0 <= t.mb < problem.microbatches for t in tasks)
    if len(orders) != problem.pp or len(tasks) != expected or len(set(tasks)) != expected or not valid:
        return None
    return orders


def load(problem: SynthesisProblem, method: str) -> tuple[list[list[Task]], str] | None:
    """The stored (orders, origin) of ``problem`` solved by ``method``, or None."""
    path = entry_path(problem, method)
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        orders = _decode(entry["orders"], problem)
        origin = str(entry["origin"])
    except (OSError, ValueError, KeyError, TypeError):  # absent, half-deleted by hand, or not ours
        return None
    return None if orders is None else (orders, origin)


def save(problem: SynthesisProblem, method: str, orders: list[list[Task]], origin: str) -> None:
    """Store an entry (atomically; a folder that cannot be written is skipped in silence)."""
    path = entry_path(problem, method)
    if path is None:
        return
    text = json.dumps({"describe": problem.describe(), "origin": origin, "orders": _encode(orders)})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return
