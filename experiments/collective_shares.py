"""The share of NVLink each NCCL collective reaches inside an H100 or B200 node, fitted to OpenXLA's measured tables.

pipesim took one share of the link for every collective inside a node (``collective_efficiency``, 1.0 on H100,
from nccl-tests' 8-GPU all-reduce with NVLink SHARP). OpenXLA's measured H100 collective table
(``pipesim/validation/data/xla_h100_collectives.csv``) says an all-gather, a reduce-scatter and groups smaller
than the node reach less. This prints, per collective and group size, the measured bus bandwidth at each buffer
size of at least 16 MiB, the fitted share of the chip's NVLink (:mod:`pipesim.validation.collective_shares`), the
fitted per-call constant (XLA's launch with NCCL's latency, not taken) and the preset's share; then the same for
B200 from the table's sm_100 entries.

Run: ``python experiments/collective_shares.py`` (under a second).
"""

from __future__ import annotations

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.collective_shares import MIN_FIT_BYTES, TABLES, fit_table, link_bandwidth, load_table


def _report(chip_name: str) -> None:
    rows = load_table(TABLES[chip_name])
    preset = CHIP_PRESETS[chip_name].nvlink_collective_shares
    sizes = sorted({r.nbytes for r in rows if r.nbytes >= MIN_FIT_BYTES})
    print(f"{chip_name} ({TABLES[chip_name]}): bus bandwidth in GB/s (nccl-tests' convention), shares of "
          f"{link_bandwidth(chip_name) / 1e9:.0f} GB/s\n")
    print("| collective | GPUs | " + " | ".join(f"{s // 2**20} MiB" for s in sizes)
          + " | fitted share | fixed µs | RMS log error | preset |")
    print("|---|---|" + "---|" * (len(sizes) + 4))
    for fit in fit_table(chip_name):
        # a size a group did not measure (the NVL72 racks' buffers divide by the group) is a dash; where two
        # layouts of one group size were measured (16 or 18 groups of 4), their mean
        measured: dict[int, list[float]] = {}
        for r in rows:
            if r.op is fit.op and r.ranks == fit.ranks:
                measured.setdefault(r.nbytes, []).append(r.bus_bytes / r.seconds / 1e9)
        cells = " | ".join(f"{sum(measured[s]) / len(measured[s]):.0f}" if s in measured else "–" for s in sizes)
        print(f"| {fit.op.value} | {fit.ranks} | {cells} | {fit.share:.3f} | {fit.fixed_s * 1e6:.0f} | "
              f"{fit.rms_log_error:.3f} | {preset.share(fit.op, fit.ranks):.2f} |")
    print()


def main(argv: list[str] | None = None) -> int:
    args = parse_experiment_args(experiment_parser(__doc__, figures=False, fast_help="no effect: it is quick"), argv)
    record_output(args.out, "collective_shares.md")
    for chip_name in TABLES:
        _report(chip_name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
