"""Measured chip files (pipesim profile's tables): the costs they imply, interpolation, and bad-table errors."""

from __future__ import annotations

import math

import pytest
import yaml

from pipesim.analytic.chip_load import load_chip
from pipesim.analytic.chip_spec import chip_from_dict
from pipesim.analytic.comm import tp_layer_comm
from pipesim.analytic.kernels import attention_core_times, gemm_time, layer_times
from pipesim.analytic.layout import Layout, Precision
from pipesim.analytic.measured import GemmDtype
from pipesim.analytic.model_spec import ModelSpec
from pipesim.errors import PipesimError

R = 2.0e11  # FLOP/s of every GEMM row
MODEL = ModelSpec("tiny", layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=128, seq_len=32, dtype_bytes=4,
                  dropout=False, bias=False, learned_positions=True)


def chip_data(**measured) -> dict:
    table = {"dtype": "fp32",
             "gemm": [{"m": 32, "n": 192, "k": 64, "flops_per_s": R}, {"m": 1024, "n": 1024, "k": 1024,
                                                                        "flops_per_s": 8 * R}],
             "attention": [{"seq": 32, "head_dim": 16, "forward_flops_per_s": 1e10, "backward_flops_per_s": 5e9},
                           {"seq": 128, "head_dim": 16, "forward_flops_per_s": 4e10, "backward_flops_per_s": 2e10}],
             "stream": [{"kernel": "add", "bytes": 1e6, "bytes_per_s": 1e10}],
             "collectives": [{"op": "all_reduce", "ranks": 2, "latency_s": 1e-4, "bandwidth": 1e9}]}
    table.update(measured)
    return {"name": "hand", "peak_flops": 8 * R, "memory_gib": 16, "hbm_bandwidth": 2e10, "memory_efficiency": 0.5,
            "intra_node_bandwidth": 1e9, "inter_node_bandwidth": 1e9, "measured": table,
            "provenance": {"device": "hand-written", "torch": "none"}}


def test_exact_shape_gives_the_table_rate():
    chip = chip_from_dict(chip_data(), "test")
    assert gemm_time(32, 192, 64, chip, Precision.BF16) == pytest.approx(2 * 32 * 192 * 64 / R, rel=1e-12)


def test_interpolates_log_log_between_sizes():
    chip = chip_from_dict(chip_data(), "test")
    small, large = 2 * 32 * 192 * 64, 2 * 1024**3
    size = math.sqrt(small * large)  # half way in log size: the rate is half way in log rate, √(R·8R)
    m = n = k = round((size / 2) ** (1 / 3))
    frac = (math.log(2 * m * n * k) - math.log(small)) / (math.log(large) - math.log(small))
    rate = math.exp(math.log(R) + frac * math.log(8))
    assert gemm_time(m, n, k, chip, Precision.BF16) == pytest.approx(2 * m * n * k / rate, rel=1e-12)
    # beyond the measured sizes the end rows' rates hold
    assert gemm_time(1, 1, 1, chip, Precision.BF16) == pytest.approx(2 / R)
    assert gemm_time(4096, 4096, 4096, chip, Precision.BF16) == pytest.approx(2 * 4096**3 / (8 * R))


def test_layer_costs_are_what_the_table_implies():
    data = chip_data(gemm=[{"m": 1, "n": 1, "k": 1, "flops_per_s": R}])  # one row: every shape at R
    chip = chip_from_dict(data, "test")
    layout = Layout(tp=1)
    tokens, h, f, s, hd, heads = 32, 64, 256, 32, 16, 4
    gemm_flops = 2 * tokens * (3 * h * h + h * h + f * h + h * f)
    executed = 4 * s * s * heads * hd / 2  # causal half
    stream = 2e10 * 0.5
    elementwise = tokens * (2 * 2 * h * 4 + 2 * 3 * h * 4 + 2 * f * 4)  # norms, residual adds, gelu; no RoPE
    times = layer_times(MODEL, layout, chip)
    assert times.forward == pytest.approx(gemm_flops / R + executed / 1e10 + elementwise / stream, rel=1e-12)
    assert times.backward_weight == pytest.approx(gemm_flops / R, rel=1e-12)
    assert times.backward_input == pytest.approx(gemm_flops / R + 2.5 * executed / 5e9 + elementwise / stream,
                                                 rel=1e-12)


