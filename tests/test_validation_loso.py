"""Validation by source left out (pipesim.validation.loso): the fit recovers a constant that generated the
data, a source is never fitted on itself, and the error bands reach the reports."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.error_band import MIN_ROWS, error_band, run_kind, tolerance_bound, tolerance_rank
from pipesim.analytic.layout import Precision
from pipesim.analytic.validation_bands import BANDS, POOLED
from pipesim.cli.main import main
from pipesim.validation.constants import FITTED_CONSTANTS, chips_with
from pipesim.validation.loso import error_bands, fit, leave_one_source_out, sensitivity, summary
from pipesim.validation.runs import Comparison, predict
from pipesim.validation.sources import PUBLISHED_RUNS, runs_by_source

SYNC = next(c for c in FITTED_CONSTANTS if c.name == "p2p_sync_overhead")
# A100 1F1B rows with blocking sends (Narayanan's pipelines), a cheap set that p2p_sync_overhead informs
PIPELINES = [r for r in runs_by_source()["narayanan2021"] if r.pp > 1][:3]


def _generated_by(value: float):
    """A predictor whose 'published' step time is pipesim's own at p2p_sync_overhead = value."""
    truth = {id(r): predict(r, SYNC.apply(CHIP_PRESETS[r.chip], value)).report.step_time for r in PIPELINES}

    def predictor(run, chip=None):
        c = predict(run, chip)
        published = replace(run, hfu_tflops=None, mfu_tflops=None, tokens_per_gpu=None, step_s=truth[id(run)])
        return Comparison(published, c.report, truth[id(run)])

    return predictor


@pytest.mark.parametrize("value", [0.15e-3, 1.8e-3])
def test_the_fit_recovers_the_constant_that_made_the_data(value):
    predictor = _generated_by(value)
    rows = [sensitivity(r, (SYNC,), predictor) for r in PIPELINES]
    assert all(math.isfinite(r.log_error) and "p2p_sync_overhead" in r.shifts for r in rows)
    assert fit(rows, (SYNC,)).values["p2p_sync_overhead"] == value


def test_a_left_out_source_is_predicted_with_constants_fitted_without_it():
    """Two sources generated at different overhead values: each left out is predicted with the other's value,
    so its left-out error is the gap between the two; in sample both sit at the shipped preset."""
    low, high = _generated_by(0.15e-3), _generated_by(1.8e-3)
    a, b = PIPELINES[:2], PIPELINES[2:]
    owner = {id(r): low for r in a} | {id(r): high for r in b}

    def predictor(run, chip=None):
        return owner[id(run)](run, chip)

    result = leave_one_source_out({"a": a, "b": b}, constants=(SYNC,), predictor=predictor)
    by = {s.source: s for s in result.sources}
    assert by["a"].left_out_fit.values["p2p_sync_overhead"] == 1.8e-3
    assert by["b"].left_out_fit.values["p2p_sync_overhead"] == 0.15e-3
    assert all(e > 0 for e in by["a"].left_out)  # predicted with the larger overhead: too slow
    assert all(e < 0 for e in by["b"].left_out)
    assert summary(by["a"].left_out)["bias"] > summary(by["a"].in_sample)["bias"]
    # three A100 rows are too few for a 90/90 bound, of their kind or pooled (the library's bands, as written)
    largest = round(max(abs(e) for e in by["a"].left_out + by["b"].left_out), 3)
    assert error_bands(result) == ({"a100-bf16": (None, 3, largest)}, (None, 3))


def test_a_constant_no_row_informs_keeps_its_preset():
    only_a100 = [r for r in PUBLISHED_RUNS if r.chip == "a100-80gb"][:1]
    hopper = next(c for c in FITTED_CONSTANTS if c.name == "hopper_attention_forward")
    result = fit([sensitivity(r, (hopper,)) for r in only_a100], (hopper,))
    assert result.values == {} and result.unfitted == ("hopper_attention_forward",)
    assert chips_with({})["h100-sxm"] == CHIP_PRESETS["h100-sxm"]


def test_the_gemm_rates_come_from_measurements_and_only_hoppers_training_ratio_is_fitted():
    """Bekman's best shapes (H100 0.80, A100 0.86) at the sustained clocks (gpu-fryer 730/792, HPL 1305/1410) are
    measurements no row gave, so they are not refit; what Hopper's training steps reach of them is (every
    out-of-sample Hopper source is too fast at the benchmarks' rate, A100's agree with it)."""
    assert not any(c.name in ("gemm_efficiency", "sustained_clock_ratio") for c in FITTED_CONSTANTS)
    h100, a100 = CHIP_PRESETS["h100-sxm"], CHIP_PRESETS["a100-80gb"]
    assert (h100.gemm_efficiency, a100.gemm_efficiency) == (0.80, 0.86)
    assert h100.gemm_efficiency * h100.sustained_clock_ratio == pytest.approx(0.80 * 730 / 792, abs=1e-3)
    assert a100.gemm_efficiency * a100.sustained_clock_ratio == pytest.approx(0.86 * 1305 / 1410, abs=1e-3)
    ratio = next(c for c in FITTED_CONSTANTS if c.name == "hopper_training_gemm_ratio")
    assert a100.training_gemm_ratio == 1.0 and "a100-80gb" not in ratio.chips
    assert {CHIP_PRESETS[name].training_gemm_ratio for name in ratio.chips} == {ratio.preset_value}
    assert ratio.preset_value < 1.0


def test_the_hopper_ratio_slows_bf16_gemms_only():
    from dataclasses import replace

    from pipesim.analytic.kernels import gemm_kernel_time as gemm_time  # the tiles, without the per-kernel 5 µs
    from pipesim.analytic.layout import Precision as P

    h100 = CHIP_PRESETS["h100-sxm"]
    bench = replace(h100, training_gemm_ratio=1.0)
    # compute-bound, whole waves, the benchmark's K (its tile overhead is the benchmark's own): the time scales
    # exactly with the rate
    shape = (8192, 8192, 8192)
    slower = gemm_time(*shape, bench, P.BF16) / h100.training_gemm_ratio
    assert gemm_time(*shape, h100, P.BF16) == pytest.approx(slower, rel=1e-12)
    assert gemm_time(*shape, h100, P.FP8) == gemm_time(*shape, bench, P.FP8)


