"""The data-parallel bucket an overlapped gradient reduce cannot hide (pipesim/analytic/grad_buckets.py), by hand:
Megatron-Core's and PyTorch DDP's reverse-order greedy cut, which stage it applies to, and what it adds to a
step."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pipesim
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import contended_overlap, dp_grad_sync, sharded_collective
from pipesim.analytic.grad_buckets import (
    TORCH_DDP_BUCKET_BYTES,
    bucket_capacity,
    last_bucket,
    stage_tensors_backward,
)
from pipesim.analytic.layout import GradBuckets, Layout, ZeroStage
from pipesim.analytic.measured import CollectiveOp
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind
from pipesim.analytic.to_costs import param_gather_time, stage_breakdown, stage_last_bucket, stage_reduce_grad

H100 = CHIP_PRESETS["h100-sxm"]
LLAMA8B = MODEL_PRESETS["llama3.1-8b"]


def _one_by_one(tensors: list[float], capacity: float) -> float:
    """Megatron's _compute_default_per_buffer_param_layout, tensor by tensor: the last bucket's elements."""
    filling = last_closed = 0.0
    for size in tensors:
        filling += size
        if filling >= capacity:
            last_closed, filling = filling, 0.0
    return filling if filling > 0 else last_closed


def test_the_last_bucket_by_hand():
    # 30, 30 | 30, 30 | 5: the remainder is the last bucket
    assert last_bucket([(30, 4), (5, 1)], 50) == 5
    # 30, 30 | 30, 30: nothing left over, the last full bucket is the last one
    assert last_bucket([(30, 4)], 50) == 60
    # a tensor larger than a bucket closes the open one with it: 10 | 10 + 200
    assert last_bucket([(10, 2), (200, 1)], 15) == 200
    assert last_bucket([(10, 1), (200, 1)], 15) == 210
    assert last_bucket([(7, 3)], None) == 21  # one bucket: everything


@given(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 40)), min_size=1, max_size=8),
       st.integers(1, 400))
def test_runs_cut_as_tensor_by_tensor(runs, capacity):
    tensors = [size for size, count in runs for _ in range(count)]
    assert last_bucket(runs, capacity) == _one_by_one(tensors, capacity)


def test_megatrons_bucket_grows_with_data_parallelism_and_only_the_first_stage_is_cut():
    layout = Layout(dp=8, pp=2, microbatches=4, overlap_grad_reduce=True)
    assert bucket_capacity(LLAMA8B, layout, 0) == 40_000_000
    assert bucket_capacity(LLAMA8B, replace(layout, dp=64), 0) == 64_000_000
    assert bucket_capacity(LLAMA8B, layout, 1) is None  # pp_rank > 0: one bucket
    torch = replace(layout, grad_buckets=GradBuckets.TORCH_DDP)
    assert bucket_capacity(LLAMA8B, torch, 1) == TORCH_DDP_BUCKET_BYTES / 2 == 13_107_200  # 25 MiB of BF16


def test_the_backward_order_of_a_stages_tensors():
    """Llama 3.1 8B over two stages at tp 2: the last stage starts with the output projection and the final norm,
    then its layers from the last; the first stage ends with the embedding. A layer, backward: the two norms, the
    down projection, the fused gate and up, the attention's output and the fused QKV projections."""
    layout = Layout(tp=2, dp=8, pp=2, microbatches=4, overlap_grad_reduce=True)
    h, v, t = 4096, 128256, 2
    layer = [(h, 2), (14336 * h / t, 1), (2 * 14336 * h / t, 1), (h * h / t, 1), ((4096 + 2 * 1024) * h / t, 1)]
    last = stage_tensors_backward(LLAMA8B, layout, 1, [LayerKind.DENSE] * 16, True)
    assert last[:2] == [(v * h / t, 1), (h, 1)] and last[2:7] == layer and len(last) == 2 + 16 * 5
    first = stage_tensors_backward(LLAMA8B, layout, 0, [LayerKind.DENSE] * 16, False)
    assert first[:5] == layer and first[-1] == (v * h / t, 1) and len(first) == 16 * 5 + 1
    # one stage, tied embeddings: the embedding is the output layer too, one tensor, finished last
    tied = MODEL_PRESETS["llama3.2-1b"]
    whole = stage_tensors_backward(tied, Layout(dp=8, microbatches=4), 0, [LayerKind.DENSE] * 16, True)
    assert whole[0] == (tied.hidden, 1) and whole[-1] == (tied.vocab * tied.hidden, 1)


