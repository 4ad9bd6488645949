"""Mixture-of-experts and latent-attention model shapes: parameter counts against the published totals and
active counts, FLOPs and activations hand-computed from the config.json numbers, and model-file checks."""

import pytest

from pipesim.analytic.activations import layer_activation_bytes
from pipesim.analytic.flops import attention_core_flops, layer_flops, mlp_flops, model_flops_per_microbatch
from pipesim.analytic.layout import Layout, Precision, Recompute
from pipesim.analytic.model_load import model_from_dict
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.params import active_params, attention_params, layer_expert_params, total_params
from pipesim.errors import PipesimError

V3 = MODEL_PRESETS["deepseek-v3"]
MIXTRAL = MODEL_PRESETS["mixtral-8x7b"]


# Published totals and active counts (billions) and the tolerance each is held to. The active counts are
# rounded in their sources (37B, 12.9B, 39B, 2.4B) and leave out the input embedding (a lookup).
@pytest.mark.parametrize("name, total, active", [
    ("deepseek-v3", 671, 37),        # DeepSeek-V3 technical report §1
    ("mixtral-8x7b", 46.7, 12.9),    # Jiang et al. 2024 §2
    ("mixtral-8x22b", 141, 39),      # Mistral's Mixtral 8x22B announcement
    ("deepseek-v2-lite", 15.7, 2.4),  # DeepSeek-V2 App. B
])
def test_total_and_active_parameters_match_the_published_figures(name, total, active):
    model = MODEL_PRESETS[name]
    assert total_params(model) == pytest.approx(total * 1e9, rel=0.01)
    assert active_params(model) == pytest.approx(active * 1e9, rel=0.03)


def test_deepseek_v3_count_by_hand():
    h = 7168
    # MLA: W_DQ + its norm + W_UQ, W_DKV (with the 64-wide RoPE key) + its norm + W_UKV, output projection
    attention = h * 1536 + 1536 + 1536 * 128 * 192 + h * 576 + 512 + 512 * 128 * 256 + 128 * 128 * h
    assert attention == 187_107_328 == attention_params(V3)
    norms = 2 * h
    expert = 3 * h * 2048
    dense_layer = attention + 3 * h * 18432 + norms
    moe_layer = attention + 256 * expert + 1 * expert + h * 256 + norms  # routed, shared, router
    embeddings = 2 * 129280 * h + h  # untied input and output, the final norm
    assert total_params(V3) == 3 * dense_layer + 58 * moe_layer + embeddings == 671_026_404_352
    active_moe = attention + 8 * expert + expert + h * 256 + norms
    assert active_params(V3) == 3 * dense_layer + 58 * active_moe + 129280 * h + h
    assert layer_expert_params(V3, LayerKind.MOE) == 256 * expert
    assert layer_expert_params(V3, LayerKind.DENSE) == 0


def test_layer_kinds_first_dense_and_frequency():
    assert V3.layer_kinds()[:4] == (LayerKind.DENSE,) * 3 + (LayerKind.MOE,)
    assert V3.moe_layers == 58
    every_other = ModelSpec("m", 8, 64, 4, 256, 100, 32, experts=4, experts_per_token=1, moe_layer_frequency=2,
                            first_dense_layers=1)
    assert [k is LayerKind.MOE for k in every_other.layer_kinds()] == [False, False, True, False, True, False,
                                                                       True, False]


def test_mixtral_mlp_flops_by_hand():
    model = MIXTRAL.with_shape(seq_len=4096)
    tokens, h = 4096, 4096
    assert mlp_flops(model, LayerKind.MOE) == 2 * tokens * h * (2 * 14336) * 3 + 2 * tokens * h * 8
    assert mlp_flops(model, LayerKind.DENSE) == 2 * tokens * h * 14336 * 3
    # GQA attention projections (Narayanan et al.'s terms with K, V of width 8·128) and the 4bs²h core
    attention = 2 * tokens * h * (h + 2 * 1024) + 2 * tokens * h * h
    core = 4 * tokens * tokens * h
    f = layer_flops(model, Layout(), LayerKind.MOE)
    assert f.forward == attention + core + mlp_flops(model, LayerKind.MOE)
    per_mb = model_flops_per_microbatch(model, Layout())
    head = 2 * tokens * h * 32000
    assert per_mb.forward == pytest.approx(32 * f.forward + head)


