"""A change to the chip presets tried on the published rows (pipesim/validation/what_if.py)."""

from __future__ import annotations

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.errors import PipesimError
from pipesim.validation.runs import predict
from pipesim.validation.sources import runs_by_source
from pipesim.validation.what_if import ChangeOp, ChipChange, SourceDelta, WhatIf, changed, compare, numeric_fields


def test_a_change_parses_scales_or_sets_and_touches_only_its_chips():
    scale = ChipChange.parse("gemm_efficiency*0.5", ["a100-80gb"])
    assert (scale.field, scale.op, scale.amount) == ("gemm_efficiency", ChangeOp.SCALE, 0.5)
    a100, h100 = CHIP_PRESETS["a100-80gb"], CHIP_PRESETS["h100-sxm"]
    assert scale.apply(a100).gemm_efficiency == pytest.approx(a100.gemm_efficiency * 0.5)
    assert scale.apply(h100) is h100
    setting = ChipChange.parse("host_kernel_overhead = 2e-5")
    assert setting.op is ChangeOp.SET and setting.apply(h100).host_kernel_overhead == 2e-5
    assert changed(a100, [scale, setting]) == scale.apply(setting.apply(a100))
    # an integer field stays an integer
    assert isinstance(ChipChange.parse("sm_count*0.5").apply(a100).sm_count, int)
    # a field the chip leaves unset is not scaled; a value outside the field's bounds is refused as a chip file's
    assert a100.fp8_peak_flops is None and ChipChange.parse("fp8_peak_flops*2").apply(a100) is a100
    with pytest.raises(PipesimError, match="collective_efficiency"):
        ChipChange.parse("collective_efficiency=-1").apply(a100)


@pytest.mark.parametrize("text, chips, message", [
    ("gemm_efficiency", (), "write FIELD"),
    ("name*2", (), "not a numeric chip field"),
    ("gemm_efficiency*fast", (), "not a number"),
    ("gemm_efficiency*0.9", ("a100",), "no such preset"),
])
def test_a_bad_change_is_one_line_naming_it(text, chips, message):
    with pytest.raises(PipesimError, match=message) as error:
        ChipChange.parse(text, chips)
    assert "\n" not in str(error.value)


def test_fields_offered_are_the_numeric_ones():
    names = numeric_fields()
    assert {"gemm_efficiency", "intra_node_bandwidth", "inter_node_bandwidth", "sm_count"} <= set(names)
    assert "name" not in names and "nvlink_collective_shares" not in names and "measured" not in names


def test_summaries_weigh_rows_and_sources_as_said():
    result = WhatIf((), False, (SourceDelta("a", (0.1, -0.1), (0.0, 0.0)), SourceDelta("b", (-0.4,), (-0.2,))))
    assert result.pooled(after=False)["mean_abs"] == pytest.approx(0.2)  # (0.1 + 0.1 + 0.4) / 3 rows
    assert result.over_sources(after=False) == pytest.approx((0.25, -0.2))  # (0.1 + 0.4) / 2, (0 - 0.4) / 2
    assert result.over_sources(after=True) == pytest.approx((0.1, -0.1))
    assert result.sources[0].moved == pytest.approx(-0.1)


def test_a_change_moves_exactly_the_rows_on_its_chips():
    """Half the A100's GEMM rate: every A100 row's prediction grows, no other chip's row moves, and the 'before'
    errors are the presets' own."""
    by_source = {name: runs[::12] for name, runs in runs_by_source().items()}
    change = ChipChange.parse("gemm_efficiency*0.5", ["a100-80gb"])
    result = compare(by_source, [change])
    for delta in result.sources:
        runs = [r for r in by_source[delta.source] if r.measures_step]
        for run, before, after in zip(runs, delta.before, delta.after, strict=True):
            assert before == pytest.approx(predict(run).step_error, rel=1e-12)
            if run.chip == "a100-80gb":
                assert after > before
            else:
                assert after == pytest.approx(before, rel=1e-12)
    assert any(r.chip == "a100-80gb" for runs in by_source.values() for r in runs)
