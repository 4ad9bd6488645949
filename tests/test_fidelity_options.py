"""Each fidelity option on a small case computed by hand, and a clear error for combinations that do not exist."""

import json
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.analytic.activations import layer_activation_bytes, linear_input_element_bytes
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import FIELDS as CHIP_FIELDS
from pipesim.analytic.chip_spec import ChipSpec, chip_from_dict
from pipesim.analytic.comm import CollectiveOp, collective_time, cp_ring_comm, tp_layer_comm
from pipesim.analytic.kernels import (
    attention_core_times,
    gemm_kernel_time,
    gemm_time,
    head_times,
    layer_times,
    quantization_cast_bytes,
    wave_efficiency,
)
from pipesim.analytic.layout import Fp8Params, Fp8Recipe, Layout, Precision, Recompute, ZeroCollectives, ZeroStage
from pipesim.analytic.memory_gib import static_bytes
from pipesim.analytic.model_load import model_from_dict
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import FIELDS as MODEL_FIELDS
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.params import embedding_params, largest_layer_params, layer_params, output_params
from pipesim.analytic.stage_split import StageSplitRequest, resolve_stage_layers, uniform_item_split
from pipesim.analytic.steady_state import StepBoundary, lone_step_is_steady, multi_step_time, steady_state_step_time
from pipesim.analytic.to_costs import build_cost_model, recomputed_layers, stage_breakdown, stage_time_parts
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.program.build import build_program
from pipesim.program.table import table_of
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import simulate
from tests.schedule_cases import schedule_shapes

H100 = CHIP_PRESETS["h100-sxm"]
LLAMA = MODEL_PRESETS["llama3.1-405b"]
SMALL = ChipSpec("toy", 100.0, 1.0, 10.0, 1.0, 1.0, sm_count=4, gemm_tile=(128, 128), gemm_efficiency=0.5,
                 memory_efficiency=1.0)


def _error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pipesim: error: ")
    return err


# --- uneven stage splits ---------------------------------------------------------------------------------
def test_first_and_last_lighter_split_by_hand():
    assert resolve_stage_layers(126, 8, StageSplitRequest(15, 15)) == (15, 16, 16, 16, 16, 16, 16, 15)
    assert resolve_stage_layers(22, 8, StageSplitRequest(2, 2)) == (2, 3, 3, 3, 3, 3, 3, 2)  # Qi et al. 1.5B
    assert resolve_stage_layers(10, 4, StageSplitRequest(explicit=(1, 4, 4, 1))) == (1, 4, 4, 1)
    assert resolve_stage_layers(8, 2, StageSplitRequest(3, 5)) == (3, 5)


def test_uniform_split_of_modules_by_hand():
    """DeepSpeed-style "uniform" partition of [embedding, layers…, final norm, head]: equal item counts, the
    remainder first; the embedding and the norm + head take their items from the first and last stage."""
    assert uniform_item_split(40, 2) == (21, 19)  # items 22, 21
    assert uniform_item_split(80, 4) == (20, 21, 21, 18)  # items 21, 21, 21, 20
    assert uniform_item_split(60, 16) == (3,) + (4,) * 14 + (1,)  # 63 items: 4 each, the last one 3
    assert uniform_item_split(40, 1) == (40,)
    with pytest.raises(PipesimError, match="fewer stages"):
        uniform_item_split(1, 4)


@pytest.mark.parametrize(("request_", "words"), [
    (StageSplitRequest(explicit=(1, 2)), "2 entries"),
    (StageSplitRequest(explicit=(1, 2, 2, 1)), "sums to 6"),
    (StageSplitRequest(first=3), "do not split evenly"),
    (StageSplitRequest(first=1, explicit=(3, 3, 2, 2)), "drop --first-stage-layers"),
])
def test_split_errors_name_the_fix(request_, words):
    with pytest.raises(PipesimError, match=words):
        resolve_stage_layers(10, 4, request_)


def test_uneven_split_puts_embedding_and_head_on_the_right_stages():
    layout = Layout(tp=8, pp=8, microbatches=8, stage_layers=(15, 16, 16, 16, 16, 16, 16, 15), overlap_p2p=True)
    first, middle, last = (stage_breakdown(LLAMA, layout, s) for s in (0, 1, 7))
    per_layer = layer_params(LLAMA)
    assert first.params * 8 == 15 * per_layer + embedding_params(LLAMA)
    assert middle.params * 8 == 16 * per_layer
    assert last.params * 8 == 15 * per_layer + output_params(LLAMA, 8)
    costs = build_cost_model(LLAMA, H100, layout)
    assert costs.stage(0).forward == pytest.approx(costs.stage(1).forward * 15 / 16)


