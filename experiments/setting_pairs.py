"""What changing one setting costs, measured against predicted (pipesim/validation/setting_pairs.py): every pair of
published runs of one job that differ in one setting, grouped by the setting, with the median error of pipesim's
predicted step-time ratio (positive: the change costs more than pipesim says) and, per source, the same.

Run: ``python experiments/setting_pairs.py [--fast]`` (seconds; ``--fast`` leaves out the rows whose order is
synthesised).
"""

from __future__ import annotations

import statistics

from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.loso import source_of, synthesised
from pipesim.validation.runs import predict
from pipesim.validation.setting_pairs import setting_effects, setting_pairs
from pipesim.validation.sources import PUBLISHED_RUNS


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="leave out the rows whose order is synthesised")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "setting_pairs.txt")
    runs = [r for r in PUBLISHED_RUNS if r.measures_step and not (args.fast and synthesised(r))]
    pairs = setting_pairs([predict(r) for r in runs], source_of)
    print(f"{'setting changed (low → high)':30} {'pairs':>5} {'sources':>7} {'measured':>9} {'pipesim':>8} "
          f"{'median error':>12} {'same side':>9}   per source (median error, pairs)")
    for e in setting_effects(pairs):
        own = [p for p in pairs if p.setting == e.setting]
        by_source: dict[str, list[float]] = {}
        for p in own:
            by_source.setdefault(p.source, []).append(p.residual)
        sources = ", ".join(f"{s} {statistics.median(v) * 100:+.1f}% ({len(v)})" for s, v in sorted(by_source.items()))
        print(f"{e.setting:30} {e.pairs:>5} {e.sources:>7} {e.measured:>9.3f} {e.predicted:>8.3f} "
              f"{e.median_residual:>+12.1%} {e.agreeing:>9.0%}   {sources}")


if __name__ == "__main__":
    main()
