"""``pipesim chips``: the chip presets ``simulate --hardware`` accepts."""

from __future__ import annotations

import argparse

NAME = "chips"


def register(sub) -> None:
    chips = sub.add_parser(NAME, help="list chip presets", description="List chip presets (--hardware).")
    chips.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.analytic.chip_presets import CHIP_PRESETS

    print(f"{'name':<10} {'BF16 TFLOP/s':>12} {'FP8':>6} {'HBM GiB':>8} {'HBM TB/s':>8} {'intra GB/s':>10} "
          f"{'inter GB/s':>10} {'node':>4} {'gemm':>5} {'attn f/b':>9} {'mem':>4}")
    for c in CHIP_PRESETS.values():
        fp8 = f"{c.fp8_peak_flops / 1e12:.0f}" if c.fp8_peak_flops else "-"
        print(f"{c.name:<10} {c.peak_flops / 1e12:>12.1f} {fp8:>6} {c.memory_gib:>8.1f} "
              f"{c.hbm_bandwidth / 1e12:>8.2f} {c.intra_node_bandwidth / 1e9:>10.0f} "
              f"{c.inter_node_bandwidth / 1e9:>10.0f} {c.node_size:>4} {c.gemm_efficiency:>5.2f} "
              f"{c.attention_forward_efficiency:>4.2f}/{c.attention_backward_efficiency:<4.2f} "
              f"{c.memory_efficiency:>4.2f}")
    print("link bandwidths: per chip, one direction (datasheet NVLink figures are bidirectional; halved here); "
          "gemm/attn/mem: kernel efficiencies (docs/model-and-chip-files.md)")
    return 0
