"""``pipesim calibrate``: a costs file from a measured timeline."""

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
    from pipesim.analysis.calibrate import calibrate
    from pipesim.io.timeline import read_timeline

    frame = read_timeline(args.timeline, flag="timeline")
    notes: list[str] = []
    costs = calibrate(frame, warmup_steps=args.warmup_steps, notes=notes)
    costs.save(args.output)
    d = costs.default
    print(f"wrote {args.output}: F={d.forward:.4g} B={d.backward:.4g} I={d.backward_input:.4g} "
          f"W={d.backward_weight:.4g} p2p latency={costs.p2p_latency:.4g} [{costs.time_unit}], "
          f"{len(costs.overrides)} stage override(s)")
    for note in notes:
        print(f"note: {note}")
    return 0
