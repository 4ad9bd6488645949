"""Whose FP8 linears an FP8 run trains with (Layout.fp8_linears), by hand: Transformer Engine's keep an FP8 copy of
their weights and save their inputs in FP8; torchao's Float8Linear (torchtitan's float8) saves the BF16 input and
weight and casts them again at each GEMM (``matmul_with_hp_or_float8_args``), keeping neither."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pipesim.analytic.activations import layer_activation_bytes, linear_input_element_bytes
from pipesim.analytic.layout import Fp8Linears, Fp8Params, Layout, Precision, ZeroStage
from pipesim.analytic.memory_gib import static_bytes
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.params import embedding_params, output_params, total_params
from pipesim.api.simulation import simulate
from pipesim.errors import PipesimError

MODEL = MODEL_PRESETS["llama3.1-8b"].with_shape(8192, 1)
TE = Layout(dp=8, precision=Precision.FP8)
TORCHAO = replace(TE, fp8_linears=Fp8Linears.TORCHAO)


def test_torchao_keeps_no_fp8_weight_copy():
    params = total_params(MODEL)
    ends = embedding_params(MODEL) + output_params(MODEL, 1)
    te, ao = static_bytes(params, TE, MODEL, end_params=ends), static_bytes(params, TORCHAO, MODEL, end_params=ends)
    # the copy: one byte for each parameter of the quantized linears (not the embedding or the output layer)
    assert te[0] - ao[0] == pytest.approx(params - ends)
    assert te[1:] == ao[1:]


def test_torchao_saves_its_linears_inputs_in_bf16():
    assert linear_input_element_bytes(MODEL, TE) == 1.0 and linear_input_element_bytes(MODEL, TORCHAO) == 2.0
    sb = 8192 * 1
    h, f, attn = MODEL.hidden, MODEL.ffn_hidden, MODEL.attention_out_width
    # a layer kept whole: the QKV and MLP inputs (h each) and the down projection's (MLP width) one byte more an
    # element; the attention output, which the output projection saves, is then the kernel's own BF16 tensor
    # (2 bytes) where Transformer Engine keeps its FP8 copy beside it (2 + 1): one byte less
    more = sb * (2 * h + f) - sb * attn
    assert layer_activation_bytes(MODEL, TORCHAO) - layer_activation_bytes(MODEL, TE) == pytest.approx(more)


def test_bf16_and_nvfp4_are_unchanged():
    for precision in (Precision.BF16, Precision.FP4):
        te = replace(TE, precision=precision)
        assert layer_activation_bytes(MODEL, replace(te, fp8_linears=Fp8Linears.TORCHAO)) == \
            layer_activation_bytes(MODEL, te)


def test_torchtitan_fp8_runs_torchao_and_an_explicit_choice_wins():
    run = dict(model="llama3.1-8b", hardware="h100-sxm", pp=1, mb=1, dp=8, zero=3)
    assert simulate(**run, framework="torchtitan", fp8=True).setup.layout.fp8_linears is Fp8Linears.TORCHAO
    assert simulate(**run, framework="torchtitan", fp8=True, fp8_linears="transformer-engine").setup.layout \
        .fp8_linears is Fp8Linears.TRANSFORMER_ENGINE
    assert simulate(**run, fp8=True).setup.layout.fp8_linears is Fp8Linears.TRANSFORMER_ENGINE
    bf16 = simulate(**run, framework="torchtitan")  # BF16: the framework's default falls back without a note
    assert bf16.setup.layout.fp8_linears is Fp8Linears.TRANSFORMER_ENGINE
    assert not bf16.model_report.layout.inert_flag_notes
    asked = simulate(**run, fp8_linears="torchao").model_report.layout.inert_flag_notes
    assert any("--fp8-linears torchao changes nothing here" in note for note in asked)


def test_fp8_params_are_transformer_engines():
    with pytest.raises(PipesimError, match="--fp8-linears torchao casts its weights at each GEMM"):
        Layout(dp=8, precision=Precision.FP8, zero=ZeroStage.OPTIMIZER, fp8_params=Fp8Params.BOTH,
               fp8_linears=Fp8Linears.TORCHAO)


def test_torchao_casts_each_weight_at_each_gemm():
    from pipesim.analytic.kernels import TORCHAO_WEIGHT_CAST_BYTES, layer_gemms, quantization_cast_bytes

    tokens = 8192
    te, ao = quantization_cast_bytes(MODEL, TE, tokens), quantization_cast_bytes(MODEL, TORCHAO, tokens)
    weights = sum(count * k_in * n_out for _, n_out, k_in, count in layer_gemms(MODEL, TE, tokens))
    assert weights == pytest.approx(4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336)  # Llama 3.1 8B
    # the forward's cast of each weight and the input gradient's, an amax pass and a cast each (5 bytes)
    assert TORCHAO_WEIGHT_CAST_BYTES == 5
    assert (ao[0] - te[0], ao[1] - te[1]) == pytest.approx((5 * weights, 5 * weights))
