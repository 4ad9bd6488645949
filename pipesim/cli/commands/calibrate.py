"""``pipesim calibrate``: a costs file from a measured timeline (:func:`pipesim.api.calibrate`)."""

from __future__ import annotations

import argparse

from pipesim.cli.arg_types import non_negative_int, output_file

NAME = "calibrate"
COSTS_SUFFIXES = (".json", ".yaml", ".yml")


def register(sub) -> None:
    cal = sub.add_parser(NAME, help="derive a costs file from a measured timeline",
                         description="Per-stage F/B/I/W 10%-trimmed means (warm-up steps dropped) and P2P "
                         "latency from a timeline, written as a costs file for 'pipesim simulate --costs' (per "
                         "rank's share of the model: a run with v chunks has its chunk times multiplied by v). A "
                         "fused-backward timeline gives I = W = B/2, a split one B = I + W; the output notes which "
                         "were derived.")
    cal.add_argument("timeline", help="measured timeline (.csv or .parquet)")
    cal.add_argument("--warmup-steps", type=non_negative_int, default=1,
                     help="leading steps to drop when more exist (default 1)")
    cal.add_argument("--output", "-o", required=True, metavar="FILE", type=output_file(*COSTS_SUFFIXES,
                                                                                       what="costs file"),
                     help="costs file (.json or .yaml)")
    cal.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.timelines import calibrate

    result = calibrate(args.timeline, warmup_steps=args.warmup_steps)
    result.save(args.output)
    print(f"wrote {args.output}: {result.summary()}")
    for note in result.notes:
        print(f"note: {note}")
    return 0
