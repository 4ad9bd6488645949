"""Validation forward in time (pipesim.validation.forward): a source is predicted with constants fitted on the sources
published before it alone, and a constant no earlier row informs is said to be a preset chosen later."""

import re
from dataclasses import replace

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.constants import FITTED_CONSTANTS
from pipesim.validation.forward import forward_in_time, prospective_by_kind, prospective_errors
from pipesim.validation.runs import Comparison, predict
from pipesim.validation.sources import PUBLISHED, SOURCE_MODULES, published_month, runs_by_source

SYNC = next(c for c in FITTED_CONSTANTS if c.name == "p2p_sync_overhead")
PIPELINES = [r for r in runs_by_source()["narayanan2021"] if r.pp > 1][:3]
LOW, HIGH = 0.15e-3, 1.8e-3


def _generated_by(owner: dict[int, float]):
    """A predictor whose 'published' step time of each row is pipesim's own at that row's overhead value."""
    truth = {id(r): predict(r, SYNC.apply(CHIP_PRESETS[r.chip], owner[id(r)])).report.step_time for r in PIPELINES}

    def predictor(run, chip=None):
        c = predict(run, chip)
        published = replace(run, hfu_tflops=None, mfu_tflops=None, tokens_per_gpu=None, step_s=truth[id(run)])
        return Comparison(published, c.report, truth[id(run)])

    return predictor


def test_a_source_is_predicted_from_the_earlier_sources_alone():
    """Source a (2021) was made at a low overhead, b (2022) at a high one, and c (2022, a's value) shares b's
    month: a has nothing earlier, so its rows keep the preset, which is said to be chosen later; b and c are
    each predicted with a's value alone (not with each other's: the same month is not earlier)."""
    a, b, c = PIPELINES[:1], PIPELINES[1:2], PIPELINES[2:]
    owner = {id(r): LOW for r in a + c} | {id(r): HIGH for r in b}
    month = {id(r): "2021-01" for r in a} | {id(r): "2022-06" for r in b + c}
    results = forward_in_time({"a": a, "b": b, "c": c}, month_of=lambda run: month[id(run)], constants=(SYNC,),
                              predictor=_generated_by(owner))
    by = {r.source: r for r in results}
    assert by["a"].earlier_sources == () and by["a"].from_later == ("p2p_sync_overhead",)
    assert not by["a"].prospective and by["a"].fit.values == {}
    for name in ("b", "c"):
        assert by[name].earlier_sources == ("a",) and by[name].prospective
        assert by[name].fit.values["p2p_sync_overhead"] == LOW
    assert all(e < 0 for e in by["b"].forward)  # made at the high overhead, predicted at the low one: too fast
    assert max(abs(e) for e in by["c"].forward) < 1e-9  # a's value is c's own
    assert prospective_errors(results) == by["b"].forward + by["c"].forward
    # by kind (A100 in BF16, all three), the prospective rows beside their left-out errors, as the same rows
    left_out = {id(r): 0.01 * n for n, r in enumerate(PIPELINES)}
    assert prospective_by_kind(results, left_out) == {"a100-bf16": (by["b"].forward + by["c"].forward, [0.01, 0.02])}


def test_rows_of_one_source_from_two_months_are_predicted_apart():
    """A source whose rows two months published (MosaicML's tables) is predicted month by month, each with what
    was published before it: its later rows see the other source's earlier month, its earlier rows do not."""
    a, b = PIPELINES[:2], PIPELINES[2:]
    owner = {id(r): LOW for r in a + b}
    month = {id(a[0]): "2021-01", id(a[1]): "2023-01"} | {id(r): "2022-01" for r in b}
    results = forward_in_time({"a": a, "b": b}, month_of=lambda run: month[id(run)], constants=(SYNC,),
                              predictor=_generated_by(owner))
    assert [(r.source, r.month, r.earlier_sources) for r in results] == [
        ("a", "2021-01", ()), ("a", "2023-01", ("b",)), ("b", "2022-01", ("a",))]
    assert [len(r.runs) for r in results] == [1, 1, 1]


def test_every_step_time_source_has_the_month_its_rows_were_published():
    assert set(PUBLISHED) == set(SOURCE_MODULES)
    assert all(re.fullmatch(r"20[12]\d-(0[1-9]|1[0-2])", month) for month in PUBLISHED.values())
    assert published_month(PIPELINES[0]) == "2021-04"  # Narayanan et al., arXiv 2104.04473
