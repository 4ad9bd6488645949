"""``pipesim chips``: the chip presets ``simulate --hardware`` accepts, the committed measured chip files, and
any chip files given (a ``pipesim profile`` file is listed as measured, with its provenance)."""

from __future__ import annotations

import argparse

NAME = "chips"
_PROVENANCE = ("device", "date", "torch", "cuda", "cuda_driver", "cpu_threads_per_process", "processes",
               "collective_backend", "command")


def register(sub) -> None:
    chips = sub.add_parser(NAME, help="list chip presets and measured chip files",
                           description="List chip presets, the measured chip files committed in "
                           "pipesim/analytic/measured_chips (--hardware NAME), and any chip FILEs given.")
    chips.add_argument("files", nargs="*", metavar="FILE", help="chip files to list too (.yaml/.json)")
    chips.add_argument("--compare", metavar="PRESET", default=None,
                       help="for each measured FILE, each constant of the chip preset PRESET beside what the "
                       "measurement gives for it, in the preset's terms ('auto': the preset the measured device's "
                       "name matches)")
    chips.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.analytic.chip_load import load_chip
    from pipesim.analytic.chip_presets import CHIP_PRESETS
    from pipesim.analytic.measured_chips import measured_chip_files

    chips = [("preset", c) for c in CHIP_PRESETS.values()]
    chips += [("measured", load_chip(str(path))) for path in measured_chip_files().values()]
    given = [load_chip(path) for path in args.files]
    chips += [("measured" if chip.measured else "file", chip) for chip in given]
    if args.compare is not None:
        _check_compare(args.compare, [chip for chip in given if chip.measured])
    w = max(10, *(len(c.name) for _, c in chips))
    print(f"{'name':<{w}} {'source':<8} {'BF16 TFLOP/s':>12} {'FP8':>6} {'FP4':>6} {'HBM GiB':>8} {'HBM TB/s':>8} "
          f"{'intra GB/s':>10} {'inter GB/s':>10} {'node':>4} {'gemm':>5} {'train':>5} {'clock':>5} {'attn f/b':>9} "
          f"{'mem':>4} {'spread':>6} {'σ comm':>6}")
    for source, c in chips:
        fp8 = f"{c.fp8_peak_flops / 1e12:.0f}" if c.fp8_peak_flops else "-"
        fp4 = f"{c.fp4_peak_flops / 1e12:.0f}" if c.fp4_peak_flops else "-"
        print(f"{c.name:<{w}} {source:<8} {c.peak_flops / 1e12:>12.4g} {fp8:>6} {fp4:>6} {c.memory_gib:>8.1f} "
              f"{c.hbm_bandwidth / 1e12:>8.3g} {c.intra_node_bandwidth / 1e9:>10.3g} "
              f"{c.inter_node_bandwidth / 1e9:>10.3g} {c.node_size:>4} {c.gemm_efficiency:>5.2f} "
              f"{c.training_gemm_ratio:>5.2f} {c.sustained_clock_ratio:>5.3f} "
              f"{c.attention_forward_efficiency:>4.2f}/{c.attention_backward_efficiency:<4.2f} "
              f"{c.memory_efficiency:>4.2f} {c.gpu_speed_spread:>6.3f} {c.comm_sm_share:>6.3f}")
    for _, c in chips:
        if c.measured is None:
            continue
        record = c.provenance or {}
        recorded = [f"{k} {record[k]}" for k in _PROVENANCE if k in record]
        terms = "; ".join(f"{k} {v}" for k, v in c.measured.sources().items())
        print(f"measured {c.name}: {', '.join(recorded) or 'no provenance recorded'}\n  tables: {terms}")
    if args.compare is not None:
        _compare([chip for chip in given if chip.measured], args.compare)
    print("link bandwidths: per chip, one direction (datasheet NVLink figures are bidirectional; halved here); "
          "gemm/attn/mem: kernel efficiencies (docs/model-and-chip-files.md); train: the share of the GEMM rate a "
          "training step's BF16 GEMMs reach (fitted: docs/validation.md); clock: the tensor-core rate a training run "
          "sustains over a short benchmark's; σ comm: the compute an overlapped collective takes (both measured by "
          "pipesim profile under load); spread: the GPUs' speed spread, of which "
          "a step waits for the slowest (fitted, or measured by pipesim profile on four processes or more); "
          "measured: pipesim profile's tables, which the cost model reads instead of these constants")
    return 0


def _check_compare(preset: str, measured: list) -> None:
    """Refuse a --compare that cannot print anything, before the table."""
    from pipesim.errors import PipesimError
    from pipesim.profile.compare import check_compare_preset

    check_compare_preset(preset)
    if not measured:
        raise PipesimError("--compare needs a measured chip FILE to compare with (write one with pipesim profile -o "
                           "FILE)")


def _compare(measured: list, preset: str) -> None:
    from pipesim.profile.compare import comparison_lines

    for chip in measured:
        print("\n".join(comparison_lines(chip, preset)))
