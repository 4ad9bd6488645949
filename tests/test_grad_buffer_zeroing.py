"""A persistent gradient buffer is cleared every step (pipesim.analytic.kernels.grad_buffer_zeroing_time): by hand,
only under fused accumulation, and the step and the busiest rank's optimizer part grow by it."""

from dataclasses import replace

import pytest

import pipesim
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.kernels import grad_buffer_zeroing_time
from pipesim.analytic.layout import GradAccumulation, Layout, OptimizerBytes, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.to_costs import build_cost_model, rank_params

H100 = CHIP_PRESETS["h100-sxm"]


def test_one_write_of_the_whole_buffer_by_hand():
    layout = Layout(dp=8, microbatches=4, zero=ZeroStage.OPTIMIZER)  # Megatron's fused accumulation by default
    params = 8e9
    # FP32 main gradients, the whole buffer: the distributed optimizer reduce-scatters it in place, unsharded
    assert grad_buffer_zeroing_time(params, layout, H100) == pytest.approx(4 * 8e9 / (H100.hbm_bandwidth * 0.9))
    bf16 = replace(layout, param_bytes=OptimizerBytes(grads=2.0))
    assert grad_buffer_zeroing_time(params, bf16, H100) == pytest.approx(2 * 8e9 / H100.stream_bandwidth)
    # ZeRO-2 without pipelining keeps only its shard of the gradients
    zero2 = replace(layout, zero=ZeroStage.GRADIENTS)
    assert grad_buffer_zeroing_time(params, zero2, H100) == pytest.approx(4 * 1e9 / H100.stream_bandwidth)
    # autograd's .grad is freed, not cleared
    assert grad_buffer_zeroing_time(params, replace(layout, grad_accumulation=GradAccumulation.AUTOGRAD), H100) == 0


def test_the_step_grows_by_the_busiest_ranks_clearing():
    model = MODEL_PRESETS["llama3.1-8b"]
    options = dict(pp=2, mb=8, hardware="h100-sxm", dp=4, zero=1)
    fused = pipesim.simulate("1f1b", model=model, **options)
    autograd = pipesim.simulate("1f1b", model=model, grad_accumulation="autograd", **options)
    layout = fused.setup.layout
    params = rank_params(model, layout, fused.built.program.shape)
    cleared = [grad_buffer_zeroing_time(p, layout, H100) for p in params]
    assert min(cleared) > 1e-3  # ~4 GB of FP32 gradients a rank at ~3 TB/s
    a = build_cost_model(model, H100, layout)
    b = build_cost_model(model, H100, replace(layout, grad_accumulation=GradAccumulation.AUTOGRAD))
    assert a.optimizer_step - b.optimizer_step == pytest.approx(max(cleared))  # the two ranks hold alike here
    for rank, t in enumerate(fused.model_report.rank_times):
        assert t.optimizer - autograd.model_report.rank_times[rank].optimizer == pytest.approx(cleared[rank])
