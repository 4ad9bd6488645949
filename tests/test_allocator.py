"""The caching allocator's reserved peak beside the allocated one (pipesim.analytic.allocator), by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesim.analytic.allocator import RESERVED_SHARE, RESERVED_SHARE_RANGE, MemoryMeasure, reserved_peak
from pipesim.analytic.memory_gib import GIB
from pipesim.cli.main import main
from pipesim.validation.allocator_pairs import PAIRS, median_share, share_range
from pipesim.validation.runs import predict
from pipesim.validation.sources import MEMORY_RUNS


def test_reserved_peak_by_hand():
    # 40 GiB allocated on an 80 GiB device: 5.3 % more, 42.12 GiB
    assert reserved_peak(40 * GIB, 80 * GIB, 0.053) == pytest.approx(42.12 * GIB)
    # 78 GiB: 82.13 would pass the device, and the allocator frees its cache before it does: 80
    assert reserved_peak(78 * GIB, 80 * GIB, 0.053) == 80 * GIB
    # a run that does not fit stays at its allocated peak (pipesim warns about it)
    assert reserved_peak(85 * GIB, 80 * GIB, 0.053) == 85 * GIB


@given(allocated=st.floats(0, 200), capacity=st.floats(1, 200), share=st.floats(0, 1))
def test_reserved_is_at_least_allocated_and_at_most_the_device(allocated, capacity, share):
    reserved = reserved_peak(allocated, capacity, share)
    assert allocated <= reserved <= max(allocated, capacity)


def test_the_share_is_the_median_of_the_published_pairs():
    assert len(PAIRS) == 27
    low, high = share_range()
    assert abs(RESERVED_SHARE - median_share()) < 0.0005
    assert abs(RESERVED_SHARE_RANGE[0] - low) < 0.0005 and abs(RESERVED_SHARE_RANGE[1] - high) < 0.005
    # every pair is a reserved peak above an allocated one, the share what the log's two numbers give
    assert all(p.max_reserved_mib >= p.max_allocated_mib for p in PAIRS)
    first = next(p for p in PAIRS if p.index_id == 51780658802)
    assert first.reserved_share == pytest.approx(48934.0 / 47104.3 - 1)


def test_a_reserved_row_is_compared_with_the_reserved_peak():
    rows = [r for r in MEMORY_RUNS if r.memory_measure is MemoryMeasure.RESERVED]
    assert rows, "torchtitan's rows publish max_reserved"
    as_reserved = predict(rows[0])
    memory = as_reserved.report.memory
    expected = reserved_peak(memory.peak.total, memory.capacity_gib * GIB)
    assert as_reserved.predicted_memory_gib == pytest.approx(expected / GIB)
    assert expected > memory.peak.total  # 74 GiB of 96: the share applies in full
    as_allocated = replace(as_reserved, run=replace(rows[0], memory_measure=MemoryMeasure.ALLOCATED))
    assert as_allocated.predicted_memory_gib == pytest.approx(memory.peak.total / GIB)


def test_simulate_reports_both_peaks(capsys):
    args = ["simulate", "--model", "llama2-7b", "--hardware", "h100-sxm", "--pp", "4", "--mb", "8", "--dp", "2"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "GiB allocated" in text and "reserved ≈ " in text and "max_memory_reserved" in text
    assert main([*args, "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)["model_report"]["memory"]
    assert memory["peak_reserved_gib"] == pytest.approx(
        reserved_peak(memory["peak_gib"] * GIB, memory["capacity_gib"] * GIB) / GIB)
    assert memory["reserved_share"] == RESERVED_SHARE
    assert all(r["reserved_gib"] >= r["total_gib"] for r in memory["ranks"])


def test_a_run_over_the_capacity_is_not_said_to_reserve_at_most_the_capacity(capsys):
    # 405B on 8 GPUs cannot fit: what the allocator reserves is at least what is allocated, beyond the capacity
    args = ["simulate", "--model", "llama3.1-405b", "--hardware", "h100-sxm", "--pp", "8", "--mb", "8"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "reserved ≈" not in text and "at most the capacity" not in text
    assert "reserved: at least the" in text and "more than the 79.6 GiB there are" in text and "warning: rank" in text


def test_plan_writes_the_reserved_peak_beside_the_allocated_one():
    from pipesim.api import plan

    result = plan("llama2-7b", 8, 32, top=2, hardware="h100-sxm", schedules=("1f1b",), precision=("bf16",))
    for row in result.to_dict()["ranked"]:
        assert row["peak_reserved_gib"] == pytest.approx(reserved_peak(row["peak_gib"] * GIB, 79.6 * GIB) / GIB)
        assert row["peak_reserved_gib"] > row["peak_gib"]
    frame = result.candidates
    simulated = frame[frame["peak_gib"].notna()]
    assert (simulated["peak_reserved_gib"] >= simulated["peak_gib"]).all()
    assert frame.loc[frame["peak_gib"].isna(), "peak_reserved_gib"].isna().all()