def test_mla_core_flops_use_the_per_head_widths():
    model = V3
    s = 4096
    # QKᵀ over 192-wide queries/keys, ·V over 128-wide values, 128 heads
    assert attention_core_flops(model, Layout()) == 2 * s * s * 128 * (192 + 128)
    dense = MODEL_PRESETS["llama2-7b"]
    assert attention_core_flops(dense, Layout()) == 4 * 4096 * 4096 * 4096  # 4bs²h, as before


def test_moe_activations_by_hand():
    model = MIXTRAL.with_shape(seq_len=4096)
    layout = Layout(recompute=Recompute.SELECTIVE)
    s, h, d, k = 4096, 4096, 2, 2
    replicated = 4 * d * s * h + s * (4 * 8 + 2 * d * k * h)  # norms, QKV and MLP inputs; router, dispatched
    attention = d * s * (h + 1024 + 1024 + h)
    mid = 3 * d * s * k * 14336
    assert layer_activation_bytes(model, layout, LayerKind.MOE) == replicated + attention + mid
    skewed = layer_activation_bytes(model, Layout(recompute=Recompute.SELECTIVE, moe_imbalance=1.5), LayerKind.MOE)
    assert skewed - layer_activation_bytes(model, layout, LayerKind.MOE) == pytest.approx(
        0.5 * (s * 2 * d * k * h + mid))


def test_the_experts_saved_inputs_are_fp8_in_an_fp8_run():
    # Transformer Engine's grouped linear keeps its quantized input, as every FP8 linear does: the dispatched
    # tokens into the experts at one byte, those out (the combine's, for the probabilities' gradient) at two
    model = MIXTRAL.with_shape(seq_len=4096)
    bf16 = Layout(recompute=Recompute.SELECTIVE)
    fp8 = Layout(recompute=Recompute.SELECTIVE, precision=Precision.FP8)
    s, h, k = 4096, 4096, 2
    dense_gap = layer_activation_bytes(model, bf16) - layer_activation_bytes(model, fp8)
    moe_gap = layer_activation_bytes(model, bf16, LayerKind.MOE) - layer_activation_bytes(model, fp8, LayerKind.MOE)
    # beyond what the layer's other linears save in FP8 (the dense MLP's width differs: compare the MoE terms)
    mid_gap = s * k * 14336 - s * 14336  # the down projections' inputs, k·f_e against f, at one byte less
    assert moe_gap - dense_gap == pytest.approx(s * k * h * 1 + mid_gap)


def test_dense_models_are_unchanged_by_the_moe_fields():
    model = MODEL_PRESETS["llama2-7b"]
    assert model.layer_kinds() == (LayerKind.DENSE,) * 32
    assert total_params(model) == 6_738_415_616  # Llama 2 7B's released count


def test_model_file_with_moe_and_mla_keys():
    data = {"layers": 4, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 1000, "seq": 128, "experts": 8,
            "experts_per_token": 2, "expert_ffn_hidden": 128, "shared_experts": 1, "first_dense_layers": 1,
            "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "mlp": "swiglu"}
    model = model_from_dict(data, "moe.yaml")
    assert model.is_moe and model.mla and model.moe_layers == 3 and model.shared_expert_ffn_hidden == 128
    assert model.q_width == 4 * 48 and model.v_width == 4 * 32


@pytest.mark.parametrize("extra, words", [
    ({"experts": 8, "experts_per_token": 9}, "experts_per_token=9"),
    ({"experts": 8}, "experts_per_token=0"),
    ({"experts_per_token": 2}, "experts is 0"),
    ({"experts": 4, "experts_per_token": 1, "first_dense_layers": 4}, "first_dense_layers=4"),
    ({"kv_lora_rank": 64}, "qk_nope_head_dim"),
    ({"q_lora_rank": 64}, "kv_lora_rank is 0"),
    ({"experts": -1}, "experts=-1"),
])
def test_bad_moe_fields_are_refused_in_one_line(extra, words):
    data = {"layers": 4, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 1000, "seq": 128, **extra}
    with pytest.raises(PipesimError) as err:
        model_from_dict(data, "bad.yaml")
    assert words in str(err.value) and "\n" not in str(err.value)