def test_cli_uneven_split_runs_and_reports_layers(capsys):
    argv = ["simulate", "--model", "llama3.1-405b", "--pp", "8", "--mb", "8", "--tp", "8", "--first-stage-layers",
            "15", "--last-stage-layers", "15", "--recompute", "full", "--sequence-parallel", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    assert report["layout"]["stage_layers"] == [15, 16, 16, 16, 16, 16, 16, 15]


# --- per-operation kernel times ----------------------------------------------------------------------------
def test_wave_quantization_by_hand():
    assert wave_efficiency(256, 256, SMALL) == 1.0  # 4 tiles, one full wave of 4 SMs
    assert wave_efficiency(256, 384, SMALL) == 0.75  # 6 tiles → 2 waves of 4: 6/8
    assert wave_efficiency(100, 128, SMALL) == pytest.approx(100 * 128 / (4 * 128 * 128))


def test_gemm_roofline_by_hand():
    # 256×256×256 on the toy chip: 2·256³ FLOP at 100·0.5·1.0 FLOP/s; bytes 2·(2·256²)+2·256² over 10 B/s
    compute = 2 * 256**3 / 50
    memory = (2 * 2 * 256 * 256 + 2 * 256 * 256) / 10
    assert gemm_time(256, 256, 256, SMALL, Precision.BF16) == pytest.approx(max(compute, memory))
    # 1×256 output: 2 tiles of 128×128, one wave on 4 SMs: it costs what a full wave (4 tiles) costs
    assert gemm_time(1, 256, 256, SMALL, Precision.BF16) == pytest.approx(2 * 4 * 128 * 128 * 256 / 50)


def test_hopper_attention_at_flash_attention_2_rates_by_hand():
    # Llama 2 7B, four 4096-token sequences: causal QKᵀ and ·V over 32 heads of 128 → 4·4·4096²·32·128 / 2 FLOP,
    # forward at 35 % of 989.4 TFLOP/s, backward (2.5× the FLOPs) at 28 %, both at the sustained clock
    # (gpu-fryer's 730 TFLOP/s over a short run's 792: 0.922), each scaled to 4k tokens by FlashAttention-2's
    # H100 rates (Shah et al. 2024): forward 319 of the 335 TFLOP/s at 16k, backward 310·(319/368) of
    # 322·(335/370). 32 query tiles × 128 (sequence, head) pairs = 4,096 CTAs: many waves, no grid penalty.
    model = replace(MODEL_PRESETS["llama2-7b"], micro_batch=4)
    executed = 4 * 4 * 4096**2 * 32 * 128 / 2
    core = attention_core_times(model, Layout(), H100)
    assert core.forward == pytest.approx(executed / (989.4e12 * 0.922 * 0.35 * 319 / 335))
    backward_share = (310 * 319 / 368) / (322 * 335 / 370)
    assert core.backward_input == pytest.approx(2.5 * executed / (989.4e12 * 0.922 * 0.28 * backward_share))


def test_sustained_clock_scales_tensor_core_work_only():
    # The toy chip at a 0.5 sustained clock: a compute-bound GEMM takes twice as long, a memory-bound one
    # (the same GEMM on a chip with an enormous peak) keeps its time, and the streaming bandwidth of the
    # element-wise kernels is untouched (HBM is not clocked down with the SMs).
    slow = replace(SMALL, sustained_clock_ratio=0.5)
    compute_bound = gemm_time(256, 256, 256, replace(SMALL, hbm_bandwidth=1e12), Precision.BF16)
    assert gemm_time(256, 256, 256, replace(slow, hbm_bandwidth=1e12), Precision.BF16) == pytest.approx(
        2 * compute_bound)
    memory_bound = replace(SMALL, peak_flops=1e18)
    assert gemm_time(256, 256, 256, replace(memory_bound, sustained_clock_ratio=0.5), Precision.BF16) == (
        gemm_time(256, 256, 256, memory_bound, Precision.BF16))
    assert slow.stream_bandwidth == SMALL.stream_bandwidth
    # the presets: H100 at gpu-fryer's 730 of a short run's 792, A100 at HPL's 1,305 of 1,410 MHz
    assert H100.sustained_clock_ratio == pytest.approx(730 / 792, abs=5e-4)
    assert CHIP_PRESETS["a100-80gb"].sustained_clock_ratio == pytest.approx(1305 / 1410, abs=5e-4)


def test_cross_entropy_moves_megatrons_bytes_per_logit():
    # The toy model's head on a chip with an enormous peak (GEMMs free up to their memory roofline), tp 2:
    # 10 tokens × 16 logits per rank; forward 38 B per logit + the final norm's 10·8·2·2, backward 14 B per
    # logit + twice the norm's bytes, over the streaming bandwidth.
    model = ModelSpec("toy", 1, 8, 2, 16, 32, 10)
    chip = replace(SMALL, peak_flops=1e30)
    layout = Layout(tp=2)
    head = head_times(model, layout, chip)
    logits, norm = 10 * 16, 10 * 8 * 2 * 2
    gemm_forward = gemm_time(10, 16, 8, chip, Precision.BF16)
    gemm_backward = gemm_time(10, 8, 16, chip, Precision.BF16)
    assert head.forward == pytest.approx(gemm_forward + (38 * logits + norm) / chip.stream_bandwidth)
    assert head.backward_input == pytest.approx(gemm_backward + (14 * logits + 2 * norm) / chip.stream_bandwidth)


def test_fp8_cast_bytes_by_hand():
    # h = 8, 2 heads, 1 KV head (kv_dim 4), gated FFN 16, tp 2, 10 tokens. GEMM (out, in) per tp rank:
    # QKV (8, 8), proj (8, 4), up+gate (16, 8), down (8, 8): inputs 28 wide, outputs 40 wide; 4 B each.
    model = ModelSpec("toy", 1, 8, 2, 16, 32, 10, kv_heads=1, gated=True)
    fp8 = Layout(tp=2, precision=Precision.FP8)
    assert quantization_cast_bytes(model, fp8, 10) == (28 * 4 * 10, 40 * 4 * 10)
    assert quantization_cast_bytes(model, Layout(tp=2), 10) == (0.0, 0.0)
    # FP8 GEMMs that take any layout (Blackwell): no transpose is written, read 2 B and write 1 B an element
    assert quantization_cast_bytes(model, fp8, 10, transposed=False) == (28 * 3 * 10, 40 * 3 * 10)
    # per-tensor current scaling ("tensorwise"): the amax pass reads each BF16 tensor once more first, 2 B more
    current = Layout(tp=2, precision=Precision.FP8, fp8_recipe=Fp8Recipe.TENSORWISE)
    assert quantization_cast_bytes(model, current, 10) == (28 * 6 * 10, 40 * 6 * 10)
    assert quantization_cast_bytes(model, current, 10, transposed=False) == (28 * 5 * 10, 40 * 5 * 10)


def test_an_fp8_recipe_needs_fp8_and_the_cli_says_which_flag_to_add(capsys):
    from pipesim.cli.main import main
    from pipesim.errors import PipesimError

    with pytest.raises(PipesimError, match="--fp8-recipe tensorwise scales FP8 casts, but the run is bf16"):
        Layout(fp8_recipe=Fp8Recipe.TENSORWISE)
    argv = ["simulate", "--model", "llama3.1-8b", "--hardware", "b200", "--pp", "1", "--dp", "8", "--mb", "1"]
    assert main([*argv, "--fp8-recipe", "tensorwise"]) == 2
    assert "add --fp8 or drop --fp8-recipe" in capsys.readouterr().err
    assert main([*argv, "--fp8", "--fp8-recipe", "tensorwise", "--json"]) == 0
    assert '"fp8_recipe": "tensorwise"' in capsys.readouterr().out


def test_fp8_leaves_the_lm_head_in_bf16():
    model = MODEL_PRESETS["llama3.1-8b"]
    fp8, bf16 = head_times(model, Layout(precision=Precision.FP8), H100), head_times(model, Layout(), H100)
    assert fp8 == bf16
    layer_fp8 = layer_times(model, Layout(precision=Precision.FP8), H100)
    assert layer_fp8.forward < layer_times(model, Layout(), H100).forward  # the layers' GEMMs do run in FP8


def test_weight_gradient_is_pure_gemm_and_faster_than_forward():
    costs = build_cost_model(MODEL_PRESETS["llama2-7b"], H100, Layout(pp=2, microbatches=4))
    stage = costs.stage(0)
    assert stage.backward_weight < stage.forward < stage.backward_input


def test_achievable_fraction_still_overrides(capsys):
    argv = ["simulate", "--model", "llama2-7b", "--pp", "2", "--mb", "4", "--achievable-fraction", "0.5", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["model_report"]["chip"]["achievable_fraction"] == 0.5


# --- steady state ----------------------------------------------------------------------------------------
def test_post_validation_lets_zb_h2_beat_zb_h1_and_changes_nothing_for_1f1b():
    costs = CostModel(optimizer_step=0.5)
    times = {}
    for name in ("1f1b", "zb-h1", "zb-h2"):
        program = build_program(name, 4, 8, None).program
        times[name] = (multi_step_time(program, costs, StepBoundary.SYNC),
                       multi_step_time(program, costs, StepBoundary.POST_VALIDATION))
    assert times["1f1b"][0] == times["1f1b"][1] == 33.5  # (m + p − 1)·(F + B) + step = 11·3 + 0.5
    assert times["zb-h1"][0] == times["zb-h2"][0]  # one isolated step: the same
    assert times["zb-h2"][1] < times["zb-h1"][1]


_SYNC_SCHEDULES = ["1f1b", "gpipe", "interleaved", "looped_bfs", "zb_h1", "zb_h2", "zb_v", "dualpipe", "dualpipe_v",
                   "interleaved_overlap"]


@settings(max_examples=60, deadline=None)
@given(shape=schedule_shapes(_SYNC_SCHEDULES, max_pp=6, max_chunks=3, max_microbatches=12),
       stage_costs=st.lists(st.tuples(st.floats(0.2, 3), st.floats(0.2, 3), st.floats(0.2, 3), st.floats(0, 1)),
                            min_size=18, max_size=18),
       latency=st.sampled_from([0.0, 0.3]), step=st.floats(0, 2), barrier=st.floats(0, 0.1))
def test_a_synchronised_steady_state_is_the_lone_step(shape, stage_costs, latency, step, barrier):
    """Under SYNC the planner takes the lone step's duration for the period (no repeated table): the same
    number, to the last bit, as three steps simulated back to back with the barrier between them."""
    name, pp, microbatches, chunks = shape
    program = build_program(name, pp, microbatches, chunks).program
    overrides = {s: {"forward": f, "backward": f + b, "backward_input": b, "backward_weight": w, "reduce_grad": r}
                 for s, (f, b, w, r) in enumerate(stage_costs[:program.shape.num_slices])}
    costs = CostModel(overrides=overrides, p2p_latency=latency, optimizer_step=step)
    assert lone_step_is_steady(table_of(program))
    lone = simulate(program, costs, check=False)
    period = multi_step_time(program, costs, StepBoundary.SYNC) + barrier
    assert steady_state_step_time(lone, StepBoundary.SYNC, barrier) == pytest.approx(period, rel=1e-12, abs=1e-12)
    three = simulate(program, costs, check=False, steps=3, boundary=StepBoundary.SYNC)
    assert not lone_step_is_steady(three.table)  # three STEPs per rank: the repeated table is not a lone step
    assert steady_state_step_time(three, StepBoundary.SYNC, barrier) == pytest.approx(period, rel=1e-12, abs=1e-12)


def test_cli_step_boundary_and_steps(capsys):
    base = ["simulate", "--model", "gpt-1.7b", "--hardware", "a100-80gb", "--pp", "4", "--mb", "8", "-s", "zb-h2",
            "--json"]
    assert main([*base, "--step-boundary", "sync"]) == 0
    sync = json.loads(capsys.readouterr().out)["model_report"]
    assert main([*base, "--steps", "3"]) == 0  # zero-bubble schedules default to post-validation
    post = json.loads(capsys.readouterr().out)["model_report"]
    assert post["step_boundary"] == "post-validation" and post["step_time_s"] < sync["step_time_s"]
    assert "drop one" in _error(capsys, [*base, "--step-boundary", "sync", "--steps", "3"])
    one_f = ["simulate", "--model", "gpt-1.7b", "--hardware", "a100-80gb", "--pp", "4", "--mb", "8", "--json"]
    assert main(one_f) == 0
    assert json.loads(capsys.readouterr().out)["model_report"]["step_boundary"] == "sync"


# --- FP8, ZeRO, CP, async TP -----------------------------------------------------------------------------
def test_partial_recomputation_by_hand():
    """Megatron's block method (--recompute-layers r): a stage's first r of n layers recomputed in full, the rest
    keeping their activations, so each per-layer quantity is r/n of full recomputation's and the rest of none's
    (Llama 2 13B at tp 2 on H100, where no host floor binds), the recomputed FLOPs count r layers a stage, and
    r ≥ n is full recomputation."""
    model = MODEL_PRESETS["llama2-13b"]  # 40 layers: 20 a stage at pp 2
    none = Layout(tp=2, pp=2, microbatches=4, sequence_parallel=True)
    full = replace(none, recompute=Recompute.FULL)
    part = replace(full, recompute_layers=5)
    share = 5 / 20
    for stage in (0, 1):
        act = {k: stage_breakdown(model, lay, stage).activation_bytes for k, lay in (("n", none), ("f", full),
                                                                                   ("p", part))}
        assert act["p"] == pytest.approx(act["n"] + share * (act["f"] - act["n"]), rel=1e-12)
        t = {k: stage_time_parts(model, H100, lay)[stage] for k, lay in (("n", none), ("f", full), ("p", part))}
        for field in ("compute", "exposed_comm", "backward_pass"):
            n, f, p = (getattr(t[k], field) for k in "nfp")
            assert p == pytest.approx(n + share * (f - n), rel=1e-9), field
        assert t["p"].forward_pass == t["f"].forward_pass == t["n"].forward_pass
    assert recomputed_layers(model, part) == {LayerKind.DENSE: 10, LayerKind.MOE: 0}
    assert recomputed_layers(model, full) is None
    whole = replace(full, recompute_layers=20)
    assert build_cost_model(model, H100, whole) == build_cost_model(model, H100, full)
    with pytest.raises(PipesimError, match="--recompute full"):
        replace(none, recompute_layers=2)


def test_distributed_saved_activations_by_hand(capsys):
    """Megatron-LM's --distribute-saved-activations (metaseq's --distribute-checkpointed-activations, OPT-175B's):
    under full recomputation each layer keeps 1/tp of its input, 2·b·s·h bytes over tp, and its backward first
    all-gathers it over tp, waited for: one all-gather of b·s·h more than full recomputation's collectives. GPT-3
    175B at tp 8, micro-batch 8 on A100: 8·2048·12288·2 bytes a layer, 50.3 MB kept of 403 MB."""
    model = MODEL_PRESETS["gpt3-175b"].with_shape(None, 8)
    chip = CHIP_PRESETS["a100-80gb"]
    full = Layout(tp=8, recompute=Recompute.FULL)
    split = replace(full, distribute_saved_activations=True)
    sbh_bytes = 8 * 2048 * 12288 * 2
    assert layer_activation_bytes(model, full) == sbh_bytes
    assert layer_activation_bytes(model, split) == sbh_bytes / 8
    gather = collective_time(CollectiveOp.ALL_GATHER, sbh_bytes, 8, chip, 8)
    assert tp_layer_comm(model, split, chip).backward == pytest.approx(tp_layer_comm(model, full, chip).backward
                                                                       + gather, rel=1e-12)
    assert tp_layer_comm(model, split, chip).forward == tp_layer_comm(model, full, chip).forward
    # partial recomputation: the layers that keep their activations keep them whole and gather nothing
    part = replace(split, pp=2, microbatches=4, recompute_layers=12)
    assert build_cost_model(model, chip, part) != build_cost_model(model, chip, replace(full, pp=2, microbatches=4,
                                                                                      recompute_layers=12))
    for bad in (dict(recompute=Recompute.SELECTIVE), dict(tp=1), dict(sequence_parallel=True)):
        with pytest.raises(PipesimError, match="--distribute-saved-activations"):
            replace(split, **bad)
    base = ["simulate", "--model", "gpt3-175b", "--hardware", "a100-80gb", "--tp", "8", "--pp", "2", "--mb", "4",
            "--recompute", "full", "--json"]
    reports = {}
    for flag in ("", "--distribute-saved-activations", "--distribute-checkpointed-activations",
                 "--partition-activations"):
        assert main([*base, *([flag] if flag else [])]) == 0
        reports[flag] = json.loads(capsys.readouterr().out)["model_report"]
    plain, split_report = reports[""], reports["--distribute-saved-activations"]
    # Megatron-LM's older name (metaseq's) and DeepSpeed's
    assert split_report == reports["--distribute-checkpointed-activations"] == reports["--partition-activations"]
    assert split_report["layout"]["distribute_saved_activations"] and not plain["layout"][
        "distribute_saved_activations"]
    assert split_report["memory"]["peak_gib"] < plain["memory"]["peak_gib"]
    assert split_report["step_time_s"] > plain["step_time_s"]
    assert "--sequence-parallel" in _error(capsys, [*base, "--distribute-saved-activations", "--sequence-parallel"])
    # nanotron has no such switch; DeepSpeed's engine (partition_activations) has
    assert "nanotron keeps" in _error(capsys, [*base, "--distribute-saved-activations", "--framework", "nanotron"])
    assert main([*base, "--partition-activations", "--framework", "megatron-deepspeed", "--pp", "1"]) == 0
    capsys.readouterr()


def test_fp8_weights_by_hand():
    """1,000 parameters on a rank, 100 of them the embedding's and output layer's, which Transformer Engine
    leaves in BF16: an FP8 run keeps BF16 weights and an FP8 copy of the linears; with FP8 parameters the
    linears keep FP8 alone, with its transpose (Transformer Engine 2.x) or without."""
    fp8 = Layout(dp=4, zero=ZeroStage.OPTIMIZER, precision=Precision.FP8)
    assert static_bytes(1000, fp8, end_params=100) == (2 * 1000 + 900, 4000, 3000)
    assert static_bytes(1000, replace(fp8, fp8_params=Fp8Params.BOTH), end_params=100) == (2 * 100 + 2 * 900, 4000,
                                                                                            3000)
    assert static_bytes(1000, replace(fp8, fp8_params=Fp8Params.ROWWISE), end_params=100)[0] == 2 * 100 + 900
    fsdp = Layout(dp=4, zero=ZeroStage.PARAMETERS, precision=Precision.FP8)  # the FP8 copy sharded like the weights
    assert static_bytes(1000, fsdp, end_params=100)[0] == (2 * 1000 + 900) / 4


def test_fp8_params_in_the_report_by_hand(capsys):
    """Llama 3.1 8B on one rank (tp 1): FP8 parameters kept rowwise save 2 bytes on every parameter but the
    embedding's and the output layer's, and the step the once-a-step cast of those weights (the optimizer writes
    them in FP8) and half the parameter all-gather after the step (one byte a weight, the embedding and head's
    taken alike: Layout.gathered_weight_bytes); nothing else changes."""
    base = ["simulate", "--model", "llama3.1-8b", "--pp", "1", "--mb", "1", "--dp", "8", "--distributed-optimizer",
            "--fp8", "--json"]
    reports = {}
    for extra in ([], ["--fp8-params", "rowwise"], ["--fp8-params"]):
        assert main([*base, *extra]) == 0
        reports[tuple(extra)] = json.loads(capsys.readouterr().out)["model_report"]
    (copy,), (rowwise,), (both,) = (r["memory"]["ranks"] for r in reports.values())
    model = MODEL_PRESETS["llama3.1-8b"]
    linears = copy["params"] - embedding_params(model) - output_params(model, 1)
    assert copy["weights_gib"] - rowwise["weights_gib"] == pytest.approx(2 * linears / 2**30, rel=1e-12)
    assert copy["weights_gib"] - both["weights_gib"] == pytest.approx(linears / 2**30, rel=1e-12)
    assert rowwise["activations_gib"] == copy["activations_gib"] and rowwise["grads_gib"] == copy["grads_gib"]
    assert reports[("--fp8-params",)]["layout"]["fp8_params"] == "both"
    assert reports[("--fp8-params", "rowwise")]["step_time_s"] == reports[("--fp8-params",)]["step_time_s"]
    # one microbatch: the whole cast, read BF16 and write FP8 and its transpose on the H100, on that one forward;
    # and the gather of the updated weights over dp 8 inside the node, after the step, in one byte a weight
    h100 = CHIP_PRESETS["h100-sxm"]
    cast = 4 * linears / h100.stream_bandwidth
    gathered = (collective_time(CollectiveOp.ALL_GATHER, 2 * copy["params"], 8, h100, 8)
                - collective_time(CollectiveOp.ALL_GATHER, copy["params"], 8, h100, 8))
    assert reports[()]["step_time_s"] - reports[("--fp8-params",)]["step_time_s"] == pytest.approx(cast + gathered,
                                                                                                   rel=0.02)


def test_zero_stages_memory_by_hand():
    one, two = Layout(dp=4, zero=ZeroStage.OPTIMIZER), Layout(dp=4, zero=ZeroStage.GRADIENTS)
    assert static_bytes(1000, one) == (2000, 4000, 3000)
    assert static_bytes(1000, two) == (2000, 1000, 3000)
    assert static_bytes(1000, Layout(dp=4, zero=ZeroStage.PARAMETERS)) == (500, 1000, 3000)
    assert static_bytes(1000, Layout(dp=4, pp=2, zero=ZeroStage.PARAMETERS)) == (2000, 4000, 3000)
    assert static_bytes(1000, Layout(precision=Precision.FP8)) == (3000, 4000, 12000)  # FP8 weight copy
    fsdp_fp8 = Layout(dp=4, zero=ZeroStage.PARAMETERS, precision=Precision.FP8)
    assert static_bytes(1000, fsdp_fp8) == (750, 1000, 3000)  # (2 + 1)·1000 / 4
    # FSDP's ZeRO-2 keeps every gathered layer until its backward: whole weights, sharded gradients, plus the
    # unsharded gradients of the two layers in flight
    per_layer = Layout(dp=4, zero=ZeroStage.GRADIENTS, zero_collectives=ZeroCollectives.PER_LAYER)
    assert static_bytes(1000, per_layer) == (2000, 1000, 3000)
    model = MODEL_PRESETS["llama2-7b"]
    layer = largest_layer_params(model)
    weights, grads, _ = static_bytes(1e9, per_layer, model)
    assert weights == pytest.approx(2e9) and grads == pytest.approx(1e9 + 2 * layer * 4)


def test_zero_collectives_flag_runs_fsdp_zero2_per_layer(capsys):
    """``--zero-collectives per-layer``: the per-layer collectives, a gather and a reduce-scatter of every layer
    each microbatch prefetched beside the layers, give a step of eight microbatches another time than DeepSpeed's
    buckets (each microbatch's reduce-scatter after its backward, exposed) across four nodes, the report says which
    ran, and a stage other than 2 (or pipelining) is refused."""
    base = ["simulate", "--model", "llama2-7b", "--hardware", "a100-80gb", "--pp", "1", "--mb", "8", "--dp", "32",
            "--zero", "2", "--json"]
    runs = {}
    for how in ("bucketed", "per-layer"):
        assert main([*base, "--zero-collectives", how]) == 0
        runs[how] = json.loads(capsys.readouterr().out)["model_report"]
        assert runs[how]["layout"]["zero_collectives"] == how
    assert runs["per-layer"]["layout"]["gathers_per_layer"] and not runs["bucketed"]["layout"]["gathers_per_layer"]
    assert runs["per-layer"]["step_time_s"] != runs["bucketed"]["step_time_s"]
    assert "--zero 2 and --pp 1" in _error(capsys, [*base[:-3], "--zero", "1", "--zero-collectives", "per-layer"])


def test_zero_collectives_flag_runs_deepspeed_2021_zero3_per_tensor(capsys):
    """``--zero 3 --zero-collectives per-tensor``: a collective per tensor, each costing the host a tensor
    operation per rank, makes the step longer than per-layer ZeRO-3, by more on more ranks; the report says
    which ran, and ZeRO-2 (or pipelining) is refused."""
    base = ["simulate", "--model", "gpt3-175b", "--hardware", "a100-80gb", "--pp", "1", "--mb", "1",
            "--recompute", "full", "--zero", "3", "--json"]
    steps = {}
    for dp in (64, 128):
        for how in ("bucketed", "per-tensor"):
            assert main([*base, "--dp", str(dp), "--zero-collectives", how]) == 0
            report = json.loads(capsys.readouterr().out)["model_report"]
            assert report["layout"]["zero_collectives"] == how
            steps[dp, how] = report["step_time_s"]
    assert steps[64, "per-tensor"] > steps[64, "bucketed"]
    assert steps[128, "per-tensor"] - steps[128, "bucketed"] > steps[64, "per-tensor"] - steps[64, "bucketed"]
    error = _error(capsys, [*base[:-3], "--zero", "2", "--dp", "8", "--zero-collectives", "per-tensor"])
    assert "--zero 3 and --pp 1" in error


def test_overlap_tp_dgrad_flag(capsys):
    """``--no-overlap-tp-dgrad``: every TP collective waits, so 1F1B's step is longer than with the column-parallel
    input-gradient collectives beside their weight gradients (the default); the report says which ran, and
    async TP, which overlaps everything, refuses the contradiction."""
    base = ["simulate", "--model", "llama2-13b", "--hardware", "h100-sxm", "--pp", "2", "--mb", "4", "--tp", "8",
            "--sequence-parallel", "--json"]
    runs = {}
    for flags in ([], ["--no-overlap-tp-dgrad"]):
        assert main([*base, *flags]) == 0
        runs[bool(flags)] = json.loads(capsys.readouterr().out)["model_report"]
    assert runs[False]["layout"]["overlap_tp_dgrad"] and not runs[True]["layout"]["overlap_tp_dgrad"]
    assert runs[True]["step_time_s"] > runs[False]["step_time_s"]
    assert main([*base[:-1], "--no-overlap-tp-dgrad"]) == 0
    assert "TP collectives all blocking" in capsys.readouterr().out
    assert "contradicts --async-tp" in _error(capsys, [*base[:-1], "--async-tp", "--no-overlap-tp-dgrad"])


def test_column_input_flag(capsys):
    """``--column-input``: under sequence parallelism, gathering the column-parallel inputs again and waiting
    (nanotron) is slower than beside the input-gradient GEMM (Megatron-LM, the default); keeping them gathered
    (DTensor) is faster and holds more memory. The report names a departure from the default."""
    base = ["simulate", "--model", "llama2-13b", "--hardware", "h100-sxm", "--pp", "2", "--mb", "4", "--tp", "8",
            "--sequence-parallel", "--json"]
    runs = {}
    for mode in ("regather", "regather-blocking", "saved"):
        assert main([*base, "--column-input", mode]) == 0
        runs[mode] = json.loads(capsys.readouterr().out)["model_report"]
        assert runs[mode]["layout"]["column_input"] == mode
    assert runs["saved"]["step_time_s"] < runs["regather"]["step_time_s"] < runs["regather-blocking"]["step_time_s"]
    assert runs["saved"]["memory"]["peak_gib"] > runs["regather"]["memory"]["peak_gib"]
    assert runs["regather"]["memory"]["peak_gib"] == runs["regather-blocking"]["memory"]["peak_gib"]
    assert main([*base[:-1], "--column-input", "regather-blocking"]) == 0
    assert "TP inputs gathered again, blocking" in capsys.readouterr().out
    assert main([*base[:-1], "--column-input", "saved"]) == 0
    assert "gathered TP inputs kept" in capsys.readouterr().out
    # without sequence parallelism nothing is gathered: the run says the flag changed nothing
    assert main([*base[:-2], "--column-input", "saved"]) == 0
    out = capsys.readouterr().out
    assert "note: --column-input saved changes nothing here" in out and "gathered TP inputs kept" not in out


def test_context_parallel_by_hand():
    model = MODEL_PRESETS["llama3.1-8b"]
    layout = Layout(tp=1, cp=2)
    ring = cp_ring_comm(model, layout, H100)
    block = 2 * 2 * 1 * 8192 / 2 * model.kv_dim  # K and V of 4096 tokens, BF16
    assert ring.forward == pytest.approx(block / H100.intra_node_bandwidth + H100.link_latency)
    assert ring.backward == pytest.approx(2 * ring.forward)
    halves = stage_breakdown(model, layout, 0).activation_bytes, stage_breakdown(model, Layout(), 0).activation_bytes
    assert halves[0] == pytest.approx(halves[1] / 2)


def test_ring_attention_hides_each_hop_behind_one_step_by_hand():
    """Transformer Engine's ring runs the attention in cp steps and sends step i + 1's K/V block while step i
    computes, so each hop hides behind one step's share of the attention (core / cp), not the whole layer's.
    Llama 3.1 8B at 8,192 tokens, cp = 4 on one H100 node, the cp group capped at one CTA (NVIDIA's MLPerf
    communicator config): a block is K and V of 2,048 tokens, 2·2·2,048·1,024 = 8.39 MB, moved at one NCCL
    channel's 36.7 GB/s (not NVLink's 450), plus the 10 µs link latency. Attention 0.2 ms forward, 0.4 ms
    backward: forward 3 hops each beyond a 50 µs step; backward, the first and last hops one block beyond a 100
    µs step, the two middle ones two blocks (K/V out, dK/dV back)."""
    from pipesim.analytic.comm import cp_ring_exposed, cp_ring_hop

    model = MODEL_PRESETS["llama3.1-8b"].with_shape(seq_len=8192, micro_batch=1)
    capped = Layout(cp=4, cp_comm_ctas=1)
    hop = 2 * 2 * 2048 * 1024 / 36.7e9 + 10e-6
    assert cp_ring_hop(model, capped, H100) == pytest.approx(hop)
    ring = cp_ring_exposed(model, capped, H100, core_forward=0.2e-3, core_backward=0.4e-3)
    assert ring.forward == pytest.approx(3 * (hop - 0.05e-3))
    assert ring.backward == pytest.approx(2 * (hop - 0.1e-3) + 2 * (2 * hop - 0.1e-3))
    # more than the whole attention would hide: 3 hops against 0.2 ms
    assert ring.forward > 3 * hop - 0.2e-3
    # uncapped, NCCL's own channels move the block at NVLink's 450 GB/s and every step hides its hop
    free = cp_ring_exposed(model, Layout(cp=4), H100, core_forward=0.2e-3, core_backward=0.4e-3)
    assert cp_ring_hop(model, Layout(cp=4), H100) == pytest.approx(2 * 2 * 2048 * 1024 / 450e9 + 10e-6)
    assert (free.forward, free.backward) == (0.0, 0.0)
    # across nodes (tp 8 × cp 2 on 8-GPU nodes) one CTA moves NCCL's per-channel network figure, below the NIC's
    across = Layout(tp=8, cp=2, cp_comm_ctas=1)
    assert cp_ring_hop(model, across, H100) == pytest.approx(2 * 2 * 4096 * 1024 / 8 / 14e9 + 10e-6)
    assert cp_ring_exposed(model, Layout(), H100, 1.0, 1.0) == cp_ring_comm(model, Layout(), H100)


def test_cp_comm_ctas_needs_context_parallelism_and_shows_in_the_report(capsys):
    with pytest.raises(PipesimError, match="--cp-comm-ctas 1 caps the CTAs"):
        Layout(cp_comm_ctas=1)
    argv = ["simulate", "--model", "llama3.1-8b", "--hardware", "b200", "--pp", "1", "--dp", "4", "--mb", "1",
            "--seq-len", "8192", "--cp-comm-ctas", "1"]
    assert main(argv) == 2
    assert "it needs --cp N (N > 1)" in capsys.readouterr().err
    assert main([*argv, "--cp", "2"]) == 0
    capped = capsys.readouterr().out
    assert "1 CTA(s) for the ring sends" in capped
    assert main([*argv, "--cp", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_report"]["layout"]["cp_comm_ctas"] == 1
    # the cap slows the step: B200's block of 16.8 MB takes 0.43 ms at one channel, beyond a step's attention
    assert main([*argv[:-2], "--cp", "2"]) == 0
    free = capsys.readouterr().out
    step = [float(line.split()[2]) for line in (capped, free) for line in line.splitlines()
            if line.startswith("step time")]
    assert step[0] > step[1]


def test_ring_attention_merges_its_partial_outputs_by_hand():
    """Llama 3.1 8B at 8,192 tokens over cp = 2: each rank's 4,096 queries meet one visiting K/V block, so one
    merge of partial results per pass: forward, read the running output and the step's and write it back (3 ×
    2 B) over 4,096 × 32 heads × 128 = 16.8M output elements; backward, the queries' gradient (16.8M) and the
    visiting K and V gradients (4,096 × 8 KV heads × 256 = 8.4M) the same way. Memory-bound at the stream
    rate, on top of the attention kernels; nothing without CP."""
    from pipesim.analytic.kernels import attention_core_times, cp_merge_bytes

    model = MODEL_PRESETS["llama3.1-8b"].with_shape(seq_len=8192, micro_batch=1)
    forward, backward = cp_merge_bytes(model, Layout(cp=2))
    assert forward == pytest.approx(6 * 4096 * 32 * 128)
    assert backward == pytest.approx(6 * (4096 * 32 * 128 + 4096 * 8 * 256))
    assert cp_merge_bytes(model, Layout(cp=1)) == (0.0, 0.0)
    assert cp_merge_bytes(model, Layout(cp=4))[0] == pytest.approx(3 * 6 * 2048 * 32 * 128)  # 3 merges of 2,048 rows
    # the core's time grows by exactly that, at the chip's stream rate
    plain = attention_core_times(model, Layout(cp=2), replace(H100, hbm_bandwidth=1e30))
    real = attention_core_times(model, Layout(cp=2), H100)
    assert real.forward - plain.forward == pytest.approx(forward / H100.stream_bandwidth)
    assert real.backward_input - plain.backward_input == pytest.approx(backward / H100.stream_bandwidth)


def test_async_tp_hides_most_of_the_collectives():
    model = MODEL_PRESETS["llama2-70b"]
    plain = build_cost_model(model, H100, Layout(tp=8, microbatches=2))
    overlapped = build_cost_model(model, H100, Layout(tp=8, microbatches=2, async_tp=True))
    comm = tp_layer_comm(model, Layout(tp=8), H100)
    saved = plain.default.forward - overlapped.default.forward
    assert 0 < saved <= model.layers * comm.forward * (1 - 1 / 8) + 1e-12


def test_fp8_is_faster_on_h100():
    model = MODEL_PRESETS["llama2-70b"]
    bf16 = build_cost_model(model, H100, Layout(tp=8, microbatches=2))
    fp8 = build_cost_model(model, H100, Layout(tp=8, microbatches=2, precision=Precision.FP8))
    assert fp8.default.backward_weight < bf16.default.backward_weight


@pytest.mark.parametrize(("argv", "words"), [
    (["--hardware", "a100-80gb", "--fp8"], "no FP8"),
    (["--dp", "2", "--zero", "2", "--pp", "2"], "--zero 2"),
    (["--async-tp"], "--tp is 1"),
    (["--cp", "3"], "not divisible by 6; use a --cp whose 2·cp divides it (2, 4, 8, 16, 32, 64)"),
    (["--stage-layers", "10,10"], "sums to 20"),
    (["--dp", "2", "--distributed-optimizer", "--zero", "3"], "keep one"),
])
def test_combinations_that_do_not_exist(capsys, argv, words):
    base = ["simulate", "--model", "llama2-7b", "--mb", "4"]
    if "--pp" not in argv:
        base += ["--pp", "2"]
    assert words in _error(capsys, [*base, *argv])


def test_memory_warning_does_not_suggest_what_is_on(capsys):
    argv = ["simulate", "--model", "llama3.1-405b", "--pp", "2", "--mb", "4", "--tp", "2", "--dp", "2",
            "--stage-layers", "63,63", "--distributed-optimizer", "--sequence-parallel", "--recompute", "full"]
    assert main(argv) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    assert warnings and all("--distributed-optimizer" not in w and "--sequence-parallel" not in w
                            and "--recompute" not in w for w in warnings)


# --- model and chip files --------------------------------------------------------------------------------
def test_model_file_takes_listing_column_names():
    model = model_from_dict({"layers": 2, "hidden": 64, "heads": 4, "kv": 2, "ffn": 128, "vocab": 100,
                             "seq": 32, "mlp": "swiglu"}, "m.yaml")
    assert (model.ffn_hidden, model.seq_len, model.kv_heads, model.gated) == (128, 32, 2, True)


def test_chip_file_accepts_yaml11_exponent_strings_and_refuses_bad_values():
    good = {"peak_flops": "989.4e12", "memory_gib": 80, "hbm_bandwidth": 3.35e12, "intra_node_bandwidth": 4.5e11,
            "inter_node_bandwidth": 5e10}
    assert chip_from_dict(good, "c.yaml").peak_flops == 989.4e12
    for key, value, words in [("peak_flops", float("inf"), "finite"), ("memory_gib", True, "not a boolean"),
                              ("intra_node_bandwidth", 0, "> 0"), ("node_size", 2.5, "integer"),
                              ("gemm_efficiency", 1.5, "≤ 1")]:
        with pytest.raises(PipesimError, match=words):
            chip_from_dict({**good, key: value}, "c.yaml")
    with pytest.raises(PipesimError, match=r"unknown key 'peak'.*peak_flops"):
        chip_from_dict({**good, "peak": 1}, "c.yaml")
    assert replace(H100, gemm_efficiency=0.7).gemm_efficiency == 0.7


def test_docs_list_every_key():
    from pathlib import Path

    from pipesim.analytic.spec_docs import model_and_chip_doc

    text = (Path(__file__).parent.parent / "docs" / "model-and-chip-files.md").read_text()
    assert text == model_and_chip_doc(), "regenerate: python -m pipesim.analytic.spec_docs > docs/…md"


def test_executor_takes_the_same_uneven_split():
    pytest.importorskip("torch")
    from executors.model import ModelConfig, layers_of_stage

    cfg = ModelConfig(layers=6, stage_layers=(1, 2, 2, 1))
    assert [list(layers_of_stage(cfg, s, 4)) for s in range(4)] == [[0], [1, 2], [3, 4], [5]]
    with pytest.raises(PipesimError, match="summing to --layers 6"):
        layers_of_stage(ModelConfig(layers=6, stage_layers=(3, 2)), 0, 2)
    # Without a split: the simulator's default (lighter ends where the stages do not divide the layers)
    assert [len(layers_of_stage(ModelConfig(layers=6), s, 4)) for s in range(4)] == [1, 2, 2, 1]
    assert [len(layers_of_stage(ModelConfig(layers=7), s, 4)) for s in range(4)] == [2, 2, 2, 1]  # none balances


def test_model_file_takes_params_as_listed():
    data = {"layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 32000, "seq": 4096, "mlp": "swiglu",
            "bias": False, "rms_norm": True}
    assert model_from_dict({**data, "params": "6.7B"}, "m.yaml").layers == 32
    with pytest.raises(PipesimError, match="the shape gives"):
        model_from_dict({**data, "params": "70B"}, "m.yaml")


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                    st.text(max_size=12), st.lists(st.integers(-5, 500), max_size=3),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from([f.key for f in CHIP_FIELDS] + ["peak", "bogus"]), _VALUES, max_size=8))
def test_any_chip_file_is_a_chip_or_one_clear_error(data):
    try:
        chip = chip_from_dict(data, "c.yaml")
    except PipesimError as err:
        assert "c.yaml" in str(err) and "\n" not in str(err)
    else:
        assert chip.peak_flops > 0 and chip.memory_gib > 0


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from([f.key for f in MODEL_FIELDS] + ["ffn", "seq", "kv", "width"]), _VALUES,
                       max_size=10))
