"""Megatron-Core's selective recomputation by module (``--recompute-modules``): what each module stops keeping and
re-runs, by hand against the layer's terms, and the refusals.

``core_attn`` (the default) is Korthikanti et al.'s selective recomputation as before; ``layernorm`` discards the
two block norms' outputs (the linears' saved inputs) and re-runs the norms; ``moe_act`` discards the routed
experts' activation output (their down projection's saved input) and re-runs the activation.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pipesim.analytic.activations import layer_activation_bytes, linear_input_element_bytes
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.flops import layer_flops
from pipesim.analytic.kernels import (
    attention_core_times,
    gemm_time,
    layer_kernel_counts,
    layer_times,
    routed_width,
    selective_recompute_bytes,
)
from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels, Layout, Recompute, RecomputeModule
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind
from pipesim.cli.main import main
from pipesim.errors import PipesimError

H100 = CHIP_PRESETS["h100-sxm"]
MOE = MODEL_PRESETS["qwen3-30b-a3b"].with_shape(seq_len=4096, micro_batch=2)
DENSE = MODEL_PRESETS["llama2-7b"].with_shape(seq_len=4096, micro_batch=1)
CORE, NORMS, ACT = RecomputeModule.CORE_ATTN, RecomputeModule.LAYERNORM, RecomputeModule.MOE_ACT


def _selective(*modules: RecomputeModule, **fields) -> Layout:
    return Layout(recompute=Recompute.SELECTIVE, recompute_modules=modules, **fields)


def test_the_default_is_the_attention_core_and_a_set_has_one_spelling():
    assert Layout(recompute=Recompute.SELECTIVE) == _selective(CORE)
    assert _selective(ACT, NORMS, ACT) == _selective(NORMS, ACT)
    # names parse as the enum
    assert Layout(recompute=Recompute.SELECTIVE, recompute_modules=("layernorm", "moe_act")) == _selective(NORMS, ACT)
    with pytest.raises(PipesimError, match="names no module"):
        _selective()
    # under any other recomputation the modules are inert
    assert not replace(_selective(NORMS), recompute=Recompute.NONE).recomputed_modules
    assert not replace(_selective(NORMS), recompute=Recompute.FULL).recomputes_attention_core


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_layernorm_drops_the_norm_outputs_the_linears_kept(sequence_parallel):
    layout = dict(tp=2, sequence_parallel=sequence_parallel)
    b, s, h = DENSE.micro_batch, DENSE.seq_len, DENSE.hidden
    lin = linear_input_element_bytes(DENSE, _selective(CORE, **layout))
    kept = layer_activation_bytes(DENSE, _selective(CORE, **layout))
    dropped = layer_activation_bytes(DENSE, _selective(CORE, NORMS, **layout))
    # the QKV and MLP inputs, 2·lin·sbh, replicated over tp unless sequence parallelism shards them
    assert kept - dropped == pytest.approx(2 * lin * s * b * h / (2 if sequence_parallel else 1), rel=1e-12)


def test_moe_act_drops_the_routed_experts_down_projection_input_in_moe_layers_only():
    layout = dict(ep=8, dp=8, moe_imbalance=1.25)
    lin = linear_input_element_bytes(MOE, _selective(CORE, **layout))
    tokens = MOE.micro_batch * MOE.seq_len
    moe_kept = layer_activation_bytes(MOE, _selective(CORE, **layout), LayerKind.MOE)
    moe_dropped = layer_activation_bytes(MOE, _selective(CORE, ACT, **layout), LayerKind.MOE)
    # k·f_e·imbalance = 8 · 768 · 1.25 inner elements a token, no shared expert
    assert moe_kept - moe_dropped == pytest.approx(lin * tokens * 8 * 768 * 1.25, rel=1e-12)
    assert layer_activation_bytes(DENSE, _selective(CORE, ACT)) == layer_activation_bytes(DENSE, _selective(CORE))


def test_an_unfused_attention_keeps_its_scores_unless_the_core_is_recomputed():
    unfused = dict(attention=AttentionKernel.UNFUSED)
    none = layer_activation_bytes(DENSE, Layout(**unfused))
    assert layer_activation_bytes(DENSE, _selective(NORMS, **unfused)) == pytest.approx(
        none - 2 * linear_input_element_bytes(DENSE, Layout()) * DENSE.seq_len * DENSE.hidden, rel=1e-12)
    assert layer_activation_bytes(DENSE, _selective(CORE, **unfused)) < layer_activation_bytes(
        DENSE, _selective(NORMS, **unfused))


@pytest.mark.parametrize("elementwise", [ElementwiseKernels.FUSED, ElementwiseKernels.EAGER])
def test_the_recomputed_pass_is_the_modules_forward(elementwise):
    layout = _selective(CORE, NORMS, ACT, ep=8, dp=8, elementwise=elementwise)
    tokens = MOE.micro_batch * MOE.seq_len
    d, h = MOE.dtype_bytes, MOE.hidden
    # the two norms (fused: read and write; eager RMSNorm: 28 + 4d), and SwiGLU over the routed width (3d; eager 5d)
    norm, act = (2 * d, 3 * d) if elementwise is ElementwiseKernels.FUSED else (7 * 4 + 4 * d, 5 * d)
    moved = selective_recompute_bytes(MOE, layout, tokens, LayerKind.MOE)
    assert moved == pytest.approx(tokens * (norm * 2 * h + act * routed_width(MOE, layout)), rel=1e-12)
    assert selective_recompute_bytes(MOE, layout, tokens, LayerKind.DENSE) == pytest.approx(tokens * norm * 2 * h)
    core = attention_core_times(MOE, layout, H100).forward
    # the activation reads the fused gate-and-up GEMM's strided halves; eager RMSNorm's chain runs through FP32:
    # each at its measured share of HBM (kernels.UnvectorisedBytes)
    norm_bandwidth = (H100.stream_bandwidth if elementwise is ElementwiseKernels.FUSED
                      else H100.converting_stream_bandwidth)
    elementwise_seconds = tokens * (norm * 2 * h / norm_bandwidth
                                    + act * routed_width(MOE, layout) / H100.strided_stream_bandwidth)
    assert layer_times(MOE, layout, H100, LayerKind.MOE).recompute == pytest.approx(
        core + elementwise_seconds, rel=1e-12)
    # without the core: only the element-wise work, and no recomputed FLOPs
    bare = replace(layout, recompute_modules=(NORMS, ACT))
    assert layer_times(MOE, bare, H100, LayerKind.MOE).recompute == pytest.approx(elementwise_seconds)
    assert layer_flops(MOE, bare, LayerKind.MOE).recompute == 0.0
    core_flops = layer_flops(MOE, _selective(CORE), LayerKind.MOE).recompute
    assert layer_flops(MOE, layout, LayerKind.MOE).recompute == core_flops
    # and the kernels it launches again: the attention's, the two norms and the activation
    counts = layer_kernel_counts(MOE, layout, LayerKind.MOE)
    assert counts.recompute == layer_kernel_counts(MOE, _selective(CORE), LayerKind.MOE).recompute + (
        (2 + 1) if elementwise is ElementwiseKernels.FUSED else (16 + 2))


MLA = MODEL_PRESETS["deepseek-v2-lite"]
UP = RecomputeModule.MLA_UP_PROJ


def test_mla_up_proj_drops_the_attention_inputs_and_reruns_the_up_projections():
    layout = _selective(CORE, UP, tp=2, ep=2, dp=2)
    tokens, d, t = MLA.micro_batch * MLA.seq_len, MLA.dtype_bytes, 2
    # the kernel's Q, K and V: 16 heads of 192-wide queries and keys and 128-wide values, split over tp
    qkv = 16 * (192 + 192 + 128)
    assert (layer_activation_bytes(MLA, _selective(CORE, tp=2, ep=2, dp=2), LayerKind.MOE)
            - layer_activation_bytes(MLA, layout, LayerKind.MOE)) == pytest.approx(d * tokens * qkv / t, rel=1e-12)
    # re-run: the queries from the hidden state (no query bottleneck in V2-Lite: 16·192/2 × 2048) and the keys and
    # values from their 512-wide latent (16·(128 + 128)/2 × 512), then RoPE on Q and K (read and write)
    gemms = (gemm_time(tokens, 16 * 192 // t, 2048, H100, layout.precision)
             + gemm_time(tokens, 16 * 256 // t, 512, H100, layout.precision))
    rope = tokens * 2 * d * (16 * 192 + 16 * 192) / t
    assert selective_recompute_bytes(MLA, layout, tokens, LayerKind.MOE) == pytest.approx(rope, rel=1e-12)
    core = attention_core_times(MLA, layout, H100).forward
    assert layer_times(MLA, layout, H100, LayerKind.MOE).recompute == pytest.approx(
        core + gemms + rope / H100.stream_bandwidth, rel=1e-12)
    # a model with standard attention has no up projection to re-run
    assert layer_activation_bytes(DENSE, _selective(CORE, UP)) == layer_activation_bytes(DENSE, _selective(CORE))
    assert layer_times(DENSE, _selective(CORE, UP), H100).recompute == layer_times(DENSE, _selective(CORE),
                                                                                   H100).recompute


_RUN = ["simulate", "--json", "--model", "qwen3-30b-a3b", "--pp", "2", "--ep", "8", "--dp", "8", "--mb", "8"]


def test_through_the_command_line(capsys):
    def run(*argv):
        assert main([*_RUN, *argv]) == 0, capsys.readouterr().err
        return json.loads(capsys.readouterr().out)["model_report"]

    default, named = run("--recompute", "selective"), run("--recompute", "selective", "--recompute-modules",
                                                           "core_attn")
    assert default == named
    lean = run("--recompute", "selective", "--recompute-modules", "moe_act", "layernorm")
    assert lean["layout"]["recompute_modules"] == ["layernorm", "moe_act"]
    assert lean["memory"]["peak_gib"] < default["memory"]["peak_gib"]
    assert lean["step_time_s"] < default["step_time_s"]  # the attention core is not recomputed


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--recompute", "full", "--moe-layer-recompute"], "--moe-layer-recompute is a selective recomputation"),
    (["--recompute-modules", "layernorm"], "add --recompute selective"),
    (["--recompute", "full", "--recompute-modules", "layernorm"], "but the run's is full"),
    (["--recompute", "selective", "--recompute-modules", "layernorm", "--framework", "megatron-deepspeed"],
     "Megatron"),
    (["--recompute", "selective", "--recompute-modules", "norm"], "'norm' is not one of"),
])
def test_what_is_not_modelled_is_a_one_line_refusal(capsys, argv, fragment):
    assert main([*_RUN, *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err


# --- the checkpointed submodules: mlp, moe, shared_experts ---------------------------------------------------------

MLP, BLOCK, SHARED = RecomputeModule.MLP, RecomputeModule.MOE, RecomputeModule.SHARED_EXPERTS
V2 = MODEL_PRESETS["deepseek-v2-lite"]  # two shared experts of 1,408 beside 64 routed ones, top-6


def test_mlp_keeps_its_input_and_reruns_the_dense_mlp_with_its_collective():
    from pipesim.analytic.comm import tp_layer_comm
    from pipesim.analytic.kernels import layer_gemms

    layout = _selective(CORE, tp=2, sequence_parallel=True)
    checkpointed = _selective(CORE, MLP, tp=2, sequence_parallel=True)
    b, s, d, f = DENSE.micro_batch, DENSE.seq_len, DENSE.dtype_bytes, DENSE.ffn_hidden
    lin = linear_input_element_bytes(DENSE, layout)
    # SwiGLU's gate and up outputs (2d) and the down projection's input (lin), 11,008 wide over tp 2
    assert layer_activation_bytes(DENSE, layout) - layer_activation_bytes(DENSE, checkpointed) == pytest.approx(
        (2 * d + lin) * s * b * f / 2, rel=1e-12)
    tokens = b * s
    mlp_gemms = layer_gemms(DENSE, checkpointed, tokens)[-2:]  # the fused gate-and-up and the down projection
    extra = (sum(gemm_time(m, n, k, H100, checkpointed.precision) for m, n, k, _ in mlp_gemms)
             + tokens * 3 * d * f / 2 / H100.strided_stream_bandwidth)  # SwiGLU over the GEMM's strided halves
    assert layer_times(DENSE, checkpointed, H100).recompute == pytest.approx(
        layer_times(DENSE, layout, H100).recompute + extra, rel=1e-12)
    # the MLP's forward all-gather and reduce-scatter again in the backward; the MoE layers' MLP is not "mlp"
    once = tp_layer_comm(DENSE, layout, H100).forward / 2
    assert tp_layer_comm(DENSE, checkpointed, H100).backward == pytest.approx(
        tp_layer_comm(DENSE, layout, H100).backward + once, rel=1e-12)
    assert layer_activation_bytes(V2, _selective(CORE, MLP, ep=2, dp=2), LayerKind.MOE) == layer_activation_bytes(
        V2, _selective(CORE, ep=2, dp=2), LayerKind.MOE)
    # FLOPs: the MLP's matmuls again
    assert layer_flops(DENSE, checkpointed).recompute - layer_flops(DENSE, layout).recompute == pytest.approx(
        2 * tokens * DENSE.hidden * f * 3)


def test_moe_reruns_the_block_and_its_dispatch_and_keeps_nothing_inside_it():
    from pipesim.analytic.comm import moe_layer_a2a

    base = dict(ep=8, dp=8)
    layout, block = _selective(CORE, **base), _selective(CORE, BLOCK, ACT, **base)  # moe covers moe_act
    b, s, d, h = V2.micro_batch, V2.seq_len, V2.dtype_bytes, V2.hidden
    lin = linear_input_element_bytes(V2, layout)
    width = 6 * 1408 + 2 * 1408  # the routed top-6 and the two shared experts
    router_and_dispatched = 4 * 64 + 2 * d * 6 * h
    assert layer_activation_bytes(V2, layout, LayerKind.MOE) - layer_activation_bytes(
        V2, block, LayerKind.MOE) == pytest.approx(s * b * ((2 * d + lin) * width + router_and_dispatched), rel=1e-12)
    # the dispatch and combine again in the backward, as under full recomputation
    a2a, again = moe_layer_a2a(V2, layout, H100), moe_layer_a2a(V2, block, H100)
    assert again.forward == a2a.forward and again.backward == pytest.approx(a2a.backward + a2a.forward)
    assert layer_flops(V2, block, LayerKind.MOE).recompute - layer_flops(V2, layout, LayerKind.MOE).recompute == \
        pytest.approx(2 * b * s * h * (width * 3 + 64))
    # a dense layer of the model is untouched by it
    assert layer_times(V2, block, H100).recompute == layer_times(V2, layout, H100).recompute


def test_shared_experts_drops_and_reruns_only_the_shared_experts():
    base = dict(ep=8, dp=8)
    layout, shared = _selective(CORE, **base), _selective(CORE, SHARED, **base)
    b, s, d = V2.micro_batch, V2.seq_len, V2.dtype_bytes
    lin = linear_input_element_bytes(V2, layout)
    assert layer_activation_bytes(V2, layout, LayerKind.MOE) - layer_activation_bytes(
        V2, shared, LayerKind.MOE) == pytest.approx(s * b * (2 * d + lin) * 2 * 1408, rel=1e-12)
    tokens = b * s
    gemms = gemm_time(tokens, 2 * 2 * 1408, V2.hidden, H100, layout.precision) + gemm_time(
        tokens, V2.hidden, 2 * 1408, H100, layout.precision)
    assert layer_times(V2, shared, H100, LayerKind.MOE).recompute == pytest.approx(
        layer_times(V2, layout, H100, LayerKind.MOE).recompute + gemms
        + tokens * 3 * d * 2 * 1408 / H100.strided_stream_bandwidth, rel=1e-12)


def test_moe_layer_recompute_is_megatrons_older_spelling(capsys):
    def run(*argv):
        assert main([*_RUN, *argv]) == 0, capsys.readouterr().err
        return json.loads(capsys.readouterr().out)["model_report"]

    old = run("--moe-layer-recompute")
    assert old == run("--recompute", "selective", "--recompute-modules", "core_attn", "moe")
    assert old["layout"]["recompute_modules"] == ["core_attn", "moe"]
    assert run("--moe-layer-recompute", "--recompute-modules", "layernorm")["layout"]["recompute_modules"] == [
        "layernorm", "moe"]
