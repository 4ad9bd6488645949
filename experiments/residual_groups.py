"""Where do pipesim's step-time errors lean? The published rows grouped by a feature of how each run ran, each
group summarised over its rows and over its sources (pipesim/validation/residual_groups.py).

Run: ``python experiments/residual_groups.py [--fast]`` (seconds; the presets' predictions, in sample;
``--fast`` leaves out the rows whose order is synthesised). A group is one-sided when four in five of at least three of
its sources lean the way of their median, by 5 % or more; docs/validation-log.md says what it finds.
"""

from __future__ import annotations

from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.loso import source_of, synthesised
from pipesim.validation.residual_groups import AGREEING, MIN_LEAN, MIN_SOURCES, group_leans
from pipesim.validation.runs import predict
from pipesim.validation.sources import PUBLISHED_RUNS


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="leave out the rows whose order is synthesised")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "residual_groups.txt")
    runs = [r for r in PUBLISHED_RUNS if r.measures_step and not (args.fast and synthesised(r))]
    leans = group_leans((source_of(r), r, predict(r).step_error) for r in runs)
    print(f"{'feature':42} {'rows':>5} {'sources':>7} {'mean':>7} {'source median':>13} {'agree':>5} "
          f"{'source range':>16}")
    for g in leans:
        flag = "  one-sided" if g.one_sided else ""
        print(f"{g.feature:42} {g.rows:>5} {g.sources:>7} {g.mean:>+7.1%} {g.source_median:>+13.1%} "
              f"{g.agreeing:>5} {g.source_low:>+7.1%}…{g.source_high:+.1%}{flag}")
    sided = [f"{g.feature} ({g.source_median:+.1%})" for g in leans if g.one_sided]
    print(f"\none-sided (of {MIN_SOURCES} or more sources, {AGREEING:.0%} leaning the way of their median, by "
          f"{MIN_LEAN:.0%} or more): {', '.join(sided) or 'none'}")


if __name__ == "__main__":
    main()
