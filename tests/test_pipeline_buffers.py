"""What torch.distributed.pipelining keeps of the boundary tensors (pipesim.analytic.pipeline_buffers), by hand.

Llama 3.2 1B on 4 ranks at one 4,096-token sequence a microbatch, tp 1: the boundary tensor is
2 bytes × 4,096 × 2,048 = 16 MiB, the last stage's logits 2 bytes × 4,096 × 128,256. Counted from torch 2.13's
``stage.py`` and ``schedules.py`` (the module's docstring); the distributed test at the end holds the counts to
torch's own runtime.
"""

from __future__ import annotations

import numpy as np
import pytest

from pipesim.analytic.layout import PipelineBuffers
from pipesim.api.simulation import simulate
from pipesim.cli.main import main
from pipesim.errors import PipesimError

BOUNDARY = 2 * 4096 * 2048
MICROBATCHES = 8
_RUN = dict(model="llama3.2-1b", hardware="h100-sxm", pp=4, mb=MICROBATCHES, seq_len=4096, micro_batch_size=1)


def _run(schedule: str = "1f1b", chunks: int | None = None, **options):
    return simulate(schedule, chunks=chunks, **_RUN, **options)


def _logits(result) -> float:
    return 2 * 4096 * result.setup.model.vocab


def _held_at_step_end(result) -> list[float]:
    """Per rank, what the runtime holds once its last backward is done (the curve's last value)."""
    curve = result.raw.memory.curve_columns
    held = curve.get("held_to_step_end", np.zeros(len(curve["rank"])))
    return [float(held[curve["rank"] == r][-1]) for r in range(4)]


def test_torchtitan_resolves_the_runtime_by_schedule_and_an_explicit_choice_wins():
    assert _run(framework="torchtitan").setup.layout.pipeline_buffers is PipelineBuffers.TORCH
    assert _run("interleaved", 2, framework="torchtitan").setup.layout.pipeline_buffers \
        is PipelineBuffers.TORCH_RUNTIME
    assert _run("zb-h1", framework="torchtitan").setup.layout.pipeline_buffers is PipelineBuffers.TORCH_RUNTIME
    assert _run().setup.layout.pipeline_buffers is PipelineBuffers.FREED  # Megatron frees each one
    assert _run(framework="torchtitan", pipeline_buffers="freed").setup.layout.pipeline_buffers \
        is PipelineBuffers.FREED
    alone = simulate(model="llama3.2-1b", hardware="h100-sxm", pp=1, mb=4, framework="torchtitan")
    assert alone.setup.layout.pipeline_buffers is PipelineBuffers.FREED  # no pipeline, no buffers, no note
    assert not alone.model_report.layout.inert_flag_notes


def test_single_stage_schedule_keeps_receive_buffers_and_outputs_until_their_backward():
    freed, torch = _run(framework="torchtitan", pipeline_buffers="freed"), _run(framework="torchtitan")
    ranks = torch.model_report.memory.ranks
    # a receive buffer per microbatch: the input's on every stage but the first, the output gradient's on every
    # stage but the last; Schedule1F1B holds no send past the next exchange
    expected = [1, 2, 2, 1]
    assert [r.pipeline_buffers for r in ranks] == pytest.approx([n * MICROBATCHES * BOUNDARY for n in expected])
    assert torch.raw.memory.peak_held_bytes is None
    # a microbatch in flight keeps its output (the logits on the last stage) and not its input (in a buffer):
    # rank 0 has 4 in flight at its peak, the last rank one
    more = [t.activations - f.activations for t, f in zip(ranks, freed.model_report.memory.ranks, strict=True)]
    assert more == pytest.approx([4 * BOUNDARY, 0, 0, _logits(torch) - BOUNDARY], abs=1.0)
    assert [r.total for r in ranks] == pytest.approx(
        [f.total + m + r.pipeline_buffers for r, f, m in zip(ranks, freed.model_report.memory.ranks, more,
                                                              strict=True)])


