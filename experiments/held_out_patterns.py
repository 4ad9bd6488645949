"""Where issue #24's held-out patterns stand now: each group of the issue's table of unseen runs, its error range
carried from the release the issue measured to this one by how far representative runs' predictions moved
(pipesim/validation/held_out_patterns.py says how, and what it cannot say).

Run: ``python experiments/held_out_patterns.py [--fast] [--sensitivity] [--update-records]`` (``--fast``: one
representative a group; ``--sensitivity``: for each group's first representative as run, how far each setting the
issue leaves unstated moves it, flipped alone: :func:`pipesim.sensitivity`; ``--update-records``: write each kind
of run's carried range into pipesim/analytic/held_out_records.py, which ``simulate`` and ``plan`` quote beside the
band of a run of that kind: :mod:`pipesim.analytic.held_out_kinds`). The baseline
release's predictions are recorded (pipesim/validation/data/held_out_baseline.json); ``--baseline-tree DIR``
re-derives them from a checkout of that release (``git worktree add DIR 570e706``), running its ``pipesim
simulate`` on each representative, and records them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipesim.analytic.memory_gib import GIB
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.held_out_patterns import (
    BASELINE_COMMIT,
    RECORDS_FILE,
    Measure,
    Representative,
    cli_flags,
    fits_as_run,
    kind_records,
    load_baseline,
    measured_value,
    records_module,
    representatives,
    save_baseline,
    standings,
    unstated_settings,
)


def baseline_prediction(tree: Path, rep: Representative) -> float:
    """The release in ``tree`` predicting ``rep``: its own ``pipesim simulate --json``, run as a user would."""
    run = [sys.executable, "-c", "import sys; from pipesim.cli.main import main; sys.exit(main())", "simulate",
           *cli_flags(rep.options), "--json"]
    done = subprocess.run(run, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True,
                          text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{rep.key}: the baseline release refused it: {done.stderr.strip().splitlines()[-1]}")
    report = json.loads(done.stdout)["model_report"]
    return measured_value(rep, report["step_time_s"], report["memory"]["peak_gib"] * GIB)


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="one representative a group")
    parser.add_argument("--baseline-tree", type=Path, metavar="DIR",
                        help=f"a checkout of the release the issue measured ({BASELINE_COMMIT}): re-derive and "
                             "record its predictions")
    parser.add_argument("--sensitivity", action="store_true",
                        help="also flip each unstated setting of each group's first representative, as run")
    parser.add_argument("--update-records", action="store_true",
                        help="write each kind of run's carried range into pipesim/analytic/held_out_records.py "
                             "(every representative: not with --fast)")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "held_out_patterns.txt")
    reps = representatives()
    if args.baseline_tree is not None:
        save_baseline({rep.key: baseline_prediction(args.baseline_tree, rep) for rep in reps}, BASELINE_COMMIT)
    if args.update_records and args.fast:
        parser.error("--update-records carries every representative; drop --fast")
    if args.fast:
        reps = [rep for i, rep in enumerate(reps) if i == 0 or rep.group != reps[i - 1].group]
    baseline = load_baseline()
    print(f"{'group':48} {'measure':11} {'issue (then)':>13} {'now/then':>10} {'carried (now)':>14} "
          f"{'as run':>14}  runs")
    named, unfit = [], 0
    standing = standings(reps, baseline)
    for s in standing:
        as_run = s.carried_as_run
        print(f"{s.group.name:48} {s.group.measure.value:11} {_range(s.group.low, s.group.high):>13} "
              f"{_ratios(s.ratios):>10} {_range(*s.carried):>14} {_range(*as_run) if as_run else '':>14}  "
              f"{len(s.ratios)}" + (f" (+{s.unfit} that would not fit)" if s.unfit else ""))
        unfit += s.unfit
        if as_run:
            named.append(s.group)
    print(f"\nnow/then: this release's prediction over the baseline's ({BASELINE_COMMIT}) for the group's "
          "representative runs (their range);\ncarried: the issue's range × the median ratio, (1 + e)·r − 1; "
          "as run: with the framework and settings the group names and the peak it prints;\nruns: the "
          f"representatives counted ({unfit} left out where, as run, they would not fit their GPU: no run that "
          "ran was like them):")
    for group in named:
        print(f"  {group.name}: {group.as_run_flags}")
    for basis in dict.fromkeys(group.basis for group in named):
        print(f"  ({basis})")
    print("The runs' inferred settings: pipesim/validation/held_out_patterns.py")
    if args.update_records:
        RECORDS_FILE.write_text(records_module(kind_records(standing)), encoding="utf-8")
        print(f"wrote {RECORDS_FILE}")
    if args.sensitivity:
        _print_sensitivity(reps)


def _print_sensitivity(reps: list[Representative]) -> None:
    """Each group's first representative that fits, as run, each unstated setting flipped alone: the range of the
    step (or the peak, for a memory group) over the flips that fit, and the two that move it most."""
    print("\nunstated settings, each flipped alone from each group's first representative that fits, as run (the "
          "flips that fit):")
    print(f"{'group':48} {'range':>16}  moved most by")
    firsts: dict[str, Representative] = {}
    for rep in reps:
        if rep.group.name not in firsts and fits_as_run(rep):
            firsts[rep.group.name] = rep
    for rep in firsts.values():
        s = unstated_settings(rep)
        fits = [f for f in s.flips if f.fits]
        if rep.group.measure is Measure.STEP:
            changes = {f.flag: s.step_change(f) for f in fits}
        else:
            changes = {f.flag: s.memory_change(f) for f in fits}
        values = [0.0, *changes.values()]
        low, high = min(values), max(values)
        most = sorted(changes, key=lambda flag: -abs(changes[flag]))[:2]
        print(f"{rep.group.name:48} {_range(low, high):>16}  "
              + ", ".join(f"{flag} {changes[flag]:+.0%}" for flag in most))


def _range(low: float, high: float) -> str:
    return f"{low:+.0%} … {high:+.0%}" if round(low, 2) != round(high, 2) else f"{low:+.0%}"


def _ratios(ratios: tuple[float, ...]) -> str:
    return f"{ratios[0]:.3f}" if len(ratios) == 1 else f"{min(ratios):.2f}-{max(ratios):.2f}"


if __name__ == "__main__":
    main()
