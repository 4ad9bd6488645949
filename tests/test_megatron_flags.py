"""Megatron-LM's flags on ``simulate``: a launch script's layout pasted in means what it means to Megatron-LM.

The per-rank layer splits by hand (Megatron-Core's ``get_num_layers_to_build``), the names that are aliases give the
same run as pipesim's, the flags pipesim spells otherwise map as documented, contradictions are one-line refusals,
and the Megatron-LM line ``pipesim plan`` prints for a configuration simulates to the step time plan ranked it by.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest

import pipesim
from pipesim.analytic.megatron_model import MegatronModelArgs, model_from_megatron
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.stage_split import StageSplitRequest, chunks_of_layers_per_chunk, megatron_rank_split
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.plan.launch import megatron_argv
from pipesim.program.ir import PipelineShape


def _slices(pp: int, chunks: int) -> tuple[tuple[int, ...], ...]:
    return PipelineShape(pp, 8, chunks).slices_by_rank


# --- the per-rank splits, by hand ---------------------------------------------------------------------------------


def test_first_and_last_rank_layers_split_over_each_ranks_chunks():
    # 10 layers, pp 2, v 2, rank 0 holding 4: 2 on each of its chunks (stages 0 and 2), the other 6 on rank 1's
    # (stages 1 and 3), 3 each.
    assert megatron_rank_split(10, _slices(2, 2), StageSplitRequest(first_rank=4)) == (2, 3, 2, 3)
    # Llama 3.1 405B, pp 8, one layer fewer on the first and last rank: 15, 16 × 6, 15
    assert megatron_rank_split(126, _slices(8, 1), StageSplitRequest(first_rank=15, last_rank=15)) == (
        (15,) + (16,) * 6 + (15,))
    # pp 4, v 2, the last rank 4 (2 a chunk): 36 layers over the other three ranks' six chunks, 6 each
    assert megatron_rank_split(40, _slices(4, 2), StageSplitRequest(last_rank=4)) == (6, 6, 6, 2, 6, 6, 6, 2)


def test_embedding_and_loss_counted_as_layers():
    # 126 layers + embedding + loss = 128 over pp·v = 64 chunks: 2 each, the first and last giving one away
    split = megatron_rank_split(126, _slices(8, 8), StageSplitRequest(embedding_as_layer=True, loss_as_layer=True))
    assert split == (1,) + (2,) * 62 + (1,)
    # only the loss: 31 + 1 = 32 over 4 chunks, the last one fewer
    assert megatron_rank_split(31, _slices(2, 2), StageSplitRequest(loss_as_layer=True)) == (8, 8, 8, 7)


@pytest.mark.parametrize(("layers", "pp", "chunks", "request_", "fragment"), [
    (126, 8, 7, StageSplitRequest(embedding_as_layer=True, loss_as_layer=True), "do not split evenly over pp·v = 56"),
    (126, 8, 2, StageSplitRequest(first_rank=15), "positive multiple of the 2 chunks"),
    (126, 8, 1, StageSplitRequest(first_rank=14, last_rank=14), "98 layers left"),
    (126, 8, 1, StageSplitRequest(first_rank=15, embedding_as_layer=True), "keep one"),
    (126, 8, 1, StageSplitRequest(first=15, embedding_as_layer=True), "keep one kind"),
    (10, 1, 1, StageSplitRequest(first_rank=10), "more than one pipeline rank"),
])
def test_splits_megatron_refuses_are_refused(layers, pp, chunks, request_, fragment):
    with pytest.raises(PipesimError, match=fragment):
        megatron_rank_split(layers, _slices(pp, chunks), request_)


def test_layers_per_virtual_stage_set_the_chunks():
    assert chunks_of_layers_per_chunk(80, 4, 5) == 4  # 20 layers a rank, 5 a chunk
    assert chunks_of_layers_per_chunk(126, 8, 2, True, True) == 8  # (126 + 2) / 8 = 16 a rank
    with pytest.raises(PipesimError, match="20 each"):
        chunks_of_layers_per_chunk(80, 4, 3)


# --- the command line -----------------------------------------------------------------------------------------


def _run(capsys, *argv: str) -> dict:
    assert main(["simulate", "--json", *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _refused(capsys, *argv: str) -> str:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


_PIPESIM = ["--model", "llama3.2-1b", "--tp", "2", "--pp", "2", "-s", "interleaved", "--chunks", "4", "--cp", "2",
            "--dp", "2", "--global-batch", "16", "--seq-len", "2048", "--recompute", "full", "--fp8",
            "--distributed-optimizer", "--fp8-params", "--sequence-parallel"]
_MEGATRON = ["--model", "llama3.2-1b", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
             "--num-virtual-stages-per-pipeline-rank", "4", "--context-parallel-size", "2", "--gpus", "16",
             "--global-batch-size", "16", "--seq-length", "2048", "--recompute-granularity", "full",
             "--recompute-method", "uniform", "--recompute-num-layers", "1", "--bf16", "--fp8-format", "hybrid",
             "--use-distributed-optimizer", "--fp8-param-gather", "--sequence-parallel"]


def test_megatron_names_run_what_pipesims_do(capsys):
    ours, theirs = _run(capsys, *_PIPESIM), _run(capsys, *_MEGATRON)
    assert theirs == ours
    assert ours["config"]["schedule"] == "interleaved" and ours["model_report"]["layout"]["dp"] == 2


def test_a_megatron_line_leaving_out_pp_and_the_global_batch_runs_megatrons_defaults(capsys):
    # Megatron-LM runs no pipeline without --pipeline-model-parallel-size, and sets the global batch to
    # micro-batch × dp without --global-batch-size (arguments.py): one microbatch, where pipesim's own defaults are
    # four ranks and eight
    line = ["--model", "llama3.2-1b", "--tensor-model-parallel-size", "2", "--micro-batch-size", "2", "--gpus", "8"]
    pasted = _run(capsys, *line)
    layout = pasted["model_report"]["layout"]
    assert (layout["pp"], layout["dp"], layout["microbatches"]) == (1, 4, 1)
    assert main(["simulate", *line]) == 0
    err = capsys.readouterr().err
    assert "Megatron-LM's defaults for what its line leaves out: --pp 1 (no pipeline); --mb 1" in err
    # the same with a global batch: the microbatches follow it, the pipeline still Megatron-LM's default
    batched = _run(capsys, *line, "--global-batch-size", "64")["model_report"]["layout"]
    assert (batched["pp"], batched["microbatches"]) == (1, 8)
    # pipesim's own spelling keeps pipesim's defaults (and says so)
    ours = _run(capsys, "--model", "llama3.2-1b", "--tp", "2", "--micro-batch-size", "2")["model_report"]["layout"]
    assert (ours["pp"], ours["microbatches"]) == (4, 8)
    # flags both spell alike say nothing of whose line it is; a given --pp wins
    assert _run(capsys, "--model", "llama3.2-1b", "--sequence-parallel", "--tp", "2")["model_report"]["layout"][
        "pp"] == 4
    assert _run(capsys, *line, "--pipeline-model-parallel-size", "2")["model_report"]["layout"]["pp"] == 2
    # and what Megatron-LM refuses of them: virtual stages without a pipeline, or with one microbatch a step
    virtual = [*line, "--num-layers-per-virtual-pipeline-stage", "2"]
    assert "Megatron-LM interleaves only over more than one pipeline rank" in _refused(capsys, *virtual)
    assert "give --global-batch-size" in _refused(capsys, *virtual, "--pipeline-model-parallel-size", "2")
    assert _run(capsys, *virtual, "--pipeline-model-parallel-size", "2", "--global-batch-size", "64")[
        "config"]["schedule"] == "interleaved"


def test_chunks_without_a_schedule_interleave(capsys):
    # Megatron-LM interleaves whenever it has virtual stages; pipesim's default schedule follows the chunks
    assert pipesim.simulate(pp=4, chunks=2).to_dict()["config"]["schedule"] == "interleaved"
    assert pipesim.simulate(pp=4).to_dict()["config"]["schedule"] == "1f1b"
    per_stage = _run(capsys, "--model", "llama3.2-1b", "--pp", "2", "--num-layers-per-virtual-pipeline-stage", "2",
                     "--mb", "4")
    # 16 layers / 2 ranks / 2 a chunk
    assert per_stage["config"]["schedule"] == "interleaved" and per_stage["config"]["chunks"] == 4


def test_megatron_flags_pipesim_spells_otherwise(capsys):
    base = ["--model", "llama3.2-1b", "--pp", "1", "--mb", "2"]
    pairs = [
        (["--attention-backend", "local"], ["--attention", "unfused"]),
        (["--use-flash-attn"], ["--attention", "fused"]),
        (["--recompute-activations"], ["--recompute", "selective"]),
        (["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "3"],
         ["--recompute", "full", "--recompute-layers", "3"]),
        (["--no-gradient-accumulation-fusion"], ["--grad-accumulation", "autograd"]),
        (["--fp8-format", "e4m3"], ["--fp8"]),
        (["--cross-entropy-loss-fusion"], ["--loss", "megatron-fused"]),
        (["--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te"], ["--loss", "te"]),
        (["--cross-entropy-fusion-impl", "te"], []),  # the implementation alone changes nothing in Megatron-LM
    ]
    for megatron, ours in pairs:
        assert _run(capsys, *base, *megatron) == _run(capsys, *base, *ours), megatron


def test_megatrons_fsdp_flags_are_the_zero_stage_they_run(capsys):
    """Megatron-FSDP's sharding strategies (its default optim_grads_params: ZeRO-3; optim and no_shard with the
    reduce beside the last backward, as its docs say), beside the distributed optimizer it turns on itself, and
    PyTorch's FSDP2 (resharded or not after the forward) run as pipesim's ZeRO flags."""
    base = ["--model", "llama3.2-1b", "--pp", "1", "--dp", "8", "--mb", "2"]
    bf16_grads = ["--param-bytes", "16"]  # Megatron-FSDP's gradient buffer is the parameters' type unless told
    pairs = [
        (["--use-megatron-fsdp"], ["--zero", "3", *bf16_grads]),
        (["--use-megatron-fsdp", "--use-distributed-optimizer", "--data-parallel-sharding-strategy",
          "optim_grads_params"], ["--zero", "3", *bf16_grads]),
        (["--use-megatron-fsdp", "--megatron-fsdp-main-grads-dtype", "fp32"], ["--zero", "3", "--param-bytes", "18"]),
        (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim"],
         ["--zero", "1", "--overlap-grad-reduce", *bf16_grads]),
        (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim", "--no-overlap-grad-reduce"],
         ["--zero", "1", *bf16_grads]),
        (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "no_shard"],
         ["--overlap-grad-reduce", *bf16_grads]),
        (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads"],
         ["--zero", "2", "--overlap-grad-reduce", *bf16_grads]),
        # Megatron-FSDP's HSDP: its instances are the replicas of a shard group of dp·cp/N (8 / 2)
        (["--use-megatron-fsdp", "--num-distributed-optimizer-instances", "2"],
         ["--zero", "3", "--shard-group", "4", *bf16_grads]),
        # ... and its hybrid FSDP: the optimizer state across the instances too
        (["--use-megatron-fsdp", "--num-distributed-optimizer-instances", "2", "--outer-dp-sharding-strategy", "optim"],
         ["--zero", "3", "--shard-group", "4", "--outer-optimizer-sharding", *bf16_grads]),
        (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim", "--num-distributed-optimizer-instances",
          "2"], ["--zero", "1", "--overlap-grad-reduce", "--shard-group", "4", "--zero-collectives", "hierarchical",
                 *bf16_grads]),
        (["--use-torch-fsdp2"], ["--zero", "3", "--fsdp2"]),
        (["--use-torch-fsdp2", "--torch-fsdp2-no-reshard-after-forward"],
         ["--zero", "2", "--zero-collectives", "per-layer", "--fsdp2"]),
    ]
    for megatron, ours in pairs:
        assert _run(capsys, *base, *megatron) == _run(capsys, *base, *ours), megatron
    assert _run(capsys, *base, "--use-megatron-fsdp")["model_report"]["layout"]["zero"] == 3
    # their defaults, as a launch line may state them, change nothing
    defaults = ["--num-distributed-optimizer-instances", "1", "--outer-dp-sharding-strategy", "no_shard",
                "--megatron-fsdp-grad-comm-dtype", "auto"]
    assert _run(capsys, *base, "--use-megatron-fsdp", *defaults) == _run(capsys, *base, "--use-megatron-fsdp")
    # FP16's gradients stay FP16 unless asked for in FP32 (Megatron-LM casts them under --bf16 only)
    assert _run(capsys, *base, "--fp16") == _run(capsys, *base, *bf16_grads)
    assert _run(capsys, *base, "--fp16", "--accumulate-allreduce-grads-in-fp32") == _run(capsys, *base)


def test_the_precision_aware_optimizer_keeps_its_state_in_the_types_asked(capsys):
    """Megatron-LM's --use-precision-aware-optimizer as --param-bytes W+G+O, by hand: an FP32 master kept as the
    16-bit remainder beside BF16 weights (Transformer Engine's store_param_remainders, Megatron-Core's default)
    unless FP8 with current scaling hands it to Megatron-Core; the moments and gradients in their types."""
    base = ["--model", "llama3.2-1b", "--pp", "1", "--dp", "8", "--mb", "2", "--use-distributed-optimizer"]
    aware = [*base, "--use-precision-aware-optimizer"]
    pairs = [
        ([], ["--param-bytes", "2+4+10"]),  # 2 master remainder + 4 + 4
        (["--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"], ["--param-bytes", "2+4+6"]),
        (["--main-grads-dtype", "bf16"], ["--param-bytes", "2+2+10"]),
        (["--exp-avg-dtype", "fp8", "--main-params-dtype", "fp16"], ["--param-bytes", "2+4+7"]),  # 2 + 1 + 4
        # FP8 with current scaling: an FP32 master of Megatron-Core's, 4 + 4 + 4, Megatron's 18
        (["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"], ["--fp8", "--fp8-recipe", "tensorwise"]),
    ]
    for megatron, ours in pairs:
        assert _run(capsys, *aware, *megatron) == _run(capsys, *base, *ours), megatron
    # the library's account, which the flags reach, and its inverse, which plan's Megatron line writes back
    from pipesim.analytic.layout import OptimizerBytes, precision_aware_bytes, precision_aware_moments

    bf16_moments = precision_aware_bytes(OptimizerBytes(), exp_avg="bf16", exp_avg_sq="bf16")
    assert bf16_moments.text == "2+4+6" and precision_aware_moments(bf16_moments) == ("bf16", "bf16")
    assert precision_aware_bytes(OptimizerBytes(), master_remainder=False).text == "18"


def test_a_w_g_o_account_is_the_memory_by_hand():
    """--param-bytes 2+4+6 under ZeRO-1 over 8 ranks: weights 2 and gradients 4 bytes a parameter on every rank,
    the optimizer's 6 split eight ways."""
    from pipesim.analytic.params import total_params

    report = pipesim.simulate("1f1b", pp=1, mb=2, model="llama3.2-1b", dp=8, zero=1, param_bytes="2+4+6").model_report
    params, peak = total_params(report.model), report.memory.peak
    assert (peak.weights, peak.grads) == (pytest.approx(2 * params), pytest.approx(4 * params))
    assert peak.optimizer == pytest.approx(6 * params / 8)
    assert report.to_dict()["layout"]["param_bytes"]["total"] == 12
    with pytest.raises(PipesimError, match="param_bytes '17': give 18"):
        pipesim.simulate("1f1b", pp=1, mb=2, model="llama3.2-1b", param_bytes="17")


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--exp-avg-dtype", "bf16"], "--exp-avg-dtype bf16 needs --use-precision-aware-optimizer"),
    (["--use-precision-aware-optimizer"], "runs with the distributed optimizer only"),
    (["--use-precision-aware-optimizer", "--use-megatron-fsdp"], "beside --use-megatron-fsdp is not modelled"),
    (["--param-bytes", "2+x"], "give 18 (FP32 gradients), 16 (16-bit gradients) or W+G+O"),
    (["--data-parallel-sharding-strategy", "optim"], "is Megatron-FSDP's; add --use-megatron-fsdp"),
    # Megatron-FSDP's ZeRO-2 with a pipeline: pipesim's ZeRO-2 has none (DeepSpeed refuses it)
    (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads", "--pp", "2"], "--zero 2 shards "
     "gradients"),
    (["--use-megatron-fsdp", "--zero", "1"], "--use-megatron-fsdp (optim_grads_params) is --zero 3, but --zero 1"),
    (["--use-megatron-fsdp", "--use-torch-fsdp2"], "two FSDPs"),
    (["--use-torch-fsdp2", "--pp", "2"], "not supported with pipeline parallelism"),
    (["--use-torch-fsdp2", "--use-distributed-optimizer"], "not supported with MCore's distributed optimizer"),
    (["--torch-fsdp2-no-reshard-after-forward"], "applies to --use-torch-fsdp2"),
    # Megatron-LM takes --fp8-param-gather with Megatron-FSDP; pipesim has no ZeRO-3 of FP8 weights
    (["--use-megatron-fsdp", "--fp8-format", "hybrid", "--fp8-param-gather"], "--fp8-params under ZeRO-3"),
    (["--megatron-fsdp-main-grads-dtype", "bf16"], "is Megatron-FSDP's; add --use-megatron-fsdp"),
    (["--use-megatron-fsdp", "--param-bytes", "18"], "keeps 16-bit gradients (--megatron-fsdp-main-grads-dtype auto)"),
    (["--fp16", "--bf16"], "two precisions"),
    # what Megatron-LM does that pipesim does not model is refused by name, not dropped (--ignore-unknown did)
    (["--num-distributed-optimizer-instances", "2", "--ignore-unknown"], "'Partial DistOpt cannot be used without "
     "DistOpt'"),
    (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "no_shard", "--num-distributed-optimizer-instances",
      "2"], "but nothing is sharded"),
    (["--num-distributed-optimizer-instances", "3", "--use-distributed-optimizer"], "must divide dp·cp = 8"),
    (["--optimizer-cpu-offload"], "--optimizer-cpu-offload (the optimizer's state and step on the host) is not "
     "modelled"),
    # hybrid FSDP needs HSDP's instances (Megatron-FSDP: only effective with them) and optim_grads_params
    (["--use-megatron-fsdp", "--outer-dp-sharding-strategy", "optim"], "but there are none"),
    (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads",
      "--num-distributed-optimizer-instances", "2", "--outer-dp-sharding-strategy", "optim"],
     "only supported with full-sharding on DP-Shard"),
    (["--outer-dp-sharding-strategy", "optim"], "is Megatron-FSDP's; add --use-megatron-fsdp"),
    (["--use-megatron-fsdp", "--megatron-fsdp-grad-comm-dtype", "fp32"], "--megatron-fsdp-grad-comm-dtype fp32"),
])
def test_megatrons_fsdp_flags_refused_as_megatron_refuses_them(capsys, argv, fragment):
    assert fragment in _refused(capsys, "--model", "llama3.2-1b", "--dp", "8", "--mb", "2", *argv)


