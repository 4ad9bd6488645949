"""Activation bytes per layer: Korthikanti et al. 2023 Table 2, and by hand for a GQA/SwiGLU model."""

import pytest

from pipesim.analytic.activations import layer_activation_bytes, output_activation_bytes
from pipesim.analytic.layout import AttentionKernel, Layout, Recompute
from pipesim.analytic.model_presets import MODEL_PRESETS

GPT = MODEL_PRESETS["gpt3-175b"]  # MHA, ffn = 4h, dropout: Korthikanti's setting
S, B, H, A = 2048, 1, 12288, 96


def _table2(t, sp, recompute):
    sbh = S * B * H
    scores = 5 * A * S / (H * t)
    if recompute is Recompute.FULL:
        return 2 * sbh / (t if sp else 1)
    if recompute is Recompute.SELECTIVE:
        scores = 0
    return sbh * ((34 / t if sp else 10 + 24 / t) + scores)


@pytest.mark.parametrize(("t", "sp"), [(1, False), (2, False), (8, False), (2, True), (8, True)])  # SP needs tp > 1
@pytest.mark.parametrize("recompute", [r for r in Recompute if r is not Recompute.PER_OP])  # Table 2 has no per-op row
def test_korthikanti_table2_closed_forms(t, sp, recompute):
    layout = Layout(tp=t, sequence_parallel=sp, recompute=recompute, attention=AttentionKernel.UNFUSED)
    assert layer_activation_bytes(GPT, layout) == pytest.approx(_table2(t, sp, recompute), rel=1e-12)


def test_fused_attention_removes_exactly_the_score_term():
    unfused = layer_activation_bytes(GPT, Layout(tp=8, attention=AttentionKernel.UNFUSED))
    fused = layer_activation_bytes(GPT, Layout(tp=8, attention=AttentionKernel.FUSED))
    assert unfused - fused == pytest.approx(5 * A * S * S * B / 8)


def test_llama3_8b_layer_bytes_by_hand():
    m = MODEL_PRESETS["llama3.1-8b"]  # no dropout, GQA 8 KV heads × 128, SwiGLU 14336
    s, b, h, kv, f, t = 8192, 1, 4096, 1024, 14336, 4
    replicated = 2 * s * b * h * 4  # 2 norm inputs, QKV input, MLP input
    sharded = 2 * s * b * (h + 2 * kv + h) + 3 * 2 * s * b * f  # Q, K, V, proj input; gate, up, product
    scores = 2 * 32 * s * s * b  # softmax output only (no dropout)
    got = layer_activation_bytes(m, Layout(tp=t, attention=AttentionKernel.UNFUSED))
    assert got == replicated + (sharded + scores) / t
    got_sp = layer_activation_bytes(m, Layout(tp=t, sequence_parallel=True))
    assert got_sp == (replicated + sharded) / t


def test_output_layer_bytes_are_megatrons_4sbh_1_plus_v_over_h():
    layout = Layout(tp=8, sequence_parallel=True)
    assert output_activation_bytes(GPT, layout) == pytest.approx(S * B * H * 4 * (1 + 51200 / H) / 8)