def test_multi_stage_runtime_holds_every_send_until_the_step_ends():
    result = _run("interleaved", 2, framework="torchtitan")
    # rank r holds stages r and r + 4; each backward leaves the output it sent (not on the last stage) and the
    # input gradient it sends back (not on the first) until the end: rank 0 1 + 2, ranks 1–2 2 + 2, rank 3 2 + 1
    assert _held_at_step_end(result) == pytest.approx([n * MICROBATCHES * BOUNDARY for n in (3, 4, 4, 3)])
    memory = result.model_report.memory
    held = result.raw.memory.peak_held_bytes
    curve = result.raw.memory.curve_columns
    buffers = (3, 4, 4, 3)  # as the sends: rank 0's stage 0 receives no input, rank 3's stage 7 no gradient
    for r, rank in enumerate(memory.ranks):
        mine = curve["rank"] == r
        # the peak is where activations and held sends peak together, and the report takes both from there
        together = float(np.max(curve["bytes"][mine] + curve["held_to_step_end"][mine]))
        assert rank.activations + held[r] == pytest.approx(together)
        assert rank.pipeline_buffers == pytest.approx(buffers[r] * MICROBATCHES * BOUNDARY + held[r])
    assert any(held)  # the later ranks peak once some backwards are done
    # memory over time (and its plot) draws the two together
    frame = result.memory.over_time
    assert frame.groupby("rank")["total_gib"].max().tolist() == pytest.approx(
        [(rank.activations + held[r]) / 2**30 for r, rank in enumerate(memory.ranks)])


def test_split_backward_keeps_the_whole_graph_until_w():
    torch, freed = _run("zb-h1", framework="torchtitan"), _run("zb-h1", framework="torchtitan",
                                                               pipeline_buffers="freed")
    shape = torch.built.program.shape
    stages = torch.costs.shape_costs(shape)
    kept = [c.weight_grad_activation / c.activation for c in stages]
    # stage_backward_input retains the graph: the I frees nothing but, on the last stage, the logits it read, and
    # elsewhere the output, which the runtime's held send counts from the I on
    assert kept[:-1] == pytest.approx([1 - BOUNDARY / c.activation_bytes for c in stages[:-1]])
    assert kept[-1] == pytest.approx(1 - _logits(torch) / stages[-1].activation_bytes)
    assert all(f.weight_grad_activation < f.activation for f in freed.costs.shape_costs(shape))  # Megatron's I


def test_a_v_fold_sends_nothing_but_keeps_its_slots():
    result = _run("zb-v", framework="torchtitan")
    # rank 3 holds stages 3 and 4, which hand over on the rank: each of their backwards holds one send, not two
    assert _held_at_step_end(result) == pytest.approx([n * MICROBATCHES * BOUNDARY for n in (2, 4, 4, 2)])
    # the fold's slots keep the handed tensors as receive buffers would: rank 0 (stages 0, 7) two a microbatch,
    # every other rank four
    held = result.raw.memory.peak_held_bytes
    buffers = [r.pipeline_buffers - h for r, h in zip(result.model_report.memory.ranks, held, strict=True)]
    assert buffers == pytest.approx([n * MICROBATCHES * BOUNDARY for n in (2, 4, 4, 4)])


def test_returned_outputs_stay_on_the_last_stage_until_the_step_ends():
    kept = _run(framework="torchtitan", pipeline_outputs_kept=True)
    assert _held_at_step_end(kept) == pytest.approx([0, 0, 0, MICROBATCHES * _logits(kept)])
    plain = _run(framework="torchtitan")
    assert kept.model_report.memory.ranks[3].total > plain.model_report.memory.ranks[3].total + _logits(kept)


