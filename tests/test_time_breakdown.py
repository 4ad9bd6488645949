"""Where a step's time goes on each rank (pipesim/analytic/time_breakdown.py): the parts add up to the cost
model the simulator ran, each term by hand on small cases, and the report and --json carry them."""

import json
from dataclasses import replace

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import embedding_grad_sum
from pipesim.analytic.layout import Layout, Recompute
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.time_breakdown import rank_times
from pipesim.analytic.to_costs import build_cost_model
from pipesim.cli.main import main
from pipesim.program.ir import Op, PipelineShape

A100 = CHIP_PRESETS["a100-80gb"]
MODEL = MODEL_PRESETS["gpt3-2.7b"]


@pytest.mark.parametrize("layout", [
    Layout(pp=4, microbatches=8),
    Layout(pp=2, chunks=2, microbatches=4),
    Layout(tp=2, pp=2, dp=4, microbatches=4, recompute=Recompute.FULL),
    Layout(pp=4, microbatches=8, overlap_p2p=True),
], ids=["1f1b", "interleaved", "tp-dp-recompute", "overlapped"])
def test_a_ranks_passes_add_up_to_the_cost_models_pass_times(layout):
    """Two code paths, one answer: compute + exposed comm + P2P wire + sync over a rank's passes equal the
    durations the cost model gives the simulator for the same passes (F and the full backward, each chunk 1/v
    of the rank's share), and gradient sync equals its REDUCE_GRAD durations and the tied embedding's gradient
    sum over the first and last pipeline ranks, which the cost model runs before every rank's optimizer step."""
    shape = PipelineShape(layout.pp, layout.microbatches, layout.chunks)
    costs = build_cost_model(MODEL, A100, layout, shape)
    embedding = embedding_grad_sum(MODEL, layout, A100, shape)
    assert embedding > 0  # GPT-3 2.7B ties its embeddings, and they sit on two pipeline ranks
    for t in rank_times(MODEL, A100, layout, shape, step_time=1e9):
        stages = [costs.stage(shape.stage(t.rank, c)) for c in range(shape.chunks)]
        passes = sum(layout.microbatches * (s.duration(Op.F) + s.duration(Op.B)) / shape.chunks for s in stages)
        assert t.compute + t.exposed_comm + t.p2p_wire + t.p2p_sync == pytest.approx(passes, rel=1e-12)
        reduce = sum(s.reduce_grad / shape.chunks for s in stages)
        assert t.grad_sync == pytest.approx(reduce + embedding, rel=1e-12)  # no ZeRO: no parameter gather
        assert t.step == pytest.approx(1e9)


def test_synchronisations_by_hand():
    """1F1B on 2 ranks: rank 0 sends once per microbatch (its forward's output), rank 1 once (its backward's
    gradient), each paying the chip's p2p_sync_overhead. Interleaved v = 2 on 2 ranks: rank 0 holds stages 0 and
    2, which send 1 + 2 times per microbatch, half a synchronisation each (one call per F/B pair)."""
    sync = A100.p2p_sync_overhead
    layout = Layout(pp=2, microbatches=4)
    times = rank_times(MODEL, A100, layout, PipelineShape(2, 4), step_time=100.0)
    assert [t.p2p_sync for t in times] == pytest.approx([4 * sync, 4 * sync])
    interleaved = Layout(pp=2, chunks=2, microbatches=4)
    times = rank_times(MODEL, A100, interleaved, PipelineShape(2, 4, 2), step_time=100.0)
    assert [t.p2p_sync for t in times] == pytest.approx([4 * 3 * sync / 2, 4 * 3 * sync / 2])
    overlapped = rank_times(MODEL, A100, replace(layout, overlap_p2p=True), PipelineShape(2, 4), step_time=100.0)
    assert all(t.p2p_wire == t.p2p_sync == 0 for t in overlapped)
    single = rank_times(MODEL, A100, Layout(dp=8, microbatches=4), PipelineShape(1, 4), step_time=100.0)
    assert single[0].p2p_wire == single[0].p2p_sync == 0 and single[0].grad_sync > 0


def test_idle_is_what_the_step_leaves_and_never_negative():
    layout = Layout(pp=2, microbatches=4)
    busy = rank_times(MODEL, A100, layout, PipelineShape(2, 4), step_time=0.0)
    assert all(t.idle == 0 for t in busy)
    work = busy[0].step
    assert rank_times(MODEL, A100, layout, PipelineShape(2, 4), step_time=work + 1.5)[0].idle == pytest.approx(1.5)


def test_the_report_names_the_busiest_rank_and_json_carries_every_rank(capsys):
    argv = ["simulate", "--model", "gpt3-2.7b", "--hardware", "a100-80gb", "--pp", "4", "--mb", "8"]
    assert main(argv) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("where the step goes"))
    assert "the busiest" in line and "P2P" in line and "idle" in line
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    ranks = report["time_per_rank"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    for r in ranks:
        total = sum(v for k, v in r.items() if k.endswith("_s"))
        assert total == pytest.approx(report["step_time_s"], rel=1e-9)


def test_asynchronous_gradient_sync_counts_what_the_rank_was_busy_for_and_what_it_waited():
    """--overlap-grad-reduce: a REDUCE_GRAD holds the rank σ·c and hands the rest to its channel. Without the
    simulation's waits the breakdown counts both parts whole (nothing hidden); with them, the busy part plus
    each rank's wait at STEP, as the simulator measured it (by hand in tests/test_engines.py)."""
    from pipesim.analytic.layout import ZeroStage

    layout = Layout(tp=2, dp=64, pp=2, chunks=2, microbatches=4, zero=ZeroStage.OPTIMIZER, overlap_grad_reduce=True)
    shape = PipelineShape(2, 4, 2)
    slow = replace(A100, inter_node_bandwidth=A100.inter_node_bandwidth / 100)  # more than a backward hides
    costs = build_cost_model(MODEL, slow, layout, shape)
    stages = [[costs.stage(shape.stage(r, c)) for c in range(2)] for r in range(2)]
    assert all(s.reduce_grad_async > 0 for rank in stages for s in rank)
    whole = rank_times(MODEL, slow, layout, shape, step_time=1e9)
    waited = rank_times(MODEL, slow, layout, shape, step_time=1e9, sync_wait=[0.25, 0.0])
    for r, (a, b) in enumerate(zip(whole, waited, strict=True)):
        busy = sum(s.reduce_grad for s in stages[r]) / 2
        hidden = sum(s.reduce_grad_async for s in stages[r]) / 2
        assert a.grad_sync - b.grad_sync == pytest.approx(hidden - [0.25, 0.0][r], rel=1e-9)
        assert b.grad_sync - [0.25, 0.0][r] > busy  # the rest is the parameter gather, which ZeRO-1 adds
