"""Validation by source left out: pipesim's step-time error on each published source with the fitted constants
re-derived without it (the headline), beside the in-sample error (the presets as shipped).

Run: ``python experiments/validation_loso.py [--markdown] [--json FILE] [--fast] [--pooling median]`` (each
row is simulated at every grid value of each constant that informs it; ``--fast`` takes every sixth row and
leaves out the rows whose order is synthesised, a smoke run of the whole path). The fitted constants, their
provenance and their grids are in ``pipesim/validation/constants.py``; the method in
``pipesim/validation/loso.py``. ``--pooling median`` fits on the median over sources instead of the mean, a
sensitivity analysis beside the headline (it refuses ``--update-bands``: the bands are the headline's).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pipesim.analytic.error_band import COMMUNICATION_BOUND
from pipesim.io.atomic import write_text_atomic
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.constants import FITTED_CONSTANTS
from pipesim.validation.loso import (
    SourcePooling,
    ValidationResult,
    communication_contrast,
    error_bands,
    framework_records,
    layout_regimes,
    leave_one_source_out,
    left_out_by_kind,
    memory_error_band,
    memory_errors,
    regime_counts,
    source_bootstrap,
    step_group_records,
    summary,
)
from pipesim.validation.ranking import APART, rankings, summarise
from pipesim.validation.sources import MEMORY_RUNS, runs_by_source, source_title


def _pct(value: float) -> str:
    return f"{value:+.1%}" if value == value else "–"


def _abs(value: float) -> str:
    return f"{value:.1%}" if value == value else "–"


def table(result: ValidationResult, markdown: bool) -> str:
    header = ["source", "rows", "in-sample mean |e|", "in-sample bias", "left-out mean |e|", "left-out bias",
              "left-out max |e|", "constants refit without it"]
    lines = []
    if markdown:
        # a "|" inside a Markdown cell ends it: escaped, so the header has as many cells as the rows
        lines += ["| " + " | ".join(h.replace("|", "\\|") for h in header) + " |", "|" + "---|" * len(header)]
    rows = [(source_title(s.source), s.in_sample, s.left_out, _fit_text(s.left_out_fit)) for s in result.sources]
    rows.append(("all sources", result.pooled("in_sample"), result.pooled("left_out"), ""))
    for name, inside, outside, fitted in rows:
        a, b = summary(inside), summary(outside)
        cells = [name, str(a["rows"]), _abs(a["mean_abs"]), _pct(a["bias"]), _abs(b["mean_abs"]), _pct(b["bias"]),
                 _abs(b["max_abs"]), fitted]
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(f"{c:<18}" for c in cells))
    return "\n".join(lines)


def _fit_text(fit) -> str:
    moved = [f"{c.name} {fit.values[c.name]:g}" for c in FITTED_CONSTANTS
             if c.name in fit.values and fit.values[c.name] != c.preset_value]
    kept = [f"{name} (no row: preset)" for name in fit.unfitted]
    return ", ".join(moved + kept) or "as preset"


def to_dict(result: ValidationResult) -> dict:
    return {
        "fitted_on_all_sources": result.all_sources_fit.values,
        # each constant's own loss over its grid (empty where no row informs it)
        "own_loss_profiles": {c.name: {str(value): loss for value, loss in
                                       zip(c.grid, result.all_sources_profiles.get(c.name, ()), strict=False)}
                              for c in FITTED_CONSTANTS},
        "presets": {c.name: c.preset_value for c in FITTED_CONSTANTS},
        "sources": {s.source: {"title": source_title(s.source), "in_sample": summary(s.in_sample),
                               "left_out": summary(s.left_out), "memory": summary(s.memory),
                               "left_out_fit": s.left_out_fit.values, "unfitted": list(s.left_out_fit.unfitted)}
                    for s in result.sources},
        "ranking_left_out": vars(summarise(rankings([c for s in result.sources for c in s.left_out_comparisons]))),
        "all": {"in_sample": summary(result.pooled("in_sample")), "left_out": summary(result.pooled("left_out")),
                "memory": summary(memory_errors(result)[0]),
                # the central 90 % of each left-out figure over resamples of the sources
                "left_out_source_bootstrap_90": {k: list(v) for k, v in source_bootstrap(result).items()}},
    }


BANDS_FILE = Path(__file__).resolve().parents[1] / "pipesim" / "analytic" / "validation_bands.py"


def bands_module(per_kind: dict[str, tuple[float | None, int, float]], pooled: tuple[float, int],
                 memory: tuple[float, int, int], step_regimes: tuple[tuple[str, ...], ...],
                 memory_regimes: tuple[tuple[str, ...], ...],
                 frameworks: dict[str, tuple[int, int, float, float]],
                 groups: dict[str, tuple[int, int, float, float, float]],
                 communication: tuple[int, int, float]) -> str:
    return (
        '"""Step-time error bands measured by validation by source left out (written by\n'
        "``python experiments/validation_loso.py --update-bands``; see :mod:`pipesim.analytic.error_band`).\n\n"
        "kind: (90/90 tolerance bound of |left-out step-time error|, None for too few rows; published rows of\n"
        "that kind; their largest |left-out error|). MEMORY: (90/90 bound of |peak-memory error| over every "
        "published\nmemory row, rows, "
        "sources).\nSTEP_REGIMES and MEMORY_REGIMES: the layout feature sets (pipesim.analytic.error_band."
        "LayoutFeature) of\nthose rows, what the bands were measured on. FRAMEWORKS: per training framework the "
        "rows name (other than\nMegatron-LM's), (rows, sources, lowest and highest signed left-out step-time "
        "error).\nSTEP_GROUPS: per step group (pipesim.analytic.error_band.StepGroup) the rows are of, (rows, "
        "sources, lowest,\nhighest and mean signed left-out step-time error). COMMUNICATION: each source's "
        "communication-bound rows\nagainst its others (pipesim.analytic.error_band.CommunicationRecord): (sources "
        'with rows on both sides,\nthose differing the way of the median, the median difference)."""\n\n'
        "BANDS: dict[str, tuple[float | None, int, float]] = {\n"
        + "".join(f"    {kind!r}: {value!r},\n" for kind, value in per_kind.items()) + "}\n"
        f"POOLED: tuple[float, int] = {pooled!r}\n"
        f"MEMORY: tuple[float, int, int] = {memory!r}\n"
        "STEP_REGIMES: tuple[tuple[str, ...], ...] = (\n" + "".join(f"    {r!r},\n" for r in step_regimes) + ")\n"
        "MEMORY_REGIMES: tuple[tuple[str, ...], ...] = (\n" + "".join(f"    {r!r},\n" for r in memory_regimes)
        + ")\n"
        "FRAMEWORKS: dict[str, tuple[int, int, float, float]] = {\n"
        + "".join(f"    {name!r}: {value!r},\n" for name, value in frameworks.items()) + "}\n"
        "STEP_GROUPS: dict[str, tuple[int, int, float, float, float]] = {\n"
        + "".join(f"    {name!r}: {value!r},\n" for name, value in groups.items()) + "}\n"
        f"COMMUNICATION: tuple[int, int, float] = {communication!r}\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False,
                               fast_help="every sixth row, no synthesised orders: a smoke run")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON to this file")
    parser.add_argument("--update-bands", action="store_true",
                        help="write the per-kind error bands into pipesim/analytic/validation_bands.py")
    parser.add_argument("--pooling", choices=[p.value for p in SourcePooling], default="mean",
                        help="how a fit pools the sources' errors: mean (the headline; every source weighs the "
                        "same) or median (a sensitivity analysis: one source cannot move a constant alone)")
    args = parse_experiment_args(parser, argv)
    pooling = SourcePooling(args.pooling)
    if args.update_bands and pooling is not SourcePooling.MEAN:
        parser.error("--update-bands writes the headline's bands: drop --pooling median")
    record_output(args.out, "validation_loso.md" if args.markdown else "validation_loso.txt")
    by_source = runs_by_source()
    if args.fast:
        by_source = {name: runs[::6] for name, runs in by_source.items()}
    started = time.perf_counter()
    result = leave_one_source_out(by_source, include_synthesised=not args.fast, pooling=pooling,
                                  progress=lambda what: print(f"  {what}", file=sys.stderr))
    print(table(result, args.markdown))
    everything = result.all_sources_fit
    print("\nconstants fitted on every source (preset → fit, informing rows; where the fit moves a preset, the "
          "constant's own loss at each, the others at their presets):")
    for c in FITTED_CONSTANTS:
        fitted = everything.values.get(c.name, c.preset_value)
        profile = result.all_sources_profiles.get(c.name, ())
        losses = (f"; own loss {profile[c.grid.index(c.preset_value)]:.4f} → {profile[c.grid.index(fitted)]:.4f}"
                  if profile and fitted != c.preset_value else "")
        print(f"  {c.name}: {c.preset_value:g} → {fitted:g} ({everything.informing_rows.get(c.name, 0)} rows"
              f"{losses})")
    memory_rows, memory_sources = memory_errors(result)
    memory = summary(memory_rows)
    print(f"memory: {memory['rows']} rows, mean |error| {_abs(memory['mean_abs'])}, bias {_pct(memory['bias'])} "
          "(no fitted constant moves memory: left out = in sample; memory-only sources included)")
    print(f"({time.perf_counter() - started:.0f} s)")
    interval = source_bootstrap(result)
    print("left out, the central 90 % over resamples of the sources (each keeping its own left-out errors): "
          + ", ".join(f"{label} {shown(interval[key][0])}…{shown(interval[key][1])}" for key, label, shown in
                      (("mean_abs", "all rows' mean |error|", _abs), ("bias", "their bias", _pct),
                       ("mean_over_sources", "the mean over sources", _abs))))
    ranked = summarise(rankings([c for s in result.sources for c in s.left_out_comparisons]))
    print(f"within-model ranking, left out: {ranked.groups} groups, mean Spearman {ranked.mean_spearman:+.2f} "
          f"(median {ranked.median_spearman:+.2f}), pairs ordered as measured {ranked.pairs_right}/{ranked.pairs} "
          f"({ranked.pair_accuracy:.0%}); of those published more than {APART:.0%} apart {ranked.apart_right}/"
          f"{ranked.apart} ({ranked.apart_accuracy:.0%})")
    print("left out, by kind of run: " + ", ".join(
        f"{kind} {_abs(s['mean_abs'])} (bias {_pct(s['bias'])}, max {_abs(s['max_abs'])}, {s['rows']} rows)"
        for kind, s in ((kind, summary(errors)) for kind, errors in left_out_by_kind(result).items())))
    per_kind, pooled = error_bands(result)
    memory_band = memory_error_band(memory_rows, memory_sources)
    print("error bands (90/90 tolerance bound of |left-out error|): "
          + ", ".join(f"{k} ±{v:.0%} ({n} rows)" if v is not None
                      else f"{k}: too few rows ({n}), takes all's or its largest ({largest:.0%}), the wider"
                      for k, (v, n, largest) in per_kind.items())
          + f"; all ±{pooled[0]:.0%} ({pooled[1]} rows); peak memory "
          + (f"±{memory_band[0]:.1%}" if memory_band[0] is not None else "too few rows")
          + f" ({memory_band[1]} rows, {memory_band[2]} sources)")
    frameworks = framework_records(result)
    print("left out, by the framework the rows name (Megatron-LM's aside): " + ", ".join(
        f"{name} {rows} rows from {sources} source{'' if sources == 1 else 's'}, {lowest:+.1%}…{highest:+.1%}"
        for name, (rows, sources, lowest, highest) in frameworks.items()))
    groups = step_group_records(result)
    print("left out, by step group: " + ", ".join(
        f"{name} {rows} rows from {sources} source{'' if sources == 1 else 's'}, {lowest:+.1%}…{highest:+.1%} "
        f"(mean {mean:+.1%})" for name, (rows, sources, lowest, highest, mean) in groups.items()))
    communication = communication_contrast(result)
    sources, leaning, median = communication
    print(f"left out, each source's communication-bound rows ({COMMUNICATION_BOUND:.0%}+ of the step) against its "
          f"others: {sources} sources with rows on both sides, {leaning} differing the median's way, median "
          f"{median:+.1%}")
    step_rows = [r for s in result.sources for r in s.runs]
    for what, runs in (("step-time", step_rows), ("peak-memory", MEMORY_RUNS)):
        print(f"layouts the {what} rows had (the bands' coverage; error_band.unvalidated): " + ", ".join(
            f"{'+'.join(regime) or 'dp only'} {n}" for regime, n in regime_counts(runs).items()))
    if args.update_bands:
        if args.fast:
            parser.error("--update-bands needs the full run (drop --fast)")
        write_text_atomic(BANDS_FILE, bands_module(per_kind, pooled, memory_band, layout_regimes(step_rows),
                                                   layout_regimes(MEMORY_RUNS), frameworks, groups, communication))
    if args.json:
        write_text_atomic(args.json, json.dumps(to_dict(result), indent=2) + "\n")


if __name__ == "__main__":
    main()