def test_refusals_are_one_line():
    with pytest.raises(PipesimError, match="--pipeline-outputs-kept"):
        _run(pipeline_outputs_kept=True)
    with pytest.raises(PipesimError, match="DualPipe's two model copies"):
        simulate("dualpipe", **{**_RUN, "pp": 4}, pipeline_buffers="torch")
    with pytest.raises(PipesimError, match="pipeline_buffers='eager' is not one of 'freed', 'torch', 'torch-runtime'"):
        _run(pipeline_buffers="eager")


def test_cli_reports_the_column_and_notes_a_pipeline_of_one(capsys):
    argv = ["simulate", "--model", "llama3.2-1b", "--pp", "4", "--mb", "8", "--seq-len", "4096",
            "--micro-batch-size", "1", "--framework", "torchtitan"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert " p2p " in out and "a receive buffer per microbatch" in out
    assert main([*argv[:3], "--pp", "1", "--mb", "4", "--pipeline-buffers", "torch"]) == 0
    assert "--pipeline-buffers torch changes nothing here" in capsys.readouterr().out
    assert main([*argv[:-2], "--pipeline-outputs-kept"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--pipeline-outputs-kept" in err


# --- held to torch's own runtime -------------------------------------------------------------------------------
# pipesim's orders exported as PyTorch action CSVs and run by torch's _PipelineScheduleRuntime (the class torchtitan
# builds for its multi-stage and file-loaded schedules) around the executor's stages, on 2 gloo processes: each
# rank counts the receive slots its PipelineStages keep after a step and the most batches of sends it had issued
# and not yet waited for; Schedule1F1B runs the 1F1B order's stages as torchtitan runs a single-stage 1F1B.
TORCH_WORLD, TORCH_MICROBATCHES = 2, 4
TORCH_ORDERS = [("1f1b", None), ("interleaved", 2), ("zb-v", None)]


def _torch_counts(rank: int, world_size: int, orders: list[str]) -> list[tuple[int, int, int]]:
    """Per order file, this rank's (receive slots, most sends pending in the runtime, most in Schedule1F1B)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import Schedule1F1B, schedules

    from executors.config import ModelConfig
    from executors.model import synthetic_batch
    from executors.parallel_context import ParallelContext
    from executors.torch_runtime import TorchRunConfig, build_stages, load_schedule_runtime, plan, token_loss
    from pipesim.topology import Topology

    model = ModelConfig(layers=4)
    pending: dict[int, object] = {}
    most = [0]
    batch, wait = schedules._batch_p2p, schedules._wait_batch_p2p

    def counted_batch(ops, desc=None):
        works = batch(ops, desc)
        if ops and all(op.op is dist.isend for op in ops):
            pending.update((id(work), work) for work in works)
            most[0] = max(most[0], len(pending))
        return works

    def counted_wait(works):
        wait(works)
        for work in works:
            pending.pop(id(work), None)

    def run(schedule, stages, step):
        tokens, targets = synthetic_batch(model, step, TORCH_MICROBATCHES * model.micro_batch_size)
        args = (tokens,) if any(s.is_first for s in stages) else ()
        schedule.step(*args, target=targets if any(s.is_last for s in stages) else None, losses=[])

    counts = []
    schedules._batch_p2p, schedules._wait_batch_p2p = counted_batch, counted_wait
    try:
        for order in orders:
            cfg = TorchRunConfig(order, model=model, steps=2)
            imported = plan(cfg, world_size)
            ctx = ParallelContext.create(Topology(pp=imported.program.shape.pp))
            _, stages = build_stages(ctx, imported, model, torch.device("cpu"))
            schedule = load_schedule_runtime(stages, order, cfg.fmt, TORCH_MICROBATCHES)
            for step in range(2):  # by the second step a V's fold slots hold the tensors handed over
                most[0] = 0
                run(schedule, stages, step)
            slots = sum(1 for stage in stages for infos in stage.args_recv_info.values() for info in infos
                        if not info.is_root_arg and info.buffer is not None)
            slots += sum(1 for stage in stages for infos in stage.grad_recv_info.values() for info in infos
                         if info.buffer is not None)
            runtime_most, single_most = most[0], -1
            if len(stages) == 1:
                _, fresh = build_stages(ctx, imported, model, torch.device("cpu"))
                single = Schedule1F1B(fresh[0], n_microbatches=TORCH_MICROBATCHES, loss_fn=token_loss)
                most[0] = 0
                run(single, fresh, 0)
                single_most = most[0]
            counts.append((slots, runtime_most, single_most))
    finally:
        schedules._batch_p2p, schedules._wait_batch_p2p = batch, wait
    return counts


@pytest.mark.distributed
def test_torch_runtime_keeps_what_pipesim_counts(tmp_path):
    from executors.harness import spawn
    from pipesim.analytic.comm import p2p_bytes
    from pipesim.analytic.layout import Layout
    from pipesim.analytic.model_presets import MODEL_PRESETS
    from pipesim.analytic.pipeline_buffers import held_to_step_end, receive_buffer_bytes
    from pipesim.io.torch_csv import export_rows, rows_to_text
    from pipesim.program.build import build_program

    built = {name: build_program(name, TORCH_WORLD, TORCH_MICROBATCHES, chunks).program
             for name, chunks in TORCH_ORDERS}
    paths = []
    for name, program in built.items():
        path = tmp_path / f"{name}.csv"
        path.write_text(rows_to_text(export_rows(program)))
        paths.append(str(path))
    measured = spawn(_torch_counts, TORCH_WORLD, paths)
    spec = MODEL_PRESETS["llama3.2-1b"]
    for (name, _), program in zip(TORCH_ORDERS, built.values(), strict=True):
        shape = program.shape
        layout = Layout(pp=TORCH_WORLD, chunks=shape.chunks, microbatches=TORCH_MICROBATCHES,
                        pipeline_buffers=PipelineBuffers.TORCH_RUNTIME)
        one = p2p_bytes(spec, layout)
        for rank in range(TORCH_WORLD):
            slots, runtime_most, single_most = measured[rank][list(built).index(name)]
            assert slots * one == receive_buffer_bytes(spec, layout, shape, rank), (name, rank)
            sent = sum(held_to_step_end(spec, layout, shape, shape.stage(rank, c)) for c in range(shape.chunks))
            assert runtime_most * one == sent * TORCH_MICROBATCHES, (name, rank)  # every send waits to the end
            if single_most >= 0:
                assert single_most <= 1, (name, rank)  # Schedule1F1B waits for each at the next exchange


def test_the_planner_keeps_each_runtime_apart():
    from dataclasses import replace

    from pipesim.analytic.chip_presets import CHIP_PRESETS
    from pipesim.analytic.layout import Layout
    from pipesim.analytic.model_presets import MODEL_PRESETS
    from pipesim.plan.evaluate import peak_memory, prepare

    model = MODEL_PRESETS["llama3.2-1b"].with_shape(4096, 1)
    chip = CHIP_PRESETS["h100-sxm"]
    waited = Layout(pp=4, chunks=2, microbatches=MICROBATCHES, overlap_p2p=True,
                    pipeline_buffers=PipelineBuffers.TORCH)
    held = replace(waited, pipeline_buffers=PipelineBuffers.TORCH_RUNTIME)
    # one Program and the same activations for both, only the held sends differ: the planner's cached
    # activation profile must not serve the other runtime
    gib = [peak_memory(model, chip, layout, prepare(model, chip, layout, "interleaved"))[0]
           for layout in (waited, held, waited)]
    assert gib[0] == gib[2] < gib[1]
    simulated = _run("interleaved", 2, pipeline_buffers="torch-runtime").model_report.memory.peak.total / 2**30
    assert gib[1] == pytest.approx(simulated)  # the planner's figure is simulate's
