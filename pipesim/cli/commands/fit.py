"""``pipesim fit``: a chip's fitted constants from step times measured on the user's system
(:func:`pipesim.api.fit_chip`)."""

from __future__ import annotations

import argparse
import json

from pipesim.cli.arg_types import output_file

NAME = "fit"
CHIP_SUFFIXES = (".yaml", ".yml")  # the chip file is written as YAML, its provenance in a comment


def register(sub) -> None:
    from pipesim.analysis.step_fit import DEFAULT_KNOBS

    p = sub.add_parser(NAME, help="fit a chip's constants to step times measured on your system",
                       description="Re-derive the chip constants pipesim fits to published runs (what a training "
                       "step's GEMMs reach, the spread of GPU speeds, the share of the link collectives reach) "
                       "from your own measured steps, and say how far to trust them: every run predicted with the "
                       "values fitted without it. The runs file: 'runs:', one mapping a run, each with 'step_s' "
                       "(measured seconds a step), an optional 'label' and pipesim.simulate's options (schedule, "
                       "pp, mb, model, tp, dp, ...); docs/calibration.md.")
    p.add_argument("runs", help="measured-steps file (.yaml)")
    p.add_argument("--hardware", metavar="NAME|FILE", required=True,
                   help="the chip the runs ran on: a preset (pipesim chips) or a chip file (pipesim profile -o)")
    p.add_argument("--knobs", metavar="FIELD", nargs="+", choices=[k.field for k in DEFAULT_KNOBS], default=None,
                   help="the chip fields to fit (default: all; each stays where no run moves it): "
                   + "; ".join(f"{k.field}: {k.meaning}" for k in DEFAULT_KNOBS))
    p.add_argument("--output", "-o", metavar="FILE", default=None,
                   type=output_file(*CHIP_SUFFIXES, what="chip file"),
                   help="write the fitted chip here (.yaml), for --hardware FILE")
    p.add_argument("--json", action="store_true", help="print the fit as JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.fitting import fit_chip

    result = fit_chip(args.runs, args.hardware, args.knobs)
    if args.output is not None:
        result.save(args.output, str(args.runs))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(result.text(args.hardware))
    if args.output is not None:
        print(f"wrote {args.output} (--hardware {args.output})")
    return 0
