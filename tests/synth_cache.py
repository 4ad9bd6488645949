"""A committed cache of the zb-auto orders the published-runs table synthesises (tests/data/synth_orders.json.gz).

Synthesis is a pure function of its problem (a work budget, not a clock, bounds the search), and the 21 ZB-2p
rows of the published-runs table cost about two CPU-minutes to synthesise: half the fast tier. The tests read
their orders from this file instead (``tests/conftest.py``), and still check them:

- an entry is used only when the fingerprint of ``pipesim/synth/*.py`` it was made with is the current one, and
  its orders are re-evaluated (``pipesim.synth.evaluate``) and must complete within the memory limit; the Program
  built from them is validated as every Program is;
- ``tests/test_synth_cache.py`` re-synthesises one cached problem live and requires the same orders (which
  catches a change elsewhere, a built-in candidate or the IR, that moves synthesis), and every problem with
  ``PIPESIM_FULL_MATRIX=1``; it fails on a stale fingerprint, naming the command that rebuilds the file.

A problem not in the file, or any problem when the file is stale, is synthesised live: the cache can make the
suite slower, never its answers different. Rebuild: ``python -m tests.synth_cache`` (about two minutes).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from pipesim.synth import search
from pipesim.synth.evaluate import Orders, evaluate
from pipesim.synth.problem import Pass, SynthesisProblem, Task

ROOT = Path(__file__).resolve().parent.parent
CACHE_FILE = ROOT / "tests" / "data" / "synth_orders.json.gz"
REBUILD = "python -m tests.synth_cache"


def synth_fingerprint() -> str:
    """sha256 over the synthesiser's own sources: an edit there may change every order."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "pipesim" / "synth").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def problem_key(problem: SynthesisProblem) -> str:
    """The problem's identity: its dataclass repr (floats print exactly, round-trip), hashed."""
    return hashlib.sha256(repr(problem).encode()).hexdigest()


_PASS = {p.name: p for p in Pass}


def encode(orders: Orders) -> list[str]:
    """One line per rank. A rank that runs one stage, each pass's microbatches in order 0, 1, 2 … (every
    one-chunk order synthesis makes), is ``=S:FFIWFIW…``, its passes in order; any other is explicit,
    ``F3.12 I3.12 W3.12 …`` (pass, global stage, microbatch)."""
    lines = []
    for order in orders:
        stages = {t.stage for t in order}
        counts = dict.fromkeys(Pass, 0)
        in_order = True
        for t in order:
            in_order = in_order and t.mb == counts[t.kind]
            counts[t.kind] += 1
        if len(stages) == 1 and in_order:
            lines.append(f"={stages.pop()}:" + "".join(t.kind.name for t in order))
        else:
            lines.append(" ".join(f"{t.kind.name}{t.stage}.{t.mb}" for t in order))
    return lines


def decode(lines: list[str]) -> Orders:
    orders = []
    for line in lines:
        tasks = []
        if line.startswith("="):
            stage, kinds = line[1:].split(":")
            counts = dict.fromkeys(Pass, 0)
            for name in kinds:
                kind = _PASS[name]
                tasks.append(Task(kind, int(stage), counts[kind]))
                counts[kind] += 1
        else:
            for token in line.split():
                stage, mb = token[1:].split(".")
                tasks.append(Task(_PASS[token[0]], int(stage), int(mb)))
        orders.append(tasks)
    return orders


def load() -> dict:
    """The file's contents, or an empty cache when the file is missing."""
    if not CACHE_FILE.exists():
        return {"fingerprint": None, "entries": {}}
    with gzip.open(CACHE_FILE, "rt", encoding="utf-8") as f:
        return json.load(f)


class CachedOrders:
    """Lookup for :func:`search.synthesize` (default method and options only, as zb-auto calls it)."""

    def __init__(self, data: dict | None = None):
        data = load() if data is None else data
        self.fresh = data["fingerprint"] == synth_fingerprint()
        self.entries: dict = data["entries"] if self.fresh else {}

    def result(self, problem: SynthesisProblem) -> search.SynthesisResult | None:
        """The cached result for ``problem``, re-evaluated; None when absent or not feasible (then: live)."""
        entry = self.entries.get(problem_key(problem))
        if entry is None:
            return None
        orders = decode(entry["orders"])
        evaluation = evaluate(problem, orders)
        if not evaluation.feasible or len(orders) != problem.pp:
            return None
        return search.SynthesisResult(problem, orders, evaluation, entry["origin"])


class _Recorded(Exception):
    """Raised by :func:`problem_of`'s stand-in for the search once it has the problem."""


def problem_of(run) -> SynthesisProblem:
    """The problem a zb-auto published row synthesises, without synthesising it (the search is stopped as it is
    called, after predict() built the row's costs as it always does). The Program cache is bypassed, so that
    the build reaches the search even when this process built the row before."""
    from pipesim.program import build
    from pipesim.validation.runs import predict

    seen: list[SynthesisProblem] = []
    solve, build_cached = search.synthesize, build._build_cached

    def record(problem, method=search.Method.LOCAL, **options):
        seen.append(problem)
        raise _Recorded

    import os

    from pipesim.synth.store import CACHE_ENV

    # The on-disk store (pipesim/synth/store.py) answers before the search is called: switched off here, or a
    # problem this session already solved would never reach the recorder.
    stored_in = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = ""
    search.synthesize, build._build_cached = record, build_cached.__wrapped__
    try:
        predict(run)
    except Exception:  # _Recorded, as the loader wraps what a schedule's build raises
        if not seen:
            raise
    finally:
        search.synthesize, build._build_cached = solve, build_cached
        if stored_in is None:
            del os.environ[CACHE_ENV]
        else:
            os.environ[CACHE_ENV] = stored_in
    assert seen, f"{run.label}: predict() synthesised nothing"
    return seen[0]


def synthesised_runs() -> list:
    """The published rows whose order is synthesised for their costs (zb-auto), smallest problem first."""
    from pipesim.program.loader import load_schedule
    from pipesim.validation.sources import PUBLISHED_RUNS

    runs = [r for r in PUBLISHED_RUNS if load_schedule(r.schedule).build_options]
    return sorted(runs, key=lambda r: r.pp * r.microbatches * r.chunks)


def rebuild() -> int:
    entries = {}
    for run in synthesised_runs():
        problem = problem_of(run)
        result = search.synthesize(problem)
        assert not result.notes, result.notes  # a safety-time stop would make the order machine-dependent
        entries[problem_key(problem)] = {
            "describe": problem.describe(),
            "origin": result.origin,
            "orders": encode(result.orders),
        }
    CACHE_FILE.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps({"fingerprint": synth_fingerprint(), "entries": entries}, sort_keys=True)
    # mtime=0: the same orders give the same bytes, so a rebuild with nothing changed leaves git clean.
    with open(CACHE_FILE, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(payload.encode())
    print(f"wrote {len(entries)} problems to {CACHE_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(rebuild())
