"""``pipesim chips``: the chip presets ``simulate --hardware`` accepts."""

from __future__ import annotations

import argparse

NAME = "chips"


def register(sub) -> None:
    chips = sub.add_parser(NAME, help="list chip presets", description="List chip presets (--hardware).")
    chips.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.analytic.chip_presets import CHIP_PRESETS

    print(f"{'name':<10} {'BF16 TFLOP/s':>12} {'HBM GiB':>8} {'HBM TB/s':>8} {'intra GB/s':>10} "
          f"{'inter GB/s':>10} {'node':>4} {'achievable':>10}")
    for c in CHIP_PRESETS.values():
        print(f"{c.name:<10} {c.peak_flops / 1e12:>12.1f} {c.memory_gib:>8.1f} {c.hbm_bandwidth / 1e12:>8.2f} "
              f"{c.intra_node_bandwidth / 1e9:>10.0f} {c.inter_node_bandwidth / 1e9:>10.0f} {c.node_size:>4} "
              f"{c.achievable_fraction:>10.2f}")
    print("link bandwidths: per chip, one direction (datasheet NVLink figures are bidirectional; halved here)")
    return 0