def test_megatron_split_flags_reach_the_layout(capsys):
    report = _run(capsys, "--model", "llama3.2-3b", "--pp", "4", "--mb", "4", "--decoder-first-pipeline-num-layers",
                  "6", "--decoder-last-pipeline-num-layers", "6")
    assert report["model_report"]["layout"]["stage_layers"] == [6, 8, 8, 6]  # (28 − 12) / 2 on the middle ranks
    report = _run(capsys, "--model", "llama3.2-3b", "--pp", "3", "--chunks", "2", "--mb", "6",
                  "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split")
    assert report["model_report"]["layout"]["stage_layers"] == [4, 5, 5, 5, 5, 4]  # (28 + 2) / 6 = 5


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--gpus", "12", "--tp", "2", "--pp", "4"], "--gpus 12 is not a multiple of tp·cp·pp = 2·1·4 = 8"),
    (["--gpus", "16", "--dp", "4", "--pp", "2"], "means dp 8, but --dp 4 is given"),
    (["--recompute-num-layers", "2", "--pp", "1"], "needs --recompute-method"),
    (["--recompute-method", "block", "--recompute-num-layers", "2", "--pp", "1"], "applies to --recompute-granularity"),
    (["--recompute-granularity", "full", "--recompute-method", "block", "--pp", "1"], "needs --recompute-num-layers"),
    (["--pp", "2", "--vp", "2", "--num-layers-per-virtual-pipeline-stage", "2"], "means 4 chunks per rank"),
    (["--pp", "4", "-s", "zb-v", "--account-for-loss-in-pipeline-split"], "give --stage-layers"),
    (["--pipeline-model-parallel-size", "0"], "argument --pipeline-model-parallel-size: 0 must be"),
    (["--attention-backend", "te"], "invalid choice: 'te'"),
    (["--cross-entropy-loss-fusion", "--loss", "pytorch"], "--cross-entropy-loss-fusion is --loss megatron-fused"),
    # 8 microbatches over pp 3: groups of 4, the least Megatron-Core accepts (a last group of 2 < pp it refuses)
    (["--pp", "3", "--vp", "2", "--microbatch-group-size-per-virtual-pipeline-stage", "3"], "runs groups of 4"),
    (["--pp", "3", "--microbatch-group-size-per-virtual-pipeline-stage", "3"], "not 1f1b's"),
])
def test_contradictions_are_one_line_refusals(capsys, argv, fragment):
    assert fragment in _refused(capsys, "--model", "llama3.2-1b", "--mb", "8", *argv)


