"""The GEMM overheads of a chip (``gemm_tile_overhead``, ``gemm_kernel_overhead``) fitted to a published table
of measured GEMM rates, and how well the roofline matches that table with and without them.

The table: OpenXLA's default matmul performance table (``xla/service/gpu/model/matmul_interpolator_data.h``,
``kDefaultMatmulPTable``), measured BF16 rates of batched ``b × (m×k)·(k×n)`` products on H100 (``sm_90``),
shipped as ``pipesim/validation/data/xla_h100_gemm.csv`` (the entries with at least 4,096 rows and 512 columns,
the shapes of training GEMMs); its B200 (``sm_100``) entries likewise as ``xla_b200_gemm.csv``, fitted at the
B200 preset's best-shape rate (cuBLAS's best measured shape, see the preset); and its MI300X (``gfx942``) entries,
as AMD added them to ROCm's fork of XLA, as ``xla_mi300x_gemm.csv``, fitted at that table's own best shape (see
the preset). It is a GEMM microbenchmark, not
a training run: no row of the published-runs table informs these two constants, so they are not refit by
validation (:mod:`pipesim.validation.constants`).

What the plain roofline misses there: a GEMM with a short inner dimension. At ``16384×4096×256`` the roofline
(best-shape rate, memory bound at HBM) gives 716 TFLOP/s and H100 measures 504; at ``K = 4096`` both agree. The
model of :func:`pipesim.analytic.kernels.gemm_time` adds what an SM pays per output tile beyond its ``K``
main-loop steps and what every kernel pays once; the fit picks both on a grid by the least squares of the log
rate. Only shapes of at least two waves of tiles are used: below that cuBLAS splits ``K`` across SMs, which the
wave model does not describe.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from importlib import resources

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.kernels import gemm_time
from pipesim.analytic.layout import Precision

TABLE = "xla_h100_gemm.csv"
TABLE_CHIP = "h100-sxm"
# Every shipped table and the preset whose overheads it sets (the Hopper presets share the H100's SMs)
TABLES: dict[str, str] = {"h100-sxm": "xla_h100_gemm.csv", "b200": "xla_b200_gemm.csv",
                          "mi300x": "xla_mi300x_gemm.csv"}
TILE_GRID = tuple(round(0.1e-6 * i, 8) for i in range(31))  # 0–3 µs per tile
KERNEL_GRID = tuple(round(0.5e-6 * i, 8) for i in range(21))  # 0–10 µs per kernel


@dataclass(frozen=True)
class MeasuredGemm:
    """One measured batched product: ``batch`` × ``(m×k)·(k×n)`` at ``tflops``."""

    batch: int
    m: int
    n: int
    k: int
    tflops: float

    @property
    def rows(self) -> int:  # a batch of products with one weight runs as one GEMM of batch·m rows
        return self.batch * self.m


def load_table(name: str = TABLE) -> list[MeasuredGemm]:
    """The rows of a shipped GEMM table (comment lines start with ``#``)."""
    text = resources.files("pipesim.validation.data").joinpath(name).read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return [MeasuredGemm(int(r["b"]), int(r["m"]), int(r["n"]), int(r["k"]), float(r["tflops"]))
            for r in csv.DictReader(lines)]


def benchmark_chip(chip: ChipSpec) -> ChipSpec:
    """The chip as a short benchmark sees it: the best-shape rate at the boost clock, nothing a training step adds."""
    return replace(chip, sustained_clock_ratio=1.0, training_gemm_ratio=1.0, measured=None)


def full_waves(row: MeasuredGemm, chip: ChipSpec) -> bool:
    """At least two waves of output tiles (below that cuBLAS splits K, which the wave model does not describe)."""
    tm, tn = chip.gemm_tile
    return math.ceil(row.rows / tm) * math.ceil(row.n / tn) >= 2 * chip.sm_count


def predicted_tflops(row: MeasuredGemm, chip: ChipSpec) -> float:
    """pipesim's rate for the row's shape on ``chip`` (a benchmark chip: :func:`benchmark_chip`)."""
    return 2 * row.rows * row.n * row.k / gemm_time(row.rows, row.n, row.k, chip, Precision.BF16) / 1e12


@dataclass(frozen=True)
class OverheadFit:
    tile_overhead: float  # s per output tile
    kernel_overhead: float  # s per kernel
    rms_log_error: float  # over the rows, of log(predicted / measured)
    mean_log_error: float
    max_log_error: float
    rows: int


def log_errors(rows: list[MeasuredGemm], chip: ChipSpec) -> list[float]:
    return [math.log(predicted_tflops(r, chip) / r.tflops) for r in rows]


def score(rows: list[MeasuredGemm], chip: ChipSpec, tile: float, kernel: float) -> OverheadFit:
    errors = log_errors(rows, replace(chip, gemm_tile_overhead=tile, gemm_kernel_overhead=kernel))
    return OverheadFit(tile, kernel, math.sqrt(sum(e * e for e in errors) / len(errors)),
                       sum(errors) / len(errors), max(abs(e) for e in errors), len(errors))


def fit_overheads(chip_name: str = TABLE_CHIP, table: str = TABLE) -> OverheadFit:
    """The grid point of (tile overhead, kernel overhead) with the least RMS log error on the table's full-wave rows."""
    chip = benchmark_chip(CHIP_PRESETS[chip_name])
    rows = [r for r in load_table(table) if full_waves(r, chip)]
    return min((score(rows, chip, tile, kernel) for tile in TILE_GRID for kernel in KERNEL_GRID),
               key=lambda f: f.rms_log_error)


def roofline_only(chip_name: str = TABLE_CHIP, table: str = TABLE) -> OverheadFit:
    """The same rows scored with both overheads at 0 (the model before them)."""
    chip = benchmark_chip(CHIP_PRESETS[chip_name])
    rows = [r for r in load_table(table) if full_waves(r, chip)]
    return score(rows, chip, 0.0, 0.0)
