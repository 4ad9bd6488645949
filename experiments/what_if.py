"""What the published rows say of a change to the chip presets: every row with the presets and with the change,
by source, in sample or by source left out (pipesim/validation/what_if.py says how, and what a lever is not).

Run: ``python experiments/what_if.py --change FIELD*FACTOR|FIELD=VALUE [--change ...] [--chips A,B] [--left-out]
[--markdown] [--fast]``, for example ``--change 'intra_node_bandwidth*0.714' --chips a100-80gb,a800-80gb``
(A100's NVLink collectives at 1/1.4 of the preset's rate). In sample takes seconds; ``--left-out`` refits the
fitted constants with each source out, under the presets and under the change (a few minutes on 2 cores).
``--fast`` takes every sixth row.
"""

from __future__ import annotations

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.errors import PipesimError
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.sources import runs_by_source, source_title
from pipesim.validation.what_if import ChipChange, WhatIf, compare

MOVED = 0.0005  # a source whose mean |error| moved less than this is left out of the table


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _signed(value: float) -> str:
    return f"{value:+.1%}"


def report(result: WhatIf, markdown: bool) -> str:
    before, after = result.pooled(after=False), result.pooled(after=True)
    (over_b, bias_b), (over_a, bias_a) = result.over_sources(after=False), result.over_sources(after=True)
    how = "left out (constants refit without each source)" if result.left_out else "in sample (presets as shipped)"
    lines = [f"change: {'; '.join(c.text() for c in result.changes)}; errors {how}",
             f"all {before['rows']} rows: mean |e| {_pct(before['mean_abs'])} -> {_pct(after['mean_abs'])}, "
             f"bias {_signed(before['bias'])} -> {_signed(after['bias'])}, max {_pct(before['max_abs'])} -> "
             f"{_pct(after['max_abs'])}",
             f"mean over {len(result.sources)} sources: {_pct(over_b)} -> {_pct(over_a)} (bias {_signed(bias_b)} "
             f"-> {_signed(bias_a)})", ""]
    moved = sorted((s for s in result.sources if abs(s.moved) >= MOVED), key=lambda s: s.moved)
    header = ["source", "rows", "mean |e| before", "after", "bias before", "after"]
    if markdown:  # a "|" inside a Markdown cell ends it: escaped, so the header has as many cells as the rows
        lines += ["| " + " | ".join(h.replace("|", "\\|") for h in header) + " |", "|" + "---|" * len(header)]
    else:
        lines.append(f"{header[0]:44} {header[1]:>5} {header[2]:>16} {header[3]:>7} {header[4]:>12} {header[5]:>7}")
    for s in moved:
        b, a = (_summary(errors) for errors in (s.before, s.after))
        cells = [source_title(s.source), str(len(s.before)), _pct(b[0]), _pct(a[0]), _signed(b[1]), _signed(a[1])]
        lines.append("| " + " | ".join(cells) + " |" if markdown else
                     f"{cells[0][:44]:44} {cells[1]:>5} {cells[2]:>16} {cells[3]:>7} {cells[4]:>12} {cells[5]:>7}")
    if not moved:
        lines.append("(no source moved)")
    return "\n".join(lines)


def _summary(errors: tuple[float, ...]) -> tuple[float, float]:
    return sum(abs(e) for e in errors) / len(errors), sum(errors) / len(errors)


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="every sixth row: the whole path in seconds")
    parser.add_argument("--change", action="append", required=True, metavar="FIELD*FACTOR|FIELD=VALUE",
                        help="a chip field scaled or set (repeat for several)")
    parser.add_argument("--chips", default="", metavar="A,B",
                        help="the presets the changes apply to (default: every preset)")
    parser.add_argument("--left-out", action="store_true", help="errors by source left out (refits the constants)")
    parser.add_argument("--markdown", action="store_true", help="the per-source table in Markdown")
    args = parse_experiment_args(parser, argv)
    chips = [name.strip() for name in args.chips.split(",") if name.strip()]
    by_source = runs_by_source()
    if args.fast:
        by_source = {name: runs[::6] for name, runs in by_source.items()}
    try:
        changes = [ChipChange.parse(text, chips) for text in args.change]
        for change in changes:  # a value out of a field's bounds, refused before any row is predicted
            for name in change.chips or CHIP_PRESETS:
                change.apply(CHIP_PRESETS[name])
    except PipesimError as error:
        raise SystemExit(f"what_if: {error}") from None
    record_output(args.out, "what_if.txt")
    print(report(compare(by_source, changes, left_out=args.left_out), args.markdown))


if __name__ == "__main__":
    main()
