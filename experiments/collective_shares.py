"""The share of NVLink each NCCL collective reaches inside an H100 node, fitted to OpenXLA's measured table.

pipesim took one share of the link for every collective inside a node (``collective_efficiency``, 1.0 on H100,
from nccl-tests' 8-GPU all-reduce with NVLink SHARP). OpenXLA's measured H100 collective table
(``pipesim/validation/data/xla_h100_collectives.csv``) says an all-gather, a reduce-scatter and groups smaller
than the node reach less. This prints, per collective and group size, the measured bus bandwidth at each buffer
size of at least 16 MiB, the fitted share of NVLink's 450 GB/s (:mod:`pipesim.validation.collective_shares`), the
fitted per-call constant (XLA's launch with NCCL's latency, not taken) and the preset's share.

Run: ``python experiments/collective_shares.py`` (under a second).
"""

from __future__ import annotations

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.collective_shares import LINK_BANDWIDTH, MIN_FIT_BYTES, fit_table, load_table


def main(argv: list[str] | None = None) -> int:
    args = parse_experiment_args(experiment_parser(__doc__, figures=False, fast_help="no effect: it is quick"), argv)
    record_output(args.out, "collective_shares.md")
    rows = load_table()
    preset = CHIP_PRESETS["h100-sxm"].nvlink_collective_shares
    sizes = sorted({r.nbytes for r in rows if r.nbytes >= MIN_FIT_BYTES})
    print("| collective | GPUs | " + " | ".join(f"{s // 2**20} MiB" for s in sizes)
          + " | fitted share | fixed µs | RMS log error | preset |")
    print("|---|---|" + "---|" * (len(sizes) + 4))
    for fit in fit_table():
        bus = {r.nbytes: r.bus_bytes / r.seconds / 1e9 for r in rows if r.op is fit.op and r.ranks == fit.ranks}
        cells = " | ".join(f"{bus[s]:.0f}" for s in sizes)
        print(f"| {fit.op.value} | {fit.ranks} | {cells} | {fit.share:.3f} | {fit.fixed_s * 1e6:.0f} | "
              f"{fit.rms_log_error:.3f} | {preset.share(fit.op, fit.ranks):.2f} |")
    print(f"\nBus bandwidth in GB/s (nccl-tests' convention); shares of {LINK_BANDWIDTH / 1e9:.0f} GB/s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
