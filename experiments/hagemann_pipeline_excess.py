"""How Hagemann et al.'s pipelined layouts are slower than pipesim predicts: the excess of each row's measured step
over pipesim's, counted in microbatch-times (the busiest rank's simulated compute per microbatch), so that a cost
paid once a step and one paid every microbatch can be told apart.

A cost paid once a step whose size follows the microbatch (a longer pipeline fill and drain, for instance) shows
as the same number of microbatch-times at every microbatch count; one paid every microbatch grows with the count.
The rows are grouped by sheet (model, sequence, GPUs), tensor- and pipeline-parallel size, recomputation and kernels;
each group prints its rows as (microbatches a step: excess in microbatch-times, and per microbatch in ms).
It is an observation of what the rows say, not a model: docs/validation-log.md says what was found and what not.

Run: ``python experiments/hagemann_pipeline_excess.py`` (seconds; ``--fast``: the 64-GPU sheets).
"""

from __future__ import annotations

from pipesim.analytic.layout import AttentionKernel
from pipesim.validation.runs import predict
from pipesim.validation.sources import runs_by_source


def excess(run) -> tuple[int, float, float]:
    """(microbatches a step, the measured step's excess over pipesim's in microbatch-times, the excess per
    microbatch in s)."""
    comparison = predict(run)
    report = comparison.report
    extra = comparison.published_step_s - report.step_time
    per_microbatch = max(report.simulated_busy) / run.microbatches
    return run.microbatches, extra / per_microbatch, extra / run.microbatches


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False, fast_help="the 64-GPU sheets only"),
                                 argv)
    record_output(args.out, "hagemann_pipeline_excess.txt")
    runs = [run for run in runs_by_source()["hagemann2023"] if run.pp > 1 and (not args.fast or run.gpus == 64)]
    groups: dict[tuple, list[tuple[int, float, float]]] = {}
    for run in runs:
        kernels = run.elementwise.value + ("" if run.attention is AttentionKernel.FUSED else f" {run.attention.value}")
        key = (run.model, run.seq_len, run.gpus, run.tp, run.pp, run.recompute.value, kernels, run.sequence_parallel)
        groups.setdefault(key, []).append(excess(run))
    print(f"{len(runs)} pipelined rows of Hagemann et al. 2023: measured − pipesim, in microbatch-times "
          "(m: excess; per microbatch)")
    for (model, seq, gpus, tp, pp, recompute, kernels, sp), rows in sorted(groups.items()):
        cells = ", ".join(f"m{m}: {times:+.1f} ({each * 1e3:+.0f} ms)" for m, times, each in sorted(rows))
        print(f"  {model} s{seq} {gpus} GPUs tp{tp} pp{pp} {recompute:4} {kernels}{' sp' if sp else ''}: {cells}")


if __name__ == "__main__":
    main()
