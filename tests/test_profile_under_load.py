"""pipesim profile under load: its GEMM burn (pipesim.profile.sustained: the settled rate, the ratio it writes as
``sustained_clock_ratio``, the cost model running a measured chip's GEMM and attention tables at it) and GEMMs
timed beside all-reduces (pipesim.profile.contention: ``collective_sm_share``, the overlaps' σ)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import chip_from_dict
from pipesim.analytic.kernels import attention_core_times, gemm_time, layer_times
from pipesim.analytic.layout import Layout, Precision
from pipesim.analytic.measured import GemmDtype
from pipesim.cli.main import main
from pipesim.profile import sustained
from pipesim.profile.chip_file import Measurements, chip_dict
from pipesim.profile.compare import preset_gaps
from pipesim.profile.device import open_device
from pipesim.profile.timing import QUICK
from tests.test_profile_tables import MODEL, chip_data


def test_the_settled_rate_is_the_median_of_the_last_third():
    # nine windows: the last three, 6, 7 and 5, whose median is 6 (the first six are the clock coming down)
    assert sustained.settled_rate([10, 10, 9, 9, 8, 7, 6, 7, 5]) == 6
    assert sustained.settled_rate([3.0]) == 3.0  # one window is its own tail
    assert sustained.settled_rate([4, 2]) == 2  # round(2 / 3) = 1 window
    with pytest.raises(ValueError, match="at least one"):
        sustained.settled_rate([])


def test_the_ratio_is_capped_at_the_short_runs_rate():
    run = sustained.SustainedRun(1024, GemmDtype.FP32, burst_flops_per_s=100.0, sustained_flops_per_s=92.0,
                                 seconds=5.0, windows=20)
    assert run.ratio == pytest.approx(0.92)
    assert dataclasses.replace(run, sustained_flops_per_s=103.0).ratio == 1.0  # above the short run: noise


def test_a_burn_on_this_cpu_times_windows_for_as_long_as_asked():
    device = open_device(1, 0, 1)
    run = sustained.burn(device, 0.3, QUICK)
    assert run.size == sustained.BURN_SIZE[False] and run.dtype is GemmDtype.FP32
    assert run.seconds >= 0.3 and run.windows >= 1
    assert run.burst_flops_per_s > 0 and run.sustained_flops_per_s > 0 and 0 < run.ratio <= 1


def _measured(ratio_run: sustained.SustainedRun | None) -> dict:
    from pipesim.profile.device import Device, DeviceKind

    m = Measurements(GemmDtype.FP32)
    m.gemm = chip_from_dict(chip_data(), "t").measured.gemm
    m.stream = chip_from_dict(chip_data(), "t").measured.stream
    m.sustained = ratio_run
    return chip_dict(m, Device(DeviceKind.CPU, "hand CPU", 1, 0, 1), 16.0, {"device": "hand"}, "hand")


def test_the_chip_file_writes_the_measured_ratio_or_says_it_was_not_measured():
    run = sustained.SustainedRun(1024, GemmDtype.FP32, 1.0e11, 0.9e11, 5.0, 20)
    data = _measured(run)
    assert data["sustained_clock_ratio"] == pytest.approx(0.9)
    notes = " ".join(data["measured"]["notes"])
    assert "sustained_clock_ratio = a 1024³ fp32 GEMM's settled rate over a 5 s burn" in notes
    chip = chip_from_dict(data, "t")
    assert chip.sustained_clock_ratio == pytest.approx(0.9)
    gaps = {g.constant: g for g in preset_gaps(chip, CHIP_PRESETS["h100-sxm"])}
    assert gaps["sustained_clock_ratio"].measured == pytest.approx(0.9)
    assert gaps["sustained_clock_ratio"].preset == CHIP_PRESETS["h100-sxm"].sustained_clock_ratio
    skipped = _measured(None)
    assert "sustained_clock_ratio" not in skipped
    assert "sustained_clock_ratio: not measured (--sustain-seconds 0)" in " ".join(skipped["measured"]["notes"])
    assert "sustained_clock_ratio" not in {g.constant for g in preset_gaps(chip_from_dict(skipped, "t"),
                                                                          CHIP_PRESETS["h100-sxm"])}


def test_the_cost_model_runs_a_measured_table_at_the_sustained_clock():
    """The tables are short runs: at a sustained ratio of 0.8 every GEMM and attention time is 1/0.8 of the
    table's, the memory-bound kernels are not (HBM is not clocked down with the SMs)."""
    short = chip_from_dict(chip_data(), "t")
    burned = dataclasses.replace(short, sustained_clock_ratio=0.8)
    assert gemm_time(32, 192, 64, burned, Precision.BF16) == pytest.approx(
        gemm_time(32, 192, 64, short, Precision.BF16) / 0.8, rel=1e-12)
    layout = Layout(tp=1)
    a, b = attention_core_times(MODEL, layout, short), attention_core_times(MODEL, layout, burned)
    assert b.forward == pytest.approx(a.forward / 0.8) and b.backward_input == pytest.approx(a.backward_input / 0.8)
    # the layer: its GEMMs and attention slow by 1/0.8, its element-wise bytes keep the stream rate
    gemms_and_attention = layer_times(MODEL, layout, short).forward - _elementwise_forward(short)
    assert layer_times(MODEL, layout, burned).forward == pytest.approx(
        gemms_and_attention / 0.8 + _elementwise_forward(short), rel=1e-9)
    # a preset (no tables) is untouched by this path: its ratio scales the roofline as before
    h100 = CHIP_PRESETS["h100-sxm"]
    assert gemm_time(4096, 4096, 4096, h100, Precision.BF16) == gemm_time(
        4096, 4096, 4096, dataclasses.replace(h100, measured=None), Precision.BF16)


