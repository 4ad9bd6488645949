"""Where do pipesim's step-time errors come from? The published rows by what each predicted step is made of
(pipesim/validation/residual_composition.py): the rows pooled by the share of the step spent waiting on
communication, each part's slope within the sources, and each source's communication-bound rows against its
others.

Run: ``python experiments/residual_composition.py [--fast]`` (seconds; the presets' predictions, in sample;
``--fast`` leaves out the rows whose order is synthesised). docs/validation-log.md says what it finds.
"""

from __future__ import annotations

import statistics

from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.loso import source_of, synthesised
from pipesim.validation.residual_composition import (
    COMMUNICATION_BOUND,
    Row,
    composition_of,
    exposure_bins,
    within_source_contrasts,
    within_source_slopes,
)
from pipesim.validation.runs import predict
from pipesim.validation.sources import PUBLISHED_RUNS

# The parts fitted together: the three kinds of communication a step waits on, the bubble and the host
JOINT = ("exposed_comm", "grad_sync", "p2p", "idle", "host_wait")


def main(argv: list[str] | None = None) -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="leave out the rows whose order is synthesised")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "residual_composition.txt")
    rows = []
    for run in PUBLISHED_RUNS:
        if run.measures_step and not (args.fast and synthesised(run)):
            comparison = predict(run)
            rows.append(Row(source_of(run), comparison.step_error, composition_of(comparison.report.busiest)))

    print("rows by the share of the busiest rank's step spent waiting on communication (TP/CP/ZeRO collectives, "
          "gradient sync, P2P)")
    print(f"{'share':>11} {'rows':>5} {'sources':>7} {'mean |e|':>8} {'bias':>7} {'p90 |e|':>8}")
    for b in exposure_bins(rows):
        print(f"{b.low:>4.0%}–{b.high:<5.0%} {b.rows:>5} {b.sources:>7} {b.mean_abs:>8.1%} {b.bias:>+7.1%} "
              f"{b.p90_abs:>8.1%}")

    print("\nwithin-source slopes (signed error per unit share; a source's own intercept, sources weighing the same, "
          "standard error by leaving out one source at a time)")
    print(f"{'part':>14} {'alone':>16} {'together':>16} {'sources':>7} {'rows':>5}")
    together = {s.part: s for s in within_source_slopes(rows, JOINT)}
    for part in ("communication", *JOINT):
        alone = within_source_slopes(rows, (part,))[0]
        joint = together.get(part)
        joint_text = f"{joint.slope:+.2f} ± {joint.standard_error:.2f}" if joint else "—"
        print(f"{part:>14} {alone.slope:>+8.2f} ± {alone.standard_error:.2f} {joint_text:>16} {alone.sources:>7} "
              f"{alone.rows:>5}")

    contrasts = within_source_contrasts(rows)
    print(f"\neach source's rows at {COMMUNICATION_BOUND:.0%}+ communication against its others (mean signed error)")
    for c in contrasts:
        print(f"{c.source:28} {c.bound_rows:>4} rows {c.bound_mean:>+7.1%}   {c.other_rows:>4} rows "
              f"{c.other_mean:>+7.1%}   {c.difference:>+7.1%}")
    leaning = sum(c.difference < 0 for c in contrasts)
    median = statistics.median(c.difference for c in contrasts) if contrasts else 0.0
    print(f"\ncommunication-bound rows ({COMMUNICATION_BOUND:.0%}+ of the step) come out more optimistic than their "
          f"source's other rows in {leaning} of {len(contrasts)} sources (median {median:+.1%})")


if __name__ == "__main__":
    main()
