"""MosaicML's A100 rows by sequence length, with the A100's fused attention at its measured shape and at one rate.

MosaicML measured MPT models from 125M to 70B at 512 to 65,536 tokens on A100 80GB and 40GB with one software
stack. Attention's share of a step grows with the sequence, so a kernel rate wrong at some lengths shows as an
error that drifts with the length. Printed side by side on the same rows: the A100 presets as shipped
(FlashAttention-2's causal forward + backward rate by sequence and head size, Dao 2023 Figure 4, scaling 0.71
forward and 0.57 backward at 16k tokens) and the one rate every shape had before (0.60 forward, 0.48 backward,
the middle of the paper's "50-73 %"). The H100 rows beside them keep their own table either way.

Run: ``python experiments/attention_by_sequence.py`` (a few seconds).
"""

from __future__ import annotations

from dataclasses import replace

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.by_sequence import error_by_sequence
from pipesim.validation.sources import rows_of

AMPERE = ("a100-80gb", "a100-40gb")
# The A100's fused attention before its shape table: one rate at every sequence and head size
ONE_RATE = {"attention_shape_rates": None, "attention_forward_efficiency": 0.60, "attention_backward_efficiency": 0.48}


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False,
                                                   fast_help="no effect: the rows are quick"), argv)
    record_output(args.out, "attention_by_sequence.txt")
    runs = rows_of("mosaicml2023", "mosaicml_small2023")
    ampere = [r for r in runs if r.chip in AMPERE]
    shaped = error_by_sequence(ampere)
    flat = error_by_sequence(ampere, lambda name: replace(CHIP_PRESETS[name], **ONE_RATE))
    hopper = {g.seq_len: g for g in error_by_sequence(r for r in runs if r.chip == "h100-sxm")}
    print(f"{'tokens':>8}{'A100 rows':>11}{'shape table':>13}{'one rate':>10}{'H100 rows':>11}{'H100':>8}")
    for with_shape, without in zip(shaped, flat, strict=True):
        h100 = hopper.get(with_shape.seq_len)
        h100_text = f"{h100.rows:>11}{h100.mean_error:>+8.1%}" if h100 else f"{'':>11}{'':>8}"
        print(f"{with_shape.seq_len:>8}{with_shape.rows:>11}{with_shape.mean_error:>+13.1%}{without.mean_error:>+10.1%}"
              f"{h100_text}")
    span = shaped[-1].mean_error - shaped[0].mean_error
    flat_span = flat[-1].mean_error - flat[0].mean_error
    print(f"\nA100, {shaped[0].seq_len} to {shaped[-1].seq_len} tokens: the mean error moves {span:+.1%} with the "
          f"shape table, {flat_span:+.1%} with one rate")


if __name__ == "__main__":
    main()
