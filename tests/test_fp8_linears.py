"""Whose FP8 linears an FP8 run trains with (Layout.fp8_linears), by hand: Transformer Engine's keep an FP8 copy of
their weights and save their inputs in FP8; torchao's Float8Linear (torchtitan's float8) saves the BF16 input and
weight and casts them again at each GEMM (``matmul_with_hp_or_float8_args``), keeping neither."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pipesim.analytic.activations import layer_activation_bytes, linear_input_element_bytes
from pipesim.analytic.layout import Fp8Linears, Fp8Params, Fp8Recipe, Layout, Precision, ZeroStage
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


def test_transformer_engine_casts_each_weight_once_a_step_by_hand():
    """Transformer Engine's quantized linears cast their BF16 weights on a step's first microbatch and keep the
    copy (``is_first_microbatch``): the cast's bytes once a step, spread over its microbatches."""
    from pipesim.analytic.chip_presets import CHIP_PRESETS
    from pipesim.analytic.kernels import AMAX_PASS_BYTES, NVFP4_CAST_BYTES, weight_cast_time
    from pipesim.analytic.to_costs import build_cost_model, stage_breakdown

    h100, b200 = CHIP_PRESETS["h100-sxm"], CHIP_PRESETS["b200"]
    layout = Layout(dp=8, microbatches=4, precision=Precision.FP8)
    part = stage_breakdown(MODEL, layout, 0)
    linears = part.params - part.end_params  # the embedding and the head stay BF16
    # Hopper: the cast and its transpose (3 + 1 bytes an element); Blackwell no transpose; tensorwise an amax first
    assert weight_cast_time(linears, layout, h100) == pytest.approx(4 * linears / h100.stream_bandwidth / 4)
    assert weight_cast_time(linears, layout, b200) == pytest.approx(3 * linears / b200.stream_bandwidth / 4)
    tensorwise = replace(layout, fp8_recipe=Fp8Recipe.TENSORWISE)
    assert weight_cast_time(linears, tensorwise, h100) == pytest.approx(6 * linears / h100.stream_bandwidth / 4)
    nvfp4 = replace(layout, precision=Precision.FP4)
    # NVFP4: read BF16, write the row-wise and the column-wise copies (half a byte an element and the block
    # scales), and the amax pass its per-tensor scale needs
    per_element = 2 + 2 * Precision.FP4.element_bytes + 2
    assert per_element == NVFP4_CAST_BYTES + AMAX_PASS_BYTES
    assert weight_cast_time(linears, nvfp4, b200) == pytest.approx(per_element * linears / b200.stream_bandwidth / 4)
    # once a step: one microbatch pays it all
    assert weight_cast_time(linears, replace(layout, microbatches=1), h100) == pytest.approx(
        4 * weight_cast_time(linears, layout, h100))
    # none where nothing is cast on the way: BF16, FP8 parameters the optimizer writes, torchao's per-GEMM casts,
    # and ZeRO-3's per-layer gathers (the FSDP code's own casts)
    for none in (replace(layout, precision=Precision.BF16),
                 replace(layout, fp8_params=Fp8Params.ROWWISE, distributed_optimizer=True),
                 replace(layout, fp8_linears=Fp8Linears.TORCHAO), replace(layout, zero=ZeroStage.PARAMETERS)):
        assert weight_cast_time(linears, none, h100) == 0.0
    # it joins the forward, and only the forward
    params = replace(layout, fp8_params=Fp8Params.ROWWISE, distributed_optimizer=True)
    cast, kept = build_cost_model(MODEL, h100, replace(params, fp8_params=Fp8Params.OFF)), build_cost_model(
        MODEL, h100, params)
    assert cast.stage(0).forward - kept.stage(0).forward == pytest.approx(weight_cast_time(linears, layout, h100))
    assert cast.stage(0).backward == kept.stage(0).backward
