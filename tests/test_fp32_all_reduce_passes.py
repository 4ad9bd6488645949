"""The memory-bound passes around Aleph Alpha's FP32 gradient all-reduce (pipesim.analytic.kernels.
fp32_all_reduce_passes_time): by hand, only under that collective, and in the optimizer step and its report."""

from dataclasses import replace

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.kernels import fp32_all_reduce_passes_time, grad_buffer_zeroing_time, step_end_passes_time
from pipesim.analytic.layout import (
    GradAccumulation,
    Layout,
    OptimizerBytes,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.to_costs import build_cost_model, rank_params
from pipesim.program.ir import PipelineShape

A100 = CHIP_PRESETS["a100-80gb"]
SCALING = Layout(dp=8, microbatches=4, zero=ZeroStage.OPTIMIZER, zero_collectives=ZeroCollectives.ALL_REDUCE_FP32,
                 grad_accumulation=GradAccumulation.AUTOGRAD, param_bytes=OptimizerBytes(grads=2.0))


def test_thirty_bytes_a_bf16_gradient_by_hand():
    # flatten 2+2, divide 2+2, cast to FP32 2+4, back to BF16 4+2, into the gradients 2+2, unscale 2+2, norm 2
    assert fp32_all_reduce_passes_time(1e9, SCALING, A100) == pytest.approx(30e9 / A100.stream_bandwidth)
    # FP32 gradients: every 16-bit pass moves twice the bytes, the casts' FP32 sides stay
    fp32 = replace(SCALING, param_bytes=OptimizerBytes(grads=4.0))
    assert fp32_all_reduce_passes_time(1e9, fp32, A100) == pytest.approx(52e9 / A100.stream_bandwidth)
    # every other way of syncing: none of it
    bucketed = replace(SCALING, zero_collectives=ZeroCollectives.BUCKETED)
    assert fp32_all_reduce_passes_time(1e9, bucketed, A100) == 0.0
    # with the buffer's clearing, the step's end passes (autograd here: nothing to clear)
    assert step_end_passes_time(1e9, SCALING, A100) == fp32_all_reduce_passes_time(1e9, SCALING, A100)
    fused = replace(bucketed, grad_accumulation=GradAccumulation.FUSED)
    assert step_end_passes_time(1e9, fused, A100) == grad_buffer_zeroing_time(1e9, fused, A100) > 0


def test_the_optimizer_step_grows_by_the_busiest_ranks_passes():
    model = MODEL_PRESETS["aa-llama-13b"]
    layout = replace(SCALING, pp=2)
    shape = PipelineShape(layout.pp, layout.microbatches, 1)
    with_passes = build_cost_model(model, A100, layout, shape)
    without = build_cost_model(model, A100, replace(layout, zero_collectives=ZeroCollectives.BUCKETED), shape)
    # the FP32 all-reduce moves more on the wire, but the optimizer step holds the passes alone
    passes = max(fp32_all_reduce_passes_time(p, layout, A100) for p in rank_params(model, layout, shape))
    assert passes > 0.05  # ~7B BF16 gradients a rank, 30 bytes each, at ~1.8 TB/s
    assert with_passes.optimizer_step - without.optimizer_step == pytest.approx(passes)


def test_each_ranks_report_counts_its_own_passes_in_the_optimizer_part():
    import pipesim

    options = dict(pp=2, mb=8, model="aa-llama-13b", hardware="a100-80gb", dp=4, zero=1, param_bytes=16,
                   grad_accumulation="autograd")
    fp32 = pipesim.simulate("1f1b", zero_collectives="all-reduce-fp32", **options)
    bucketed = pipesim.simulate("1f1b", **options)
    layout = fp32.setup.layout
    for rank, params in enumerate(rank_params(fp32.setup.model, layout, fp32.built.program.shape)):
        grown = fp32.model_report.rank_times[rank].optimizer - bucketed.model_report.rank_times[rank].optimizer
        assert grown == pytest.approx(fp32_all_reduce_passes_time(params, layout, A100)) and grown > 0
