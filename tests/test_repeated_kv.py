"""Grouped-query attention's keys and values copied out to every query head before the attention call
(``--repeat-kv``: torchtitan's Llama until January 2026), each effect computed by hand."""

import json
from dataclasses import replace

import pytest

from pipesim.analytic.activations import cp_backward_buffers, layer_activation_bytes
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import cp_kv_bytes
from pipesim.analytic.kernels import (
    elementwise_backward_bytes,
    elementwise_bytes,
    kv_repeat,
    layer_kernel_counts,
    repeat_kv_bytes,
)
from pipesim.analytic.layout import CpComm, CpKernels, Layout, Recompute
from pipesim.analytic.memory_gib import backward_working_set
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.to_costs import build_cost_model
from pipesim.cli.main import main

MIB = 2**20
LLAMA_8B = MODEL_PRESETS["llama3.1-8b"].with_shape(seq_len=8192, micro_batch=1)  # 32 heads, 8 KV heads of 128
LLAMA_405B = MODEL_PRESETS["llama3.1-405b"].with_shape(seq_len=131072, micro_batch=1)  # 128 heads, 8 KV heads
PYTORCH_CP4 = Layout(tp=8, cp=4, cp_kernels=CpKernels.PYTORCH, cp_comm=CpComm.ALL_GATHER)


def test_the_repeat_is_the_query_heads_over_the_kv_heads_and_nothing_without_gqa():
    assert kv_repeat(LLAMA_8B, Layout(kv_repeated=True)) == 4.0
    assert kv_repeat(LLAMA_405B, Layout(kv_repeated=True)) == 16.0
    assert kv_repeat(LLAMA_8B, Layout()) == 1.0
    mha = MODEL_PRESETS["llama2-13b"]  # each head its own K and V: nothing to repeat
    assert kv_repeat(mha, Layout(kv_repeated=True)) == 1.0 and repeat_kv_bytes(mha, Layout(kv_repeated=True)) == 0


def test_the_copy_reads_the_kv_heads_and_writes_the_repeated_ones_each_way():
    """8B at tp 2: 4 KV heads of 128 a rank for K and for V (1,024 elements a token), read once (2 B) and written
    at 4× (16 query heads): 2 · 1,024 · (1 + 4) = 10,240 bytes a token, forward and again backward (the sum
    back into the KV heads)."""
    plain, repeated = Layout(tp=2), Layout(tp=2, kv_repeated=True)
    assert repeat_kv_bytes(LLAMA_8B, repeated) == 2 * 1024 * 5
    tokens = 8192
    assert elementwise_bytes(LLAMA_8B, repeated, tokens) - elementwise_bytes(LLAMA_8B, plain, tokens) == \
        pytest.approx(tokens * 10240)
    assert (elementwise_backward_bytes(LLAMA_8B, repeated, tokens)
            - elementwise_backward_bytes(LLAMA_8B, plain, tokens)) == pytest.approx(tokens * 10240)
    more = layer_kernel_counts(LLAMA_8B, repeated)
    fewer = layer_kernel_counts(LLAMA_8B, plain)
    assert (more.forward - fewer.forward, more.backward_input - fewer.backward_input) == (2, 2)


def test_the_kernel_saves_the_repeated_keys_and_values():
    """Without recomputation at tp 1 the attention kernel keeps K and V at 32 heads instead of 8: 2 B × 8,192
    tokens × (4,096 − 1,024) × 2 more."""
    more = layer_activation_bytes(LLAMA_8B, Layout(kv_repeated=True))
    assert more - layer_activation_bytes(LLAMA_8B, Layout()) == pytest.approx(2 * 8192 * 3072 * 2)
    # full recomputation keeps only the layer's input; the repeat shows in the backward's working set
    full = Layout(recompute=Recompute.FULL)
    assert layer_activation_bytes(LLAMA_8B, replace(full, kv_repeated=True)) == layer_activation_bytes(LLAMA_8B, full)
    assert backward_working_set(LLAMA_8B, replace(full, kv_repeated=True)) > backward_working_set(LLAMA_8B, full)


