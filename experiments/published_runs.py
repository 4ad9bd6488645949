"""pipesim against published training runs: step time (or throughput) and memory, each row with its source.

Run: ``python experiments/published_runs.py`` (prints the README's table; ``--markdown`` for Markdown; about
two minutes, nearly all of it synthesising the ZB-2p rows' zb-auto orders, which ``--fast`` skips).
Nothing here is fitted per row: the chip constants are the presets' (pipesim/analytic/chip_presets.py, each
cited there), the rest is each paper's stated configuration. Step time is compared in seconds: a published
throughput (TFLOP/s per GPU, tokens/s per GPU, MFU) is turned into seconds per step with the paper's own
batch, and a published TFLOP/s with pipesim's FLOP count of the same step (both count the full s² attention).
The rows are in :mod:`pipesim.validation.sources`, one module per source; the memory-only sources
(:data:`~pipesim.validation.sources.MEMORY_MODULES`) come last, with no published step. ``--moe`` prints the
mixture-of-experts rows instead (held out of every fit, :data:`pipesim.validation.sources.MOE_MODULES`),
with the exposed all-to-all's share of the busiest rank's step; ``--blackwell`` the Blackwell rows alone (part of
the table, :data:`pipesim.validation.sources.BLACKWELL_MODULES`: the one fitted constant they inform is the
Blackwell sustained clock).
"""

from __future__ import annotations

from pipesim.analytic.layout import ElementwiseKernels
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.program.loader import load_schedule
from pipesim.validation.runs import cli_args, predict
from pipesim.validation.sources import (
    BLACKWELL_RUNS,
    IN_SAMPLE_MODULES,
    MEMORY_ONLY_RUNS,
    MOE_RUNS,
    PUBLISHED_RUNS,
    module_of,
)

__all__ = ["PUBLISHED_RUNS", "cli_args", "main", "predict"]


def main() -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="skip the rows whose order is synthesised for "
                               "their costs (zb-auto, ~1 s each): a smoke run")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--commands", action="store_true", help="print the pipesim command of each row instead")
    held_apart = parser.add_mutually_exclusive_group()
    held_apart.add_argument("--moe", action="store_true", help="the mixture-of-experts rows (held out of every fit)")
    held_apart.add_argument("--blackwell", action="store_true", help="the Blackwell rows alone (part of the table)")
    args = parse_experiment_args(parser)
    record_output(args.out, "published_runs_commands.txt" if args.commands
                  else "published_runs.md" if args.markdown else "published_runs.txt")
    # memory-only sources last
    table = MOE_RUNS if args.moe else BLACKWELL_RUNS if args.blackwell else PUBLISHED_RUNS + MEMORY_ONLY_RUNS
    if args.commands:
        for run in table:
            print("pipesim " + " ".join(cli_args(run)))
        return
    runs = [r for r in table if not (args.fast and load_schedule(r.schedule).build_options)]
    comparisons = [predict(run) for run in runs]
    header = ["source", "configuration", "published s/step", "pipesim s/step", "error", "published GiB",
              "pipesim GiB", "memory error"] + (["exposed all-to-all"] if args.moe else [])
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    for c in comparisons:
        kernels = "" if c.run.elementwise is ElementwiseKernels.FUSED else f" {c.run.elementwise.value}"
        cells = [c.run.source.split(",")[0], c.run.label + f" {c.run.recompute.value}"
                 + (" +sp" if c.run.sequence_parallel else "") + kernels]
        if c.step_error is None:  # a memory-only source
            cells += ["", f"{c.report.step_time:.3g}", ""]
        else:
            cells += [f"{c.published_step_s:.3g}", f"{c.report.step_time:.3g}", f"{c.step_error:+.1%}"]
        if c.memory_error is None:
            cells += ["", "", ""]
        else:
            cells += [f"{c.run.memory_gib:g}", f"{c.predicted_memory_gib:.1f}", f"{c.memory_error:+.1%}"]
        if args.moe:
            cells.append(f"{c.report.busiest.a2a_exposed_share:.0%} of the step")
        print("| " + " | ".join(cells) + " |" if args.markdown else "  ".join(f"{x:<14}" for x in cells))
    for title, group in (("in-sample", [c for c in comparisons if module_of(c.run) in IN_SAMPLE_MODULES]),
                         ("out-of-sample", [c for c in comparisons if module_of(c.run) not in IN_SAMPLE_MODULES])):
        if not group:
            continue
        print(f"\n{title} sources:")
        _summary(group)
    over = [c for c in comparisons if c.report.memory.over_capacity_beyond_band]
    print(f"\nruns that ran, which pipesim puts over their GPU's memory by more than the memory band: {len(over)} of "
          f"{len(comparisons)}" + "".join(f"\n  {c.run.source.split(',')[0]}: {c.run.label} "
                                         f"({c.report.memory.peak.total / 2**30:.0f} GiB of "
                                         f"{c.report.memory.capacity_gib:g})" for c in over))
    print("\nper source module (signed error: negative = pipesim faster / smaller than published):")
    by_module: dict[str, list] = {}
    for c in comparisons:
        by_module.setdefault(module_of(c.run), []).append(c)
    for module, group in by_module.items():
        print(f"  {module}{'' if module in IN_SAMPLE_MODULES else ' (out-of-sample)'}")
        _summary(group, indent="    ")
    print("\nper table:")
    by_source: dict[str, list] = {}
    for c in comparisons:
        by_source.setdefault(c.run.source, []).append(c)
    for source, group in by_source.items():
        print(f"  [{module_of(group[0].run)}] {source}")
        _summary(group, indent="    ")


def _summary(group: list, indent: str = "  ") -> None:
    """Rows, mean signed and mean |error|, for step time and (where published) memory."""
    for what, errors in (("step time", [c.step_error for c in group if c.step_error is not None]),
                         ("memory", [c.memory_error for c in group if c.memory_error is not None])):
        if errors:
            print(f"{indent}{what}: {len(errors)} rows, mean signed {sum(errors) / len(errors):+.1%}, "
                  f"mean |error| {sum(map(abs, errors)) / len(errors):.1%}, max |error| {max(map(abs, errors)):.1%}")


if __name__ == "__main__":
    main()
