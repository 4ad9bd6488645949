"""Published runs of one job on two networks: what the network cost them, measured and as pipesim predicts it at
each value of ZeRO-3's overlap share (pipesim/validation/network_pairs.py says which rows pair and why).

Run: ``python experiments/network_pairs.py`` (seconds; ``--fast`` takes the first pair alone). Prints each pair's
throughput per GPU on the faster network over the thinner one's, as published and as predicted, and writes
pipesim-figures/network_pairs.txt. docs/validation-log.md reads it.
"""

from __future__ import annotations

from statistics import fmean

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.network_pairs import OVERLAP_SHARES, network_pairs
from pipesim.validation.sources import PUBLISHED_RUNS


def main(argv: list[str] | None = None) -> int:
    parser = experiment_parser(__doc__.split("\n\n")[0], figures=False, fast_help="the first pair alone")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "network_pairs.txt")
    pairs = network_pairs(PUBLISHED_RUNS)
    if args.fast:
        pairs = pairs[:1]
    if not pairs:
        print("no two published rows differ in their network alone")
        return 0
    shares = "  ".join(f"at {share:<4g}" for share in OVERLAP_SHARES)
    print(f"throughput per GPU, faster network over thinner: published, then pipesim at each ZeRO-3 overlap share\n"
          f"{'pair':58s} {'published':>9s}  {shares}")
    for pair in pairs:
        predicted = "  ".join(f"{pair.predicted[share]:7.3f}" for share in OVERLAP_SHARES)
        print(f"{pair.label:58s} {pair.measured:9.3f}  {predicted}")
    gaps = "  ".join(f"{fmean(p.predicted[share] - p.measured for p in pairs):+7.3f}" for share in OVERLAP_SHARES)
    print(f"{'mean of predicted − published':58s} {'':9s}  {gaps}")
    preset = CHIP_PRESETS[pairs[0].thin.chip].zero3_overlap_share
    at_preset = [p.predicted[preset] for p in pairs if preset in p.predicted]
    print(f"{len(pairs)} pairs: published {min(p.measured for p in pairs):.3f}…{max(p.measured for p in pairs):.3f}"
          + (f"; pipesim at the presets' share, {preset:g}, {min(at_preset):.3f}…{max(at_preset):.3f}" if at_preset
             else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