def test_any_model_file_is_a_model_or_one_clear_error(data):
    try:
        model = model_from_dict(data, "m.yaml")
    except PipesimError as err:
        assert "m.yaml" in str(err) or "model m.yaml" in str(err)
        assert "\n" not in str(err)
    else:
        assert model.layers >= 1 and model.hidden % model.heads == 0


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("sm_count", 10**30, "sm_count=1000000000000000000000000000000 must be ≥ 1 and ≤ 10000"),
    ("gemm_tile", [10**9, 256], "gemm_tile=1000000000 must be ≥ 1 and ≤ 4096")])
def test_chip_counts_no_chip_has_are_refused(key, value, fragment):
    """A fuzzed chip file's 10^30 SMs overflowed the wave count (an internal error), and a tile a billion wide made
    nonsense of it: both bounded in the schema, one line each."""
    data = {"peak_flops": 989e12, "memory_gib": 80, "hbm_bandwidth": 3.35e12, "intra_node_bandwidth": 450e9,
            "inter_node_bandwidth": 50e9, key: value}
    with pytest.raises(PipesimError, match=re.escape(f"c.yaml: {fragment}")):
        chip_from_dict(data, "c.yaml")


def test_a_layer_count_no_model_has_is_refused_before_anything_is_built_from_it():
    """10^12 layers (a typo) once hung `simulate` building the list of the layers' kinds; a model file, a ModelSpec
    and Megatron-LM's --num-layers are each refused in one line."""
    data = {"layers": 10**12, "hidden": 1024, "heads": 8, "ffn_hidden": 4096, "vocab": 32000, "seq_len": 2048}
    with pytest.raises(PipesimError, match=re.escape("m.yaml: layers=1000000000000 must be ≥ 1 and ≤ 100000")):
        model_from_dict(data, "m.yaml")
    with pytest.raises(PipesimError, match="layers=1000000000000 must be ≤ 100,000"):
        replace(MODEL_PRESETS["llama2-7b"], layers=10**12)
    assert model_from_dict({**data, "layers": 100_000}, "m.yaml").layers == 100_000


