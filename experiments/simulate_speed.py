"""How long a whole ``pipesim simulate --pp 64 --mb 8192 --json`` process takes, against the naive SimPy script.

Issue 22's goal: the whole process ≥ 10× faster than the naive SimPy model of ``tests/naive_simpy.py`` (which
builds and simulates the same 1F1B schedule itself: one SimPy process per rank, one Store per link, one timeout
per compute op), warm, and no slower than it on the first run after installing (numba's cache empty).

Side by side in one run, whole processes as a user starts them, one after another in rounds (each round
starting at the next process). The process that runs right after the naive script (a large Python heap, freed
at its exit) spends about 1 s more in the kernel, whichever it is, so an untimed ``simulate`` runs there; the
naive script itself is not affected. The processes: the naive script, then this
checkout's ``python -m pipesim.cli simulate … --json`` warm (numba's cache filled before timing) and on a first
run (an empty ``NUMBA_CACHE_DIR`` each round: every compiled kernel compiled again), and with ``--baseline DIR``
(a checkout of the code to compare with, e.g. ``git worktree add /tmp/base <commit>``) the same two for that
checkout. Every process's makespan is checked against the naive model's. Wall seconds (what a user waits) and
CPU seconds (user + system: what it costs one core, whatever else the machine runs).

``python experiments/simulate_speed.py [--baseline DIR] [--rounds N]``; ``--fast``: pp=8, m=512, one round.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

ROOT = Path(__file__).resolve().parent.parent
FULL, FAST = (64, 8192), (8, 512)
NAIVE = ("from pipesim.sim.costs import CostModel; from tests.naive_simpy import naive_whole_job; "
         "print(naive_whole_job('1f1b', {}, {}, 1, CostModel()))")


def _process(checkout: Path, argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and the makespan printed by one process."""
    environment = {**os.environ, "PYTHONPATH": str(checkout), **env}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=checkout, env=environment, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(argv[:4])} failed: {done.stderr[-1000:]}")
    out = json.loads(done.stdout)
    makespan = out["metrics"]["makespan"] if "metrics" in out else out["makespan"]
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), makespan


def main() -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="pp=8, m=512 and one round")
    parser.add_argument("--baseline", type=Path, help="a checkout of the code to compare with (side by side)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3; the naive script runs in each)")
    args = parse_experiment_args(parser)
    pp, mb = FAST if args.fast else FULL
    rounds = 1 if args.fast else args.rounds
    record_output(args.out, "simulate_speed.txt")
    cli = ["-m", "pipesim.cli", "simulate", "--pp", str(pp), "--mb", str(mb), "--json"]
    checkouts = {"now": ROOT, **({"before": args.baseline.resolve()} if args.baseline else {})}
    with tempfile.TemporaryDirectory() as caches:
        warm = {name: {"NUMBA_CACHE_DIR": str(Path(caches) / f"warm-{name}")} for name in checkouts}
        runs: dict[str, tuple[Path, list[str], object]] = {"naive SimPy script": (ROOT, ["-c", NAIVE.format(pp, mb)],
                                                                                  lambda r: {})}
        for name, checkout in checkouts.items():
            _process(checkout, cli, warm[name])  # fills numba's cache of this checkout's kernels
            runs[f"{name}, warm"] = (checkout, cli, lambda r, env=warm[name]: env)
            runs[f"{name}, first run"] = (checkout, cli, lambda r, name=name: {
                "NUMBA_CACHE_DIR": str(Path(caches) / f"cold-{name}-{r}")})
        walls: dict[str, list[float]] = {name: [] for name in runs}
        cpus: dict[str, list[float]] = {name: [] for name in runs}
        makespans = set()
        loads = [os.getloadavg()[0]]
        names = list(runs)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                checkout, argv, env = runs[name]
                wall, cpu, makespan = _process(checkout, argv, env(r))
                walls[name].append(wall)
                cpus[name].append(cpu)
                makespans.add(makespan)
                if name == "naive SimPy script":  # an untimed process takes the kernel's clean-up after it
                    _process(ROOT, cli, warm["now"])
            loads.append(os.getloadavg()[0])
    if len(makespans) != 1:
        raise SystemExit(f"the makespans differ: {sorted(makespans)}")
    naive_wall, naive_cpu = min(walls["naive SimPy script"]), min(cpus["naive SimPy script"])
    print(f"1F1B pp={pp} m={mb} (makespan {makespans.pop():g} units, all processes), {rounds} rounds, 1-minute load "
          f"{min(loads):.1f}–{max(loads):.1f}:\n")
    print("| process | wall s, min / median | CPU s, min / median | naive / this, wall (min) | naive / this, CPU "
          "(min) |\n|---|---|---|---|---|")
    for name in runs:
        w, c = walls[name], cpus[name]
        print(f"| {name} | {min(w):.2f} / {statistics.median(w):.2f} | {min(c):.2f} / {statistics.median(c):.2f} | "
              f"{naive_wall / min(w):.1f}× | {naive_cpu / min(c):.1f}× |")


if __name__ == "__main__":
    main()