def test_every_fitted_constant_has_its_provenance_and_its_preset_on_its_grid():
    for c in FITTED_CONSTANTS:
        assert len(c.provenance) > 40 and c.preset_value in c.grid
        assert any(c.informs(r) for r in PUBLISHED_RUNS), c.name


def test_bands_follow_the_kind_and_say_when_unvalidated(monkeypatch):
    assert run_kind("h100-sxm", Precision.FP8) == "hopper-fp8" and run_kind("mi300x", Precision.BF16) is None
    band = error_band("mi300x", Precision.BF16)
    assert band.relative is None and "mi300x" in band.text()
    # Blackwell's published runs are all FP8: its BF16 has no band of its own nor anyone else's
    assert run_kind("b200", Precision.BF16) == "blackwell-bf16"
    bf16 = error_band("b200", Precision.BF16)
    assert bf16.relative is None and "no published bf16 run on b200" in bf16.text()
    hopper = error_band("h100-sxm", Precision.BF16)
    assert hopper.relative is not None and 0 < hopper.relative < 1
    assert (hopper.rows >= MIN_ROWS) == ("bound over all" not in hopper.basis)
    fp8 = error_band("h100-sxm", Precision.FP8)  # 28 rows since MLPerf's: a bound of its own
    assert fp8.relative == BANDS["hopper-fp8"][0] and BANDS["hopper-fp8"][1] >= MIN_ROWS
    # A kind with fewer than MIN_ROWS rows has no bound of its own: the pooled one, saying why.
    from pipesim.analytic import validation_bands

    monkeypatch.setitem(validation_bands.BANDS, "hopper-fp8", (None, 15, POOLED[0] / 2))
    few = error_band("h100-sxm", Precision.FP8)
    assert "only 15 of kind hopper-fp8" in few.basis and few.relative == POOLED[0]
    # ...or its own largest left-out error where that is wider: never narrower than what its rows showed
    monkeypatch.setitem(validation_bands.BANDS, "hopper-fp8", (None, 15, 0.5))
    wide = error_band("h100-sxm", Precision.FP8)
    assert wide.relative == 0.5 and "the largest of the 15 published hopper-fp8 runs" in wide.basis


def test_tolerance_rank_by_hand():
    """The k-th smallest of n samples bounds the 90th percentile with 90% confidence when
    P(Binomial(n, 0.9) ≤ k − 1) ≥ 0.9: for n = 22 only the largest (1 − 0.9²² = 0.9015), for n = 21 none
    (1 − 0.9²¹ = 0.891), for n = 80 the 76th (0.9^80 summed up to 75 below: 0.906, up to 74: 0.792)."""
    def below(n: int, k: int) -> float:  # P(Binomial(n, 0.9) ≤ k − 1)
        return sum(math.comb(n, i) * 0.9 ** i * 0.1 ** (n - i) for i in range(k))

    assert tolerance_rank(22) == 22 and below(22, 22) == pytest.approx(1 - 0.9 ** 22)
    assert tolerance_rank(21) is None and MIN_ROWS == 22
    assert tolerance_rank(80) == 76 and below(80, 76) >= 0.9 > below(80, 75)
    assert tolerance_bound(list(range(80))) == 75  # the 76th smallest
    assert tolerance_bound([0.1] * 21) is None


def test_tolerance_bound_covers_the_90th_percentile_nine_times_in_ten():
    """What the band promises, checked by drawing: over many samples of 80 errors from a known distribution
    (|N(0, 1)|, whose 90th percentile is 1.645), the bound lies above that percentile in at least about 90% of
    samples; the plain sample 90th percentile does so only about half the time."""
    rng = np.random.default_rng(7)
    samples = np.abs(rng.standard_normal((2000, 80)))
    q90 = 1.6448536
    covered = np.mean([tolerance_bound(list(s)) >= q90 for s in samples])
    plain = np.mean([np.percentile(s, 90) >= q90 for s in samples])
    assert covered >= 0.88 and plain < 0.7


