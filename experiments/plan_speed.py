"""How long ``pipesim plan`` takes, and that a faster search gives the same answer.

Llama 2 70B on 1,024 H100s (issue 22: ``pipesim plan --model llama2-70b --hardware h100-sxm --gpus 1024
--global-batch 1024 --top 5``). The answer is hashed: sha256 over the top list and the Pareto front, every
field of every row (floats print exactly, so equal hashes mean equal values).

- ``python experiments/plan_speed.py``: one search in this process, its hash and seconds;
- ``--baseline DIR``: side by side in one run, whole processes as a user starts them, one after another in
  rounds: the command from the checkout in DIR (e.g. ``git worktree add /tmp/base <commit>``) and from this
  checkout, each on a first run (the on-disk store of synthesised orders switched off: ``PIPESIM_CACHE_DIR=``)
  and again with that store filled (a user iterating on a plan). Both checkouts' hashes are compared first.
  numba's cache is filled once for both before timing. CPU seconds (user + system of each process) are what
  the command costs one core whatever else runs; wall seconds follow the machine's load.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

ROOT = Path(__file__).resolve().parent.parent
FULL = ("llama2-70b", "h100-sxm", 1024, 1024)
FAST = ("gpt3-2.7b", "a100-80gb", 8, 32)
TOP = 5
# Run by each checkout as `python -c`: only what both the old and the new planner have.
HASH = """
import hashlib, json, sys
from pipesim.api.planning import plan
model, chip, gpus, batch, top = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
search = plan(model, gpus, batch, top=top, hardware=chip).search
rows = [{"label": o.candidate.label(), "m": o.candidate.microbatches, **o.evaluation.to_dict()}
        for o in search.fitting()[:top]]
rows += [{"front": o.candidate.label(), "m": o.candidate.microbatches, **o.evaluation.to_dict()}
         for o in search.pareto()]
print(hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest(), len(rows) - top)
"""


def answer_hash(search, top: int) -> str:
    """The hash HASH prints, for a search run in this process."""
    rows = [
        {"label": o.candidate.label(), "m": o.candidate.microbatches, **o.evaluation.to_dict()}
        for o in search.fitting()[:top]
    ]
    rows += [
        {"front": o.candidate.label(), "m": o.candidate.microbatches, **o.evaluation.to_dict()} for o in search.pareto()
    ]
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def _process(checkout: Path, argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system: what it costs one core, whatever else the machine runs) and
    what it printed."""
    environment = {**os.environ, "PYTHONPATH": str(checkout), **env}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *argv], cwd=checkout, env=environment, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(argv[:4])} failed: {done.stderr[-1000:]}")
    return seconds, cpu, done.stdout


def side_by_side(baseline: Path, case: tuple, rounds: int) -> None:
    model, chip, gpus, batch = case
    cli = [
        "-m",
        "pipesim.cli",
        "plan",
        "--model",
        model,
        "--hardware",
        chip,
        "--gpus",
        str(gpus),
        "--global-batch",
        str(batch),
        "--top",
        str(TOP),
        "-q",
    ]
    with tempfile.TemporaryDirectory() as numba, tempfile.TemporaryDirectory() as store:
        shared = {"NUMBA_CACHE_DIR": numba}
        cold = {**shared, "PIPESIM_CACHE_DIR": ""}
        warm = {**shared, "PIPESIM_CACHE_DIR": store}
        hashes = {}
        for name, checkout, env in (("before", baseline, warm), ("now", ROOT, warm)):  # also fills numba, store
            *_, out = _process(checkout, ["-c", HASH, model, chip, str(gpus), str(batch), str(TOP)], env)
            hashes[name] = out.split()[0]
            print(f"{name}: {checkout} answer {out.strip()}")
        if hashes["before"] != hashes["now"]:
            raise SystemExit("the answers differ: the top list or the Pareto front changed")
        # each variant of this checkout beside the same variant of DIR's (a store of orders filled by DIR's code
        # is read by this one's only where the synthesiser's sources are the same: each keys its own)
        runs = {"before (DIR), first run": (baseline, cold), "now, first run": (ROOT, cold),
                "before (DIR), store filled": (baseline, warm), "now, store filled": (ROOT, warm)}
        walls: dict[str, list[float]] = {name: [] for name in runs}
        cpus: dict[str, list[float]] = {name: [] for name in runs}
        loads = [os.getloadavg()[0]]
        for _ in range(rounds):
            for name, (checkout, env) in runs.items():
                wall, cpu, _ = _process(checkout, cli, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
            loads.append(os.getloadavg()[0])
    print(
        f"\n`pipesim plan --model {model} --hardware {chip} --gpus {gpus} --global-batch {batch} --top {TOP}`, "
        f"{rounds} rounds, 1-minute load {min(loads):.1f}–{max(loads):.1f}, same answer (hash {hashes['now'][:12]}):\n"
    )
    print("| process | CPU s, min / mean | wall s, min / mean | before / this (CPU, min) |\n|---|---|---|---|")
    for name in runs:
        c, w = cpus[name], walls[name]
        before = min(cpus["before (DIR), " + name.split(", ", 1)[1]])
        print(
            f"| {name} | {min(c):.2f} / {sum(c) / len(c):.2f} | {min(w):.2f} / {sum(w) / len(w):.2f} | "
            f"{before / min(c):.2f}× |"
        )


def main() -> None:
    parser = experiment_parser(
        __doc__, figures=False, fast_help="GPT-3 2.7B on 8 A100s instead of Llama 2 70B on 1,024 H100s"
    )
    parser.add_argument("--baseline", type=Path, help="a checkout of the code to compare with (side by side)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the side-by-side run (default 3)")
    args = parse_experiment_args(parser)
    case = FAST if args.fast else FULL
    record_output(args.out, "plan_speed.txt")
    if args.baseline:
        side_by_side(args.baseline.resolve(), case, args.rounds)
        return
    from pipesim.api.planning import plan

    model, chip, gpus, batch = case
    start = time.perf_counter()
    search = plan(model, gpus, batch, top=TOP, hardware=chip).search
    seconds = time.perf_counter() - start
    print(
        f"{answer_hash(search, TOP)}  {model} on {gpus}× {chip}: {len(search.pareto())} on the front, "
        f"{sum(o.evaluation is not None for o in search.outcomes)} simulated, {seconds:.1f} s in this process"
    )


if __name__ == "__main__":
    main()
