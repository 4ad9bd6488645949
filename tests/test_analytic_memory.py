"""Per-rank memory against Megatron-LM's theoretical memory formula, and where pipesim deliberately differs.

Megatron-LM's ``megatron/training/theoretical_memory_usage.py``, reimplemented here from its published form:
weights+optimizer = (L·P_layer/pp + V·h)/tp · (18, or 6 + 12/dp with the distributed optimizer);
activations (first stage, SP + selective) = [sbh·L·(18 + 4·ffn/h) + 8sb·pp + sbh·pp] / tp,
× (1 + (pp−1)/(pp·v)) interleaved, × min(1, m/pp) 1F1B.
"""

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.layout import Layout, Recompute
from pipesim.analytic.memory_gib import memory_report
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.to_costs import build_cost_model
from pipesim.program.build import build_program
from pipesim.sim.simulator import simulate

CHIP = CHIP_PRESETS["a100-80gb"]


def _run(model, schedule, tp, pp, m, v=1, dp=1, recompute=Recompute.SELECTIVE, sp=True, dist=False):
    built = build_program(schedule, pp, m, v if schedule == "interleaved" else None)
    shape = built.program.shape
    layout = Layout(tp=tp, dp=dp, pp=pp, chunks=shape.chunks, microbatches=m, recompute=recompute,
                    sequence_parallel=sp, distributed_optimizer=dist)
    result = simulate(built.program, build_cost_model(model, CHIP, layout, shape), check=False)
    return layout, result, memory_report(model, CHIP, layout, result)


def _megatron_activation(model, tp, pp, m, v=None):
    s, b, h = model.seq_len, model.micro_batch, model.hidden
    act = s * b * h * model.layers * (18 + 4 * model.ffn_hidden / h)
    act += 8 * s * b * pp + s * b * h * pp
    if v is not None:
        act *= 1 + (pp - 1) / (pp * v)
    elif pp > 1:
        act *= min(1, m / pp)
    return act / tp


def _megatron_weights(model, tp, pp, dp, dist):
    h, n, v = model.hidden, model.layers, model.vocab
    gated = 3 / 2 if model.gated else 1
    layer = 2 * n * h * h * ((1 + model.kv_heads / model.heads) + model.ffn_hidden / h * gated + 2 / h)
    per_param = 6 + 12 / dp if dist else 18
    return (layer / pp + v * h) / tp * per_param


@pytest.mark.parametrize("m", [2, 8, 32])
def test_first_stage_activations_match_megatron_1f1b(m):
    model = MODEL_PRESETS["gpt3-175b"]
    tp, pp = 8, 8
    _, _result, report = _run(model, "1f1b", tp, pp, m)
    held = min(m, pp)
    # Token ids (int64) are not sharded by tp in pipesim; Megatron's formula divides them by tp too.
    ids_correction = held * 8 * model.seq_len * (1 - 1 / tp)
    assert report.ranks[0].activations == pytest.approx(_megatron_activation(model, tp, pp, m) + ids_correction,
                                                        rel=1e-12)


def test_first_stage_activations_interleaved_layers_match_megatron_embedding_deliberately_differs():
    model = MODEL_PRESETS["gpt3-175b"]
    tp, pp, v, m = 8, 4, 2, 16
    _layout, _result, report = _run(model, "interleaved", tp, pp, m, v)
    s, b, h = model.seq_len, model.micro_batch, model.hidden
    layer_part = s * b * h * model.layers * 34 / tp * (1 + (pp - 1) / (pp * v))
    embedding = 8 * s * b + s * b * h / tp
    # Replay rank 0's compute order by hand: which (microbatch, chunk) pairs are held at the peak?
    order = build_program("interleaved", pp, m, v).schedule.orders[0]
    per_chunk = {0: 0, 1: 0}
    best = (0, 0)
    for ins in order:
        per_chunk[ins.chunk] += 1 if ins.op.value == "F" else -1
        if ins.op.value == "F":
            best = max(best, (sum(per_chunk.values()), per_chunk[0]))
    held, chunk0 = best
    assert held == pp * v + pp - 1  # Megatron's warmup 2(p−1)+(v−1)p, plus the steady-state forward
    assert report.ranks[0].activations == pytest.approx(layer_part + chunk0 * embedding, rel=1e-12)
    # Megatron scales the embedding by the same penalty, p·(1 + (p−1)/(pv)) = 5.5 microbatches; the schedule
    # really holds 8 chunk-0 microbatches (the ones carrying the embedding) at its peak, in the steady state.
    megatron = _megatron_activation(model, tp, pp, m, v)
    assert chunk0 == 8 and pp * (1 + (pp - 1) / (pp * v)) == 5.5
    assert report.ranks[0].activations - megatron == pytest.approx(
        chunk0 * embedding - 5.5 * (8 * s * b + s * b * h) / tp, rel=1e-9)


