"""H100 against A100 on the same configurations and software: MosaicML's llm-foundry MPT tables.

MosaicML measured the same MPT models, sequence lengths, GPU counts, micro-batches and FSDP settings on H100 and on
A100 80GB with one software stack. The ratio of pipesim's errors on a pair, ``(1 + e_H100) / (1 + e_A100)``,
cancels what the two runs share (framework, kernels, inferred settings) and leaves pipesim's view of H100 against
A100: below 1, pipesim takes the H100 as faster against the A100 than it was. Printed twice: at the benchmarks'
GEMM rate (``training_gemm_ratio`` = 1 on Hopper) and with the presets as shipped, whose Hopper
``training_gemm_ratio`` was fitted to the published Hopper runs (pipesim/validation/constants.py).

Run: ``python experiments/hopper_vs_ampere.py`` (about ten seconds).
"""

from __future__ import annotations

from dataclasses import replace

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.chip_pairs import chip_pairs, median_ratio
from pipesim.validation.sources import rows_of


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False,
                                                   fast_help="no effect: fifteen pairs are quick"), argv)
    record_output(args.out, "hopper_vs_ampere.txt")
    runs = rows_of("mosaicml2023")
    benchmark = replace(CHIP_PRESETS["h100-sxm"], training_gemm_ratio=1.0)
    at_benchmark = chip_pairs(runs, "h100-sxm", "a100-80gb", lambda n: benchmark if n == "h100-sxm" else None)
    shipped = chip_pairs(runs, "h100-sxm", "a100-80gb")
    print(f"{'configuration':<40}{'H100 err':>10}{'A100 err':>10}{'ratio':>8}{'ratio (presets)':>17}")
    for raw, now in zip(at_benchmark, shipped, strict=True):
        print(f"{raw.label:<40}{raw.first.step_error:>+10.1%}{raw.second.step_error:>+10.1%}{raw.ratio:>8.3f}"
              f"{now.ratio:>17.3f}")
    print(f"\nmedian ratio over {len(shipped)} pairs: {median_ratio(at_benchmark):.3f} at the benchmarks' GEMM rate, "
          f"{median_ratio(shipped):.3f} with the presets (Hopper training_gemm_ratio "
          f"{CHIP_PRESETS['h100-sxm'].training_gemm_ratio:g})")


if __name__ == "__main__":
    main()