def test_the_microbatch_group_pipesim_runs_is_accepted(capsys):
    stated = _run(capsys, "--model", "llama3.2-1b", "--pp", "3", "--vp", "2", "--mb", "8",
                  "--microbatch-group-size-per-virtual-pipeline-stage", "4", "--stage-layers", "3,3,3,3,2,2")
    assert stated == _run(capsys, "--model", "llama3.2-1b", "--pp", "3", "--vp", "2", "--mb", "8", "--stage-layers",
                          "3,3,3,3,2,2")


def test_gpus_need_the_pipeline_the_schedule_fixes(capsys, tmp_path):
    program = tmp_path / "p.txt"
    assert main(["lower", "-s", "1f1b", "--pp", "2", "--mb", "4", "-o", str(program)]) == 0
    capsys.readouterr()
    assert "the schedule fixes pp = 2" in _refused(capsys, "-s", str(program), "--model", "llama3.2-1b", "--gpus",
                                                   "8")


# --- Megatron-LM's model flags -------------------------------------------------------------------------------


def _flags(**values) -> MegatronModelArgs:
    return MegatronModelArgs(**values)


def test_a_model_from_megatron_flags_is_the_preset_it_describes():
    # Llama 2 13B as Megatron-LM's flags give it (its vocabulary, 32000, already a multiple of 128)
    llama = _flags(num_layers=40, hidden_size=5120, num_attention_heads=40, ffn_hidden_size=13824, vocab_size=32000,
                   swiglu=True, normalization="RMSNorm", position_embedding_type="rope",
                   untie_embeddings_and_output_weights=True, disable_bias_linear=True, hidden_dropout=0.0,
                   attention_dropout=0.0)
    assert replace(model_from_megatron(llama, tp=1, seq_len=4096), name="llama2-13b") == MODEL_PRESETS["llama2-13b"]