def test_context_parallelism_exchanges_the_repeated_keys_and_values():
    """405B at 131,072 tokens, cp 4, tp 8: a rank's 32,768 tokens of K and V on 1 KV head of 128, 2 B each:
    2 · 2 · 32,768 · 128 = 16 MiB; repeated to its 16 query heads, 256 MiB."""
    assert cp_kv_bytes(LLAMA_405B, PYTORCH_CP4) == 16 * MIB
    assert cp_kv_bytes(LLAMA_405B, replace(PYTORCH_CP4, kv_repeated=True)) == 256 * MIB


def test_pytorch_cp_holds_its_exchange_in_the_backward():
    """PyTorch's ring backward: the 4 ranks' K and V gathered (4 × 256 MiB), Q's and K/V's gradients accumulated
    in FP32 (2 × (128 + 256) MiB: a rank's queries are 32,768 tokens × 16 heads × 128 × 2 B), and the K/V
    gradients concatenated in FP32 to send and received (2 × 2 × 256 MiB): 2,816 MiB. Transformer Engine's and a
    run without CP: none counted."""
    repeated = replace(PYTORCH_CP4, kv_repeated=True)
    assert cp_backward_buffers(LLAMA_405B, repeated) == pytest.approx((1024 + 768 + 1024) * MIB)
    assert cp_backward_buffers(LLAMA_405B, replace(repeated, cp_kernels=CpKernels.TRANSFORMER_ENGINE,
                                                   cp_comm=CpComm.P2P)) == 0
    assert cp_backward_buffers(LLAMA_405B, Layout(tp=8, kv_repeated=True)) == 0
    gqa = cp_backward_buffers(LLAMA_405B, PYTORCH_CP4)
    assert gqa == pytest.approx((4 * 16 + 2 * (128 + 16) + 4 * 16) * MIB)
    # the ring rotation (--cp-comm-type p2p, its alltoall method) holds the block in use and the one arriving
    ring = replace(repeated, cp_comm=CpComm.P2P)
    assert cp_backward_buffers(LLAMA_405B, ring) == pytest.approx((2 * 256 + 768 + 1024) * MIB)
    assert backward_working_set(LLAMA_405B, repeated) - backward_working_set(
        LLAMA_405B, replace(repeated, cp_kernels=CpKernels.TRANSFORMER_ENGINE, cp_comm=CpComm.P2P)) == \
        pytest.approx(2816 * MIB)


def test_a_repeated_cp_step_is_slower_only_where_there_is_something_to_repeat():
    chip = CHIP_PRESETS["h100-sxm"]
    model = MODEL_PRESETS["llama3.1-405b"].with_shape(seq_len=32768, micro_batch=1)
    layout = replace(PYTORCH_CP4, pp=2, microbatches=2)
    plain = build_cost_model(model, chip, layout)
    repeated = build_cost_model(model, chip, replace(layout, kv_repeated=True))
    assert repeated.stage(0).backward > plain.stage(0).backward and repeated.stage(0).forward > plain.stage(0).forward
    mha = MODEL_PRESETS["llama2-13b"]
    assert build_cost_model(mha, chip, replace(layout, tp=2, kv_repeated=True)).stage(0) == \
        build_cost_model(mha, chip, replace(layout, tp=2)).stage(0)


