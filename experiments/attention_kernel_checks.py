"""Two checks of which fused-attention kernel the published rows ran, each against the rows themselves; neither is
adopted (docs/validation-log.md says why).

1. *Blackwell by sequence.* Every published Blackwell row predicted as the presets have it (one attention rate at
   every sequence: the ``ChipSpec`` defaults, 0.55 forward and 0.45 backward, no Blackwell table being at hand)
   and with the H100's measured shape profile lent to each Blackwell preset (``attention_shape_rates``: the same
   two rates read as the 16k-token rate, scaled by the H100 table's ratio at each call's sequence and head size).
   Context parallelism splits a rank's attention into calls of part of the sequence, and fused attention is slower
   on short calls on every chip with a table; if the flat rate were why MLPerf v5.1's cp 2 rows run 10 % too fast
   where the same code at cp 1 is within 3 % (``mlperf_v51_b200``), the profile would close most of that gap.
2. *cuDNN on Hopper.* Transformer Engine picks its cuDNN backend (``FusedAttention``) over FlashAttention on Hopper
   "for performance reasons" (``get_attention_backend``; since TE 1.x), and the FlashAttention-3 paper (Shah et
   al. 2024, Figures 5 and 6, H100 SXM5, head size 128, 16k tokens) measures cuDNN's causal forward at 539 TFLOP/s
   and unmasked backward at 516 against FlashAttention-2's 335 and 322, the rates pipesim's Hopper presets carry.
   The Hopper rows whose code is Transformer Engine's (NeMo, MLPerf's NeMo, Megatron-Core) predicted with both
   efficiencies scaled by those ratios.

Run: ``python experiments/attention_kernel_checks.py`` (``--fast``: the B200 rows and NeMo 24.07's alone).
"""

from __future__ import annotations

from dataclasses import replace
from statistics import fmean

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.validation.runs import PublishedRun, predict
from pipesim.validation.sources import PUBLISHED_RUNS

BLACKWELL = ("b200", "gb200", "b300", "gb300")
PROFILE_CHIP = "h100-sxm"  # whose measured shape table is lent
HOPPER = ("h100-sxm", "h100-96gb-hbm2e", "h200", "h800")
# Shah et al. 2024, Figures 5 and 6 (H100 SXM5, head size 128, 16k tokens): cuDNN over FlashAttention-2
CUDNN_FORWARD, CUDNN_BACKWARD = 539 / 335, 516 / 322
# the Hopper sources whose attention is Transformer Engine's (their modules say so)
TRANSFORMER_ENGINE_SOURCES = ("NVIDIA NeMo 24.07", "MLPerf", "Parmar", "Adler",
                              "FlagPerf (BAAI) LLM training cases, 2024: llama3")


def _errors(rows: list[PublishedRun], changed) -> list[tuple[PublishedRun, float, float]]:
    """Each row's signed step-time error on its preset and on ``changed(preset)``."""
    return [(r, predict(r).step_error, predict(r, chip=changed(CHIP_PRESETS[r.chip])).step_error) for r in rows]


def _summary(label: str, results) -> None:
    print(f"  {label}: {len(results)} rows, mean |e| {fmean(abs(a) for _, a, _ in results):.1%} → "
          f"{fmean(abs(b) for _, _, b in results):.1%}, bias {fmean(a for _, a, _ in results):+.1%} → "
          f"{fmean(b for _, _, b in results):+.1%}")


def blackwell_profile(fast: bool) -> None:
    profile = CHIP_PRESETS[PROFILE_CHIP].attention_shape_rates
    chips = ("b200",) if fast else BLACKWELL
    rows = [r for r in PUBLISHED_RUNS if r.measures_step and r.chip in chips]
    results = _errors(rows, lambda chip: replace(chip, attention_shape_rates=profile))
    print(f"1. Blackwell: one attention rate → {PROFILE_CHIP}'s shape profile, mean signed error by cp:")
    for cp in sorted({r.cp for r in rows}):
        group = [x for x in results if x[0].cp == cp]
        flat, shaped = fmean(x[1] for x in group), fmean(x[2] for x in group)
        print(f"  cp {cp}: {len(group)} rows, {flat:+.1%} → {shaped:+.1%} (moved {shaped - flat:+.1%})")
    _summary("all", results)


def _cudnn(chip: ChipSpec) -> ChipSpec:
    return replace(chip, attention_forward_efficiency=chip.attention_forward_efficiency * CUDNN_FORWARD,
                   attention_backward_efficiency=chip.attention_backward_efficiency * CUDNN_BACKWARD)


def hopper_cudnn(fast: bool) -> None:
    sources = TRANSFORMER_ENGINE_SOURCES[:1] if fast else TRANSFORMER_ENGINE_SOURCES
    rows = [r for r in PUBLISHED_RUNS if r.measures_step and r.chip in HOPPER and r.source.startswith(sources)]
    results = _errors(rows, _cudnn)
    print(f"\n2. Hopper, Transformer Engine's sources: FlashAttention-2's rates → cuDNN's (×{CUDNN_FORWARD:.2f} "
          f"forward, ×{CUDNN_BACKWARD:.2f} backward), mean signed error by source:")
    for source in dict.fromkeys(r.source for r in rows):
        group = [x for x in results if x[0].source == source]
        print(f"  {source[:60]:60} {len(group):>3} rows {fmean(x[1] for x in group):+6.1%} → "
              f"{fmean(x[2] for x in group):+6.1%}")
    _summary("all", results)


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False,
                                                   fast_help="the B200 rows and NeMo 24.07's alone"), argv)
    record_output(args.out, "attention_kernel_checks.txt")
    blackwell_profile(args.fast)
    hopper_cudnn(args.fast)


if __name__ == "__main__":
    main()