def test_megatron_defaults_where_a_flag_is_absent():
    model = model_from_megatron(_flags(num_layers=2, hidden_size=768, num_attention_heads=12, vocab_size=50257),
                                tp=2, seq_len=1024)
    # GPT: a 4h MLP, LayerNorm, learned positions, tied embeddings, biases, dropout 0.1; vocabulary padded to 128·tp
    assert (model.ffn_hidden, model.vocab, model.rms_norm, model.learned_positions) == (3072, 50432, False, True)
    assert model.tied_embeddings and model.bias and model.dropout and not model.gated
    swiglu = model_from_megatron(_flags(num_layers=2, hidden_size=4096, num_attention_heads=32, vocab_size=32000,
                                        swiglu=True, group_query_attention=True, num_query_groups=8), seq_len=4096)
    assert (swiglu.ffn_hidden, swiglu.kv_heads) == (10880, 8)  # int(8·4096/3 / 64)·64
    moe = model_from_megatron(_flags(num_layers=4, hidden_size=1024, num_attention_heads=8, vocab_size=1024,
                                     num_experts=8, moe_ffn_hidden_size=512, moe_layer_freq="[0,1,1,1]"),
                              seq_len=512)
    assert (moe.experts, moe.experts_per_token, moe.expert_ffn_hidden, moe.first_dense_layers) == (8, 2, 512, 1)


# Qwen3-30B-A3B as a Megatron-LM launch gives it (THUDM/slime's scripts/models/qwen3-30B-A3B.sh): heads of 128
# where hidden / heads is 64, QK-norm, and the MoE layer pattern as the Python expression Megatron-LM evaluates
_QWEN3_MOE = dict(num_layers=48, hidden_size=2048, num_attention_heads=32, ffn_hidden_size=6144, vocab_size=151936,
                  group_query_attention=True, num_query_groups=4, kv_channels=128, qk_layernorm=True, swiglu=True,
                  normalization="RMSNorm", position_embedding_type="rope", untie_embeddings_and_output_weights=True,
                  disable_bias_linear=True, hidden_dropout=0.0, attention_dropout=0.0, num_experts=128,
                  moe_router_topk=8, moe_ffn_hidden_size=768, moe_layer_freq="'([1]*48)'")


def test_kv_channels_and_qk_layernorm_build_the_qwen3_preset():
    model = model_from_megatron(_flags(**_QWEN3_MOE), tp=1, seq_len=4096)
    assert replace(model, name="qwen3-30b-a3b") == MODEL_PRESETS["qwen3-30b-a3b"]
    assert (model.q_width, model.kv_dim, model.attention_out_width) == (32 * 128, 4 * 128, 32 * 128)
    # --kv-channels at the default width is the default: the same model as without it
    llama = dict(num_layers=2, hidden_size=1024, num_attention_heads=8, vocab_size=1024, swiglu=True)
    assert model_from_megatron(_flags(**llama, kv_channels=128), seq_len=512) == model_from_megatron(
        _flags(**llama), seq_len=512)