def test_the_flag_reaches_the_report(capsys):
    args = ["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--pp", "2", "--mb", "4", "--tp", "2"]
    assert main([*args, "--repeat-kv", "--json"]) == 0
    repeated = json.loads(capsys.readouterr().out)["model_report"]
    assert main([*args, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)["model_report"]
    assert repeated["layout"]["repeat_kv"] is True and plain["layout"]["repeat_kv"] is False
    assert repeated["step_time_s"] > plain["step_time_s"]
    assert main([*args, "--repeat-kv"]) == 0
    assert "K and V repeated to the query heads" in capsys.readouterr().out
    assert main(["simulate", "--model", "llama2-13b", "--hardware", "h100-sxm", "--pp", "2", "--mb", "4",
                 "--repeat-kv"]) == 0
    assert "repeated to the query heads" not in capsys.readouterr().out  # no grouped heads: nothing repeated


def test_plan_takes_it_as_a_fixed_setting_of_every_candidate():
    import pipesim

    space = dict(model="llama3.1-8b", gpus=8, global_batch=16, seq_len=8192, framework="torchtitan",
                 schedules=("1f1b",), cp=(1,), precision=("bf16",), top=3)
    plain, repeated = pipesim.plan(**space), pipesim.plan(**space, repeat_kv=True)
    assert repeated.request.kv_repeated and not plain.request.kv_repeated
    assert repeated.best.evaluation.step_time > plain.best.evaluation.step_time
    assert "K and V repeated to the query heads" in repeated.text()


def test_a_recomputed_attention_exchanges_its_keys_and_values_again():
    """Under full recomputation (and a selective one of the attention core) the backward re-runs the attention's
    forward, ring exchange and all: at tp 1 (no TP collectives) the layer's exposed communication in the backward
    gains exactly the forward's CP exposure."""
    from pipesim.analytic.comm import cp_exposed
    from pipesim.analytic.kernels import attention_core_times, layer_times
    from pipesim.analytic.to_costs import _layer_comm

    chip = CHIP_PRESETS["h100-sxm"]
    model = MODEL_PRESETS["llama3.1-8b"].with_shape(seq_len=65536, micro_batch=1)
    # over two nodes: the all-gather outlasts the first step's attention
    layout = Layout(cp=16, cp_kernels=CpKernels.PYTORCH, cp_comm=CpComm.ALL_GATHER, kv_repeated=True)
    core = attention_core_times(model, layout, chip)
    ring = cp_exposed(model, layout, chip, core.forward, core.backward_input)
    assert ring.forward > 0
    kept = _layer_comm(model, chip, layout, layer_times(model, layout, chip))
    for recomputed in (replace(layout, recompute=Recompute.FULL), replace(layout, recompute=Recompute.SELECTIVE)):
        comm = _layer_comm(model, chip, recomputed, layer_times(model, recomputed, chip))
        assert (comm.forward, comm.backward) == pytest.approx((kept.forward, kept.backward + ring.forward))


def test_megatron_cores_unfused_attention_repeats_them_unasked():
    """Megatron-Core's DotProductAttention (its unfused path) repeat_interleaves grouped K and V to the query heads;
    its fused (Transformer Engine) attention and torchtitan's SDPA (enable_gqa since January 2026) read them as they
    are. A flag given wins either way; plan says Megatron's fused attention cannot run them repeated."""
    import pipesim
    from pipesim.api.simulation import simulate

    run = dict(model="llama3.1-8b", hardware="h100-sxm", pp=2, mb=4)
    assert simulate(**run, attention="unfused").setup.layout.kv_repeated
    assert not simulate(**run, attention="unfused", repeat_kv=False).setup.layout.kv_repeated
    assert not simulate(**run).setup.layout.kv_repeated
    assert not simulate(**run, attention="unfused", framework="torchtitan").setup.layout.kv_repeated
    assert simulate(**run, framework="torchtitan", repeat_kv=True).setup.layout.kv_repeated
    space = dict(model="llama3.1-8b", gpus=8, global_batch=16, seq_len=8192, schedules=("1f1b",), cp=(1,),
                 precision=("bf16",), top=1)
    fused = pipesim.plan(**space, repeat_kv=True).text()
    assert "megatron: (Megatron-Core's fused attention reads grouped K and V as they are" in fused
    unfused = pipesim.plan(**space, attention="unfused")
    assert unfused.request.kv_repeated and "megatron: pretrain_gpt.py" in unfused.text()
