"""Scaling groups and their drift (pipesim.validation.scale_drift), by hand on made-up comparisons."""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from pipesim.validation.runs import Comparison, PublishedRun
from pipesim.validation.scale_drift import scaling_groups, summarise_drift

BASE = PublishedRun("A source, Table 1", "gpt3-175b", "a100-80gb", 64, 512, tp=8, pp=8, step_s=10.0)


def _comparison(run: PublishedRun, error: float) -> Comparison:
    report = SimpleNamespace(step_time=run.step_s * (1 + error))
    return Comparison(run, report, run.step_s)


def test_a_group_drifts_by_its_slope_per_doubling():
    # one configuration on 64, 128 and 512 GPUs, its error falling one point per doubling; another on one size
    drifting = [_comparison(replace(BASE, gpus=n), e) for n, e in [(64, 0.05), (128, 0.04), (512, 0.02)]]
    alone = [_comparison(replace(BASE, tp=4, gpus=64), -0.30)]
    rising = [_comparison(replace(BASE, micro_batch=2, gpus=n), e) for n, e in [(64, -0.02), (256, 0.02)]]
    groups = scaling_groups(drifting + alone + rising)
    assert len(groups) == 2  # the lone size is no group
    by_slope = sorted(groups, key=lambda g: g.slope)
    assert by_slope[0].gpus == (64, 128, 512) and by_slope[0].slope == pytest.approx(-0.01)
    assert by_slope[1].slope == pytest.approx(0.02)  # +4 points over two doublings
    summary = summarise_drift(groups)
    assert (summary.groups, summary.negative) == (2, 1)
    assert summary.median_slope == pytest.approx(0.005) and summary.mean_slope == pytest.approx(0.005)