# gpt-oss-120b as Megatron-LM's GPT-OSS example launches it: windows of 128 keys before the query (FlashAttention's
# left 128 and the query itself, sliding_window 129 in pipesim's count of keys), every second layer full
_GPT_OSS = dict(num_layers=36, hidden_size=2880, num_attention_heads=64, ffn_hidden_size=2880, padded_vocab_size=201088,
                group_query_attention=True, num_query_groups=8, kv_channels=64, swiglu=True, normalization="RMSNorm",
                position_embedding_type="rope", untie_embeddings_and_output_weights=True, hidden_dropout=0.0,
                attention_dropout=0.0, num_experts=128, moe_router_topk=4, moe_ffn_hidden_size=2880,
                window_size="128,0", window_attn_skip_freq="2")


def test_window_flags_build_sliding_windows():
    model = model_from_megatron(_flags(**_GPT_OSS), tp=1, seq_len=4096)
    assert (model.sliding_window, model.global_attention_every, model.local_attention_layers) == (129, 2, 18)
    assert model.vocab == 201088 and model.bias  # --padded-vocab-size as given; Megatron's biases
    listed = model_from_megatron(_flags(**{**_GPT_OSS, "window_attn_skip_freq": "[1,0]*18"}), seq_len=4096)
    assert listed == model
    every_layer = model_from_megatron(_flags(**{**_GPT_OSS, "window_attn_skip_freq": None}), seq_len=4096)
    assert every_layer.local_attention_layers == 36


@pytest.mark.parametrize(("change", "fragment"), [
    (dict(window_size="128,128"), "causal windows"),
    (dict(window_size="wide"), "give left,right"),
    (dict(window_size=None), "add --window-size L,0"),
    (dict(window_attn_skip_freq="[1]*30+[0]*6"), "every n-th layer full"),
])
def test_window_flags_refused(change, fragment):
    with pytest.raises(PipesimError, match=fragment):
        model_from_megatron(_flags(**{**_GPT_OSS, **change}), seq_len=4096)


@pytest.mark.parametrize(("pattern", "first_dense", "frequency", "offset"), [
    ("[0]*3+[1]*5", 3, 1, 0), ("'([1]*8)'", 0, 1, 0), ('"[0,1,1,1,1,1,1,1]"', 1, 1, 0), ("2", 0, 2, 0),
    ("[0,1]*4", 0, 2, 1),  # Llama 4 Maverick's, as NeMo's Llama4Experts128Config writes it ([0, 1] * 24)
    ("[1,0,0]*2+[1,0]", 0, 3, 0), ("[0,0]+[0,0,1]*2", 4, 3, 1)])
def test_moe_layer_freq_as_megatron_evaluates_it(pattern, first_dense, frequency, offset):
    model = model_from_megatron(_flags(num_layers=8, hidden_size=256, num_attention_heads=4, vocab_size=256,
                                       num_experts=4, moe_layer_freq=pattern), seq_len=128)
    assert (model.first_dense_layers, model.moe_layer_frequency, model.moe_layer_offset) == (
        first_dense, frequency, offset)


@pytest.mark.parametrize(("flags", "fragment"), [
    (dict(num_layers=2, hidden_size=64), "needs --num-attention-heads, --seq-length, --vocab-size"),
    (dict(num_layers=4, hidden_size=64, num_attention_heads=4, vocab_size=64, num_experts=4,
          moe_layer_freq="__import__('os').getcwd()"), "give an integer N or a list"),
    (dict(num_layers=4, hidden_size=64, num_attention_heads=4, vocab_size=64, num_experts=4,
          moe_layer_freq="[1]*10**12"), "give an integer N or a list"),
    (dict(num_layers=4, hidden_size=64, num_attention_heads=4, vocab_size=64, num_experts=4,
          moe_layer_freq="[1]*1000000000000"), "give an integer N or a list"),
    (dict(num_layers=4, hidden_size=64, num_attention_heads=4, vocab_size=64, num_experts=4,
          moe_layer_freq="[1]*3"), "pipesim models 4 layers"),
    (dict(num_layers=4, hidden_size=64, num_attention_heads=4, vocab_size=64, num_experts=4,
          moe_layer_freq="[0,1,1,0]"), "then one MoE layer in every n"),
])
def test_megatron_model_flags_refused(flags, fragment):
    with pytest.raises(PipesimError, match=fragment):
        model_from_megatron(_flags(**flags), seq_len=128 if "vocab_size" in flags else None)


def test_sequence_parallel_at_tp_1_runs_on_as_in_megatron(capsys):
    # Megatron-LM turns --sequence-parallel off at tp 1 (a warning, arguments.py): a launch line with it simulates,
    # noted, to the step of the same line without it
    line = ["--model", "qwen3-30b-a3b", "--pipeline-model-parallel-size", "2", "--expert-model-parallel-size", "8",
            "--gpus", "16", "--global-batch-size", "64", "--micro-batch-size", "1"]
    with_sp, without = _run(capsys, *line, "--sequence-parallel"), _run(capsys, *line)
    assert with_sp["model_report"]["step_time_s"] == without["model_report"]["step_time_s"]
    assert with_sp["model_report"]["memory"] == without["model_report"]["memory"]
    notes = with_sp["model_report"]["layout"]["inert_flag_notes"]
    assert any(n.startswith("--sequence-parallel changes nothing here") for n in notes)


_MOE = ["--model", "qwen3-30b-a3b", "--pp", "2", "--ep", "8", "--dp", "8", "--mb", "8"]


def test_expert_capacity_padded_is_the_imbalance_it_forces(capsys):
    # padded to capacity F, every expert computes F times its mean tokens: --moe-imbalance F, exactly; unpadded,
    # only the tokens above F are dropped, and the default balanced routing stays (the dispatcher pipesim models)
    padded = _run(capsys, *_MOE, "--moe-expert-capacity-factor", "1.25", "--moe-pad-expert-input-to-capacity")
    assert padded == _run(capsys, *_MOE, "--moe-imbalance", "1.25")
    assert padded["model_report"]["layout"]["moe_imbalance"] == 1.25
    dropped = _run(capsys, *_MOE, "--moe-expert-capacity-factor", "1.25", "--moe-token-dispatcher-type", "alltoall")
    assert dropped == _run(capsys, *_MOE)
    assert padded["model_report"]["step_time_s"] > dropped["model_report"]["step_time_s"]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--moe-pad-expert-input-to-capacity"], "needs --moe-expert-capacity-factor F"),
    (["--moe-expert-capacity-factor", "0.8", "--moe-pad-expert-input-to-capacity"], "give F ≥ 1"),
    (["--moe-expert-capacity-factor", "1.5", "--moe-pad-expert-input-to-capacity", "--moe-imbalance", "1.2"],
     "keep one"),
    (["--moe-expert-capacity-factor", "1.1", "--moe-imbalance", "1.2"], "above which Megatron-Core drops tokens"),
    (["--moe-token-dispatcher-type", "allgather"], "invalid choice: 'allgather'"),
    (["--moe-enable-deepep"], "add --moe-token-dispatcher-type flex"),
    (["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "ncclep"], "invalid choice"),
    (["--moe-token-dispatcher-type", "alltoall", "--moe-dispatcher", "deepep"], "keep one"),
    (["--moe-dispatch-fp8"], "add --moe-dispatcher deepep"),
])
def test_expert_capacity_contradictions_are_one_line_refusals(capsys, argv, fragment):
    assert fragment in _refused(capsys, *_MOE, *argv)


