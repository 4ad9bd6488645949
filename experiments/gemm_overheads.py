"""H100's and B200's GEMM overheads fitted to OpenXLA's published tables of measured GEMM rates.

The roofline with one best-shape rate (``gemm_efficiency``) and wave quantization takes a GEMM with a short inner
dimension K as fast as a large one; OpenXLA's measured H100 table (``pipesim/validation/data/xla_h100_gemm.csv``)
says it is up to 40 % slower at K = 256. pipesim adds a fixed cost per output tile and one per kernel
(``ChipSpec.gemm_tile_overhead``, ``gemm_kernel_overhead``; :mod:`pipesim.validation.gemm_overheads`); this prints
the fit, the table row by row with the roofline's rate and the fitted model's, and the error of both.

Run: ``python experiments/gemm_overheads.py`` (under a second).
"""

from __future__ import annotations

from dataclasses import replace

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.gemm_overheads import (
    TABLES,
    benchmark_chip,
    fit_overheads,
    full_waves,
    load_table,
    predicted_tflops,
    roofline_only,
)


def _report(chip_name: str, table: str) -> None:
    fit, before = fit_overheads(chip_name, table), roofline_only(chip_name, table)
    chip = benchmark_chip(CHIP_PRESETS[chip_name])
    fitted = replace(chip, gemm_tile_overhead=fit.tile_overhead, gemm_kernel_overhead=fit.kernel_overhead)
    plain = replace(chip, gemm_tile_overhead=0.0, gemm_kernel_overhead=0.0)
    print(f"{chip_name} ({table}):")
    print(f"{'b×m':>7}{'n':>6}{'k':>6}{'measured':>10}{'roofline':>10}{'fitted':>8}   TFLOP/s (BF16)")
    for row in load_table(table):
        if full_waves(row, chip):
            print(f"{row.rows:>7}{row.n:>6}{row.k:>6}{row.tflops:>10.0f}{predicted_tflops(row, plain):>10.0f}"
                  f"{predicted_tflops(row, fitted):>8.0f}")
    print(f"{fit.rows} rows of at least two waves of tiles. Roofline: RMS log error {before.rms_log_error:.3f}, "
          f"mean {before.mean_log_error:+.3f} (too fast), max {before.max_log_error:.3f}.")
    print(f"Fitted: {fit.tile_overhead * 1e6:.1f} µs per output tile, {fit.kernel_overhead * 1e6:.1f} µs per kernel: "
          f"RMS log error {fit.rms_log_error:.3f}, mean {fit.mean_log_error:+.3f}, max {fit.max_log_error:.3f}.")
    preset = CHIP_PRESETS[chip_name]
    print(f"Preset: {preset.gemm_tile_overhead * 1e6:.1f} µs, {preset.gemm_kernel_overhead * 1e6:.1f} µs.\n")


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False, fast_help="no effect: it is quick"), argv)
    record_output(args.out, "gemm_overheads.txt")
    for chip_name, table in TABLES.items():
        _report(chip_name, table)


if __name__ == "__main__":
    main()