@pytest.mark.parametrize("dist", [False, True])
def test_first_stage_weights_and_optimizer_match_megatron(dist):
    model = MODEL_PRESETS["llama2-70b"]  # no biases; Megatron counts LayerNorm 2h per norm, RMSNorm has h
    tp, pp, dp = 8, 4, 4
    _, _, report = _run(model, "1f1b", tp, pp, 8, dp=dp, dist=dist)
    assert report.ranks[0].static == pytest.approx(_megatron_weights(model, tp, pp, dp, dist), rel=1e-4)


def test_interleaved_activation_growth_factor():
    model = MODEL_PRESETS["gpt3-175b"]
    tp, pp, m = 8, 8, 32
    for v in (2, 3, 4):
        _, one, _ = _run(model, "1f1b", tp, pp, m)
        _, inter, _ = _run(model, "interleaved", tp, pp, m, v)
        # Both in microbatches through a rank's share of the model (L/p layers).
        layers_1f1b = one.memory.peak_activations[0] * model.layers / pp
        layers_inter = inter.memory.peak_activations[0] * model.layers / pp
        assert layers_inter / layers_1f1b == pytest.approx(1 + (pp - 1) / (pp * v), rel=1e-12)
        bytes_ratio = inter.memory.peak_bytes[0] / one.memory.peak_bytes[0]
        assert bytes_ratio == pytest.approx(1 + (pp - 1) / (pp * v), rel=0.01)


def test_peak_on_last_rank_where_megatron_formula_looks_at_the_first():
    # With one microbatch every rank holds one microbatch of L/p layers; Megatron's formula looks only at the
    # first stage (and its per-layer term predates GQA/SwiGLU), but the last rank also holds the FP32 logits
    # (4sbV/t, V = 128256), so it is the one that peaks.
    model = MODEL_PRESETS["llama3.1-8b"]
    tp, pp, m = 2, 4, 1
    _, _, report = _run(model, "1f1b", tp, pp, m)
    assert report.peak.rank == pp - 1
    first, last = report.ranks[0], report.ranks[-1]
    logits = 4 * model.seq_len * model.vocab / tp
    assert last.activations - first.activations > 0.9 * logits
    assert last.total > first.total * 1.05



def test_over_capacity_warns():
    model = MODEL_PRESETS["gpt3-175b"]
    _, _, report = _run(model, "1f1b", 8, 2, 8, recompute=Recompute.NONE, sp=False)
    assert report.over_capacity and "rank 0 needs" in report.warnings()[0]


def test_a_moe_model_over_capacity_is_told_its_expert_parallelism_first(capsys):
    # the experts are most of a MoE model's weights: raising --ep is the first remedy where dp·cp leaves room, and
    # adding data parallelism for it where none is; a dense model is told neither
    from pipesim.analytic.memory_gib import remedies

    assert remedies(Layout(dp=8, ep=2), moe=True)[0] == (
        "raise --ep (now 2: the experts split over up to dp·cp = 8 ranks)")
    assert remedies(Layout(dp=4, cp=2, ep=8), moe=True)[0] == "raise --tp/--pp"
    assert remedies(Layout(), moe=True)[0].startswith("add --dp with --ep")
    assert not any("--ep" in fix for fix in remedies(Layout(dp=8)))
    from pipesim.cli.main import main

    assert main(["simulate", "--model", "llama4-maverick", "--dp", "8", "--pp", "4"]) == 0
    assert "more than the 79.6 GiB of one h100-sxm: raise --ep (now 1" in capsys.readouterr().out


