"""The embedding table's copies on other pipeline ranks have their gradients summed before the optimizer step
(pipesim.analytic.comm.embedding_grad_sum): which ranks hold a copy, the all-reduce's time by hand, and that the
step and every rank's gradient sync grow by it and by nothing else."""

from dataclasses import replace

import pytest

import pipesim
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import embedding_copy_ranks, embedding_grad_sum, nccl_ring_time
from pipesim.analytic.layout import Layout, OptimizerBytes, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.to_costs import build_cost_model
from pipesim.program.ir import PipelineShape, Placement

A100 = CHIP_PRESETS["a100-80gb"]
GPT3 = MODEL_PRESETS["gpt3-175b"]  # tied input and output embeddings, as Megatron-LM's GPT
UNTIED = replace(GPT3, name="gpt3-175b-untied", tied_embeddings=False)


def _loop(layout: Layout) -> PipelineShape:
    return PipelineShape(layout.pp, layout.microbatches, layout.chunks)


def test_ranks_holding_a_copy():
    four = Layout(tp=8, pp=4, microbatches=8)
    assert embedding_copy_ranks(GPT3, four, _loop(four)) == (0, 3)  # the table and the tied output layer
    assert embedding_copy_ranks(UNTIED, four, _loop(four)) == (0,)
    one = Layout(tp=8, pp=1, microbatches=8)
    assert embedding_copy_ranks(GPT3, one, _loop(one)) == (0,)
    interleaved = replace(four, chunks=2)  # the head on the last slice, chunk 1 of rank 3
    assert embedding_copy_ranks(GPT3, interleaved, _loop(interleaved)) == (0, 3)
    # a V placement puts the first and the last slice on rank 0: nothing to sum across ranks
    assert embedding_copy_ranks(GPT3, interleaved, PipelineShape(4, 8, 2, Placement.V)) == (0,)
    dual = replace(four, model_copies=2)  # DualPipe shares the table physically
    assert embedding_copy_ranks(GPT3, dual, PipelineShape(4, 8, 2, Placement.DUAL)) == (0,)
    # a multi-token-prediction module keeps its own copy on the slice it runs on (Megatron-Core sums it too)
    mtp = replace(MODEL_PRESETS["llama3.1-8b"], mtp_layers=1)
    assert embedding_copy_ranks(mtp, four, _loop(four)) == (0, 3)
    assert embedding_copy_ranks(mtp, replace(four, mtp_stage=2), _loop(four)) == (0, 2)


def test_all_reduce_between_the_first_and_last_pipeline_ranks_by_hand():
    layout = Layout(tp=8, pp=8, dp=2, microbatches=16, zero=ZeroStage.OPTIMIZER)
    # the table's 1/tp, FP32 main gradients (the whole buffer: the distributed optimizer does not shard it)
    nbytes = 51200 * 12288 / 8 * 4
    # rank 0 and rank 7·tp·dp = 112: two nodes, one NIC each; a two-rank ring moves the buffer once each way
    wire = nbytes / (A100.inter_node_bandwidth * A100.collective_efficiency)
    seconds = embedding_grad_sum(GPT3, layout, A100, _loop(layout))
    assert seconds == pytest.approx(nccl_ring_time(wire, A100, 2, 7 * 16 + 1, all_reduce=True))
    assert wire < seconds < wire * 1.05  # the bytes, and a few network hops' latency
    assert seconds == pytest.approx(0.0157, rel=0.05)  # 315 MB over a 200 Gb/s HDR NIC at ~0.8 of it
    # BF16 main gradients (NeMo's grad_sync_dtype bf16): half the bytes
    halved = embedding_grad_sum(GPT3, replace(layout, param_bytes=OptimizerBytes(grads=2.0)), A100, _loop(layout))
    assert halved == pytest.approx(nccl_ring_time(wire / 2, A100, 2, 113, all_reduce=True))
    # sharded gradients (ZeRO-2): each rank sums its 1/(dp·cp) of them
    sharded = embedding_grad_sum(GPT3, replace(layout, zero=ZeroStage.GRADIENTS), A100, _loop(layout))
    assert sharded == pytest.approx(nccl_ring_time(wire / 2, A100, 2, 113, all_reduce=True))
    assert embedding_grad_sum(UNTIED, layout, A100, _loop(layout)) == 0.0


def test_inside_one_node_the_pair_takes_nvlink():
    layout = Layout(tp=2, pp=4, microbatches=8)  # ranks 0 and 6 of one 8-GPU node
    seconds = embedding_grad_sum(GPT3, layout, A100, _loop(layout))
    across = embedding_grad_sum(GPT3, replace(layout, tp=4), A100, _loop(replace(layout, tp=4)))  # 0 and 12
    assert 0 < seconds < across / 4  # NVLink's pair share is several NICs' worth; half the bytes at tp 4


def test_the_step_and_every_ranks_sync_grow_by_it_and_nothing_else():
    """Tied and untied GPT-3 hold the same parameters on every stage once pp > 1 (the output layer is a copy), so
    the two cost models differ only in the optimizer step, by the sum; the simulated step by the same."""
    options = dict(pp=8, mb=16, hardware="a100-80gb", tp=8, dp=2, zero=1)
    tied = pipesim.simulate("1f1b", model=GPT3, **options)
    untied = pipesim.simulate("1f1b", model=UNTIED, **options)
    layout = tied.setup.layout
    added = embedding_grad_sum(GPT3, layout, A100, _loop(layout))
    assert added > 0.01
    a, b = build_cost_model(GPT3, A100, layout), build_cost_model(UNTIED, A100, layout)
    assert a.optimizer_step - b.optimizer_step == pytest.approx(added)
    assert [a.stage(s) for s in range(8)] == [b.stage(s) for s in range(8)]
    assert tied.model_report.step_time - untied.model_report.step_time == pytest.approx(added)
    for with_sum, without in zip(tied.model_report.rank_times, untied.model_report.rank_times, strict=True):
        assert with_sum.grad_sync - without.grad_sync == pytest.approx(added)
        assert with_sum.step == pytest.approx(without.step + added)
