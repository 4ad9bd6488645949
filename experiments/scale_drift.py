"""Does pipesim's error drift with the GPU count? Each scaling group's slope of the step-time error against
log₂(GPUs), and their median (pipesim/validation/scale_drift.py).

Run: ``python experiments/scale_drift.py [--fast]`` (``--fast`` leaves out the rows whose order is synthesised;
none of them is in a scaling group). Add ``--gpu-speed-spread 0`` to see the drift without the step's wait for
its slowest GPU (pipesim.analytic.slowest_gpu).
"""

from __future__ import annotations

from dataclasses import replace

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.cli.arg_types import speed_spread
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.loso import synthesised
from pipesim.validation.runs import predict
from pipesim.validation.scale_drift import scaling_groups, summarise_drift
from pipesim.validation.sources import PUBLISHED_RUNS


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="leave out the rows whose order is synthesised")
    parser.add_argument("--gpu-speed-spread", type=speed_spread, default=None, metavar="SIGMA",
                        help="every chip's GPU speed spread (default: the presets')")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "scale_drift.txt")
    runs = [r for r in PUBLISHED_RUNS if r.measures_step and not (args.fast and synthesised(r))]

    def chip_of(run):
        chip = CHIP_PRESETS[run.chip]
        return chip if args.gpu_speed_spread is None else replace(chip, gpu_speed_spread=args.gpu_speed_spread)

    groups = scaling_groups([predict(r, chip_of(r)) for r in runs])
    for g in sorted(groups, key=lambda g: g.slope):
        steps = ", ".join(f"{n}: {e:+.1%}" for n, e in zip(g.gpus, g.errors, strict=True))
        print(f"{g.slope * 100:+6.2f} points/doubling  {' '.join(map(str, g.key[:3]))}  ({steps})")
    s = summarise_drift(groups)
    print(f"\n{s.groups} scaling groups: median {s.median_slope * 100:+.2f} points per doubling of GPUs "
          f"(mean {s.mean_slope * 100:+.2f}); {s.negative} of {s.groups} drift optimistic")


if __name__ == "__main__":
    main()