def test_blocking_sends_join_the_senders_compute_by_hand():
    model = MODEL_PRESETS["llama2-7b"]
    overlapped = build_cost_model(model, H100, Layout(pp=2, microbatches=4, overlap_p2p=True))
    blocking = build_cost_model(model, H100, Layout(pp=2, microbatches=4))
    wire = overlapped.stage(0).p2p_bytes / (H100.intra_node_bandwidth * H100.p2p_efficiency)
    sync = H100.p2p_sync_overhead  # the device idles after each synchronising call
    assert blocking.stage(0).forward == pytest.approx(overlapped.stage(0).forward + wire + sync)
    assert blocking.stage(1).backward_input == pytest.approx(overlapped.stage(1).backward_input + wire + sync)
    assert blocking.stage(1).forward == overlapped.stage(1).forward  # the last stage sends nothing forward
    assert blocking.p2p_bandwidth is None  # the wire time moved into the compute; transfers cost their latency


def test_interleaved_chunks_share_one_synchronising_call_per_forward_backward_pair_by_hand():
    """v = 2 chunks: a rank's stage value carries two chunk passes, each with its own wire time and half a
    synchronisation (Megatron's interleaved schedule sends a forward's output and a backward's gradient in one
    call); without synchronisation (p2p_sync_overhead 0) only the wire time is left."""
    model = MODEL_PRESETS["llama2-7b"]
    layout = Layout(pp=2, chunks=2, microbatches=4)
    overlapped = build_cost_model(model, H100, replace(layout, overlap_p2p=True))
    wire = overlapped.stage(0).p2p_bytes / (H100.intra_node_bandwidth * H100.p2p_efficiency)
    for sync in (H100.p2p_sync_overhead, 0.0):
        blocking = build_cost_model(model, replace(H100, p2p_sync_overhead=sync), layout)
        assert blocking.stage(0).forward == pytest.approx(overlapped.stage(0).forward + 2 * (wire + sync / 2))
        assert blocking.stage(3).forward == overlapped.stage(3).forward  # the last stage sends nothing forward


