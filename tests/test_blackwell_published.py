"""Published runs on Blackwell (pipesim/validation/sources: mlperf_v50_gb200), held out of every fit: each row a test,
within 15 % of the published step or a strict xfail stating the measured error and why; the memory rows within
15 %. And the two Transformer Engine facts their memory rests on, by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pipesim.analytic.activations import layer_activation_bytes, linear_input_bytes
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.layout import Fp8Params, Layout, Precision, Recompute
from pipesim.analytic.memory_gib import static_bytes
from pipesim.analytic.model_spec import ModelSpec
from pipesim.validation.runs import predict
from pipesim.validation.sources import BLACKWELL_MODULES, BLACKWELL_RUNS, SOURCE_MODULES

# Why the step misses the 15 % bar (a strict xfail, so closing the gap is noticed).
STEP_MISS = ("-16...-19%, pipesim too fast at every scale: the Blackwell presets' kernel constants (the B200's "
             "benchmark GEMM share, the default FP8 share and attention efficiencies, no training or sustained-clock "
             "ratio) were set without a published training step; these rows are their first test")
_CACHE: dict[int, object] = {}


def _comparison(run):
    if id(run) not in _CACHE:
        _CACHE[id(run)] = predict(run)
    return _CACHE[id(run)]


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=STEP_MISS))
                                 for r in BLACKWELL_RUNS], ids=lambda r: r.note)
def test_step_time_within_15_percent(run):
    error = _comparison(run).step_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


@pytest.mark.parametrize("run", [r for r in BLACKWELL_RUNS if r.memory_gib is not None], ids=lambda r: r.note)
def test_memory_within_15_percent(run):
    error = _comparison(run).memory_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


def test_the_blackwell_rows_are_held_out_of_the_fitted_table():
    assert not set(BLACKWELL_MODULES) & set(SOURCE_MODULES)
    assert {r.chip for r in BLACKWELL_RUNS} == {"gb200"} and CHIP_PRESETS["gb200"].node_size == 72


def test_the_step_misses_by_nearly_the_same_share_at_every_scale():
    """256 to 2,496 GPUs, 32 to 112 microbatches: the error is mostly one per-GPU rate, not the NVLink domain or
    the data-parallel fabric, whose share of the step changes with the scale."""
    errors = [_comparison(r).step_error for r in BLACKWELL_RUNS]
    assert max(errors) - min(errors) < 0.05 and all(-0.21 < e < -0.14 for e in errors)


def test_the_tp_pp_dp_mapping_keeps_a_replica_in_its_rack_and_sends_the_gradients_across_racks():
    """Carina's runs set Megatron-Core's use_tp_pp_dp_mapping: pipeline neighbours 8 ranks apart (inside a 72-GPU
    NVLink domain) instead of tp·cp·dp, and the data-parallel group's members tp·pp = 32 apart, across racks. The
    gradient sync leaves the rack, so the step is slower than in Megatron's default order, by more at more
    data-parallel ranks."""
    from pipesim.analytic.layout import RankOrder

    by_order = []
    for run in [r for r in BLACKWELL_RUNS if r.note.startswith("carina")]:
        default = predict(replace(run, rank_order=RankOrder.TP_CP_DP_PP)).report.step_time
        by_order.append(_comparison(run).report.step_time / default)
    assert all(ratio > 1 for ratio in by_order) and by_order[-1] > by_order[0]


_TINY = ModelSpec("tiny", layers=2, hidden=64, heads=4, ffn_hidden=192, vocab=128, seq_len=32, gated=True,
                  dropout=False)


def test_fp8_linears_keep_their_inputs_in_one_byte():
    """Transformer Engine's FP8 linears save their quantized input for the weight gradient (1 byte an element):
    the QKV and MLP inputs (the norms' outputs, s·b·h each), the down projection's input (s·b·ffn); the output
    projection keeps an FP8 copy beside the fused attention kernel's BF16 output (+1 byte on s·b·h), or alone when
    the kernel is recomputed (selective: 1 byte where BF16 kept 2). Tiny model, tp 1: s·b·h = 32·64."""
    sbh, sbf = 32 * 64, 32 * 192
    bf16, fp8 = Layout(), Layout(precision=Precision.FP8)
    saved = layer_activation_bytes(_TINY, bf16) - layer_activation_bytes(_TINY, fp8)
    assert saved == 2 * sbh + sbf - sbh  # QKV and MLP inputs, down-projection input, less the output's FP8 copy
    selective_bf16 = replace(bf16, recompute=Recompute.SELECTIVE)
    selective_fp8 = replace(fp8, recompute=Recompute.SELECTIVE)
    assert layer_activation_bytes(_TINY, selective_bf16) - layer_activation_bytes(_TINY, selective_fp8) == \
        2 * sbh + sbf + sbh
    # what the weight-gradient pass reads: the four linears' inputs, one byte each
    assert linear_input_bytes(_TINY, fp8) == 2 * sbh + sbh + sbf
    assert linear_input_bytes(_TINY, bf16) == 2 * (2 * sbh + sbh + sbf)
    # full recomputation keeps the layer's BF16 input only, either way
    full = replace(bf16, recompute=Recompute.FULL)
    assert layer_activation_bytes(_TINY, full) == layer_activation_bytes(_TINY, replace(full, precision=Precision.FP8))


def test_fp8_parameters_keep_no_transpose_where_fp8_gemms_take_any_layout():
    """1,000 parameters, 100 of them the embedding and output layer (BF16): with FP8 parameters kept "both", the 900
    linears' weights take 2 bytes where the FP8 GEMMs need the TN layout (Hopper), 1 on Blackwell."""
    layout = Layout(precision=Precision.FP8, fp8_params=Fp8Params.BOTH, distributed_optimizer=True)
    assert static_bytes(1000, layout, end_params=100)[0] == 2 * 100 + 2 * 900
    assert static_bytes(1000, layout, end_params=100, fp8_weight_transpose=False)[0] == 2 * 100 + 900
    assert CHIP_PRESETS["h100-sxm"].fp8_weight_transpose
    assert not CHIP_PRESETS["b200"].fp8_weight_transpose and not CHIP_PRESETS["gb200"].fp8_weight_transpose


def test_gb200_is_the_b200_die_at_1200_watts_in_a_72_gpu_nvlink_domain():
    """The GB200 preset differs from the B200's only where a datasheet or a system description says so: the peaks
    at 1,200 W, the memory nvidia-smi reports, the NVLink domain and the tray; every kernel constant is the B200's."""
    b200, gb200 = CHIP_PRESETS["b200"], CHIP_PRESETS["gb200"]
    assert (gb200.peak_flops, gb200.fp8_peak_flops) == (2500e12, 5000e12)
    assert gb200.memory_gib == pytest.approx(189471 / 1024, abs=0.05) and gb200.node_size == 72
    assert gb200.host_gpus == 4  # GPUs per compute tray
    stated = {"name", "peak_flops", "fp8_peak_flops", "memory_gib", "node_size", "host_gpus"}
    assert replace(gb200, **{f: getattr(b200, f) for f in stated}) == b200


def test_a_blackwell_prediction_says_what_the_held_out_rows_measured():
    """No band covers Blackwell, but a prediction there carries the held-out gap, which must be these rows'."""
    from pipesim.analytic.error_band import BLACKWELL_GAP, error_band

    errors = [_comparison(r).step_error for r in BLACKWELL_RUNS]
    assert -sum(errors) / len(errors) == pytest.approx(BLACKWELL_GAP, abs=0.005)
    band = error_band("gb200", Precision.FP8)
    assert band.relative is None and "1.20× the predicted" in band.text()
