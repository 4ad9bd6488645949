"""pipesim.validation.chip_pairs: the same configuration on two chips, and the evidence it gives for Hopper's
training GEMM ratio (MosaicML's H100 and A100 tables, one software stack)."""

from dataclasses import replace

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.chip_pairs import chip_pairs, configuration, median_ratio
from pipesim.validation.sources import rows_of

MOSAIC = rows_of("mosaicml2023")


def test_pairs_are_the_configurations_run_on_both_chips():
    pairs = chip_pairs(MOSAIC, "h100-sxm", "a100-80gb")
    h100 = {configuration(r) for r in MOSAIC if r.chip == "h100-sxm"}
    a100 = {configuration(r) for r in MOSAIC if r.chip == "a100-80gb"}
    assert len(pairs) == len(h100 & a100) > 10
    for pair in pairs:
        assert configuration(pair.first.run) == configuration(pair.second.run)
        assert (pair.first.run.chip, pair.second.run.chip) == ("h100-sxm", "a100-80gb")
        assert pair.ratio == (1 + pair.first.step_error) / (1 + pair.second.step_error)


def test_at_the_benchmarks_rate_the_h100_is_too_fast_against_the_a100_and_the_ratio_closes_part_of_it():
    bench = replace(CHIP_PRESETS["h100-sxm"], training_gemm_ratio=1.0)
    raw = median_ratio(chip_pairs(MOSAIC, "h100-sxm", "a100-80gb", lambda n: bench if n == "h100-sxm" else None))
    shipped = median_ratio(chip_pairs(MOSAIC, "h100-sxm", "a100-80gb"))
    # the evidence: same software and configurations, pipesim's H100 ≥ 3 % too fast (≥ 5 % until the A100 presets'
    # attention took FlashAttention-2's measured shape, which sped the A100's long-sequence rows: 0.958 now)
    assert raw < 0.97
    # In sample: MosaicML's H100 rows are among those the shipped ratio was fitted on. At 0.94 (fitted with every
    # source weighted alike, since the collectives inside an H100 node run at their measured shares) it closes a
    # quarter of the gap on these pairs (at 0.86 and 0.90, more than half): the other Hopper sources want less of
    # a correction. It must still move the pairs the right way.
    assert abs(shipped - 1) < abs(raw - 1)