def test_a_boundary_that_crosses_nodes_uses_the_nic():
    model = MODEL_PRESETS["zb-14.6b"]
    costs = build_cost_model(model, CHIP_PRESETS["a100-80gb"], Layout(pp=16, microbatches=16, overlap_p2p=True,
                                                                      stage_layers=(2,) + (3,) * 14 + (2,)))
    a100 = CHIP_PRESETS["a100-80gb"]
    assert costs.p2p_bandwidth == a100.inter_node_bandwidth  # 16 ranks over two nodes of 8
    assert costs.stage(7).p2p_bandwidth is None  # ranks 7 → 8: the NIC
    assert costs.stage(0).p2p_bandwidth == a100.intra_node_bandwidth * a100.p2p_efficiency  # inside node 0


def test_an_uneven_model_gets_the_lighter_ends_the_planner_uses_and_the_report_says_so(capsys):
    """Without a split asked for, 126 layers over 8 stages take Megatron's lighter ends (15, 16 × 6, 15), the
    split plan searches; a report names it; layers no split balances are still refused with one that works."""
    assert resolve_stage_layers(126, 8) == (15,) + (16,) * 6 + (15,)
    assert resolve_stage_layers(126, 7) == (18,) * 7  # even where the stages divide
    with pytest.raises(PipesimError, match="61 layers do not split evenly over pp·v = 4 stages; use --stage-layers"):
        resolve_stage_layers(61, 4, model_name="model deepseek-v3")
    assert main(["simulate", "--model", "llama3.1-405b", "--pp", "8", "--tp", "8", "--mb", "16",
                 "--sequence-parallel"]) == 0
    out = capsys.readouterr().out
    assert "layers per stage 15,16,16,16,16,16,16,15 (the stages do not divide the layers" in out
    assert main(["simulate", "--model", "llama3.1-405b", "--pp", "7", "--tp", "8", "--mb", "14",
                 "--sequence-parallel"]) == 0
    assert "the stages do not divide" not in capsys.readouterr().out