def test_megatron_model_flags_beside_a_preset_must_agree(capsys):
    err = _refused(capsys, "--model", "llama2-13b", "--pp", "1", "--mb", "1", "--num-layers", "32")
    assert "--num-layers contradicts model llama2-13b, whose layers is 40" in err
    assert "whose gated is False" in _refused(capsys, "--model", "gpt3-1.3b", "--pp", "1", "--mb", "1", "--swiglu")
    assert "whose head_dim is 128" in _refused(capsys, "--model", "qwen3-8b", "--pp", "1", "--mb", "1",
                                               "--kv-channels", "64")
    assert "whose qk_norm is False" in _refused(capsys, "--model", "llama2-7b", "--pp", "1", "--mb", "1",
                                                "--qk-layernorm")


# --- plan's Megatron-LM line, simulated -----------------------------------------------------------------------


def _megatron_lines(result):
    """(outcome, Megatron-LM argv) of each listed candidate that Megatron-LM can run, as plan prints them."""
    request = result.request
    for outcome in result.ranked:
        c = outcome.candidate
        layout = request.layout_of(c)
        argv = megatron_argv(c, request.model, request.global_batch, request.overlap_p2p, request.overlap_dp_sync,
                             request.fp8_params_of(c), loss=request.loss, dispatcher=request.moe_dispatcher,
                             param_bytes=request.param_bytes, shard_group=layout.shard_group,
                             zero_collectives=layout.zero_collectives)
        if argv is not None:
            yield outcome, argv


@pytest.mark.parametrize(("model", "hardware", "gpus", "vocab", "space", "least"), [
    ("llama2-13b", "h100-sxm", 32, 32000, dict(schedules=["1f1b", "interleaved"], cp=[1], micro_batch_sizes=[1],
                                               recompute=["none", "selective"]), 5),
    ("llama3.2-1b", "b200", 8, 128256, dict(schedules=["1f1b"], cp=[1], micro_batch_sizes=[1, 2],
                                            recompute=["none", "full"], precision=["fp4"]), 3),
    ("llama3.2-1b", "h100-sxm", 8, 128256, dict(schedules=["1f1b"], cp=[1], micro_batch_sizes=[1, 2],
                                                recompute=["none"], loss="te"), 2),  # the fused loss's flags
    # a precision-aware optimizer's account, its flags in the line (and its memory in the simulation it gives); on
    # two GPUs, where tp ≤ 2 pads no vocabulary the preset does not (128,256 is a multiple of 128·2)
    ("llama3.2-1b", "h100-sxm", 2, 128256, dict(schedules=["1f1b"], cp=[1], micro_batch_sizes=[1, 2], zero=[1],
                                                recompute=["none"], param_bytes="2+2+6"), 2),
    # the distributed optimizer within groups of 4, reduced hierarchically: Megatron-LM's optimizer instances
    ("llama2-7b", "h100-sxm", 16, 32000, dict(schedules=["1f1b"], cp=[1], micro_batch_sizes=[1], zero=[1],
                                              recompute=["none"], shard_group=4, zero_collectives="hierarchical"), 2),
    # ZeRO-2 and ZeRO-3 as Megatron-FSDP's optim_grads and optim_grads_params, in FP32 and BF16 gradients, and its
    # HSDP within groups of 8
    ("llama2-7b", "h100-sxm", 16, 32000, dict(schedules=["1f1b"], cp=[1], micro_batch_sizes=[1, 2], zero=[2, 3],
                                              recompute=["none", "full"]), 4),
    ("llama2-7b", "h100-sxm", 16, 32000, dict(schedules=["1f1b"], cp=[1], micro_batch_sizes=[1, 2], zero=[2, 3],
                                              recompute=["none"], param_bytes="16", shard_group=8), 3),
])
def test_plans_megatron_lines_simulate_to_plans_step_times(capsys, model, hardware, gpus, vocab, space, least):
    result = pipesim.plan(model, gpus=gpus, global_batch=128, hardware=hardware, top=10, **space)
    lines = instances = 0
    for outcome, argv in _megatron_lines(result):
        lines += 1
        expected = pytest.approx(outcome.evaluation.step_time, rel=1e-9)
        # the line as plan prints it, beside the preset it was planned for, and built from its own flags
        common = ["--hardware", hardware, "--gpus", str(gpus), *argv]
        named = _run(capsys, "--model", model, *common)
        built = _run(capsys, "--vocab-size", str(vocab), *common)
        assert named["model_report"]["step_time_s"] == expected, shlex.join(argv)
        assert built["model_report"]["step_time_s"] == expected, shlex.join(argv)
        assert built["model_report"]["model"]["name"] == "megatron-flags"
        assert named["model_report"]["layout"]["param_bytes"]["total"] == result.request.param_bytes.total
        if "--num-distributed-optimizer-instances" in argv:  # the distributed optimizer's, or Megatron-FSDP's HSDP
            instances += 1
            layout = named["model_report"]["layout"]
            assert layout["shard_group"] == space["shard_group"]
            assert (layout["zero_collectives"] == "hierarchical") == (layout["zero"] <= 1)
    assert lines >= least  # 1F1B and interleaved lines, even and lighter-ended splits, FP4 and full recomputation
    assert (instances > 0) == (space.get("shard_group") is not None)


def test_a_qwen3_plans_megatron_lines_carry_its_heads(capsys):
    # Qwen3's heads (128 wide where hidden / heads is 80) and QK-norm reach the printed line, and the line built
    # from its own flags simulates to plan's step time (the vocabulary, 2⁷·1187, padded to no multiple but tp's)
    result = pipesim.plan("qwen3-32b", gpus=16, global_batch=64, schedules=["1f1b"], cp=[1], micro_batch_sizes=[1],
                          recompute=["none", "full"], precision=["bf16"], top=10)
    lines = 0
    for outcome, argv in _megatron_lines(result):
        lines += 1
        assert argv[argv.index("--kv-channels") + 1] == "128" and "--qk-layernorm" in argv
        built = _run(capsys, "--vocab-size", "151936", "--make-vocab-size-divisible-by", "1", "--hardware",
                     "h100-sxm", "--gpus", "16", *argv)
        assert built["model_report"]["step_time_s"] == pytest.approx(outcome.evaluation.step_time, rel=1e-9)
    assert lines >= 5