def test_simulate_prints_and_writes_the_band(capsys):
    argv = ["simulate", "--model", "llama2-7b", "--hardware", "h100-sxm", "--pp", "2", "--mb", "8"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    band = error_band("h100-sxm", Precision.BF16)
    assert f"± {band.relative:.0%}" in out
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    assert report["step_time_band"]["relative"] == band.relative


def test_the_memory_band_is_the_bound_over_the_published_memory_rows_and_warns_near_the_capacity(capsys):
    """The band the memory report carries is the 90/90 bound over every published memory row's |error| (the
    experiment writes it; no constant moves memory, so the presets' errors are the left-out ones); a peak under
    the capacity by less than the band warns that it may not fit."""
    from pipesim.analytic.error_band import ErrorBand, may_not_fit, memory_band
    from pipesim.analytic.validation_bands import MEMORY
    from pipesim.validation.loso import memory_error_band
    from pipesim.validation.runs import predict
    from pipesim.validation.sources import MEMORY_RUNS, module_of, platform_of

    errors = [predict(r).memory_error for r in MEMORY_RUNS]  # zb-auto orders from the committed synthesis cache
    bound, rows, _ = MEMORY
    sources = {platform_of(module_of(r)) for r in MEMORY_RUNS}  # sources as validation counts them (PLATFORM_OF)
    assert memory_error_band(errors, len(sources)) == MEMORY  # rerun --update-bands
    band = memory_band()
    assert band.relative == bound and f"{rows} published peak-memory rows" in band.basis
    assert may_not_fit(75.0, 79.6, band) and not may_not_fit(74.0, 79.6, band)  # 75 · 1.064 = 79.8 > 79.6
    assert not may_not_fit(80.0, 79.6, band) and not may_not_fit(79.0, 79.6, ErrorBand(None, None, 0, ""))
    # a run over the capacity by more than the band cannot fit by pipesim's own error: 85 GiB of 79.6 is (79.6 ·
    # 1.064 = 84.7), 84 GiB is not
    from pipesim.analytic.memory_gib import MemoryReport, RankMemory

    def report(gib):
        rank = RankMemory(0, (0,), 0.0, 0.0, 0.0, 0.0, gib * 2**30, 1.0)
        return MemoryReport((rank,), 79.6, "h100-sxm")

    assert report(85.0).over_capacity_beyond_band and not report(84.0).over_capacity_beyond_band
    assert report(84.0).over_capacity  # over the capacity, within the band of it
    argv = ["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--tp", "2", "--pp", "2", "--dp", "2",
            "--mb", "8", "--micro-batch-size", "2", "--seq-len", "8000"]  # rank 0 peaks at 76 GiB of 79.6
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"GiB allocated ± {bound:.0%} (90/90 bound over {rows}" in out and "it may not fit" in out
    assert main([*argv, "--seq-len", "4096", "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)["model_report"]["memory"]
    assert memory["peak_band"]["relative"] == bound and not memory["warnings"]


def test_plan_marks_the_candidates_whose_band_overlaps_the_best():
    from types import SimpleNamespace

    from pipesim.plan.uncertainty import overlaps_best

    chip = CHIP_PRESETS["h100-sxm"]
    b = error_band("h100-sxm", Precision.BF16).relative

    def outcome(step):
        return SimpleNamespace(evaluation=SimpleNamespace(step_time=step),
                               candidate=SimpleNamespace(precision=Precision.BF16))

    edge = (1 + b) / (1 - b)  # the slowest time whose fastest plausible value still reaches the best's slowest
    ranked = [outcome(1.0), outcome(edge * 0.999), outcome(edge * 1.001)]
    assert overlaps_best(ranked, chip) == [True, True, False]
    assert overlaps_best(ranked, replace(chip, achievable_fraction=0.5)) == [True, False, False]


def test_each_source_weighs_the_same_in_a_fit_whatever_its_row_count():
    """Six rows of one source favour grid point 1 gently, one row of another favours point 5 steeply: weighted by
    row the six would win; weighted by source (pipesim.validation.loso.fit) the steeper source does."""
    from pipesim.validation.loso import RowSensitivity, source_of

    many = runs_by_source()["narayanan2021"][:6]
    one = runs_by_source()["qi2024"][:1]
    assert {source_of(r) for r in many} == {"narayanan2021"} and source_of(one[0]) == "qi2024"
    preset = SYNC.grid.index(SYNC.preset_value)

    def rows(runs, target, slope):
        return [RowSensitivity(r, 1.0, slope * (preset - target),
                               {SYNC.name: tuple(slope * (i - preset) for i in range(len(SYNC.grid)))})
                for r in runs]

    fitted = fit(rows(many, 1, 0.01) + rows(one, 5, 0.05), (SYNC,))
    assert fitted.values[SYNC.name] == SYNC.grid[5]


def test_a_constants_own_loss_profile_by_hand():
    """own_loss_profile: at each grid value, the mean over sources of each source's mean |log error|, the row's
    error at the preset plus its shift there. Two rows of one source (errors +0.02 and −0.04 at the preset, each
    moving 0.01 a grid step) and one of another (+0.10, moving 0.05 a step); a row the constant does not inform
    weighs nothing."""
    from pipesim.validation.loso import RowSensitivity, own_loss_profile

    by_source = runs_by_source()
    first, second = by_source["narayanan2021"][:2], by_source["qi2024"][0]
    preset = SYNC.grid.index(SYNC.preset_value)
    steps = range(len(SYNC.grid))

    def row(run, error, slope):
        return RowSensitivity(run, 1.0, error, {SYNC.name: tuple(slope * (i - preset) for i in steps)})

    rows = [row(first[0], 0.02, 0.01), row(first[1], -0.04, 0.01), row(second, 0.10, 0.05),
            RowSensitivity(by_source["korthikanti2023"][0], 0.5, 0.5, {})]
    profile = own_loss_profile(rows, SYNC)
    for i, loss in zip(steps, profile, strict=True):
        d = i - preset
        mine = (abs(0.02 + 0.01 * d) + abs(-0.04 + 0.01 * d)) / 2
        theirs = abs(0.10 + 0.05 * d)
        assert loss == pytest.approx((mine + theirs) / 2)
    assert own_loss_profile(rows[3:], SYNC) == ()  # no informing row: no profile


def test_the_source_bootstrap_by_hand():
    """source_bootstrap resamples sources, each with its own left-out errors. Source a: three rows at +10 %,
    source b: one at −20 %. Two draws give {a, a} (all rows 10 %, bias +10 %), {a, b} (0.5/4 = 12.5 %, +2.5 %) or
    {b, b} (20 %, −20 %), the first and the last a quarter of the time each, so the central 90 % runs from the one
    to the other; and a seed gives the same interval every run."""
    from pipesim.validation.loso import Fit, SourceResult, ValidationResult, source_bootstrap

    def source(name, errors):
        return SourceResult(name, [], [], errors, Fit({}), [])

    result = ValidationResult(Fit({}), [source("a", [0.1, 0.1, 0.1]), source("b", [-0.2])])
    interval = source_bootstrap(result)
    assert interval["mean_abs"] == pytest.approx((0.1, 0.2))
    assert interval["bias"] == pytest.approx((-0.2, 0.1))
    assert interval["mean_over_sources"] == pytest.approx((0.1, 0.2))
    assert source_bootstrap(result) == interval
    narrow = source_bootstrap(result, coverage=0.4)  # the middle 40 %: the mixed draws only
    assert narrow["mean_abs"] == pytest.approx((0.125, 0.125)) and narrow["bias"] == pytest.approx((0.025, 0.025))


def test_a_median_over_sources_lets_no_single_source_move_a_constant():
    """Three sources: two favour grid point 1 gently, one favours point 5 steeply. Pooled by the mean, the steep
    source pulls the constant to 5; pooled by the median (SourcePooling.MEDIAN), the middle source's error
    decides, and the two that agree keep it at 1."""
    from pipesim.validation.loso import RowSensitivity, SourcePooling

    by_source = runs_by_source()
    gentle = [by_source["narayanan2021"][0], by_source["korthikanti2023"][0]]
    steep = by_source["qi2024"][0]
    preset = SYNC.grid.index(SYNC.preset_value)

    def row(run, target, slope):
        return RowSensitivity(run, 1.0, slope * (preset - target),
                              {SYNC.name: tuple(slope * (i - preset) for i in range(len(SYNC.grid)))})

    rows = [row(r, 1, 0.01) for r in gentle] + [row(steep, 5, 0.05)]
    assert fit(rows, (SYNC,)).values[SYNC.name] == SYNC.grid[5]
    assert fit(rows, (SYNC,), SourcePooling.MEDIAN).values[SYNC.name] == SYNC.grid[1]
    per_source = np.array([[1.0], [2.0], [9.0]])  # three sources, one combination
    assert SourcePooling.MEDIAN.combine(per_source)[0] == 2.0 and SourcePooling.MEAN.combine(per_source)[0] == 4.0


def test_modules_sharing_a_platform_are_one_source():
    from pipesim.validation.sources import PLATFORM_OF, platform_of

    assert platform_of("mosaicml_small2023") == "mosaicml2023" == PLATFORM_OF["mosaicml_small2023"]
    groups = runs_by_source()
    assert "mosaicml_small2023" not in groups and len(groups["mosaicml2023"]) == 65 + 144
    assert sum(len(v) for v in groups.values()) == len(PUBLISHED_RUNS)


def test_the_fit_finds_the_joint_minimum_wherever_it_starts():
    """Two constants coupled by one source's rows: there the error is a valley, zero wherever their grid indices
    sum to 6; a second source informs the first constant alone and wants index 5. Coordinate descent from index
    0 stops at (6, 0), the first constant's best with the second still at 0 (loss 0.001); the joint minimum is
    (5, 1), loss 0. The fit must land there whichever grid point the presets are at (the shifts are re-expressed
    from each start, so the error landscape is the same)."""
    from pipesim.validation.loso import RowSensitivity

    first = SYNC
    second = next(c for c in FITTED_CONSTANTS if c.name == "a100_p2p_efficiency")
    coupled = runs_by_source()["narayanan2021"][4:6]
    alone = runs_by_source()["qi2024"][:2]

    def landscape(run, i, j):  # log error at grid indices (i, j)
        return 0.02 * (i + j - 6) if run in coupled else 0.001 * (i - 5)

    for start in [(0, 0), (6, 0), (2, 5), (5, 1)]:
        a = replace(first, read=lambda chip, v=first.grid[start[0]]: v)
        b = replace(second, read=lambda chip, v=second.grid[start[1]]: v)
        rows = [RowSensitivity(run, 1.0, landscape(run, *start),
                               {a.name: tuple(landscape(run, i, start[1]) - landscape(run, *start) for i in range(7)),
                                **({b.name: tuple(landscape(run, start[0], j) - landscape(run, *start)
                                                  for j in range(7))} if run in coupled else {})})
                for run in coupled + alone]
        fitted = fit(rows, (a, b))
        assert (fitted.values[a.name], fitted.values[b.name]) == (first.grid[5], second.grid[1]), start


def test_the_memory_band_says_when_no_published_row_was_a_run_like_this():
    """Tensor and pipeline parallelism divide memory independently, so each validated alone covers both; ZeRO-3
    or ZeRO-2, context parallelism and experts need a row of the same combination (by hand, over the regimes
    the published rows have)."""
    from pipesim.analytic.error_band import LayoutFeature as F
    from pipesim.analytic.error_band import layout_features, unvalidated

    regimes = ((), ("pp",), ("tp",), ("zero-3",))
    assert unvalidated(layout_features(8, 4, 1, 1, False), regimes) == frozenset()  # tp + pp, ZeRO-1
    assert unvalidated(layout_features(1, 1, 1, 3, False), regimes) == frozenset()  # FSDP alone
    assert unvalidated(layout_features(8, 1, 1, 3, False), regimes) == {F.TENSOR_PARALLEL, F.SHARDED_WEIGHTS}
    assert unvalidated(layout_features(1, 1, 2, 0, False), regimes) == {F.CONTEXT_PARALLEL}
    assert unvalidated(layout_features(1, 1, 1, 0, True), regimes) == {F.EXPERTS}
    assert unvalidated(layout_features(8, 8, 1, 0, False), ((), ("pp",))) == {F.TENSOR_PARALLEL}


def test_the_regimes_in_the_bands_file_are_the_published_rows():
    """What the bands were measured on, as written by --update-bands: the step-time rows of every validated
    source, and every row that published memory."""
    from pipesim.analytic.validation_bands import MEMORY_REGIMES, STEP_REGIMES
    from pipesim.validation.loso import layout_regimes
    from pipesim.validation.sources import MEMORY_RUNS

    assert layout_regimes(MEMORY_RUNS) == MEMORY_REGIMES
    assert layout_regimes(r for runs in runs_by_source().values() for r in runs) == STEP_REGIMES


def test_a_report_marks_its_memory_band_unvalidated_outside_the_published_regimes(capsys):
    def band(*layout):
        assert main(["simulate", "--model", "llama3.1-70b", "--hardware", "h100-sxm", "--mb", "8",
                     "--recompute", "full", "--json", *layout]) == 0
        return json.loads(capsys.readouterr().out)["model_report"]["memory"]["peak_band"]

    megatron = band("--tp", "8", "--pp", "4", "--dp", "2", "--distributed-optimizer")
    fsdp_tp = band("--tp", "8", "--pp", "1", "--dp", "8", "--zero", "3")
    assert megatron["validated"] and "not validated" not in megatron["basis"]
    assert not fsdp_tp["validated"] and "none had tp and zero-3 together" in fsdp_tp["basis"]
    assert fsdp_tp["relative"] == megatron["relative"]  # the number is the one measured; only its claim changes


def test_a_step_time_band_says_when_no_published_row_had_the_layouts_features(capsys):
    """FSDP with tensor parallelism and mixture-of-experts models have no row in the step-time bands (the MoE
    rows are held out of them): their band is the kind's, marked; Megatron's 3D layout is validated."""
    from pipesim.analytic.error_band import layout_features

    megatron = error_band("h100-sxm", Precision.BF16, layout_features(8, 8, 1, 1, False))
    fsdp_tp = error_band("h100-sxm", Precision.BF16, layout_features(8, 1, 1, 3, False))
    moe = error_band("h100-sxm", Precision.BF16, layout_features(1, 4, 1, 1, True))
    assert megatron.validated and not fsdp_tp.validated and not moe.validated
    assert megatron.relative == fsdp_tp.relative == moe.relative
    assert "none had tp and zero-3 together" in fsdp_tp.text() and "none had pp and moe together" in moe.text()
    assert main(["simulate", "--model", "mixtral-8x7b", "--hardware", "h100-sxm", "--pp", "4", "--mb", "8",
                 "--tp", "2", "--dp", "2", "--ep", "2"]) == 0
    assert "moe together: not validated for this layout" in capsys.readouterr().out


def test_the_split_search_finds_the_whole_searchs_minimum():
    """Under the mean over sources the fit splits the search into groups of constants that share no row, beside
    the constants most rows have (loso._split_minimum); it must land where trying every combination does, ties
    included. Random rows: one constant moves most of them, three others pairwise-disjoint or overlapping."""
    import numpy as np

    from pipesim.validation import loso

    rng = np.random.default_rng(7)
    rows = 40
    members = [frozenset(range(0, 36)), frozenset(range(0, 10)), frozenset(range(8, 18)),
               frozenset(range(25, 40)), frozenset(range(30, 34))]
    shifts = [np.where(np.isin(np.arange(rows), sorted(m))[:, None], rng.normal(0, 0.05, (rows, n)), 0.0)
              for m, n in zip(members, (5, 4, 6, 3, 4), strict=True)]
    base = rng.normal(0, 0.08, rows)
    weights = rng.uniform(0.1, 1.0, rows)
    presets = [2, 1, 3, 0, 2]
    whole, _ = loso._exhaustive_minimum(base, shifts, presets, lambda e: weights @ np.abs(e))
    assert loso._split_minimum(base, shifts, presets, weights, members) == whole
    # a flat constant (no row moves) keeps its preset in both
    flat = [*shifts[:4], np.zeros((rows, 4))]
    flat_members = [*members[:4], frozenset()]
    whole, _ = loso._exhaustive_minimum(base, flat, presets, lambda e: weights @ np.abs(e))
    assert loso._split_minimum(base, flat, presets, weights, flat_members) == whole and whole[4] == presets[4]


def test_a_framework_record_states_its_rows_errors_and_their_direction_by_hand(monkeypatch):
    """A band names what the published runs of the --framework showed, left out, in words that follow the signs;
    Megatron's (the default, most rows' code) and no framework add nothing."""
    from pipesim.analytic import validation_bands
    from pipesim.analytic.error_band import framework_record

    monkeypatch.setattr(validation_bands, "FRAMEWORKS", {"nanotron": (2, 1, -0.212, -0.116),
                                                          "torchtitan": (3, 2, -0.05, 0.08),
                                                          "megatron-deepspeed": (1, 1, 0.174, 0.174)})
    assert framework_record(None) is None and framework_record("megatron") is None
    assert framework_record("nanotron").text() == ("the 2 published nanotron runs (1 source) came out 12–21% "
                                                   "faster than measured (pipesim too fast), left out")
    assert "(2 sources) came out -5%…+8% off the measured step" in framework_record("torchtitan").text()
    assert framework_record("megatron-deepspeed").text() == (
        "the 1 published megatron-deepspeed run (1 source) came out 17% slower than measured (pipesim too slow), "
        "left out")
    monkeypatch.setattr(validation_bands, "FRAMEWORKS", {})
    assert framework_record("nanotron").text() == "no published nanotron run validates --framework nanotron's settings"
    band = error_band("h100-sxm", Precision.BF16, framework="nanotron")
    assert band.text().endswith("; no published nanotron run validates --framework nanotron's settings)")
    assert band.to_dict()["framework"]["rows"] == 0


def test_the_frameworks_in_the_bands_file_are_the_rows_that_name_one(capsys):
    """FRAMEWORKS, as --update-bands writes it, counts the step-time rows naming each framework and their sources;
    simulate --framework quotes it beside the band, in text and JSON, and plan in its header."""
    from pipesim.analytic.validation_bands import FRAMEWORKS
    from pipesim.validation.loso import source_of

    named = [r for runs in runs_by_source().values() for r in runs if r.framework is not None]
    assert {name: rows for name, (rows, *_) in FRAMEWORKS.items()} == {
        f.value: sum(r.framework is f for r in named) for f in {r.framework for r in named}}
    for name, (_, sources, lowest, highest) in FRAMEWORKS.items():
        assert sources == len({source_of(r) for r in named if r.framework.value == name}) and lowest <= highest
    assert main(["simulate", "--model", "llama3.2-1b", "--framework", "nanotron", "--dp", "8", "--pp", "1",
                 "--mb", "4", "--json"]) == 0
    band = json.loads(capsys.readouterr().out)["model_report"]["step_time_band"]
    assert band["framework"]["name"] == "nanotron" and band["framework"]["rows"] == FRAMEWORKS["nanotron"][0]
    assert main(["simulate", "--model", "llama3.2-1b", "--dp", "8", "--pp", "1", "--mb", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_report"]["step_time_band"]["framework"] is None


def test_a_plan_under_a_framework_names_what_its_published_runs_showed():
    from pipesim.analytic.error_band import framework_record
    from pipesim.api.planning import plan

    space = dict(schedules=("1f1b",), recompute=("none",), zero=(1,), precision=("bf16",), cp=(1,),
                 micro_batch_sizes=(1,))
    nanotron = plan("llama3.2-1b", 8, 16, top=1, framework="nanotron", **space)
    megatron = plan("llama3.2-1b", 8, 16, top=1, **space)
    assert f"\nvalidation: {framework_record('nanotron').text()}" in nanotron.header()
    assert "validation:" not in megatron.header()


def test_a_step_group_record_states_its_rows_errors_their_direction_and_their_mean_by_hand(monkeypatch):
    """A run of one microbatch a step with replicated weights hears what the published runs of that group showed,
    left out: their span and, where the signs are mixed, which way they lean on average. Runs outside it hear
    nothing; a group no published row is of says so."""
    from pipesim.analytic import validation_bands
    from pipesim.analytic.error_band import StepGroup, group_records, step_groups

    one = frozenset({StepGroup.ONE_MICROBATCH})
    assert step_groups(1, 0, 64) == one and step_groups(1, 1, 8) == one  # DDP, or ZeRO-1 / distributed optimizer
    assert step_groups(2, 1, 64) == frozenset()  # two microbatches: the per-step work is shared
    assert step_groups(1, 3, 64) == step_groups(1, 2, 64) == frozenset()  # weights or gradients sharded per layer
    assert step_groups(1, 0, 1) == frozenset()  # no gradient sync at all
    monkeypatch.setattr(validation_bands, "STEP_GROUPS", {"one-microbatch": (32, 6, -0.454, 0.057, -0.113)})
    (record,) = group_records(one)
    assert record.text() == ("the 32 published runs of one microbatch a step with replicated weights (6 sources) "
                             "came out -45%…+6% off the measured step, on average 11% faster than measured "
                             "(pipesim too fast), left out")
    monkeypatch.setattr(validation_bands, "STEP_GROUPS", {"one-microbatch": (3, 2, -0.3, -0.1, -0.2)})
    assert "came out 10–30% faster than measured (pipesim too fast), left out" in group_records(one)[0].text()
    band = error_band("h100-sxm", Precision.BF16, groups=one)
    assert band.text().endswith(f"; {group_records(one)[0].text()})")
    assert band.to_dict()["groups"][0] | {} == {"group": "one-microbatch", "description": StepGroup.ONE_MICROBATCH
                                                .description, "rows": 3, "sources": 2, "lowest": -0.3,
                                                "highest": -0.1, "mean": -0.2}
    assert error_band("h100-sxm", Precision.BF16, groups=frozenset()).groups == ()
    monkeypatch.setattr(validation_bands, "STEP_GROUPS", {})
    assert group_records(one)[0].text() == ("no published run is of the one-microbatch group (runs of one microbatch "
                                            "a step with replicated weights)")


def test_the_step_groups_in_the_bands_file_are_the_rows_of_each_group(capsys):
    """STEP_GROUPS, as --update-bands writes it, counts the step-time rows of each group and their sources; simulate
    quotes it beside the band of a run of the group, in text and JSON, and not for one outside it."""
    from pipesim.analytic.validation_bands import STEP_GROUPS
    from pipesim.validation.loso import run_step_groups, source_of

    runs = [r for rows in runs_by_source().values() for r in rows]
    for name, (rows, sources, lowest, highest, mean) in STEP_GROUPS.items():
        members = [r for r in runs if any(g.value == name for g in run_step_groups(r))]
        assert rows == len(members) and sources == len({source_of(r) for r in members})
        assert lowest <= mean <= highest
    assert set(STEP_GROUPS) == {g.value for r in runs for g in run_step_groups(r)}
    one = ["simulate", "--model", "llama3.1-8b", "--dp", "64", "--pp", "1", "--mb", "1", "--zero", "1", "--json"]
    assert main(one) == 0
    band = json.loads(capsys.readouterr().out)["model_report"]["step_time_band"]
    assert [g["group"] for g in band["groups"]] == ["one-microbatch"]
    assert band["groups"][0]["rows"] == STEP_GROUPS["one-microbatch"][0]
    assert main([*one[:-2], "3", "--json"]) == 0  # ZeRO-3: weights sharded, not of the group
    assert json.loads(capsys.readouterr().out)["model_report"]["step_time_band"]["groups"] == []
    assert main([*one[:8], "2", *one[9:]]) == 0  # two microbatches
    assert json.loads(capsys.readouterr().out)["model_report"]["step_time_band"]["groups"] == []


def test_a_plan_marks_the_candidates_of_a_step_group_and_quotes_its_record():
    """plan marks a candidate of one microbatch a step with replicated weights "1mb", and its footnote quotes what
    the group's published runs showed; the data view lists each candidate's groups."""
    from pipesim.analytic.error_band import StepGroup, group_records
    from pipesim.api.planning import plan

    space = dict(schedules=("1f1b",), recompute=("none",), zero=(1, 3), precision=("bf16",), cp=(1,),
                 micro_batch_sizes=(1, 2))
    result = plan("llama3.2-1b", 8, 16, top=30, **space)
    text = result.text()
    rows = result.to_dict()["ranked"]
    lines = [line for line in text.splitlines() if line[:2].strip().isdigit()]
    assert len(lines) == len(rows) == len(result.ranked) > 1
    members = []
    for line, row, outcome in zip(lines, rows, result.ranked, strict=True):
        c = outcome.candidate  # one microbatch a step, weights replicated (ZeRO-1), some gradient sync
        one = c.microbatches == 1 and c.zero <= 1 and c.dp * c.cp > 1
        members.append(one)
        assert row["step_groups"] == (["one-microbatch"] if one else [])
        assert (" 1mb" in line) == one
    assert any(members) and not all(members)
    (record,) = group_records(frozenset({StepGroup.ONE_MICROBATCH}))
    assert f"1mb: {sum(members)} of the listed configurations are of this group; {record.text()}" in text


def test_a_communication_bound_step_hears_what_such_published_steps_showed_by_hand(monkeypatch):
    """A step whose busiest rank waits on communication for a tenth of it or more hears how such published steps
    came out against their own sources' other runs, left out; a step below the threshold, or a band file whose
    sources never had rows on both sides, hears nothing."""
    from pipesim.analytic import validation_bands
    from pipesim.analytic.error_band import communication_record
    from pipesim.analytic.time_breakdown import RankTime

    rank = RankTime(0, compute=8.0, exposed_comm=1.0, p2p_wire=0.25, p2p_sync=0.25, grad_sync=0.5, optimizer=0.0,
                    idle=0.0)  # a 10 s step, 2 s of it waiting on communication
    assert rank.communication == pytest.approx(2.0) and rank.communication_share == pytest.approx(0.2)
    monkeypatch.setattr(validation_bands, "COMMUNICATION", (17, 11, -0.034))
    assert communication_record(0.09) is None and communication_record(None) is None
    record = communication_record(0.2)
    assert record.text() == ("20% of the step waits on communication: published steps that waited for 10% or more "
                             "came out 3.4% more optimistic (pipesim too fast) than their own sources' other runs "
                             "(the median of 17 sources, 11 leaning that way), left out")
    band = error_band("h100-sxm", Precision.BF16, communication_share=0.2)
    assert band.text().endswith(f"; {record.text()})")
    assert band.to_dict()["communication"] == {"share": 0.2, "threshold": 0.1, "sources": 17, "leaning": 11,
                                               "median_difference": -0.034}
    assert error_band("h100-sxm", Precision.BF16, communication_share=0.05).communication is None
    monkeypatch.setattr(validation_bands, "COMMUNICATION", (0, 0, 0.0))
    assert communication_record(0.5) is None


def test_the_communication_contrast_compares_each_source_with_itself_by_hand():
    """loso.communication_contrast: the left-out errors of each source's communication-bound rows against its
    others; a source with rows on one side only does not count."""
    from types import SimpleNamespace

    from pipesim.analytic.time_breakdown import RankTime
    from pipesim.validation.loso import SourceResult, ValidationResult, communication_contrast

    def row(waiting: float) -> SimpleNamespace:  # a 1 s step, ``waiting`` of it in exposed collectives
        return SimpleNamespace(report=SimpleNamespace(busiest=RankTime(0, 1.0 - waiting, waiting, 0.0, 0.0, 0.0,
                                                                         0.0, 0.0)))

    def source(name: str, errors: list[float], waits: list[float]) -> SourceResult:
        return SourceResult(name, [], errors, errors, None, [], [row(w) for w in waits])

    result = ValidationResult(None, [source("a", [-0.10, -0.02], [0.3, 0.0]),  # bound 8 points more optimistic
                                     source("b", [0.05, 0.01], [0.2, 0.05]),  # 4 points less
                                     source("c", [-0.07, -0.01], [0.15, 0.01]),  # 6 points more
                                     source("d", [-0.3], [0.5])])  # one side only
    assert communication_contrast(result) == (3, 2, -0.06)
    assert communication_contrast(ValidationResult(None, [source("d", [-0.3], [0.5])])) == (0, 0, 0.0)


def test_the_communication_record_in_the_bands_file_is_quoted_by_simulate(capsys):
    """COMMUNICATION, as --update-bands writes it, is quoted beside the band of a step whose busiest rank waits on
    communication for a tenth of it or more, with that rank's own share (text and JSON), and not beside a
    compute-bound step's."""
    from pipesim.analytic.validation_bands import COMMUNICATION

    sources, leaning, median = COMMUNICATION
    assert 0 < leaning <= sources and median != 0
    heavy = ["simulate", "--model", "llama2-70b", "--tp", "8", "--pp", "8", "--dp", "2", "--mb", "64", "-s",
             "interleaved", "--recompute", "selective", "--sequence-parallel", "--distributed-optimizer", "--json"]
    assert main(heavy) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    busiest = min(report["time_per_rank"], key=lambda t: t["idle_s"])
    step = sum(v for k, v in busiest.items() if k.endswith("_s") and k != "a2a_hidden_s")
    waiting = sum(busiest[k] for k in ("exposed_comm_s", "grad_sync_s", "p2p_wire_s", "p2p_sync_s", "a2a_s"))
    band = report["step_time_band"]["communication"]
    assert band["share"] == pytest.approx(waiting / step) and band["share"] >= 0.1
    assert (band["sources"], band["leaning"], band["median_difference"]) == COMMUNICATION
    assert main(["simulate", "--model", "llama3.1-8b", "--dp", "8", "--mb", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_report"]["step_time_band"]["communication"] is None


def test_a_plan_marks_the_candidates_that_wait_on_communication():
    """plan marks a listed candidate whose step waits on communication for a tenth of it or more with that share
    ("comm13%") and quotes the published runs' record once below the ranking; the data view gives each listed
    candidate's share."""
    from pipesim.analytic.error_band import communication_record
    from pipesim.api.planning import plan

    space = dict(schedules=("1f1b",), recompute=("none",), zero=(1,), precision=("bf16",), cp=(1,),
                 micro_batch_sizes=(1, 2))
    result = plan("llama3.2-1b", 8, 16, top=30, **space)
    text = result.text()
    rows = result.to_dict()["ranked"]
    lines = [line for line in text.splitlines() if line[:2].strip().isdigit()]
    bound = [row["communication_share"] >= 0.1 for row in rows]
    assert any(bound) and not all(bound)
    for line, row, waits in zip(lines, rows, bound, strict=True):
        assert 0 <= row["communication_share"] < 1
        assert (f" comm{row['communication_share']:.0%}" in line) == waits
    lean = communication_record(0.5).lean_text()
    assert f"comm: {sum(bound)} of the listed configurations wait on communication for 10% of the step or more" in text
    assert lean in text


def test_residual_groups_lean_over_rows_and_over_sources_by_hand():
    """A group's lean is summarised over its rows and over its sources; it is one-sided only when enough sources
    (3), nearly all of them (4 in 5), lean the way of their median, and by 5 % or more."""
    from pipesim.validation.residual_groups import group_leans

    run = PUBLISHED_RUNS[0]
    small, large = replace(run, gpus=8), replace(run, gpus=1024)
    rows = [("a", small, -0.10), ("a", small, -0.20), ("b", small, -0.06), ("c", small, -0.08), ("d", small, +0.02),
            ("e", small, -0.30), ("a", large, +0.04), ("b", large, -0.01), ("c", large, +0.02)]
    features = {"small": lambda r: r.gpus <= 8, "large": lambda r: r.gpus >= 1024, "none": lambda r: False}
    small_lean, large_lean = group_leans(rows, features)  # a feature no row has is left out
    assert (small_lean.feature, small_lean.rows, small_lean.sources) == ("small", 6, 5)
    assert small_lean.mean == pytest.approx((-0.10 - 0.20 - 0.06 - 0.08 + 0.02 - 0.30) / 6)
    # source means: a -0.15, b -0.06, c -0.08, d +0.02, e -0.30; their median -0.08; 4 of 5 lean that way
    assert small_lean.source_median == pytest.approx(-0.08) and small_lean.agreeing == 4
    assert (small_lean.source_low, small_lean.source_high) == (pytest.approx(-0.30), pytest.approx(0.02))
    assert small_lean.one_sided
    # three sources, two leaning the median's way (+0.02): not enough agreement, and too small a lean anyway
    assert large_lean.sources == 3 and large_lean.agreeing == 2 and not large_lean.one_sided
    assert group_leans(rows[:4], features)[0].one_sided  # three sources, all leaning -6…-15 %
    assert not group_leans(rows[:3], features)[0].one_sided  # two sources are too few
    faint = [("a", small, -0.02), ("b", small, -0.03), ("c", small, -0.01)]
    assert not group_leans(faint, features)[0].one_sided  # all one way, but within a source's own scatter


def test_layers_per_virtual_stage_by_hand():
    """The two interleaving features split the interleaved rows by how many layers a virtual stage holds."""
    from pipesim.validation.residual_groups import FEATURES, layers_per_virtual_stage
    from pipesim.validation.runs import PublishedRun

    def row(model, pp, chunks):
        return PublishedRun("job", model, "h100-sxm", 512, 2048, tp=4, pp=pp, chunks=chunks, step_s=1.0)

    thin = FEATURES["interleaved, one layer a virtual stage"]
    thick = FEATURES["interleaved, 1.5+ layers a virtual stage"]
    v12, v4 = row("gpt3-175b", 8, 12), row("gpt3-175b", 8, 4)  # 96 layers: 1 and 3 a virtual stage
    assert (layers_per_virtual_stage(v12), layers_per_virtual_stage(v4)) == (1.0, 3.0)
    assert thin(v12) and not thick(v12) and thick(v4) and not thin(v4)
    v8 = row("llama3.1-405b", 8, 8)  # 126 layers over 64 virtual stages: 1.97, the first and last one fewer
    assert layers_per_virtual_stage(v8) == pytest.approx(126 / 64) and thick(v8)
    plain = row("gpt3-175b", 8, 1)
    assert not thin(plain) and not thick(plain)  # not interleaved
    assert layers_per_virtual_stage(replace(plain, model="not-a-preset")) is None


def test_setting_pairs_by_hand():
    """setting_pairs: rows of one job differing in exactly one setting make a pair, taken from the lower value to
    the higher; its residual is log(measured ratio) − log(predicted ratio). Three rows of one job: tp 1 and tp 2
    at micro-batch 1 (a tp pair), tp 2 at micro-batch 2 (a micro-batch pair with the second; with the first it
    differs in two settings, no pair); a fourth of another job pairs with none."""
    from types import SimpleNamespace

    from pipesim.validation.runs import PublishedRun
    from pipesim.validation.setting_pairs import setting_effects, setting_pairs

    def row(tp, micro_batch, published, predicted, batch=64):
        run = PublishedRun("job", "llama2-7b", "h100-sxm", 16, batch, tp=tp, micro_batch=micro_batch, seq_len=4096,
                           step_s=published)
        return SimpleNamespace(run=run, published_step_s=published, report=SimpleNamespace(step_time=predicted))

    rows = [row(1, 1, 10.0, 10.0), row(2, 1, 12.0, 11.0), row(2, 2, 11.0, 11.0), row(1, 1, 9.0, 9.0, batch=128)]
    pairs = setting_pairs(rows, lambda run: "source")
    assert sorted(p.setting for p in pairs) == ["micro-batch", "tp"]
    tp = next(p for p in pairs if p.setting == "tp")
    assert (tp.low, tp.high) == (rows[0], rows[1])
    assert tp.measured_ratio == pytest.approx(1.2) and tp.predicted_ratio == pytest.approx(1.1)
    assert tp.residual == pytest.approx(math.log(1.2 / 1.1))  # raising tp cost more than predicted
    batch = next(p for p in pairs if p.setting == "micro-batch")
    assert batch.residual == pytest.approx(math.log(11 / 12) - math.log(11 / 11))
    effects = {e.setting: e for e in setting_effects(pairs)}
    assert effects["tp"].median_residual == pytest.approx(1.2 / 1.1 - 1) and effects["tp"].agreeing == 1.0
    assert effects["tp"].pairs == 1 and effects["tp"].sources == 1
