"""Heads of their own width, QK-norm, and models read from a Hugging Face ``config.json``.

The Qwen3 presets against the parameter counts the Qwen3 report states; the attention's parameters, FLOPs, GEMM
shapes, memory-bound bytes and saved activations of heads wider than ``hidden / heads`` by hand; each family's
``config.json`` against the preset it describes; and every refusal as one line through the CLI.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.analytic.activations import layer_activation_bytes
from pipesim.analytic.attention_shapes import FLASH_TILE
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.flops import attention_core_flops, attention_linear_flops, layer_flops
from pipesim.analytic.hf_config import model_from_hf_config
from pipesim.analytic.kernels import (
    attention_core_times,
    attention_shapes,
    elementwise_backward_bytes,
    elementwise_bytes,
    local_attention_share,
)
from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels, Layout, Recompute
from pipesim.analytic.model_load import load_model
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.params import active_params, attention_params, total_params
from pipesim.api.planning import plan_request
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.plan.space import enumerate_candidates

QWEN3_8B, QWEN3_32B = MODEL_PRESETS["qwen3-8b"], MODEL_PRESETS["qwen3-32b"]


@pytest.mark.parametrize(("name", "total", "active"), [
    ("qwen3-8b", 8.2e9, None), ("qwen3-32b", 32.8e9, None),
    # the report's activated counts hold the output layer, which pipesim's active count (the layers') does not
    ("qwen3-30b-a3b", 30.5e9, 3.3e9), ("qwen3-235b-a22b", 235e9, 22e9)])
def test_qwen3_presets_have_the_reports_parameters(name, total, active):
    model = MODEL_PRESETS[name]
    assert total_params(model) == pytest.approx(total, rel=0.005)
    if active is not None:
        output = model.vocab * model.hidden
        assert active_params(model) + output == pytest.approx(active, rel=0.03)


@pytest.mark.parametrize(("name", "total"), [
    ("qwen2.5-0.5b", 0.49e9), ("qwen2.5-1.5b", 1.54e9), ("qwen2.5-3b", 3.09e9), ("qwen2.5-7b", 7.61e9),
    ("qwen2.5-14b", 14.7e9), ("qwen2.5-32b", 32.5e9), ("qwen2.5-72b", 72.7e9)])
def test_qwen2_5_presets_have_the_model_cards_parameters(name, total):
    # the cards round to a tenth of a billion or so (0.49B: 0.494B counted); the 32B's 32.5B is 0.8 % under the
    # count of its config's widths (64 layers of 5120 with an MLP of 27648, two 152,064 × 5120 embeddings)
    assert total_params(MODEL_PRESETS[name]) == pytest.approx(total, rel=0.01)


def test_a_qwen2_5_checkpoint_name_is_its_preset():
    assert load_model("Qwen/Qwen2.5-7B-Instruct") == MODEL_PRESETS["qwen2.5-7b"]
    assert MODEL_PRESETS["qwen2.5-3b"].tied_embeddings and not MODEL_PRESETS["qwen2.5-7b"].tied_embeddings


def test_heads_of_their_own_width_by_hand():
    # Qwen3-32B: 64 heads of 128 are 8192 wide against hidden 5120; 8 KV heads of 128
    h, q, kv = 5120, 8192, 1024
    assert (QWEN3_32B.head_dim, QWEN3_32B.q_width, QWEN3_32B.kv_dim, QWEN3_32B.attention_out_width) == (128, q, kv, q)
    # QKV h × (q + 2kv), output q × h, and the two QK-norm weights of one head's width
    assert attention_params(QWEN3_32B) == h * (q + 2 * kv) + q * h + 2 * 128
    tokens = QWEN3_32B.micro_batch * QWEN3_32B.seq_len
    assert attention_linear_flops(QWEN3_32B) == 2 * tokens * (h * (q + 2 * kv) + q * h)
    # attention's core over all 64 heads of 128: 2·2·b·s²·q (halved where the layout counts causal kernels' half)
    plain = replace(QWEN3_32B, attention_head_dim=0, heads=40, kv_heads=8, qk_norm=False)  # 40 heads of 128 = h
    core_wide = layer_flops(QWEN3_32B, Layout()).forward - attention_linear_flops(QWEN3_32B)
    core_plain = layer_flops(plain, Layout()).forward - attention_linear_flops(plain)
    halved = 2 if Layout().halve_causal_attention else 1
    assert core_wide - core_plain == pytest.approx(2 * 2 * tokens * QWEN3_32B.seq_len * (q - h) / halved, rel=1e-12)
    # the GEMMs one tp rank of 8 runs: QKV (q + 2kv)/8 × h, output h × q/8
    assert attention_shapes(QWEN3_32B, Layout(tp=8)) == [((q + 2 * kv) // 8, h), (h, q // 8)]


@pytest.mark.parametrize("elementwise", [ElementwiseKernels.FUSED, ElementwiseKernels.EAGER])
def test_qk_norm_reads_and_writes_the_query_and_key_heads(elementwise):
    layout, tokens, d = Layout(tp=2, elementwise=elementwise), 4096, 2
    without = replace(QWEN3_8B, qk_norm=False)
    qk = (QWEN3_8B.q_width + QWEN3_8B.kv_dim) / 2  # one tp rank's query and key heads
    # fused: the norm reads and writes each element once; eager: the FP32 chain of eight kernels (28 + 4d)
    per_element = 2 * d if elementwise is ElementwiseKernels.FUSED else 7 * 4 + 4 * d
    extra = elementwise_bytes(QWEN3_8B, layout, tokens) - elementwise_bytes(without, layout, tokens)
    assert extra == pytest.approx(tokens * per_element * qk, rel=1e-12)
    backward = (elementwise_backward_bytes(QWEN3_8B, layout, tokens)
                - elementwise_backward_bytes(without, layout, tokens))
    assert backward == pytest.approx(tokens * (per_element if elementwise is ElementwiseKernels.FUSED
                                               else 68 + 8 * d) * qk, rel=1e-12)


@pytest.mark.parametrize(("elementwise", "kept"), [(ElementwiseKernels.FUSED, 2), (ElementwiseKernels.EAGER, 2 + 4)])
def test_qk_norm_keeps_its_inputs(elementwise, kept):
    # a fused norm keeps its d-byte input; the eager FP32 chain 4 bytes more an element, as the layer's norms
    layout = Layout(tp=2, recompute=Recompute.NONE, elementwise=elementwise)
    model = QWEN3_8B.with_shape(seq_len=2048, micro_batch=2)
    extra = (layer_activation_bytes(model, layout)
             - layer_activation_bytes(replace(model, qk_norm=False), layout))
    assert extra == pytest.approx(kept * 2048 * 2 * (model.q_width + model.kv_dim) / 2, rel=1e-12)
    # full recomputation keeps the layer's input alone, with or without the norm
    full = replace(layout, recompute=Recompute.FULL)
    assert layer_activation_bytes(model, full) == layer_activation_bytes(replace(model, qk_norm=False), full)


def test_head_width_checks():
    with pytest.raises(PipesimError, match="multiple of heads=3, or give attention_head_dim"):
        ModelSpec("m", 2, 64, 3, 256, 100, 128)
    assert ModelSpec("m", 2, 64, 3, 256, 100, 128, attention_head_dim=32).q_width == 96
    # the default width given is the default: one model, one spelling
    assert ModelSpec("m", 2, 64, 4, 256, 100, 128, attention_head_dim=16) == ModelSpec("m", 2, 64, 4, 256, 100, 128)
    with pytest.raises(PipesimError, match="attention_head_dim=-1"):
        ModelSpec("m", 2, 64, 4, 256, 100, 128, attention_head_dim=-1)
    with pytest.raises(PipesimError, match="drop attention_head_dim"):
        replace(MODEL_PRESETS["deepseek-v2-lite"], attention_head_dim=128)


# --- Hugging Face config.json ---------------------------------------------------------------------------------------

_QWEN3_MOE = {  # Qwen/Qwen3-30B-A3B config.json, the keys pipesim reads and some it ignores
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_attention_heads": 32, "num_key_value_heads": 4,
    "head_dim": 128, "num_hidden_layers": 48, "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936, "max_position_embeddings": 40960,
    "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": None, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "torch_dtype": "bfloat16"}
_QWEN3 = {"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32,
          "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 36, "vocab_size": 151936,
          "tie_word_embeddings": False, "max_position_embeddings": 40960}
_MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
            "num_key_value_heads": 8, "num_hidden_layers": 32, "num_local_experts": 8, "num_experts_per_tok": 2,
            "vocab_size": 32000, "tie_word_embeddings": False, "sliding_window": None}
_LLAMA = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32,
          "num_key_value_heads": 8, "num_hidden_layers": 16, "vocab_size": 128256, "tie_word_embeddings": True,
          "head_dim": 64, "max_position_embeddings": 131072}
_DEEPSEEK_V3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
                "moe_intermediate_size": 2048, "num_attention_heads": 128, "num_key_value_heads": 128,
                "num_hidden_layers": 61, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
                "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
                "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
                "tie_word_embeddings": False, "num_nextn_predict_layers": 1, "n_group": 8, "topk_group": 4,
                "topk_method": "noaux_tc"}
_V3_WITHOUT_MTP = {k: v for k, v in _DEEPSEEK_V3.items() if k != "num_nextn_predict_layers"}
_DEEPSEEK_V2_LITE = {**_V3_WITHOUT_MTP, "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
                     "moe_intermediate_size": 1408, "num_attention_heads": 16, "num_key_value_heads": 16,
                     "num_hidden_layers": 27, "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
                     "first_k_dense_replace": 1, "q_lora_rank": None, "vocab_size": 102400, "n_group": 1,
                     "topk_group": 1, "topk_method": "greedy"}


# nvidia/Nemotron-4-15B's shape as transformers' NemotronConfig writes it (squared ReLU, layernorm1p, half-rotary)
_NEMOTRON4 = {"model_type": "nemotron", "hidden_size": 6144, "intermediate_size": 24576, "num_attention_heads": 48,
              "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 256000, "hidden_act": "relu2",
              "norm_eps": 1e-05, "partial_rotary_factor": 0.5, "tie_word_embeddings": False}


# HuggingFaceTB/SmolLM3-3B's shape (SmolLM3Config: tied embeddings by default, RoPE skipped on every 4th layer)
_SMOLLM3 = {"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "hidden_size": 2048,
            "intermediate_size": 11008, "num_attention_heads": 16, "num_key_value_heads": 4, "num_hidden_layers": 36,
            "vocab_size": 128256, "no_rope_layer_interval": 4, "use_sliding_window": False,
            "max_position_embeddings": 65536}

# Qwen/Qwen2.5-7B's and -3B's shapes (Qwen2Config; their QKV biases are left out of the preset and the reading alike)
_QWEN2_5_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
               "intermediate_size": 18944, "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
               "vocab_size": 152064, "tie_word_embeddings": False, "use_sliding_window": False,
               "sliding_window": 131072, "max_window_layers": 28, "max_position_embeddings": 131072}
_QWEN2_5_3B = {**_QWEN2_5_7B, "hidden_size": 2048, "intermediate_size": 11008, "num_attention_heads": 16,
               "num_key_value_heads": 2, "num_hidden_layers": 36, "vocab_size": 151936, "tie_word_embeddings": True,
               "sliding_window": 32768, "max_window_layers": 36, "max_position_embeddings": 32768}


def _config(tmp_path, data: dict, folder: str = "ckpt") -> str:
    path = tmp_path / folder / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(("config", "preset", "seq"), [
    (_QWEN3_MOE, "qwen3-30b-a3b", 4096), (_QWEN3, "qwen3-8b", 4096), (_MIXTRAL, "mixtral-8x7b", 32768),
    (_LLAMA, "llama3.2-1b", 8192), (_DEEPSEEK_V3, "deepseek-v3", 4096), (_DEEPSEEK_V2_LITE, "deepseek-v2-lite", 4096),
    (_NEMOTRON4, "nemotron-4-15b", 4096), (_SMOLLM3, "smollm3-3b", 4096), (_QWEN2_5_7B, "qwen2.5-7b", 4096),
    (_QWEN2_5_3B, "qwen2.5-3b", 4096)])
def test_a_config_json_is_the_preset_it_describes(tmp_path, config, preset, seq):
    model = load_model(_config(tmp_path, config, folder="Some-Checkpoint"), seq_len=seq)
    assert model.name == "Some-Checkpoint"  # the checkpoint's folder names it
    assert replace(model, name=preset) == MODEL_PRESETS[preset]


def test_a_model_type_of_its_own_reads_as_the_class_it_names(tmp_path, capsys):
    """A checkpoint whose remote code registers its own model_type around a transformers class (Kimi K2's kimi_k2 on
    DeepseekV3ForCausalLM) is that class's layers; an unknown class, or none, is still refused in one line."""
    renamed = {**_DEEPSEEK_V3, "model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"]}
    assert replace(load_model(_config(tmp_path, renamed), seq_len=4096), name="deepseek-v3") == MODEL_PRESETS[
        "deepseek-v3"]
    for classes in (["KimiK2ForCausalLM"], None, ["DeepseekV3ForCausalLM", "LlamaForCausalLM"]):
        data = {k: v for k, v in renamed.items() if k != "architectures" or classes is not None}
        if classes is not None:
            data["architectures"] = classes
        argv = ["simulate", "--model", _config(tmp_path, data), "--seq-len", "4096", "--pp", "2", "--ep", "8"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "model_type 'kimi_k2'" in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_config_json_simulates_as_its_preset(tmp_path, capsys):
    common = ["simulate", "--json", "--hardware", "h100-sxm", "--pp", "2", "--ep", "8", "--dp", "8", "--mb", "8"]
    assert main([*common, "--model", _config(tmp_path, _QWEN3_MOE), "--seq-len", "4096"]) == 0
    from_config = json.loads(capsys.readouterr().out)
    assert main([*common, "--model", "qwen3-30b-a3b"]) == 0
    preset = json.loads(capsys.readouterr().out)
    assert from_config["model_report"]["step_time_s"] == preset["model_report"]["step_time_s"]
    assert from_config["model_report"]["memory"] == preset["model_report"]["memory"]


@pytest.mark.parametrize(("change", "fragment"), [
    ({}, "add --seq-len N"),  # no --seq-len: the config does not say what the run trains at
    ({"model_type": "gemma3"}, "model_type 'gemma3' (architectures ['Qwen3MoeForCausalLM']) is not one pipesim"),
    ({"use_sliding_window": True, "sliding_window": 1024}, "use_sliding_window is true"),
    # MoE on layers 1, 3, 4, 5, …: no "first k dense, then one in every n"
    ({"mlp_only_layers": [0, 2]}, "decoder_sparse_step and mlp_only_layers put MoE on layers [1, 3, 4, 5"),
    ({"mlp_only_layers": [0, 48]}, "mlp_only_layers must list layer indices between 0 and 47"),
    ({"num_hidden_layers": None}, "has no 'num_hidden_layers'"),
    ({"num_experts_per_tok": "8"}, "num_experts_per_tok='8' must be a non-negative integer"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings='no' must be true or false"),
    # a fuzzed config: a model_type that is no string, and a layer count that would hang building its list
    ({"model_type": ["qwen3_moe"]}, "model_type ['qwen3_moe'] (architectures ['Qwen3MoeForCausalLM']) is not one"),
    ({"num_hidden_layers": 10**12}, "layers=1000000000000 must be ≤ 100,000"),
])
def test_configs_pipesim_cannot_read_are_one_line_refusals(tmp_path, capsys, change, fragment):
    argv = ["simulate", "--model", _config(tmp_path, {**_QWEN3_MOE, **change}), "--pp", "2", "--ep", "8"]
    assert main(argv + ([] if fragment == "add --seq-len N" else ["--seq-len", "4096"])) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_sliding_window_as_long_as_the_sequence_is_full_attention(tmp_path):
    mistral = {**_MIXTRAL, "model_type": "mistral", "sliding_window": 4096}
    for key in ("num_local_experts", "num_experts_per_tok"):
        mistral.pop(key)
    model = load_model(_config(tmp_path, mistral), seq_len=4096)
    assert not model.is_moe and model.sliding_window == 4096 and model.local_attention_layers == 0
    longer = load_model(_config(tmp_path, mistral), seq_len=8192)
    assert longer.local_attention_layers == 32 and longer.global_attention_every == 0  # Mistral windows every layer


# gpt-oss-120b's config.json (openai/gpt-oss-120b): sliding windows of 128 on every other layer, from layer 0
_GPT_OSS = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_attention_heads": 64,
            "num_key_value_heads": 8, "head_dim": 64, "num_hidden_layers": 36, "num_local_experts": 128,
            "num_experts_per_tok": 4, "vocab_size": 201088, "tie_word_embeddings": False, "sliding_window": 128,
            "attention_bias": True, "swiglu_limit": 7.0,
            "layer_types": ["sliding_attention", "full_attention"] * 18}


@pytest.mark.parametrize(("layers", "experts", "total", "active"), [(36, 128, 116.83e9, 5.13e9),
                                                                   (24, 32, 20.91e9, 3.61e9)])
def test_gpt_oss_has_its_model_cards_parameters(tmp_path, layers, experts, total, active):
    # OpenAI's gpt-oss model card: 116.83B and 20.91B parameters, 5.13B and 3.61B active a token (the embedding and
    # output layer counted as the card counts them: the output layer in, the embedding out); biases on the attention
    # and the experts
    config = {**_GPT_OSS, "num_hidden_layers": layers, "num_local_experts": experts,
              "layer_types": _GPT_OSS["layer_types"][:layers]}
    model = load_model(_config(tmp_path, config, folder="Some-Checkpoint"), seq_len=4096)
    assert replace(model, name=f"gpt-oss-{'120b' if layers == 36 else '20b'}") == MODEL_PRESETS[
        f"gpt-oss-{'120b' if layers == 36 else '20b'}"]
    assert (model.sliding_window, model.global_attention_every, model.local_attention_layers) == (128, 2, layers // 2)
    assert model.bias and model.q_width == 64 * 64
    assert total_params(model) == pytest.approx(total, rel=0.001)
    assert active_params(model) == pytest.approx(active, rel=0.002)


def test_sliding_windows_by_hand():
    gpt_oss = ModelSpec("w", 36, 2880, 64, 2880, 201088, 4096, kv_heads=8, attention_head_dim=64, gated=True,
                        sliding_window=128, global_attention_every=2)
    # the masked square's elements: w·s − w(w − 1)/2 of s(s + 1)/2 in half the layers
    elements = (128 * 4096 - 128 * 127 / 2) / (4096 * 4097 / 2)
    assert local_attention_share(gpt_oss) == pytest.approx(1 - (1 - elements) / 2, rel=1e-12)
    # 128-wide blocks: of the 32 query tiles' 528 causal blocks, each reaches its own and one before: 1 + 2·31
    assert local_attention_share(gpt_oss, 128) == pytest.approx(1 - (1 - 63 / 528) / 2, rel=1e-12)
    full = replace(gpt_oss, sliding_window=0, global_attention_every=0)
    assert attention_core_flops(gpt_oss, Layout()) == pytest.approx(
        attention_core_flops(full, Layout()) * local_attention_share(gpt_oss), rel=1e-12)
    chip = CHIP_PRESETS["h100-sxm"]
    fused = attention_core_times(gpt_oss, Layout(), chip).forward / attention_core_times(full, Layout(), chip).forward
    assert fused == pytest.approx(local_attention_share(gpt_oss, FLASH_TILE), rel=1e-12)
    unfused = Layout(attention=AttentionKernel.UNFUSED)  # the mask is applied to the whole square
    assert attention_core_times(gpt_oss, unfused, chip) == attention_core_times(full, unfused, chip)
    # every third layer full: 24 of 36 windowed; a window as long as the sequence windows nothing
    assert replace(gpt_oss, global_attention_every=3).local_attention_layers == 24
    assert replace(gpt_oss, sliding_window=4096).local_attention_layers == 0
    with pytest.raises(PipesimError, match="sliding_window and attention_chunk are 0"):
        replace(full, global_attention_every=2)
    with pytest.raises(PipesimError, match="two kinds of local attention"):
        replace(gpt_oss, attention_chunk=1024)


def test_sliding_windows_refusals(tmp_path, capsys):
    irregular = {**_GPT_OSS, "layer_types": ["sliding_attention"] * 30 + ["full_attention"] * 6}
    with pytest.raises(PipesimError, match="full attention on layers"):
        load_model(_config(tmp_path, irregular), seq_len=4096)
    path = _config(tmp_path, _GPT_OSS, folder="gpt-oss-120b")
    assert main(["simulate", "--model", path, "--seq-len", "4096", "--pp", "2", "--ep", "8", "--dp", "8",
                 "--cp", "2"]) == 2
    err = capsys.readouterr().err
    assert "attention in sliding windows under --cp 2 is not modelled" in err and err.count("\n") == 1
    # plan searches no cp over windows, and says so where only cp was asked for
    request = plan_request("gpt-oss-20b", 16, 64, cp=(1, 2, 4))
    assert {c.cp for c in enumerate_candidates(request)} == {1}
    assert main(["plan", "--model", "gpt-oss-20b", "--gpus", "16", "--global-batch", "64", "--cp", "2"]) == 2
    assert "attention in sliding windows under context parallelism is not modelled" in capsys.readouterr().err


# Gemma 2 9B's and Gemma 3 1B's config.json (google/gemma-2-9b; google/gemma-3-1b-pt, multimodal configs nest
# theirs as text_config): heads of 256, four norms a layer, tied embeddings, windows on all layers but every 2nd
# (Gemma 2's 4,096 keys) or every 6th (Gemma 3's 512, with QK-norm)
_GEMMA2 = {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_attention_heads": 16,
           "num_key_value_heads": 8, "head_dim": 256, "num_hidden_layers": 42, "vocab_size": 256000,
           "sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}
_GEMMA3 = {"model_type": "gemma3", "text_config": {
    "hidden_size": 1152, "intermediate_size": 6912, "num_attention_heads": 4, "num_key_value_heads": 1,
    "head_dim": 256, "num_hidden_layers": 26, "vocab_size": 262144, "sliding_window": 512}}


@pytest.mark.parametrize(("config", "total", "windowed", "every", "qk_norm"), [
    (_GEMMA2, 9.24e9, 21, 2, False),  # Gemma 2 report, Table 1: 9B; 9,241,705,984 counted
    (_GEMMA3, 1.0e9, 22, 6, True),  # Gemma 3 report, Table 1: 1B (698M non-embedding, 302M embedding)
])
def test_gemma_configs(tmp_path, config, total, windowed, every, qk_norm):
    model = load_model(_config(tmp_path, config), seq_len=8192)
    assert total_params(model) == pytest.approx(total, rel=0.002)
    assert (model.local_attention_layers, model.global_attention_every, model.qk_norm) == (windowed, every, qk_norm)
    assert model.sandwich_norm and model.tied_embeddings and model.gated and model.q_width == model.heads * 256


def test_sandwich_norms_by_hand():
    model = MODEL_PRESETS["llama2-7b"]
    sandwich = replace(model, sandwich_norm=True)
    h, tokens, d = model.hidden, 4096, 2
    layout = Layout(tp=2, sequence_parallel=True)
    # two more RMSNorm weights a layer; two more norms read and written (fused), over the sequence-parallel shard
    assert total_params(sandwich) - total_params(model) == 2 * h * model.layers
    assert elementwise_bytes(sandwich, layout, tokens) - elementwise_bytes(model, layout, tokens) == pytest.approx(
        tokens * 2 * d * 2 * h / 2, rel=1e-12)
    # and their inputs kept for their backward
    kept = layer_activation_bytes(sandwich.with_shape(seq_len=tokens), layout) - layer_activation_bytes(
        model.with_shape(seq_len=tokens), layout)
    assert kept == pytest.approx(2 * d * tokens * h / 2, rel=1e-12)


def test_qwen_moe_layers_interleaved_or_after_dense_ones_are_read():
    # Qwen2-MoE's decoder_sparse_step n puts MoE on layers n − 1, 2n − 1, …; mlp_only_layers keeps those dense
    stepped = model_from_hf_config({**_QWEN3_MOE, "decoder_sparse_step": 2}, "c", 4096, "c")
    assert (stepped.first_dense_layers, stepped.moe_layer_frequency, stepped.moe_layer_offset) == (0, 2, 1)
    assert [i for i, k in enumerate(stepped.layer_kinds()) if k is LayerKind.MOE] == list(range(1, 48, 2))
    dense_first = model_from_hf_config({**_QWEN3_MOE, "mlp_only_layers": [0, 1]}, "c", 4096, "c")
    assert (dense_first.first_dense_layers, dense_first.moe_layers) == (2, 46)


# Llama 4 Scout's and Maverick's text configs (meta-llama/Llama-4-Scout-17B-16E and -Maverick-17B-128E nest them as
# text_config of a multimodal "llama4" config), the keys pipesim reads
_SCOUT = {"model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
          "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 48,
          "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "vocab_size": 202048,
          "attention_chunk_size": 8192, "use_qk_norm": True, "tie_word_embeddings": False, "no_rope_layers": []}
_MAVERICK = {**_SCOUT, "num_local_experts": 128, "interleave_moe_layer_step": 2, "use_qk_norm": False}


@pytest.mark.parametrize(("config", "preset"), [(_SCOUT, "llama4-scout"), (_MAVERICK, "llama4-maverick")])
def test_llama4_configs_are_the_presets(tmp_path, config, preset):
    wrapped = {"model_type": "llama4", "text_config": config, "vision_config": {"hidden_size": 1408}}
    for data in (config, wrapped):
        model = load_model(_config(tmp_path, data, folder="Llama-4"), seq_len=8192)
        assert replace(model, name=preset) == MODEL_PRESETS[preset]
    # layer_types, where a config lists them, say the same as the RoPE layers' default
    types = ["full_attention" if (i + 1) % 4 == 0 else "chunked_attention" for i in range(48)]
    listed = load_model(_config(tmp_path, {**config, "layer_types": types}, folder="Listed"), seq_len=8192)
    assert replace(listed, name=preset) == MODEL_PRESETS[preset]


def test_llama4_maverick_parameters_by_hand():
    # per layer: Q and O 5120 × 5120, K and V 5120 × 1024, two RMSNorms; 24 MoE layers (1, 3, …) of 128 routed and
    # one shared SwiGLU expert of 8192 and a 5120 × 128 router; 24 dense layers of 16384; untied embeddings of
    # 202,048 and a final norm: 400.7B (Meta: 400B), 17B active with the input embedding (Meta: 17B)
    maverick = MODEL_PRESETS["llama4-maverick"]
    attention, norms = 2 * 5120 * 5120 + 2 * 5120 * 1024, 2 * 5120
    moe, dense = 129 * 3 * 5120 * 8192 + 5120 * 128, 3 * 5120 * 16384
    embeddings = 2 * 202048 * 5120
    assert total_params(maverick) == 48 * (attention + norms) + 24 * (moe + dense) + embeddings + 5120
    assert [i for i, k in enumerate(maverick.layer_kinds()) if k is LayerKind.MOE] == list(range(1, 48, 2))
    assert active_params(maverick) + 202048 * 5120 == pytest.approx(17e9, rel=0.02)
    assert total_params(MODEL_PRESETS["llama4-scout"]) == pytest.approx(109e9, rel=0.015)  # Meta's, vision in


def test_chunked_attention_by_hand():
    scout = MODEL_PRESETS["llama4-scout"].with_shape(seq_len=32768)
    # four chunks of 8192, each its own causal square, on 36 of 48 layers (every 4th attends to everything)
    assert scout.local_attention_layers == 36
    elements = 4 * (8192 * 8193 / 2) / (32768 * 32769 / 2)
    assert local_attention_share(scout) == pytest.approx(1 - 36 / 48 * (1 - elements), rel=1e-12)
    blocks = 4 * (64 * 65 / 2) / (256 * 257 / 2)  # 128-wide tiles: 64 a chunk, 256 in all
    assert local_attention_share(scout, 128) == pytest.approx(1 - 36 / 48 * (1 - blocks), rel=1e-12)
    # a remainder chunk is a square of its own: 20,000 tokens are two chunks of 8192 and one of 3616
    odd = scout.with_shape(seq_len=20000)
    part = (2 * 8192 * 8193 / 2 + 3616 * 3617 / 2) / (20000 * 20001 / 2)
    assert local_attention_share(odd) == pytest.approx(1 - 36 / 48 * (1 - part), rel=1e-12)
    # the FLOPs follow the share; the fused kernel's time is a quarter of the layers' calls over the whole
    # sequence and three quarters' over four chunk-long sequences a microbatch sequence (NeMo's chunkify), each at
    # the kernel's rate for its length: within 2 % of the blocks' share
    full = replace(scout, attention_chunk=0, global_attention_every=0)
    assert attention_core_flops(scout, Layout()) == pytest.approx(
        attention_core_flops(full, Layout()) * local_attention_share(scout), rel=1e-12)
    chip = CHIP_PRESETS["h100-sxm"]
    whole = attention_core_times(full, Layout(), chip)
    chunks = attention_core_times(replace(full, seq_len=8192, micro_batch=4), Layout(), chip)
    fused = attention_core_times(scout, Layout(), chip)
    assert fused.forward == pytest.approx(whole.forward / 4 + chunks.forward * 3 / 4, rel=1e-12)
    assert fused.backward_input == pytest.approx(whole.backward_input / 4 + chunks.backward_input * 3 / 4, rel=1e-12)
    assert fused.forward / whole.forward == pytest.approx(local_attention_share(scout, FLASH_TILE), rel=0.02)
    # the remainder chunk is a call of its own
    rest = attention_core_times(replace(full, seq_len=3616), Layout(), chip)
    two = attention_core_times(replace(full, seq_len=8192, micro_batch=2), Layout(), chip)
    whole_odd = attention_core_times(replace(full, seq_len=20000), Layout(), chip)
    assert attention_core_times(odd, Layout(), chip).forward == pytest.approx(
        whole_odd.forward / 4 + (two.forward + rest.forward) * 3 / 4, rel=1e-12)
    assert MODEL_PRESETS["llama4-scout"].local_attention_layers == 0
    assert local_attention_share(MODEL_PRESETS["llama4-scout"], FLASH_TILE) == 1.0


def test_chunked_attention_refusals(tmp_path, capsys):
    assert main(["simulate", "--model", "llama4-scout", "--seq-len", "32768", "--pp", "2", "--ep", "8", "--dp", "8",
                 "--cp", "2"]) == 2
    err = capsys.readouterr().err
    assert "attention in chunks under --cp 2 is not modelled" in err and err.count("\n") == 1
    # within one chunk every layer attends to the whole sequence, and context parallelism is simulated
    assert main(["simulate", "--model", "llama4-scout", "--seq-len", "8192", "--pp", "2", "--ep", "8", "--dp", "8",
                 "--cp", "2"]) == 0
    capsys.readouterr()
    # the unfused kernel's scores per chunk are not counted: refused, not approximated
    assert main(["simulate", "--model", "llama4-scout", "--seq-len", "32768", "--pp", "2", "--ep", "8", "--dp", "8",
                 "--attention", "unfused"]) == 2
    err = capsys.readouterr().err
    assert "chunked attention under --attention unfused is not modelled" in err and err.count("\n") == 1
    all_full = {**_SCOUT, "layer_types": ["full_attention"] * 48}  # chunks on no layer: full attention
    assert load_model(_config(tmp_path, all_full, folder="Full"), seq_len=32768).attention_chunk == 0
    irregular = {**_SCOUT, "layer_types": ["chunked_attention"] * 40 + ["full_attention"] * 8}
    with pytest.raises(PipesimError, match="full attention on layers"):
        load_model(_config(tmp_path, irregular), seq_len=8192)


# The keys the reader reads, and any value in them (the fuzzing that found a model_type no string and 10^12 layers,
# kept as a property): a ModelSpec or one line, never another exception, and quickly.
_READ_KEYS = ("architectures", "attention_chunk_size", "decoder_sparse_step", "first_k_dense_replace", "head_dim",
              "hidden_size", "interleave_moe_layer_step", "intermediate_size", "intermediate_size_mlp",
              "kv_lora_rank", "layer_types", "mlp_only_layers", "model_type", "moe_intermediate_size",
              "moe_layer_freq", "moe_layers", "n_group", "n_routed_experts", "n_shared_experts", "no_rope_layers",
              "no_rope_layer_interval", "num_attention_heads", "num_experts", "num_experts_per_tok",
              "num_hidden_layers", "num_key_value_heads", "num_local_experts", "num_nextn_predict_layers",
              "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "shared_expert_intermediate_size",
              "sliding_window", "sliding_window_pattern", "text_config", "tie_word_embeddings", "topk_group",
              "topk_method", "use_qk_norm", "use_sliding_window", "v_head_dim", "vocab_size")
_ANY = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                 st.sampled_from(["qwen3_moe", "deepseek_v3", "greedy", "sliding_attention", "DeepseekV3ForCausalLM"]),
                 st.text(max_size=6), st.lists(st.one_of(st.integers(-2, 60), st.text(max_size=4)), max_size=4),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([_QWEN3_MOE, _DEEPSEEK_V3, _LLAMA, _MIXTRAL, _SCOUT, _MAVERICK, _GEMMA2, _SMOLLM3]),
       st.dictionaries(st.sampled_from(_READ_KEYS), _ANY, min_size=1, max_size=3))
def test_any_value_in_a_config_reads_or_is_one_line(config, changes):
    try:
        model_from_hf_config({**config, **changes}, "fuzzed/config.json", 4096, "fuzzed")
    except PipesimError as err:
        assert "\n" not in str(err)
