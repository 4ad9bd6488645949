"""Where pipesim's reserved-memory share comes from, and its test: published logs that print both peaks.

PyTorch's caching allocator holds more than its tensors do; ``torch.cuda.max_memory_reserved()`` sits above
``max_memory_allocated()``. The 27 pretraining runs of :mod:`pipesim.validation.allocator_pairs` print both: their
median share above the allocated peak is ``pipesim.analytic.allocator.RESERVED_SHARE`` (a test holds the two
together). Then the rows of the validation table whose source publishes a reserved peak (torchtitan's) are
compared both ways: as reserved, which they are, and as allocated, which is what pipesim compared before.

Run: ``python experiments/allocator_reserve.py``.
"""

from __future__ import annotations

from dataclasses import replace

from pipesim.analytic.allocator import MemoryMeasure
from pipesim.validation.allocator_pairs import PAIRS, median_share, share_range
from pipesim.validation.runs import predict
from pipesim.validation.sources import MEMORY_RUNS


def reserved_rows():
    """Every published row whose memory figure is a reserved peak."""
    return [run for run in MEMORY_RUNS if run.memory_measure is MemoryMeasure.RESERVED]


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False,
                                                   fast_help="no effect: the table is instant"), argv)
    record_output(args.out, "allocator_reserve.txt")
    print(f"{'index id':>12} {'framework':<19}{'allocated MiB':>14}{'reserved MiB':>13}{'share':>8}  run")
    for p in sorted(PAIRS, key=lambda p: p.reserved_share):
        print(f"{p.index_id or 'issue':>12} {p.framework:<19}{p.max_allocated_mib:>14.0f}{p.max_reserved_mib:>13.0f}"
              f"{p.reserved_share:>+8.1%}  {p.described}")
    low, high = share_range()
    print(f"\n{len(PAIRS)} runs: median reserved share {median_share():+.1%}, 10–90 % {low:+.1%} … {high:+.1%}")
    print("\nrows that publish a reserved peak (pipesim as reserved, and as allocated as before):")
    for run in reserved_rows():
        as_reserved = predict(run)
        as_allocated = replace(as_reserved, run=replace(run, memory_measure=MemoryMeasure.ALLOCATED))
        print(f"  {run.label}: published {run.memory_gib:g} GiB, reserved {as_reserved.predicted_memory_gib:.1f} "
              f"({as_reserved.memory_error:+.1%}), allocated {as_allocated.predicted_memory_gib:.1f} "
              f"({as_allocated.memory_error:+.1%})")


if __name__ == "__main__":
    main()
