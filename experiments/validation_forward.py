"""Validation forward in time: pipesim's step-time error on each published source with the fitted constants chosen
from the sources published before it alone, beside its error with them chosen from every other source (validation
by source left out, the headline) on the same rows.

Run: ``python experiments/validation_forward.py [--markdown] [--json FILE] [--fast]`` (about two and a half
minutes on 2 cores: the rows' sensitivities are simulated once and read by both). The months are
``pipesim.validation.sources.PUBLISHED``; the method is ``pipesim/validation/forward.py``. Rows moved by a fitted
constant that no earlier row informs keep that constant's preset, chosen with later sources in view: they are
listed, and left out of the prospective figure.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pipesim.io.atomic import write_text_atomic
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.constants import FITTED_CONSTANTS
from pipesim.validation.forward import ForwardResult, forward_in_time, prospective_by_kind, prospective_errors
from pipesim.validation.loso import ValidationResult, leave_one_source_out, source_sensitivities, summary
from pipesim.validation.sources import published_month, runs_by_source, source_title


def _pct(value: float) -> str:
    return f"{value:+.1%}" if value == value else "–"


def _abs(value: float) -> str:
    return f"{value:.1%}" if value == value else "–"


def left_out_of(result: ValidationResult) -> dict[int, float]:
    """Each row's left-out error, by the row's identity."""
    return {id(run): error for s in result.sources for run, error in zip(s.runs, s.left_out, strict=True)}


def _moved(forward: ForwardResult) -> str:
    moved = [f"{c.name} {forward.fit.values[c.name]:g}" for c in FITTED_CONSTANTS
             if c.name in forward.fit.values and forward.fit.values[c.name] != c.preset_value]
    later = [f"{name} (preset, chosen later)" for name in forward.from_later]
    return ", ".join(moved + later) or "as preset"


def table(results: list[ForwardResult], left_out: dict[int, float], markdown: bool) -> str:
    header = ["source", "month", "rows", "earlier sources", "forward mean |e|", "forward bias", "left-out mean |e|",
              "left-out bias", "constants fitted on the earlier sources"]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        ahead, aside = summary(r.forward), summary([left_out[id(run)] for run in r.runs])
        cells = [source_title(r.source), r.month, str(ahead["rows"]), str(len(r.earlier_sources)),
                 _abs(ahead["mean_abs"]), _pct(ahead["bias"]), _abs(aside["mean_abs"]), _pct(aside["bias"]),
                 _moved(r)]
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(f"{c:<16}" for c in cells))
    return "\n".join(lines)


def totals(results: list[ForwardResult], left_out: dict[int, float]) -> dict[str, dict[str, float]]:
    """The forward and left-out errors of every row, and of the prospective rows alone."""
    prospective = [r for r in results if r.prospective]
    return {
        "all_forward": summary([e for r in results for e in r.forward]),
        "all_left_out": summary([left_out[id(run)] for r in results for run in r.runs]),
        "prospective_forward": summary(prospective_errors(results)),
        "prospective_left_out": summary([left_out[id(run)] for r in prospective for run in r.runs]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False,
                               fast_help="every twelfth row, no synthesised orders: a smoke run")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON to this file")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "validation_forward.md" if args.markdown else "validation_forward.txt")
    by_source = runs_by_source()
    if args.fast:
        by_source = {name: runs[::12] for name, runs in by_source.items()}
    started = time.perf_counter()
    def progress(what: str) -> None:
        print(f"  {what}", file=sys.stderr)

    sens = source_sensitivities(by_source, progress=progress)
    left_out = left_out_of(leave_one_source_out(by_source, include_synthesised=not args.fast, sens=sens,
                                                progress=progress))
    if args.fast:  # the left-out fold predicted no synthesised row: neither does this one
        by_source = {name: [r for r in runs if id(r) in left_out] for name, runs in by_source.items()}
    results = forward_in_time(by_source, sens=sens, progress=progress)
    print(table(results, left_out, args.markdown))
    figures = totals(results, left_out)
    later = sorted({name for r in results for name in r.from_later})
    print(f"\nall {figures['all_forward']['rows']} rows: forward {_abs(figures['all_forward']['mean_abs'])} (bias "
          f"{_pct(figures['all_forward']['bias'])}), left out {_abs(figures['all_left_out']['mean_abs'])} (bias "
          f"{_pct(figures['all_left_out']['bias'])})")
    ahead, aside = figures["prospective_forward"], figures["prospective_left_out"]
    print(f"prospective, {ahead['rows']} rows (every fitted constant that moves them fitted on earlier sources): "
          f"forward {_abs(ahead['mean_abs'])} (bias {_pct(ahead['bias'])}, max {_abs(ahead['max_abs'])}), left out "
          f"{_abs(aside['mean_abs'])} (bias {_pct(aside['bias'])}); the other "
          f"{figures['all_forward']['rows'] - ahead['rows']} keep a preset chosen later ({', '.join(later) or 'none'})")
    kinds = {kind: (summary(ahead), summary(aside)) for kind, (ahead, aside) in
             prospective_by_kind(results, left_out).items()}
    print("prospective, by kind of run (forward; left out on the same rows): " + ", ".join(
        f"{kind} {_abs(a['mean_abs'])} ({_pct(a['bias'])}; {_abs(b['mean_abs'])}, {_pct(b['bias'])}; {a['rows']} rows)"
        for kind, (a, b) in kinds.items()))
    earliest = min((published_month(run) for runs in by_source.values() for run in runs), default="–")
    print(f"(months from {earliest}; {time.perf_counter() - started:.0f} s)")
    if args.json:
        write_text_atomic(args.json, json.dumps({
            "totals": figures,
            "prospective_by_kind": {kind: {"forward": a, "left_out": b} for kind, (a, b) in kinds.items()},
            "sources": [{"source": r.source, "month": r.month, "rows": len(r.runs),
                         "earlier_sources": list(r.earlier_sources), "fit": r.fit.values,
                         "from_later": list(r.from_later), "forward": summary(r.forward)} for r in results],
        }, indent=2) + "\n")


if __name__ == "__main__":
    main()