def test_a_windowed_models_plan_lines_carry_its_windows(capsys):
    # a Llama 3.2 1B shape with 1,024-key windows on every other layer: plan's lines say so, and simulate back
    model = replace(MODEL_PRESETS["llama3.2-1b"], name="windowed", sliding_window=1024, global_attention_every=2)
    result = pipesim.plan(model, gpus=8, global_batch=64, schedules=["1f1b"], cp=[1], micro_batch_sizes=[1],
                          recompute=["none"], precision=["bf16"], top=5)
    lines = 0
    for outcome, argv in _megatron_lines(result):
        lines += 1
        assert argv[argv.index("--window-size") + 1] == "1023,0" and argv[argv.index("--window-attn-skip-freq")
                                                                              + 1] == "2"
        built = _run(capsys, "--vocab-size", "128256", "--make-vocab-size-divisible-by", "1", "--hardware",
                     "h100-sxm", "--gpus", "8", *argv)
        assert built["model_report"]["step_time_s"] == pytest.approx(outcome.evaluation.step_time, rel=1e-9)
    assert lines >= 2


def test_plans_megatron_line_names_the_loss_or_says_megatron_has_none():
    from pipesim.analytic.layout import LossKernel
    from pipesim.plan.launch import megatron_line

    result = pipesim.plan("llama3.2-1b", gpus=8, global_batch=64, schedules=["1f1b"], cp=[1], micro_batch_sizes=[2],
                          recompute=["none"], loss="te", top=1)
    c, model = result.ranked[0].candidate, result.request.model
    assert "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te" in megatron_line(c, model, 64,
                                                                                          loss=LossKernel.TE)
    assert megatron_line(c, model, 64, loss=LossKernel.PYTORCH) == (
        "(Megatron-LM has no pytorch cross-entropy; its losses are megatron, megatron-fused and te)")
    assert "makes no copy" in megatron_line(c, model, 64, loss_input_copy=True)


def test_a_whole_launch_line_with_ignore_unknown(capsys):
    training = ["--lr", "3e-4", "--train-iters", "100", "--data-path", "/data/x", "--use-mcore-models"]
    layout = ["--model", "llama3.2-1b", "--gpus", "8", "--tensor-model-parallel-size", "2",
              "--pipeline-model-parallel-size", "1", "--global-batch-size", "32", "--sequence-parallel"]
    err = _refused(capsys, *layout, *training)  # unknown flags are refused unless asked otherwise
    assert "unrecognized arguments: --lr 3e-4" in err and "add --ignore-unknown" in err
    assert main(["simulate", "--json", "--ignore-unknown", *layout, *training]) == 0
    captured = capsys.readouterr()
    assert "note: ignored (--ignore-unknown" in captured.err and "--train-iters 100" in captured.err
    assert json.loads(captured.out) == _run(capsys, *layout)  # the same run as without them


def test_a_deepep_plans_megatron_lines_carry_its_dispatcher_and_routing_groups(capsys):
    # DeepSeek-V2-Lite's shape with node-limited routing (4 of 8 groups) and a multi-token-prediction module: the
    # plan's DeepEP candidates print the flex dispatcher, the router's groups and the module, and the line built
    # from its own flags simulates back
    model = replace(MODEL_PRESETS["deepseek-v2-lite"], name="grouped", expert_groups=8, expert_groups_per_token=4,
                    mtp_layers=1)
    result = pipesim.plan(model, gpus=16, global_batch=64, schedules=["1f1b"], cp=[1], micro_batch_sizes=[1],
                          recompute=["none"], precision=["bf16"], ep=[8, 16], moe_dispatcher="deepep", top=5)
    lines = 0
    for outcome, argv in _megatron_lines(result):
        lines += 1
        assert argv[argv.index("--moe-token-dispatcher-type") + 1] == "flex"
        assert argv[argv.index("--moe-router-num-groups") + 1] == "8"
        assert argv[argv.index("--moe-router-group-topk") + 1] == "4"
        assert argv[argv.index("--mtp-num-layers") + 1] == "1"
        built = _run(capsys, "--vocab-size", "102400", "--make-vocab-size-divisible-by", "1", "--hardware",
                     "h100-sxm", "--gpus", "16", *argv)
        assert built["model_report"]["layout"]["moe_dispatcher"] == "deepep"
        assert built["model_report"]["step_time_s"] == pytest.approx(outcome.evaluation.step_time, rel=1e-9)
    assert lines >= 2


# DeepSeek-V2-Lite as released: two shared experts and a dense first layer, no multi-token-prediction module (the
# line once printed both only beside --mtp-num-layers, so Megatron-LM built every layer MoE without shared experts:
# another model than the one planned); Llama 4 Maverick: a shared expert beside each MoE layer, MoE on every other
# layer from layer 1. Each line's --moe-layer-freq list reads back to the same layers, and the model it builds
# simulates to plan's step time.
@pytest.mark.parametrize(("model", "gpus", "ep", "recompute", "vocab", "moe_layers", "shared", "least"), [
    ("deepseek-v2-lite", 16, 8, "none", 102400, ["0"] + ["1"] * 26, 2 * 1408, 1),
    ("llama4-maverick", 128, 32, "full", 202048, ["0", "1"] * 24, 8192, 2)])
def test_a_moe_plans_megatron_lines_carry_its_shared_experts_and_moe_layers(capsys, model, gpus, ep, recompute,
                                                                             vocab, moe_layers, shared, least):
    result = pipesim.plan(model, gpus=gpus, global_batch=gpus, schedules=["1f1b"], cp=[1], micro_batch_sizes=[1],
                          recompute=[recompute], precision=["bf16"], ep=[ep], top=3)
    lines = 0
    for outcome, argv in _megatron_lines(result):
        lines += 1
        assert "--mtp-num-layers" not in argv
        assert argv[argv.index("--moe-shared-expert-intermediate-size") + 1] == str(shared)
        assert argv[argv.index("--moe-layer-freq") + 1] == "[" + ",".join(moe_layers) + "]"
        built = _run(capsys, "--vocab-size", str(vocab), "--make-vocab-size-divisible-by", "1", "--hardware",
                     "h100-sxm", "--gpus", str(gpus), *argv)
        assert built["model_report"]["step_time_s"] == pytest.approx(outcome.evaluation.step_time, rel=1e-9)
    assert lines >= least


