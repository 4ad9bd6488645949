"""The GEMM overheads (ChipSpec.gemm_tile_overhead, gemm_kernel_overhead): a GEMM's time by hand, and the H100
presets' values re-derived from the published table they were fitted to (pipesim.validation.gemm_overheads)."""

from dataclasses import replace

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.kernels import BENCHMARK_K, gemm_time
from pipesim.analytic.layout import Precision
from pipesim.validation.gemm_overheads import benchmark_chip, fit_overheads, load_table, roofline_only

H100 = CHIP_PRESETS["h100-sxm"]


def test_a_short_inner_dimension_gemm_by_hand():
    """16384×4096×256 on the H100 preset: 128×256 tiles, 132 SMs, each tile 1.2 µs beyond its main loop."""
    m, n, k = 16384, 4096, 256
    rate = H100.peak_flops * H100.sustained_clock_ratio * H100.gemm_efficiency * H100.training_gemm_ratio
    tiles = (m // 128) * (n // 256)  # 2048 tiles
    waves = -(-tiles // 132)  # 16 waves, the last partial
    per_sm = rate / 132
    step = 2 * 128 * 256 / per_sm  # seconds per unit of K of one tile

    def tile_time(inner):
        return 1.2e-6 + step * inner

    compute = waves * tile_time(k) * (step * BENCHMARK_K) / tile_time(BENCHMARK_K)
    memory = (2 * (m * k + k * n) + 2 * m * n) / (H100.hbm_bandwidth * H100.memory_efficiency)
    assert compute > memory  # the tile overhead makes it compute-bound again
    assert gemm_time(m, n, k, H100, Precision.BF16) == pytest.approx(compute + 5.0e-6, rel=1e-12)
    # without the overheads: the plain roofline, 31 % faster here
    plain = replace(H100, gemm_tile_overhead=0.0, gemm_kernel_overhead=0.0)
    assert gemm_time(m, n, k, plain, Precision.BF16) == pytest.approx(max(waves * step * k, memory), rel=1e-12)
    assert gemm_time(m, n, k, plain, Precision.BF16) < 0.8 * gemm_time(m, n, k, H100, Precision.BF16)


def test_the_benchmark_shape_keeps_the_benchmark_rate():
    """At K = 8192 the tile overhead is the benchmark's own: only the kernel's 5 µs is added."""
    m = n = k = BENCHMARK_K
    plain = replace(H100, gemm_tile_overhead=0.0, gemm_kernel_overhead=0.0)
    assert gemm_time(m, n, k, H100, Precision.BF16) == pytest.approx(gemm_time(m, n, k, plain, Precision.BF16) + 5e-6)


def test_a100_has_no_table_and_keeps_the_roofline():
    a100 = CHIP_PRESETS["a100-80gb"]
    assert a100.gemm_tile_overhead == 0.0 and a100.gemm_kernel_overhead == 0.0


def test_hopper_presets_are_the_fit_to_the_xla_table():
    rows = load_table()
    assert len(rows) == 50 and all(r.tflops > 0 for r in rows)
    fitted = fit_overheads()
    assert fitted.rows == 25  # the shapes with at least two waves of 128×256 tiles on 132 SMs
    for name in ("h100-sxm", "h100-96gb-hbm2e", "h800", "h200"):
        chip = CHIP_PRESETS[name]
        assert (chip.gemm_tile_overhead, chip.gemm_kernel_overhead) == (fitted.tile_overhead, fitted.kernel_overhead)
    before = roofline_only()
    assert before.rms_log_error > 0.2 and before.mean_log_error > 0.15  # the roofline is optimistic there
    assert fitted.rms_log_error < 0.06 and abs(fitted.mean_log_error) < 0.04 and fitted.max_log_error < 0.1


def test_b200_preset_is_the_fit_to_its_xla_table_at_cublas_best_rate():
    b200 = CHIP_PRESETS["b200"]
    assert b200.gemm_efficiency == pytest.approx(1652 / 2250, abs=5e-4)  # cuBLAS's best measured shape
    fitted = fit_overheads("b200", "xla_b200_gemm.csv")
    assert (b200.gemm_tile_overhead, b200.gemm_kernel_overhead) == (fitted.tile_overhead, fitted.kernel_overhead)
    before = roofline_only("b200", "xla_b200_gemm.csv")
    assert before.mean_log_error > 0.3 and fitted.rms_log_error < 0.08 and abs(fitted.mean_log_error) < 0.03


def test_mi300x_preset_is_the_fit_to_its_xla_table_at_its_best_shape():
    """The gfx942 entries: their best BF16 shape, 583 TFLOP/s at 4096³, is the preset's rate (0.446 of the
    1,307 TFLOP/s peak, where the field's default 0.80 took it); 128×128 tiles and the fitted overhead per tile."""
    mi300x = CHIP_PRESETS["mi300x"]
    best = max(load_table("xla_mi300x_gemm.csv"), key=lambda r: r.tflops)
    assert (best.rows, best.n, best.k) == (4096, 4096, 4096) and best.tflops == pytest.approx(583.1)
    assert mi300x.gemm_efficiency == pytest.approx(583.1 / 1307.4, abs=5e-4) and mi300x.gemm_tile == (128, 128)
    fitted = fit_overheads("mi300x", "xla_mi300x_gemm.csv")
    assert (mi300x.gemm_tile_overhead, mi300x.gemm_kernel_overhead) == (fitted.tile_overhead, fitted.kernel_overhead)
    before = roofline_only("mi300x", "xla_mi300x_gemm.csv")
    assert before.rms_log_error > 0.2 and fitted.rms_log_error < 0.1 and fitted.rows == 50


def test_the_benchmark_chip_drops_what_a_training_step_adds():
    chip = benchmark_chip(H100)
    assert chip.sustained_clock_ratio == 1.0 and chip.training_gemm_ratio == 1.0


def test_the_summary_states_the_assumed_overheads_and_zero3_overlap(capsys):
    from pipesim.cli.main import main

    assert main(["simulate", "--model", "llama2-7b", "--hardware", "h100-sxm", "--pp", "1", "--dp", "8",
                 "--zero", "3", "--mb", "2"]) in (0, None)
    out = capsys.readouterr().out
    assert "GEMM overheads 1.2 µs/tile 5 µs/kernel" in out
    assert "ZeRO-3 collectives: 0.25 of their kernel work overlapped" in out
    assert main(["simulate", "--model", "llama2-7b", "--hardware", "a100-80gb", "--pp", "2", "--mb", "2"]) in (0, None)
    out = capsys.readouterr().out
    assert "GEMM overheads" not in out and "ZeRO-3 collectives" not in out  # A100 has none; no per-layer gathers
