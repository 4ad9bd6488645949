"""What fitting pipesim to your own runs buys (``pipesim fit``), measured on the published runs: each system's rows
(one source's runs on one chip) fitted with every row but one, and that row predicted; against the presets.

Run: ``python experiments/own_runs_fit.py [--fast]`` (about four minutes on 2 cores, a process a core;
``--fast``: four rows of two systems); ``--knobs`` fits fewer of them. A
system's rows are its published steps, at most 12 of them (evenly through the source's order) so the longest
table does not take the time; the rows whose order is synthesised are left out, as validation leaves them.
The presets' column is in sample (their constants were chosen with these rows in view), so the comparison
favours the presets; the fit's column is left out, one row at a time, within the system.
"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor

from pipesim.analysis.step_fit import KNOBS_BY_FIELD, MeasuredStep, fit_steps
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.loso import synthesised
from pipesim.validation.runs import predict
from pipesim.validation.sources import PUBLISHED_RUNS

MAX_ROWS = 12
MIN_ROWS = 4


def _predict(step: MeasuredStep, chip) -> float:
    return predict(step.options["run"], chip).report.step_time


def _fit_system(item):
    """One system's rows fitted one row out at a time (a worker process's task)."""
    (source, chip), runs, knobs = item
    steps = [MeasuredStep(f"{r.model} {r.gpus}", {"run": r}, predict(r).published_step_s) for r in runs]
    return source, chip, fit_steps(steps, CHIP_PRESETS[chip], _predict, [KNOBS_BY_FIELD[k] for k in knobs])


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="four rows of two systems: the script end to end")
    parser.add_argument("--knobs", nargs="+", choices=list(KNOBS_BY_FIELD), default=list(KNOBS_BY_FIELD),
                        help="the chip fields fitted (default: pipesim fit's, all of them)")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "own_runs_fit.txt")
    systems = defaultdict(list)
    for run in PUBLISHED_RUNS:
        if run.measures_step and not synthesised(run):
            systems[(run.source, run.chip)].append(run)
    cap = 4 if args.fast else MAX_ROWS
    chosen = []
    for key, runs in systems.items():
        if len(runs) < MIN_ROWS:
            continue
        if len(runs) > cap:  # evenly through the source's order, deterministic
            runs = [runs[round(i * (len(runs) - 1) / (cap - 1))] for i in range(cap)]
        chosen.append((key, runs, args.knobs))
    if args.fast:
        chosen = chosen[:2]
    print(f"{'system':<58} {'rows':>4} {'presets':>8} {'own fit, left out':>18}  fitted")
    before, after, per_system = [], [], []
    with ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
        for source, chip, fit in pool.map(_fit_system, chosen):
            moved = ", ".join(f"{name} {fit.before[name]:g}→{value:g}" for name, value in fit.values.items()
                              if value != fit.before[name]) or "none moved"
            print(f"{source[:48] + ' ' + chip:<58} {len(fit.runs):>4} {fit.mean_abs('before'):>8.1%} "
                  f"{fit.mean_abs('left_out'):>18.1%}  {moved}")
            before += [abs(r.error(r.before)) for r in fit.runs]
            after += [abs(r.error(r.left_out)) for r in fit.runs]
            per_system.append((fit.mean_abs("before"), fit.mean_abs("left_out")))
    better = sum(b > a for b, a in per_system)
    print(f"\n{len(per_system)} systems, {len(before)} rows: the presets {statistics.fmean(before):.1%} mean |error| "
          f"(in sample), fitted to each system's other rows {statistics.fmean(after):.1%} (left out); over "
          f"systems {statistics.fmean(b for b, _ in per_system):.1%} → "
          f"{statistics.fmean(a for _, a in per_system):.1%}, {better} of {len(per_system)} systems better")


if __name__ == "__main__":
    main()
