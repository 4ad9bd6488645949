"""Whether the Blackwell rows' context-parallel miss is the attention kernel's shape: every published Blackwell
row predicted as the presets have it (one attention rate at every sequence: the ``ChipSpec`` defaults, 0.55
forward and 0.45 backward, no Blackwell table being at hand) and with the H100's measured shape profile lent to
each Blackwell preset (``attention_shape_rates``: the same two rates read as the 16k-token rate, scaled by the
H100 table's ratio at each call's sequence and head size, Dao 2023 and the flash-attention repository's H100
figure).

Context parallelism splits a rank's attention into calls of a fraction of the sequence (cp 2 at 8,192 tokens:
two 2,048-token halves a rank), and fused attention is slower on short calls on every chip with a table. If the
flat Blackwell rate were why the cp 2 rows run 10 % too fast where the same code at cp 1 is within 3 %
(``mlperf_v51_b200``), the profile would close most of that gap. It is an analogy, not a measurement: the
B200's kernels (cuDNN's, what Transformer Engine calls there) have no published table by sequence in pipesim's
sources, so the presets keep one rate and this prints what the analogy would move.

Run: ``python experiments/blackwell_attention_shape.py``.
"""

from __future__ import annotations

from dataclasses import replace
from statistics import fmean

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.runs import predict
from pipesim.validation.sources import PUBLISHED_RUNS

BLACKWELL = ("b200", "gb200", "b300", "gb300")
PROFILE_CHIP = "h100-sxm"  # whose measured shape table is lent


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False, fast_help="the B200 rows only"),
                                 argv)
    record_output(args.out, "blackwell_attention_shape.txt")
    chips = ("b200",) if args.fast else BLACKWELL
    profile = CHIP_PRESETS[PROFILE_CHIP].attention_shape_rates
    rows = [r for r in PUBLISHED_RUNS if r.measures_step and r.chip in chips]
    by_cp: dict[int, list[tuple[float, float]]] = {}
    print(f"{'source':48} {'model':14} {'chip':6} {'GPUs':>5} {'layout':14} {'flat':>7} {'profile':>8}")
    for run in rows:
        flat = predict(run).step_error
        shaped = predict(run, chip=replace(CHIP_PRESETS[run.chip], attention_shape_rates=profile)).step_error
        by_cp.setdefault(run.cp, []).append((flat, shaped))
        print(f"{run.source[:48]:48} {run.model:14} {run.chip:6} {run.gpus:>5} "
              f"{f'tp{run.tp} pp{run.pp} cp{run.cp}':14} {flat:+7.1%} {shaped:+8.1%}")
    print(f"\n{len(rows)} rows; mean signed error by context-parallel size, flat rate → {PROFILE_CHIP}'s profile:")
    for cp, pairs in sorted(by_cp.items()):
        flat, shaped = fmean(p[0] for p in pairs), fmean(p[1] for p in pairs)
        print(f"  cp {cp}: {len(pairs)} rows, {flat:+.1%} → {shaped:+.1%} (moved {shaped - flat:+.1%})")
    pairs = [p for v in by_cp.values() for p in v]
    print(f"  all: mean |e| {fmean(abs(p[0]) for p in pairs):.1%} → {fmean(abs(p[1]) for p in pairs):.1%}, "
          f"bias {fmean(p[0] for p in pairs):+.1%} → {fmean(p[1] for p in pairs):+.1%}")


if __name__ == "__main__":
    main()