def test_attention_interpolates_over_seq_and_collectives_use_the_fit():
    chip = chip_from_dict(chip_data(), "test")
    model = MODEL.with_shape(seq_len=64)  # half way (log) between seq 32 and 128: rate √(1e10·4e10) = 2e10
    core = attention_core_times(model, Layout(tp=1), chip)
    assert core.forward == pytest.approx(4 * 64 * 64 * 4 * 16 / 2 / 2e10, rel=1e-12)
    comm = tp_layer_comm(MODEL, Layout(tp=2), chip)
    nbytes = 4 * 1 * 32 * 64
    assert comm.forward == pytest.approx(2 * (1e-4 + nbytes / 1e9), rel=1e-12)
    # a group size that was not measured keeps the ring formula on the link fields
    assert tp_layer_comm(MODEL.with_shape(), Layout(tp=4), chip).forward > 0


def test_a_roofline_chip_is_unchanged():
    h100 = load_chip("h100-sxm")
    assert h100.measured is None
    assert gemm_time(4096, 4096, 4096, h100, Precision.BF16) > 0


def test_round_trip_through_a_file(tmp_path):
    path = tmp_path / "chip.yaml"
    path.write_text(yaml.safe_dump(chip_data()))
    chip = load_chip(str(path))
    assert chip.measured.dtype is GemmDtype.FP32 and chip.provenance["device"] == "hand-written"
    again = chip_from_dict(chip.to_dict(), "again")
    assert again.measured == chip.measured


def test_every_preset_written_out_is_a_chip_file_of_itself(tmp_path, capsys):
    """A chip's dictionary (what simulate --json reports as "chip") leaves its unset fields out, so it reads back
    as the same chip: a user can save a report's chip, edit a constant, and simulate with it."""
    import json

    from pipesim.analytic.chip_presets import CHIP_PRESETS
    from pipesim.cli.main import main

    for name, chip in CHIP_PRESETS.items():
        assert chip_from_dict(chip.to_dict(), name) == chip, name
    assert main(["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--pp", "2", "--mb", "4",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    path = tmp_path / "from-report.yaml"
    path.write_text(yaml.safe_dump(report["model_report"]["chip"]))
    assert load_chip(str(path)) == CHIP_PRESETS["h100-sxm"]


@pytest.mark.parametrize(("change", "message"), [
    ({"gemm": [{"m": 1, "n": 1, "k": 1, "flops_per_s": -1}]}, "measured.gemm[0].flops_per_s=-1 must be > 0"),
    ({"gemm": [{"m": 1, "n": 1, "flops_per_s": 1}]}, "measured.gemm[0]: missing 'k'"),
    ({"gemm": [{"m": 1, "n": 1, "k": 1, "rate": 1}]}, "measured.gemm[0]: unknown key(s) rate"),
    ({"gemm": "fast"}, "measured.gemm must be a list of rows"),
    ({"dtype": "fp16"}, "measured.dtype='fp16' must be one of bf16, fp32, fp8"),
    ({"collectives": [{"op": "all_reduce", "ranks": 1, "latency_s": 0, "bandwidth": 1}]}, "ranks=1 must be ≥ 2"),
    ({"collectives": [{"op": "broadcast", "ranks": 2, "latency_s": 0, "bandwidth": 1}]}, "op='broadcast'"),
    ({"stream": [{"kernel": "add", "bytes": 1, "bytes_per_s": float("nan")}]}, "must be a finite number"),
    ({"gemm": [{"m": 1, "n": 1, "k": 1, "dtype": "bf16", "flops_per_s": 1}]}, "no measured.gemm row has that"),
])
def test_bad_tables_are_one_line_errors(change, message):
    with pytest.raises(PipesimError) as err:
        chip_from_dict(chip_data(**change), "chip file x.yaml")
    text = str(err.value)
    assert message in text and "\n" not in text and text.startswith("chip file x.yaml")