def test_backward_working_set_counts_what_recomputation_rematerialises():
    """Llama 2 7B, b = 1, s = 4096, tp = 1, fused attention, by hand (d = 2, gated MLP, no dropout):
    A = 4d·sbh (two norm inputs, QKV and MLP inputs) + 2d·sbh (Q, out-proj input) + 2d·sb·kv (K, V)
      + 3d·sb·ffn (gate, up, product) = 538,968,064 bytes, the layer's full activations.
    Without recomputation the working set is A (the gradients); with full recomputation 2A − S, S = d·sbh the
    stored layer input (the recomputed forward re-materialises A − S, and the gradients are A again)."""
    from pipesim.analytic.layout import Layout, Recompute
    from pipesim.analytic.memory_gib import backward_working_set
    from pipesim.analytic.model_presets import MODEL_PRESETS

    model = MODEL_PRESETS["llama2-7b"].with_shape(4096, 1)
    sbh, sb = 4096 * 4096, 4096
    full = 8 * sbh + (2 * sbh + 4 * sb * 4096 + 2 * sbh + 6 * sb * 11008)  # replicated + sharded, tp = 1
    assert full == 538_968_064
    assert backward_working_set(model, Layout()) == full
    assert backward_working_set(model, Layout(recompute=Recompute.FULL)) == 2 * full - 2 * sbh


# --- ZeRO shards over dp·cp (#24) ----------------------------------------------------------------------------
def test_zero_shards_over_dp_times_cp_by_hand():
    """ZeRO-3 with dp 1, cp 8, pp 2: the optimizer state of P parameters is P·12 B / (dp·cp) = P·12/8 B per rank
    (pipelined, so weights and gradients stay whole); the same layout with cp 1 would have nothing to shard."""
    from pipesim.analytic.layout import OptimizerBytes, ZeroStage
    from pipesim.analytic.memory_gib import static_bytes

    layout = Layout(dp=1, cp=8, pp=2, zero=ZeroStage.PARAMETERS)
    assert layout.shards == 8 and layout.sharding is ZeroStage.PARAMETERS and layout.sharding_note is None
    b = OptimizerBytes()
    weights, grads, optimizer = static_bytes(1e9, layout)
    assert optimizer == pytest.approx(1e9 * b.optimizer / 8)
    assert (weights, grads) == (pytest.approx(1e9 * b.weights), pytest.approx(1e9 * b.grads))
    dist = Layout(dp=2, cp=4, pp=2, distributed_optimizer=True)
    assert static_bytes(1e9, dist)[2] == pytest.approx(1e9 * b.optimizer / 8)


@pytest.mark.parametrize("flags", [{"distributed_optimizer": True}, {"zero": 2}, {"zero": 3}])
def test_zero_with_nothing_to_shard_runs_as_zero_0_with_a_note(flags):
    from pipesim.analytic.layout import ZeroStage
    from pipesim.analytic.memory_gib import static_bytes

    flags = {k: ZeroStage(v) if k == "zero" else v for k, v in flags.items()}
    layout = Layout(dp=1, cp=1, pp=2, **flags)  # refused before #24
    assert layout.sharding is ZeroStage.NONE
    assert layout.sharding_note.startswith("nothing to shard (dp·cp = 1): ")
    assert static_bytes(1e9, layout) == static_bytes(1e9, Layout(dp=1, cp=1, pp=2))


def test_cli_distributed_optimizer_on_one_replica_notes_it(capsys):
    from pipesim.cli.main import main

    assert main(["simulate", "--model", "llama2-7b", "--pp", "2", "--mb", "4", "--dp", "1",
                 "--distributed-optimizer"]) == 0
    out = capsys.readouterr().out
    assert "note: nothing to shard (dp·cp = 1): the distributed optimizer keeps the full state" in out
    assert main(["simulate", "--model", "llama2-7b", "--pp", "2", "--mb", "4", "--dp", "1", "--cp", "8",
                 "--zero", "3", "--hardware", "h100-sxm", "--tp", "1"]) == 0
    assert "ZeRO 3" in capsys.readouterr().out
