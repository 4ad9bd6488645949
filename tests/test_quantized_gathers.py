"""All-gathers at the precision their consumers read, by hand. Sequence parallelism's (``comm.tp_gather_bytes``):
Transformer Engine quantizes before it gathers (the forward's inputs, the output gradients, the inputs it saved);
torchao's tensor-parallel float8 casts only the forward's inputs first; the reduce-scatters stay BF16. The
distributed optimizer's parameter gather with FP8 parameters (``Layout.gathered_weight_bytes``): one byte a
weight, as Megatron-Core's uint8 parameter buffer and NeMo's distributed Adam move them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import (
    TpGather,
    collective_time,
    column_input_regather,
    dp_grad_sync,
    tp_gather_bytes,
    tp_layer_comm,
)
from pipesim.analytic.layout import ColumnInput, Fp8Linears, Fp8Params, Layout, Precision, Recompute, ZeroStage
from pipesim.analytic.measured import CollectiveOp
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind

MODEL = MODEL_PRESETS["llama3.1-70b"].with_shape(8192, 1)  # hidden 8192
H100 = CHIP_PRESETS["h100-sxm"]
BF16 = Layout(tp=8, sequence_parallel=True)
TE_FP8 = replace(BF16, precision=Precision.FP8)
TORCHAO_FP8 = replace(TE_FP8, fp8_linears=Fp8Linears.TORCHAO)
NVFP4 = replace(BF16, precision=Precision.FP4)
ELEMENTS = 8192 * 8192  # b·s·h: one gather's output


@pytest.mark.parametrize("layout, forward, gradient, saved", [
    (BF16, 2, 2, 2),
    (TE_FP8, 1, 1, 1),  # quantized, then gathered; the transpose made after the gather
    (TORCHAO_FP8, 1, 2, 2),  # Float8ColwiseParallel casts the input first; the gradient is cast inside the matmul
    (NVFP4, 0.5625, 1.125, 0.5625),  # 4-bit values and an FP8 scale per 16; the gradient row- and column-wise
])
def test_the_bytes_each_gather_moves(layout, forward, gradient, saved):
    assert tp_gather_bytes(MODEL, layout) == ELEMENTS * forward
    assert tp_gather_bytes(MODEL, layout, TpGather.OUTPUT_GRADIENT) == ELEMENTS * gradient
    assert tp_gather_bytes(MODEL, layout, TpGather.SAVED_INPUT) == ELEMENTS * saved


def _all_gather(element_bytes: float) -> float:
    return collective_time(CollectiveOp.ALL_GATHER, ELEMENTS * element_bytes, 8, H100, 8)


def test_a_layers_collectives_gather_fp8_and_reduce_bf16():
    """Per layer, two blocks (attention, MLP), each a gather before its column-parallel linear and a
    reduce-scatter after its row-parallel one; the backward their conjugates: the input gradient reduce-scattered
    (BF16), the output gradient gathered (FP8 under Transformer Engine, BF16 under torchao)."""
    scatter = collective_time(CollectiveOp.REDUCE_SCATTER, ELEMENTS * 2, 8, H100, 8)
    bf16 = tp_layer_comm(MODEL, BF16, H100)
    assert bf16.forward == pytest.approx(2 * (_all_gather(2) + scatter))
    assert bf16.backward == pytest.approx(bf16.forward)
    te = tp_layer_comm(MODEL, TE_FP8, H100)
    assert te.forward == pytest.approx(2 * (_all_gather(1) + scatter))
    assert te.backward == pytest.approx(te.forward)
    torchao = tp_layer_comm(MODEL, TORCHAO_FP8, H100)
    assert torchao.forward == pytest.approx(te.forward)
    assert torchao.backward == pytest.approx(bf16.backward)
    assert te.forward < bf16.forward  # FP8 halves the gathers' bytes, not the reduce-scatters'
    # full recomputation gathers the forward's inputs again, in FP8
    full = tp_layer_comm(MODEL, replace(TORCHAO_FP8, recompute=Recompute.FULL), H100)
    assert full.backward == pytest.approx(bf16.backward + te.forward)


def test_the_weight_gradients_gather_the_input_as_saved():
    """Megatron-LM's regather beside the input-gradient GEMMs (no GEMM here: all of it exposed) moves the input
    as Transformer Engine saved it, in FP8; torchao saves BF16."""
    regather = replace(TE_FP8, column_input=ColumnInput.REGATHER_BLOCKING)
    assert column_input_regather(MODEL, regather, H100, [0.0, 0.0]) == pytest.approx(2 * _all_gather(1))
    bf16_saved = replace(regather, fp8_linears=Fp8Linears.TORCHAO)
    assert column_input_regather(MODEL, bf16_saved, H100, [0.0, 0.0]) == pytest.approx(2 * _all_gather(2))
    # a saved gathered input re-gathered only by per-op recomputation: the forward's own (FP8) gather
    per_op = replace(TORCHAO_FP8, column_input=ColumnInput.SAVED, recompute=Recompute.PER_OP)
    assert column_input_regather(MODEL, per_op, H100, [0.0]) == pytest.approx(_all_gather(1))


def test_fp8_parameters_are_gathered_in_one_byte_after_the_step():
    """dp 8 in one node, a billion parameters a rank: the distributed optimizer reduce-scatters the FP32 gradients
    either way and gathers the updated weights in BF16, or in FP8 with FP8 parameters."""
    params = 1e9
    bf16 = Layout(dp=8, zero=ZeroStage.OPTIMIZER, precision=Precision.FP8)
    fp8_params = replace(bf16, fp8_params=Fp8Params.BOTH)
    assert bf16.gathered_weight_bytes == 2 and fp8_params.gathered_weight_bytes == 1
    plain, quantized = dp_grad_sync(params, bf16, H100), dp_grad_sync(params, fp8_params, H100)
    assert quantized.reduce == plain.reduce
    assert plain.gather == pytest.approx(collective_time(CollectiveOp.ALL_GATHER, 2 * params, 8, H100, 8))
    assert quantized.gather == pytest.approx(collective_time(CollectiveOp.ALL_GATHER, params, 8, H100, 8))


def test_a_moe_layers_token_dispatcher_gathers_in_bf16():
    """Mixtral at tp 2 with sequence parallelism, experts on the tp ranks too (etp = tp): the attention block's
    gather is Transformer Engine's (FP8), the MLP block's the token dispatcher's, in BF16 before the experts'
    linears quantize; the reduce-scatters BF16 throughout."""
    mixtral = MODEL_PRESETS["mixtral-8x7b"].with_shape(4096, 1)
    elements = 4096 * mixtral.hidden
    layout = Layout(tp=2, sequence_parallel=True, precision=Precision.FP8)

    def gather(element_bytes: float) -> float:
        return collective_time(CollectiveOp.ALL_GATHER, elements * element_bytes, 2, H100, 2)

    scatter = collective_time(CollectiveOp.REDUCE_SCATTER, elements * 2, 2, H100, 2)
    moe = tp_layer_comm(mixtral, layout, H100, LayerKind.MOE)
    assert moe.forward == pytest.approx(gather(1) + scatter + gather(2) + scatter)
    assert moe.backward == pytest.approx(moe.forward)
    # the same model's dense layers (none here, but the kind is asked for): both blocks Transformer Engine's
    dense = tp_layer_comm(mixtral, layout, H100, LayerKind.DENSE)
    assert dense.forward == pytest.approx(2 * (gather(1) + scatter))