def test_chunked_attention_beyond_one_chunk_has_no_megatron_line():
    from pipesim.plan.launch import megatron_line

    result = pipesim.plan("llama4-scout", gpus=64, global_batch=64, seq_len=32768, schedules=["1f1b"], cp=[1],
                          micro_batch_sizes=[1], recompute=["full"], precision=["bf16"], ep=[8], top=1)
    c = result.ranked[0].candidate
    assert megatron_line(c, result.request.model, 64).startswith("(Megatron-LM has no chunked attention")
    assert megatron_argv(c, result.request.model, 64) is None


# Megatron-LM's examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh, its model flags as written there
_V3_MODEL_FLAGS = shlex.split(
    "--num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 128 --kv-channels 128 "
    "--max-position-embeddings 4096 --position-embedding-type rope --make-vocab-size-divisible-by 3232 "
    "--normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --multi-latent-attention "
    "--attention-dropout 0.0 --hidden-dropout 0.0 --qk-layernorm --disable-bias-linear --num-experts 256 "
    "--moe-layer-freq [0]*3+[1]*58 --moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 2048 "
    "--moe-router-topk 8 --moe-router-group-topk 4 --moe-router-num-groups 8 --q-lora-rank 1536 --kv-lora-rank 512 "
    "--qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --mtp-num-layers 1 --seq-length 4096"
)


def test_megatrons_deepseek_v3_example_builds_the_preset(capsys):
    # its latent attention's --qk-layernorm norms the latents (the preset's MLA has them), not each head;
    # --kv-channels is MLA's to ignore; the node-limited router and the MTP module are the preset's
    built = _run(capsys, "--vocab-size", "129280", "--hardware", "h800", "--gpus", "64", "--pp", "4", "--ep", "16",
                 "--mb", "8", "--stage-layers", "16,15,15,15", *_V3_MODEL_FLAGS)
    named = _run(capsys, "--model", "deepseek-v3", "--hardware", "h800", "--gpus", "64", "--pp", "4", "--ep", "16",
                 "--mb", "8", "--stage-layers", "16,15,15,15", *_V3_MODEL_FLAGS)
    assert built["model_report"]["model"]["name"] == "megatron-flags"
    assert {k: v for k, v in built["model_report"]["model"].items() if k != "name"} == {
        k: v for k, v in named["model_report"]["model"].items() if k != "name"}
    assert built["model_report"]["step_time_s"] == named["model_report"]["step_time_s"]
    # its dispatcher, the flex one's HybridEP backend, is DeepEP's route
    hybrid = _run(capsys, "--model", "deepseek-v3", "--hardware", "h800", "--gpus", "64", "--pp", "4", "--ep", "16",
                  "--mb", "8", "--stage-layers", "16,15,15,15", "--moe-token-dispatcher-type", "flex",
                  "--moe-flex-dispatcher-backend", "hybridep")
    assert hybrid["model_report"]["layout"]["moe_dispatcher"] == "deepep"


def test_a_combined_1f1b_plans_megatron_line_asks_for_it_and_simulates_back(capsys):
    # interleaved-overlap candidates print Megatron-Core's --overlap-moe-expert-parallel-comm over its interleaved
    # schedule's flags, and the line simulates (that flag folding back into -s interleaved-overlap) to plan's time
    result = pipesim.plan("mixtral-8x7b", gpus=32, global_batch=64, seq_len=4096, schedules=["interleaved-overlap"],
                          cp=[1], micro_batch_sizes=[1], recompute=["selective"], precision=["bf16"], ep=[8], top=5)
    lines = 0
    for outcome, argv in _megatron_lines(result):
        if outcome.candidate.schedule != "interleaved-overlap":
            continue
        lines += 1
        assert "--overlap-moe-expert-parallel-comm" in argv and "--num-layers-per-virtual-pipeline-stage" in argv
        named = _run(capsys, "--model", "mixtral-8x7b", "--hardware", "h100-sxm", "--gpus", "32", *argv)
        assert named["config"]["schedule"] == "interleaved-overlap"
        assert named["model_report"]["step_time_s"] == pytest.approx(outcome.evaluation.step_time, rel=1e-9)
    assert lines >= 1


def test_plan_searches_moe_parallel_folding_and_its_lines_simulate_back(capsys):
    # at tp 2 with sequence parallelism the plan also tries whole experts a rank (etp1, ep over tp·dp), and each such
    # line, --expert-tensor-parallel-size 1 in it, simulates to plan's step time
    result = pipesim.plan("qwen3-30b-a3b", gpus=16, global_batch=64, schedules=["1f1b"], cp=[1],
                          micro_batch_sizes=[1], recompute=["none"], precision=["bf16"], ep=[8, 16], top=40)
    folded = 0
    for outcome, argv in _megatron_lines(result):
        if outcome.candidate.expert_tp != 1:
            continue
        folded += 1
        assert argv[argv.index("--expert-tensor-parallel-size") + 1] == "1"
        report = _run(capsys, "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--gpus", "16", *argv)
        assert report["model_report"]["layout"]["expert_tp"] == 1
        assert report["model_report"]["step_time_s"] == pytest.approx(outcome.evaluation.step_time, rel=1e-9)
    assert folded >= 2
    assert all(o.candidate.tp > 1 and o.candidate.sequence_parallel for o in result.ranked
               if o.candidate.expert_tp == 1)


# NeMo's NemotronHConfig8B as Megatron-LM's pretrain_mamba.py takes it: M a Mamba-2 mixer, * attention, - an MLP
_NEMOTRON_H_8B = ["--num-layers", "52", "--hidden-size", "4096", "--num-attention-heads", "32", "--seq-length", "8192",
                  "--vocab-size", "131072", "--ffn-hidden-size", "21504", "--hybrid-override-pattern",
                  "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", "--mamba-state-dim", "128",
                  "--tensor-model-parallel-size", "2", "--global-batch-size", "64", "--gpus", "8"]


@pytest.mark.parametrize("extra", [[], ["--ignore-unknown"]])
def test_a_hybrid_mamba_line_is_refused_not_simulated_as_a_transformer(capsys, extra):
    # dropped with a note under --ignore-unknown, the pattern would leave a 52-layer transformer: another model
    err = _refused(capsys, *extra, *_NEMOTRON_H_8B)
    assert "--hybrid-override-pattern: Mamba (state-space) layers" in err and "not modelled" in err
    err = _refused(capsys, "--model", "llama3.2-1b", "--mamba-num-heads", "64")
    assert "--mamba-num-heads: Mamba (state-space) layers" in err