def _elementwise_forward(chip) -> float:
    from pipesim.analytic.kernels import elementwise_bytes

    return elementwise_bytes(MODEL, Layout(tp=1), MODEL.micro_batch * MODEL.seq_len) / chip.stream_bandwidth


def test_profile_writes_the_ratio_and_zero_seconds_skips_the_burn(tmp_path, capsys):
    out = tmp_path / "cpu.yaml"
    assert main(["profile", "-o", str(out), "--quick", "--threads", "1", "--no-progress",
                 "--sustain-seconds", "0.3"]) == 0
    printed = capsys.readouterr().out
    data = yaml.safe_load(out.read_text())
    assert 0 < data["sustained_clock_ratio"] <= 1 and "sustained GEMM rate" in printed
    # the kernels PyTorch cannot load vectorised, timed as the cost model counts their bytes
    assert all(0 < data[key] <= 1 for key in ("strided_memory_efficiency", "converting_memory_efficiency"))
    kernels = {row["kernel"] for row in data["measured"]["stream"]}
    assert {"strided_glu", "rms_norm_chain"} <= kernels
    skipped = tmp_path / "skipped.yaml"
    assert main(["profile", "-o", str(skipped), "--quick", "--threads", "1", "--no-progress",
                 "--sustain-seconds", "0"]) == 0
    capsys.readouterr()
    assert "sustained_clock_ratio" not in yaml.safe_load(skipped.read_text())
    assert main(["profile", "-o", str(tmp_path / "bad.yaml"), "--sustain-seconds", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pipesim: error:") and "--sustain-seconds" in err and "\n" not in err
    assert not (tmp_path / "bad.yaml").exists()


def test_the_collective_share_is_the_compute_lost_beside_it():
    from pipesim.profile.contention import ContentionRun

    run = ContentionRun(512, 16 * 2**20, 2, alone_s=0.20, beside_s=0.25)
    assert run.share == pytest.approx(0.2)  # 1 − 0.20 / 0.25
    assert dataclasses.replace(run, beside_s=0.19).share == 0.0  # faster beside a collective: noise, none taken


def test_a_measured_collective_share_replaces_the_cta_rule_in_the_overlaps():
    """pipesim.analytic.comm.contended_overlap's σ: the measured share where the chip has one. A data-parallel
    reduce beside a long backward holds the rank σ·reduce (to_costs.stage_reduce_grad)."""
    from pipesim.analytic.comm import dp_grad_sync
    from pipesim.analytic.to_costs import stage_reduce_grad

    h100 = CHIP_PRESETS["h100-sxm"]
    assert h100.comm_sm_share == pytest.approx(24 / 132)
    measured = dataclasses.replace(h100, collective_sm_share=0.5)
    assert measured.comm_sm_share == 0.5
    layout = Layout(tp=1, dp=8, overlap_grad_reduce=True)
    reduce = dp_grad_sync(1e9, layout, measured).reduce
    held = stage_reduce_grad(1e9, layout, measured, backward=100 * reduce)
    assert held.busy == pytest.approx(0.5 * reduce) and held.asynchronous == pytest.approx(0.0)
    data = _measured(None)
    assert "collective_sm_share: not measured (one process)" in " ".join(data["measured"]["notes"])
    assert "collective_sm_share" not in data


def test_the_chip_file_writes_a_measured_collective_share():
    from pipesim.profile.contention import ContentionRun
    from pipesim.profile.device import Device, DeviceKind

    m = Measurements(GemmDtype.FP32)
    m.gemm, m.stream = chip_from_dict(chip_data(), "t").measured.gemm, chip_from_dict(chip_data(), "t").measured.stream
    m.contention = ContentionRun(512, 16 * 2**20, 2, alone_s=0.20, beside_s=0.25)
    data = chip_dict(m, Device(DeviceKind.CPU, "hand CPU", 1, 0, 2), 16.0, {"device": "hand"}, "hand")
    chip = chip_from_dict(data, "t")
    assert chip.collective_sm_share == pytest.approx(0.2) and chip.comm_sm_share == pytest.approx(0.2)
    assert "beside 16 MiB all-reduces over 2 processes" in " ".join(data["measured"]["notes"])
    gaps = {g.constant: g for g in preset_gaps(chip, CHIP_PRESETS["h100-sxm"])}
    assert gaps["collective SM share"].measured == pytest.approx(0.2)
    assert gaps["collective SM share"].preset == pytest.approx(24 / 132)


def test_the_sync_overhead_is_the_synchronised_loops_excess_per_pass():
    from pipesim.profile.chip_file import measured_fields
    from pipesim.profile.p2p_sync import P2P_SYNC_MISSING, P2pSyncRun

    run = P2pSyncRun(calls=30, synchronised_s=0.130, free_s=0.100)
    assert run.difference == pytest.approx(1e-3) and run.overhead == pytest.approx(1e-3)  # 30 ms over 30 passes
    noise = dataclasses.replace(run, synchronised_s=0.099)
    assert noise.difference < 0 and noise.overhead == 0.0
    fields, note = measured_fields(run), run.note  # what a GPU's chip file gets
    assert fields == {"p2p_sync_overhead": pytest.approx(1e-3)} and "30 passes" in note
    data = chip_data()
    data.update(fields, p2p_sync_overhead=fields["p2p_sync_overhead"])
    data["measured"]["notes"] = [note]
    gaps = {g.constant: g for g in preset_gaps(chip_from_dict(data, "t"), CHIP_PRESETS["a100-80gb"])}
    assert gaps["p2p_sync_overhead"].measured == pytest.approx(1e-3)
    assert gaps["p2p_sync_overhead"].preset == CHIP_PRESETS["a100-80gb"].p2p_sync_overhead
    assert measured_fields(None) == {} and P2P_SYNC_MISSING.startswith("p2p_sync_overhead: not measured")