def test_tp_pp_dp_mapping_moves_pipeline_neighbours_into_a_node_and_data_parallelism_out_of_it():
    """16 GPUs in nodes of 8, tp 2 × dp 4 × pp 2. Megatron's default order (tp, cp, dp, pp): pipeline neighbours
    tp·dp = 8 ranks apart, in two nodes (the NIC); the dp group's 4 members 2 apart, in one node (NVLink). With
    --tp-pp-dp-mapping (tp, cp, pp, dp): neighbours 2 apart, in one node; dp members tp·pp = 4 apart, over 16
    ranks: two nodes."""
    from pipesim.analytic.comm import boundary_bandwidths, dp_grad_sync, group_bandwidth
    from pipesim.analytic.layout import RankOrder
    from pipesim.program.ir import PipelineShape

    default = Layout(tp=2, dp=4, pp=2, microbatches=4)
    mapped = replace(default, rank_order=RankOrder.TP_CP_PP_DP)
    assert (default.pipeline_stride, default.dp_stride) == (8, 2)
    assert (mapped.pipeline_stride, mapped.dp_stride) == (2, 4)
    shape = PipelineShape(2, 4, 1)
    assert boundary_bandwidths(default, H100, shape) == [H100.inter_node_bandwidth]
    assert boundary_bandwidths(mapped, H100, shape) == [H100.intra_node_bandwidth * H100.p2p_efficiency]
    inside = group_bandwidth(H100, 2 * 4, 2)
    across = group_bandwidth(H100, 4 * 4, 4)
    assert inside > across  # the data-parallel sync leaves the node under the mapping
    assert dp_grad_sync(1e9, mapped, H100).reduce > dp_grad_sync(1e9, default, H100).reduce


