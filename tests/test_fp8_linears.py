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


def test_fsdp_float8_all_gather_by_hand():
    """torchao's enable_fsdp_float8_all_gather (OLMo-core's float8 config): FSDP gathers the linears' weights in
    FP8, each rank casting its FP32 shard first (read 4, write 1), and no GEMM casts a weight."""
    from pipesim.analytic.chip_presets import CHIP_PRESETS
    from pipesim.analytic.comm import CollectiveOp, fsdp_layer_comm, sharded_collective
    from pipesim.analytic.kernels import (
        FSDP_SHARD_CAST_BYTES,
        TORCHAO_WEIGHT_CAST_BYTES,
        layer_gemms,
        quantization_cast_bytes,
    )
    from pipesim.analytic.params import largest_layer_params

    h100 = CHIP_PRESETS["h100-sxm"]
    fsdp = Layout(dp=8, zero=ZeroStage.PARAMETERS, precision=Precision.FP8, fp8_linears=Fp8Linears.TORCHAO,
                  fp8_recipe=Fp8Recipe.TENSORWISE)
    fp8 = replace(fsdp, fp8_all_gather=True)
    assert fsdp.gathered_weight_bytes == 2.0 and fp8.gathered_weight_bytes == 1.0
    layer = largest_layer_params(MODEL)
    # the gather, forward and again in the backward, of one byte a weight; the reduce-scatter unchanged
    gather = sharded_collective(CollectiveOp.ALL_GATHER, layer * 1.0, fp8, h100)
    scatter = sharded_collective(CollectiveOp.REDUCE_SCATTER, layer * fp8.param_bytes.grads, fp8, h100)
    assert fsdp_layer_comm(layer, fp8, h100).forward == gather
    assert fsdp_layer_comm(layer, fp8, h100).backward == gather + scatter
    assert fsdp_layer_comm(layer, fsdp, h100).forward == sharded_collective(CollectiveOp.ALL_GATHER, 2 * layer,
                                                                             fsdp, h100)
    # no GEMM casts a weight; each gather casts the rank's shard of them
    tokens = 8192
    weights = sum(count * k * n for _, n, k, count in layer_gemms(MODEL, fp8, tokens))
    per_gemm, gathered = quantization_cast_bytes(MODEL, fsdp, tokens), quantization_cast_bytes(MODEL, fp8, tokens)
    shard = weights / 8 * FSDP_SHARD_CAST_BYTES
    assert FSDP_SHARD_CAST_BYTES == 5
    assert per_gemm[0] - gathered[0] == pytest.approx(weights * TORCHAO_WEIGHT_CAST_BYTES - shard)
    assert per_gemm[1] - gathered[1] == pytest.approx(weights * TORCHAO_WEIGHT_CAST_BYTES - shard)
    # memory: the two gathered layers in one byte; under pipelining the stage's gathered linears
    params, ends = total_params(MODEL), embedding_params(MODEL) + output_params(MODEL, 1)
    assert static_bytes(params, fsdp, MODEL)[0] - static_bytes(params, fp8, MODEL)[0] == pytest.approx(2 * layer)
    piped = replace(fsdp, pp=2)
    assert static_bytes(params, piped, MODEL, end_params=ends)[0] - static_bytes(
        params, replace(piped, fp8_all_gather=True), MODEL, end_params=ends)[0] == pytest.approx(params - ends)


@pytest.mark.parametrize("change", [dict(fp8_linears=Fp8Linears.TRANSFORMER_ENGINE), dict(zero=ZeroStage.OPTIMIZER),
                                    dict(precision=Precision.BF16)])
def test_fsdp_float8_all_gather_needs_torchaos_linears_under_fsdp(change):
    base = dict(dp=8, zero=ZeroStage.PARAMETERS, precision=Precision.FP8, fp8_linears=Fp8Linears.TORCHAO)
    with pytest.raises(PipesimError, match="--fp8-all-gather is torchao's FSDP float8 all-gather"):
        Layout(**{**base, **change}, fp8_all_gather=True)