def test_the_share_megatron_leaves_after_the_backward_llama_8b():
    """tp 2, dp 64: buckets of 64M parameters; the first stage's last one is what is left after cutting from the
    head: here the embedding (262.7M) with the first layer's tail before it."""
    layout = Layout(tp=2, dp=64, microbatches=1, zero=ZeroStage.OPTIMIZER, overlap_grad_reduce=True,
                    overlap_param_gather=True)
    runs = stage_tensors_backward(LLAMA8B, layout, 0, [LayerKind.DENSE] * 32, True)
    tensors = [size for size, count in runs for _ in range(count)]
    expected = _one_by_one(tensors, 64e6) / sum(tensors)
    share = stage_last_bucket(LLAMA8B, layout, 0)
    assert share == pytest.approx(expected, rel=1e-12)
    embedding = LLAMA8B.vocab * LLAMA8B.hidden / 2
    assert embedding / sum(tensors) < share < (embedding + 64e6) / sum(tensors)
    assert stage_last_bucket(LLAMA8B, replace(layout, overlap_grad_reduce=False, overlap_param_gather=False),
                             0) == 0.0  # nothing bucketed when nothing overlaps


def test_the_reduce_waits_for_the_last_bucket_after_the_backward():
    """ℓ of the reduce starts only when the backward ends: with a backward long enough to hide all the rest,
    the rank's channel still carries ℓ·c after it; with ℓ = 0, the old contended overlap."""
    layout = Layout(tp=2, dp=64, microbatches=1, zero=ZeroStage.OPTIMIZER, overlap_grad_reduce=True)
    params = stage_breakdown(LLAMA8B, layout, 0).params
    c = dp_grad_sync(params, layout, H100).reduce
    sigma = H100.comm_sm_share
    long = stage_reduce_grad(params, layout, H100, backward=100 * c, last_bucket=0.2)
    assert long.busy == pytest.approx(sigma * 0.8 * c) and long.asynchronous == pytest.approx(0.2 * c)
    short = stage_reduce_grad(params, layout, H100, backward=0.1 * c, last_bucket=0.2)
    assert short.alone == pytest.approx(0.8 * c - 0.1 * c + 0.2 * c)
    none = stage_reduce_grad(params, layout, H100, backward=0.1 * c, last_bucket=0.0)
    assert none.alone == pytest.approx(contended_overlap(c, 0.1 * c, sigma))
    one = stage_reduce_grad(params, layout, H100, backward=100 * c, last_bucket=1.0)
    assert one.busy == 0.0 and one.asynchronous == pytest.approx(c)


def test_zero2_overlaps_each_microbatchs_reduce_scatter_with_its_own_backward():
    """ZeRO-2 reduce-scatters every microbatch's gradients: overlapped (DeepSpeed's overlap_comm, Megatron-FSDP's
    optim_grads), each beside its own backward, what one does not hide waited for before the next, the last one's
    beside what follows; not overlapped, all m of them after the backward."""
    layout = Layout(dp=64, microbatches=4, zero=ZeroStage.GRADIENTS, overlap_grad_reduce=True)
    params = stage_breakdown(LLAMA8B, layout, 0).params
    one = sharded_collective(CollectiveOp.REDUCE_SCATTER, params * layout.param_bytes.grads, layout, H100)
    sigma = H100.comm_sm_share
    short = stage_reduce_grad(params, layout, H100, backward=0.5 * one, last_bucket=0.2)
    each = contended_overlap(0.8 * one, 0.5 * one, sigma) + 0.2 * one  # one microbatch's, alone
    assert short.alone == pytest.approx(4 * each)
    assert short.asynchronous == pytest.approx(each - sigma * 0.8 * one)
    long = stage_reduce_grad(params, layout, H100, backward=100 * one, last_bucket=0.2)
    assert long.alone == pytest.approx(4 * (sigma * 0.8 + 0.2) * one)
    plain = stage_reduce_grad(params, replace(layout, overlap_grad_reduce=False), H100, backward=100 * one,
                              last_bucket=0.2)
    assert plain.busy == pytest.approx(4 * one) and plain.asynchronous == 0.0
    # the flag reaches a simulated step: the overlapped one is shorter
    assert stage_last_bucket(LLAMA8B, layout, 0) > 0.0
    steps = [pipesim.simulate(pp=1, mb=4, model="llama3.2-1b", hardware="h100-sxm", dp=64, zero=2,
                              overlap_grad_reduce=flag).model_report.step_time for flag in (False, True)]
    assert steps[1] < steps[0]