def test_nvfp4_cast_bytes_by_hand():
    # The toy of test_fp8_cast_bytes_by_hand in NVFP4: read BF16 (2 B), write a row-wise and a column-wise copy,
    # each 0.5 B of data and one 1-byte scale per 16 elements: 2 + 2 × 0.5625 = 3.125 B an element, on any chip;
    # and first the amax pass for the per-tensor scale (read 2 B): 5.125 B.
    model = ModelSpec("toy", 1, 8, 2, 16, 32, 10, kv_heads=1, gated=True)
    fp4 = Layout(tp=2, precision=Precision.FP4)
    assert Precision.FP4.element_bytes == 0.5625
    for transposed in (True, False):
        assert quantization_cast_bytes(model, fp4, 10, transposed=transposed) == (28 * 5.125 * 10, 40 * 5.125 * 10)


def test_nvfp4_gemm_runs_at_the_fp4_peak_times_its_measured_share():
    """A large NVFP4 GEMM on a B200 takes the time of its FLOPs at the FP4 peak × the sustained clock × the
    measured share (torchao's 8192³: 5.37 of 9.0 PFLOP/s), its operands at 0.5625 bytes an element."""
    chip = CHIP_PRESETS["b200"]
    n = 16384
    fp4 = gemm_kernel_time(n, n, n, chip, Precision.FP4)
    rate = 9000e12 * chip.sustained_clock_ratio * round(5.37 / 9.0, 3)
    assert chip.fp4_gemm_efficiency == pytest.approx(0.597)
    # at 16384³ the wave and tile factors are ~1: the time is the FLOPs at that rate, within 2 %
    assert fp4 == pytest.approx(2 * n ** 3 / rate, rel=0.02)
    fp8 = gemm_kernel_time(n, n, n, chip, Precision.FP8)
    assert fp8 / fp4 == pytest.approx(2 * 0.597 / 0.60, rel=0.02)  # twice the peak, about the same share


def test_nvfp4_memory_keeps_two_quantized_weight_copies_and_quantized_saved_inputs():
    """NVFP4 keeps the BF16 weight plus a row- and a column-wise NVFP4 copy (1.125 B a linear parameter, where FP8
    keeps one byte) and saves each linear's input in NVFP4 (0.5625 B an element, FP8 one)."""
    model = MODEL_PRESETS["llama3.1-8b"]
    params, end = 1e9, 1e8
    w_bf16, *_ = static_bytes(params, Layout(), model, end_params=end)
    w_fp8, *_ = static_bytes(params, Layout(precision=Precision.FP8), model, end_params=end)
    w_fp4, *_ = static_bytes(params, Layout(precision=Precision.FP4), model, end_params=end)
    assert w_fp8 - w_bf16 == pytest.approx(1.0 * (params - end))
    assert w_fp4 - w_bf16 == pytest.approx(1.125 * (params - end))
    assert linear_input_element_bytes(model, Layout(precision=Precision.FP4)) == 0.5625
    assert linear_input_element_bytes(model, Layout(precision=Precision.FP8)) == 1.0


def test_fp4_is_refused_where_the_chip_has_none_and_beside_fp8(capsys):
    assert main(["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--pp", "1", "--fp4"]) == 2
    assert "chip h100-sxm has no NVFP4 tensor cores" in capsys.readouterr().err
    assert main(["simulate", "--model", "llama3.1-8b", "--hardware", "b200", "--pp", "1", "--fp4", "--fp8"]) == 2
    assert "--fp8 and --fp4 are two GEMM precisions; keep one" in capsys.readouterr().err
    assert main(["simulate", "--model", "llama3.1-8b", "--hardware", "b200", "--pp", "1", "--fp4"]) == 0
    out = capsys.readouterr().out
    assert "fp4" in out and "MFU and HFU against the BF16 peak, FP8 and FP4 runs included" in out


def test_context_parallel_all_gather_by_hand():
    """Llama 3.1 8B at 8,192 tokens over cp = 4 in one node (a chip without a measured collective table, so the
    ring model): each rank's K and V are 2·2·2,048·1,024 = 8.39 MB; the all-gather of the four moves 3/4 of the
    33.6 MB at 450 GB/s plus NCCL's Simple latency (8.4 µs and 3 NVLink steps of 3.4 µs). Transformer Engine's
    all-gather (Llama 3's) waits for it before the attention, and in the backward gathers again and
    reduce-scatters the gradients (as long again); PyTorch's issues it at the first step and waits at the
    second, so one step's attention hides it, and its K and V gradients travel on in FP32 after every step
    (twice a ring hop), the last one waited for after the loop."""
    from pipesim.analytic.comm import cp_exposed, cp_gather_time, cp_ring_hop
    from pipesim.analytic.layout import CpComm, CpKernels

    chip = replace(H100, nvlink_collective_shares=None, collective_efficiency=1.0)
    model = MODEL_PRESETS["llama3.1-8b"].with_shape(seq_len=8192, micro_batch=1)
    gathered = Layout(cp=4, cp_comm=CpComm.ALL_GATHER)
    block = 2 * 2 * 2048 * 1024
    gather = 3 * block / 450e9 + 8.4e-6 + 3 * 3.4e-6
    assert cp_gather_time(model, gathered, chip) == pytest.approx(gather)
    te = cp_exposed(model, gathered, chip, core_forward=0.2e-3, core_backward=0.4e-3)
    assert (te.forward, te.backward) == pytest.approx((gather, 2 * gather))
    torch_cp = replace(gathered, cp_kernels=CpKernels.PYTORCH)
    hop = cp_ring_hop(model, torch_cp, chip)
    assert hop == pytest.approx(block / 450e9 + 10e-6)
    exposed = cp_exposed(model, torch_cp, chip, core_forward=0.02e-3, core_backward=0.04e-3)
    assert exposed.forward == pytest.approx(gather - 0.005e-3)
    assert exposed.backward == pytest.approx(gather - 0.01e-3 + 3 * (2 * hop - 0.01e-3) + 2 * hop)
    # a long attention hides PyTorch's gather and every gradient hop but the last
    slow = cp_exposed(model, torch_cp, chip, core_forward=1.0, core_backward=2.0)
    assert (slow.forward, slow.backward) == pytest.approx((0.0, 2 * hop))
    # its ring rotation (alltoall): each step's block beside the step, gradients as above
    ring = cp_exposed(model, replace(torch_cp, cp_comm=CpComm.P2P), chip, core_forward=0.02e-3,
                      core_backward=0.04e-3)
    assert ring.forward == pytest.approx(3 * (hop - 0.005e-3))
    assert ring.backward == pytest.approx(3 * (3 * hop - 0.01e-3) + 2 * hop)


def test_ulysses_all_to_alls_by_hand():
    """Ulysses (--cp-comm-type a2a) over cp = 4 in one node, Llama 3.1 8B at 8,192 tokens: a rank's q (2,048
    tokens × 32 heads × 128) and K and V (2,048 × 8 × 256) go out in one all-to-all before the attention, 3/4 of
    them to the three peers at once over NVLink, and the output (2,048 × 32 × 128) in one after; the backward
    the same two the other way. Each waited for (NCCL's base latency and one NVLink hop each). The attention
    then sees the whole sequence on 32/4 = 8 heads; no merging, but every carried tensor reordered (a copy)."""
    from pipesim.analytic.comm import cp_exposed
    from pipesim.analytic.kernels import attention_call_shape, cp_merge_bytes
    from pipesim.analytic.layout import CpComm

    chip = replace(H100, nvlink_collective_shares=None)
    model = MODEL_PRESETS["llama3.1-8b"].with_shape(seq_len=8192, micro_batch=1)
    ulysses = Layout(cp=4, cp_comm=CpComm.A2A)
    q, kv, out = 2048 * 32 * 128, 2048 * 8 * 256, 2048 * 32 * 128
    latency = 8.4e-6 + 3.4e-6
    qkv = 2 * (q + kv) * 3 / 4 / 450e9 + latency
    back = 2 * out * 3 / 4 / 450e9 + latency
    exposed = cp_exposed(model, ulysses, chip, core_forward=1.0, core_backward=2.0)
    assert (exposed.forward, exposed.backward) == pytest.approx((qkv + back, qkv + back))
    assert attention_call_shape(model, ulysses) == (8192, 8)
    assert attention_call_shape(model, Layout(cp=4)) == (2048, 32)
    assert cp_merge_bytes(model, ulysses) == pytest.approx((4 * (q + kv + out), 4 * (q + kv + out)))
    # the heads must split over the cp ranks: 8 KV heads over tp 2 are 4, which cp 8 does not divide
    with pytest.raises(PipesimError, match="--cp 8 does not divide"):
        build_cost_model(model.with_shape(seq_len=16384), H100, Layout(tp=2, cp=8, cp_comm=CpComm.A2A))


def test_pytorch_context_parallel_merges_in_fp32_by_hand():
    """PyTorch's context_parallel (torchtitan) merges each step's output into an FP32 running output by eager
    ops: over cp = 4 at 8,192 tokens the busiest rank moves 12·O + 38·3·O + 4·3·KV bytes in the forward (O =
    2,048 × 32 × 128 outputs, KV = 2,048 × 8 × 256), against Transformer Engine's fused ring's 3 · 6 · O; its
    backward 10·(Q + KV) + 10·Q + 18·KV + 3·(max(10·Q + 21·KV, 13·Q + 18·KV) + 4·KV). Transformer Engine's
    all-gather reorders the gathered K and V and copies the two chunks' outputs into place (4·4·KV + 6·O), and
    in the backward 16 bytes a gathered K/V element and 4 a query's."""
    from pipesim.analytic.kernels import cp_merge_bytes
    from pipesim.analytic.layout import CpComm, CpKernels

    model = MODEL_PRESETS["llama3.1-8b"].with_shape(seq_len=8192, micro_batch=1)
    q = o = 2048 * 32 * 128
    kv = 2048 * 8 * 256
    forward, backward = cp_merge_bytes(model, Layout(cp=4, cp_kernels=CpKernels.PYTORCH, cp_comm=CpComm.ALL_GATHER))
    assert forward == pytest.approx(12 * o + 38 * 3 * o + 4 * 3 * kv)
    step = max(10 * q + 21 * kv, 13 * q + 18 * kv) + 4 * kv
    assert backward == pytest.approx(10 * (q + kv) + 10 * q + 18 * kv + 3 * step)
    assert forward > 6 * cp_merge_bytes(model, Layout(cp=4))[0]
    assert cp_merge_bytes(model, Layout(cp=4, cp_comm=CpComm.ALL_GATHER)) == pytest.approx(
        (4 * 4 * kv + 6 * o, 16 * 4 * kv + 4 * q))


def test_context_parallel_flags_reach_the_report_and_the_frameworks(capsys):
    """--cp-comm-type and --cp-kernels reach the layout, the report's line and its JSON; torchtitan's default is
    PyTorch's all-gather; Megatron-LM's spelling all_gather is taken, a2a+p2p needs its two sizes multiplying to
    cp, PyTorch has no Ulysses, and at cp 1 the flags are noted as changing nothing (a framework's default is
    not)."""
    from pipesim.analytic.layout import CpComm

    argv = ["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--pp", "1", "--dp", "2", "--mb", "2",
            "--seq-len", "32768", "--cp", "4"]

    def layout(*flags):
        assert main([*argv, *flags, "--json"]) == 0
        return json.loads(capsys.readouterr().out)["model_report"]["layout"]

    assert (layout()["cp_comm_type"], layout()["cp_kernels"]) == ("p2p", "transformer-engine")
    assert layout("--cp-comm-type", "all_gather")["cp_comm_type"] == "allgather"
    assert CpComm("all_gather") is CpComm.ALL_GATHER  # the library takes Transformer Engine's spelling too
    titan = layout("--framework", "torchtitan")
    assert (titan["cp_comm_type"], titan["cp_kernels"]) == ("allgather", "pytorch")
    assert main([*argv, "--cp-comm-type", "a2a"]) == 0
    assert "context parallel Ulysses all-to-alls (Transformer Engine)" in capsys.readouterr().out
    assert main([*argv, "--cp-comm-type", "a2a+p2p"]) == 2
    assert "needs --hierarchical-context-parallel-sizes A B with A·B = --cp 4 (the all-to-all groups' size, then the " \
           "ring's); none was given" in capsys.readouterr().err
    assert main([*argv, "--cp-comm-type", "a2a+p2p", "--hierarchical-context-parallel-sizes", "2", "1"]) == 2
    assert "multiply to 2, not --cp 4" in capsys.readouterr().err
    nested = layout("--cp-comm-type", "a2a+p2p", "--hierarchical-context-parallel-sizes", "2", "2")
    assert (nested["cp_comm_type"], nested["hierarchical_context_parallel_sizes"]) == ("a2a+p2p", [2, 2])
    assert main([*argv, "--cp-comm-type", "a2a", "--cp-kernels", "pytorch"]) == 2
    assert "not one of PyTorch's context_parallel rotations" in capsys.readouterr().err
    assert main([*argv[:-2], "--cp-comm-type", "a2a"]) == 0
    assert "note: --cp-comm-type a2a changes nothing here: no context parallelism (--cp 1)" in capsys.readouterr().out
    assert main([*argv[:-2], "--framework", "torchtitan"]) == 0
    assert "--cp-kernels" not in capsys.readouterr().out


def test_hierarchical_context_parallelism_by_hand():
    """a2a+p2p over cp 8 as 2 × 4 (Megatron-LM's --hierarchical-context-parallel-sizes 2 4), Llama 3.1 8B at
    32,768 tokens in one node (tp 1): Ulysses' two all-to-alls inside each pair of adjacent cp ranks (half of a
    rank's q, k, v, then of its output, to its one peer), then a 4-long ring between the pairs whose blocks are
    a pair's 8,192 tokens on half the KV heads, as many bytes as the flat ring's; the attention runs in 4 steps
    on 8,192 keys and 16 heads, merging 3 times, and every carried tensor is reordered."""
    from pipesim.analytic.comm import cp_all_to_all_time, cp_exposed, cp_ring_exposed, cp_ring_hop
    from pipesim.analytic.kernels import attention_call_shape, cp_attention_kernels, cp_merge_bytes
    from pipesim.analytic.layout import CpComm

    chip = replace(H100, nvlink_collective_shares=None)
    model = MODEL_PRESETS["llama3.1-8b"].with_shape(seq_len=32768, micro_batch=1)
    nested = Layout(cp=8, cp_comm=CpComm.A2A_P2P, cp_a2a_size=2)
    assert (nested.cp_a2a_ranks, nested.cp_ring_ranks) == (2, 4)
    q, kv, out = 4096 * 32 * 128, 4096 * 8 * 256, 4096 * 32 * 128
    latency = 8.4e-6 + 3.4e-6
    pair = 2 * (q + kv) / 2 / 450e9 + latency + 2 * out / 2 / 450e9 + latency
    assert cp_all_to_all_time(q + kv, model, nested, chip) + cp_all_to_all_time(out, model, nested, chip) == (
        pytest.approx(pair))
    hop = cp_ring_hop(model, nested, chip)
    assert hop == pytest.approx(2 * 2 * 4096 * 1024 / 450e9 + 10e-6)  # a pair's 8,192 tokens on 4 of 8 KV heads
    core_forward, core_backward = 0.4e-3, 0.8e-3
    ring = cp_ring_exposed(model, nested, chip, core_forward, core_backward)
    assert ring.forward == pytest.approx(3 * max(0.0, hop - 0.1e-3))
    exposed = cp_exposed(model, nested, chip, core_forward, core_backward)
    assert (exposed.forward, exposed.backward) == pytest.approx((ring.forward + pair, ring.backward + pair))
    assert attention_call_shape(model, nested) == (8192, 16)
    reordered = 4 * (q + kv + out)
    assert cp_merge_bytes(model, nested) == pytest.approx((3 * 6 * out + reordered, 3 * 6 * (q + kv) + reordered))
    assert cp_attention_kernels(nested) == (2 * 4 - 1 + 4, 4 * 4 - 1 + 4)
    with pytest.raises(PipesimError, match="A·B = --cp 8"):
        Layout(cp=8, cp_comm=CpComm.A2A_P2P, cp_a2a_size=3)
    with pytest.raises(PipesimError, match="sizes the levels of --cp-comm-type a2a\\+p2p"):
        Layout(cp=8, cp_a2a_size=2)