def test_the_first_bucket_is_gathered_before_the_forward():
    layout = Layout(tp=2, dp=64, microbatches=1, zero=ZeroStage.OPTIMIZER, overlap_grad_reduce=True,
                    overlap_param_gather=True)
    params = stage_breakdown(LLAMA8B, layout, 0).params
    g = dp_grad_sync(params, layout, H100).gather
    sigma = H100.comm_sm_share
    assert param_gather_time(params, layout, H100, forward=100 * g, first_bucket=0.25) == pytest.approx(
        0.25 * g + sigma * 0.75 * g)
    assert param_gather_time(params, layout, H100, forward=100 * g) == pytest.approx(sigma * g)


def test_a_one_microbatch_step_exposes_the_tail_and_many_microbatches_hide_it():
    """The same layout at one and at 32 microbatches: the exposed data-parallel time on the rank is at least the
    last bucket's reduce plus the first bucket's gather, the same seconds in both, so a smaller share of the
    longer step."""
    kw = dict(model="llama3.1-8b", tp=2, dp=64, seq_len=8192, sequence_parallel=True, zero=1,
              overlap_grad_reduce=True, overlap_param_gather=True, hardware="h100-sxm")
    one = pipesim.simulate("1f1b", 1, 1, **kw).model_report
    many = pipesim.simulate("1f1b", 1, 32, **kw).model_report
    share = stage_last_bucket(one.model, one.layout, 0)
    params = stage_breakdown(one.model, one.layout, 0).params
    sync = dp_grad_sync(params, one.layout, one.chip)
    floor = share * (sync.reduce + sync.gather)
    assert one.rank_times[0].grad_sync >= floor
    assert many.rank_times[0].grad_sync >= floor
    assert one.rank_times[0].grad_sync / one.step_time > 4 * many.rank_times[0].grad_sync / many.step_time


def test_nanotron_buckets_every_stage_as_torch_ddp_does():
    report = pipesim.simulate("1f1b", 2, 8, model="llama3.2-1b", dp=4, framework="nanotron").model_report
    assert report.layout.grad_buckets is GradBuckets.TORCH_DDP and report.layout.overlap_grad_reduce
    assert 0 < stage_last_bucket(report.model, report.layout, 1) < 1  # the second stage is cut too
    megatron = pipesim.simulate("1f1b", 2, 8, model="llama3.2-1b", dp=4, overlap_grad_reduce=True).model_report
    assert megatron.layout.grad_buckets is GradBuckets.MEGATRON
    assert stage_last_bucket(megatron.model, megatron.layout, 1) == 1.0
    asked = pipesim.simulate("1f1b", 2, 8, model="llama3.2-1b", dp=4, framework="nanotron",
                             grad_buckets="megatron").model_report
    assert asked.layout.grad_buckets is GradBuckets.MEGATRON  # the flag wins over the framework's default


def test_torchtitan_reduces_per_module_the_embedding_last():
    """torchtitan's replicate reduces each module on its own: Llama 3.1 8B over two stages at dp 4, the first
    stage's last unit is the embedding (128,256 × 4,096), the second's its first transformer block (its QKV,
    output, gate, up and down projections and two norms); without --pp, the embedding over the whole model."""
    report = pipesim.simulate("1f1b", 2, 8, model="llama3.1-8b", dp=4, framework="torchtitan").model_report
    lay = report.layout
    assert lay.grad_buckets is GradBuckets.PER_MODULE and lay.overlap_grad_reduce
    h, v, f = 4096, 128256, 14336
    block = (h + 2 * 1024) * h + h * h + 3 * f * h + 2 * h
    for stage, unit in ((0, v * h), (1, block)):
        params = stage_breakdown(report.model, lay, stage).params
        assert stage_last_bucket(report.model, lay, stage) == pytest.approx(unit / params, rel=1e-12)
    whole = pipesim.simulate("1f1b", 1, 8, model="llama3.1-8b", dp=4, framework="torchtitan").model_report
    assert stage_last_bucket(whole.model, whole.layout, 0) == pytest.approx(v * h / 8.03e9, rel=0.01)
    # after the backward without the overlap, the whole reduce waits; beside it, only the embedding's share
    after = pipesim.simulate("1f1b", 1, 8, model="llama3.1-8b", dp=4, framework="torchtitan",
                             overlap_grad_reduce=False).model_report
    assert whole.rank_times[0].grad_sync < 0.5 * after.rank_times[0].grad_sync
