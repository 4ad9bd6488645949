"""The CLI side: `simulate --model --hardware`, `models`, `chips`, and one-line errors for bad input."""

import json

import pytest

from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.cli.main import main


def _error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pipesim: error: ")
    return err


def test_unknown_model_preset(capsys):
    err = _error(capsys, ["simulate", "--model", "gpt-5"])
    assert "'gpt-5' is not a preset" in err and "llama2-70b" in err


def test_unknown_chip_preset(capsys):
    err = _error(capsys, ["simulate", "--model", "llama2-7b", "--hardware", "tpu-v9"])
    assert "--hardware 'tpu-v9'" in err and "h100-sxm" in err
    assert "did you mean" not in err  # nothing close: no guess


def test_a_shortened_or_mistyped_preset_name_gets_the_presets_it_likely_meant(capsys):
    """A newcomer's `--hardware h100` (the preset is h100-sxm) or `--model llama3-8b` (llama3.1-8b): the refusal
    names the likely presets first, so the fix is in the first words of the message."""
    err = _error(capsys, ["simulate", "--model", "llama2-7b", "--hardware", "h100"])
    assert "did you mean h100-sxm or h100-96gb-hbm2e? use one of" in err and err.count("\n") == 1
    err = _error(capsys, ["simulate", "--model", "llama3-405b", "--hardware", "h100-sxm"])  # 3.1 had the 405B
    assert "did you mean llama3.1-405b" in err
    err = _error(capsys, ["simulate", "--model", "llama2-7b", "--hardware", "B20"])
    assert "did you mean b200?" in err


def test_layers_not_divisible_names_working_splits(capsys):
    err = _error(capsys, ["simulate", "--model", "gpt3-175b", "--pp", "5", "--mb", "10"])
    assert "96 layers" in err and "pp·v = 5 stages" in err
    assert "--first-stage-layers 18 --last-stage-layers 18 (20 on each other stage)" in err
    assert "--stage-layers 20,19,19,19,19" in err


def test_heads_not_divisible_by_tp(capsys):
    err = _error(capsys, ["simulate", "--model", "gpt3-175b", "--tp", "5", "--pp", "4"])
    assert "96 attention heads" in err and "--tp 5" in err


def test_gqa_kv_heads_not_divisible_by_tp(capsys):
    err = _error(capsys, ["simulate", "--model", "llama2-70b", "--tp", "16", "--pp", "4"])
    assert "8 KV heads" in err and "[1, 2, 4, 8]" in err


def test_malformed_yaml(capsys, tmp_path):
    path = tmp_path / "model.yaml"
    path.write_text("layers: [1, 2\nhidden: 4\n")
    err = _error(capsys, ["simulate", "--model", str(path)])
    assert str(path) in err and "not valid YAML" in err


def test_yaml_with_unknown_field_and_missing_field(capsys, tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("layers: 4\nhidden: 64\nheads: 4\nffn_hidden: 256\nvocab: 100\nseq_len: 32\nwidth: 3\n")
    err = _error(capsys, ["simulate", "--model", str(path)])
    assert "unknown key 'width'" in err and "ffn_hidden" in err and str(path) in err
    path.write_text("layers: 4\nhidden: 64\n")
    assert "missing" in _error(capsys, ["simulate", "--model", str(path)])


def test_unit_cost_flags_clash_with_model(capsys):
    assert "--forward" in _error(capsys, ["simulate", "--model", "llama2-7b", "--forward", "2"])


def test_model_flags_need_model(capsys):
    assert "add --model" in _error(capsys, ["simulate", "--tp", "2"])


def test_yaml_model_and_chip_files_run(capsys, tmp_path):
    model = tmp_path / "tiny.yaml"
    model.write_text("name: tiny\nlayers: 8\nhidden: 1024\nheads: 16\nkv_heads: 4\nffn_hidden: 2816\n"
                     "gated: true\nvocab: 32000\nseq_len: 2048\ndropout: false\n")
    chip = tmp_path / "chip.json"
    chip.write_text(json.dumps({"name": "mychip", "peak_flops": 1e15, "memory_gib": 10, "hbm_bandwidth": 3e12,
                                "intra_node_bandwidth": 4e11, "inter_node_bandwidth": 5e10}))
    assert main(["simulate", "--model", str(model), "--hardware", str(chip), "--pp", "2", "--mb", "4"]) == 0
    out = capsys.readouterr().out
    assert "model tiny" in out and "mychip" in out and "peak rank" in out


def test_simulate_json_carries_step_and_memory(capsys):
    argv = ["simulate", "--model", "llama2-70b", "--hardware", "h100-sxm", "--tp", "8", "--dp", "2", "--pp", "4",
            "--mb", "8", "-s", "interleaved", "--recompute", "selective", "--sequence-parallel",
            "--distributed-optimizer", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    report = data["model_report"]
    assert data["time_unit"] == "s" and data["config"]["chunks"] == 2
    assert report["layout"]["world_size"] == 64
    assert 0 < report["mfu"] < report["hfu"] < 1
    assert report["tokens_per_s"] == pytest.approx(2 * 8 * 4096 / report["step_time_s"])
    ranks = report["memory"]["ranks"]
    assert len(ranks) == 4 and report["memory"]["peak_gib"] == max(r["total_gib"] for r in ranks)
    assert data["memory"]["peak_bytes"] is not None


def test_text_report_warns_over_capacity(capsys):
    assert main(["simulate", "--model", "gpt3-175b", "--hardware", "a100-80gb", "--tp", "8", "--pp", "2",
                 "--mb", "4"]) == 0
    out = capsys.readouterr().out
    assert "step time" in out and "MFU" in out and "warning: rank 0 needs" in out


def test_models_and_chips_list_presets(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "llama3.1-405b" in out and "gpt3-175b" in out
    assert main(["chips"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("a100-80gb", "h100-sxm", "h200", "b200", "mi300x"))
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.split()}
    assert rows["b200"][2:5] == ["2250", "4500", "9000"] and rows["h100-sxm"][4] == "-"  # BF16, FP8, FP4 peaks


def test_default_pipeline_with_a_model_is_said_with_its_gpu_count(capsys):
    """--model without --pp pipelines over the default 4 ranks: a note on stderr gives the GPUs that makes, so a
    published run without pipelining is not silently simulated on four times its GPUs."""
    assert main(["simulate", "--model", "llama2-7b", "--hardware", "h100-sxm", "--dp", "8", "--tp", "2"]) == 0
    err = capsys.readouterr().err
    assert "--pp not given: 4 pipeline ranks (the default), 64 GPUs in all; pass --pp 1" in err
    assert main(["simulate", "--model", "llama2-7b", "--hardware", "h100-sxm", "--dp", "8", "--pp", "1"]) == 0
    assert "--pp not given" not in capsys.readouterr().err
    assert main(["simulate", "--pp", "4"]) == 0  # unit costs: no model, no GPUs to count
    assert "--pp not given" not in capsys.readouterr().err


def test_global_batch_sets_the_microbatches_a_recipe_states(capsys):
    """A recipe states its global batch; --global-batch N makes it N / (micro-batch size × dp) microbatches per
    pipeline (cp ranks share each sequence, so they do not divide it), and gives the same step as that --mb."""
    base = ["simulate", "--model", "llama3.1-8b", "--tp", "2", "--pp", "2", "--cp", "2", "--dp", "3",
            "--micro-batch-size", "2", "--seq-len", "2048", "--json"]
    assert main([*base, "--global-batch", "48"]) == 0
    by_batch = json.loads(capsys.readouterr().out)
    assert by_batch["config"]["microbatches"] == 8  # 48 / (2 × 3)
    assert main([*base, "--mb", "8"]) == 0
    by_mb = json.loads(capsys.readouterr().out)
    assert by_batch["model_report"]["step_time_s"] == by_mb["model_report"]["step_time_s"]
    assert main([*base, "--global-batch", "48", "--mb", "8"]) == 0  # agreeing: accepted
    capsys.readouterr()


@pytest.mark.parametrize("argv, message", [
    (["--model", "llama3.1-8b", "--dp", "3", "--global-batch", "16"],
     "--global-batch 16 is not a multiple of micro-batch size 1 × dp 3 = 3 sequences"),
    (["--model", "llama3.1-8b", "--dp", "2", "--global-batch", "16", "--mb", "4"],
     "--global-batch 16 means 8 microbatches per pipeline (micro-batch size 1 × dp 2), but --mb 4 is given"),
    (["--global-batch", "16"], "--global-batch counts sequences of a real model; add --model NAME"),
    # a schedule's refusal of too few microbatches names the --mb the batch came to, not only the flag
    (["--model", "llama3.1-8b", "--dp", "4", "--global-batch", "4", "-s", "interleaved", "-v", "2"],
     "(got --mb 1); use --mb 2 or more (--global-batch 4 gives --mb 1; raise --global-batch or lower --dp"),
])
def test_global_batch_refusals_name_the_fix(capsys, argv, message):
    assert main(["simulate", "--pp", "2", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_default_microbatches_with_a_model_are_said_as_a_global_batch(capsys):
    """Without --mb or --global-batch the step holds the default 8 microbatches: a note gives the global batch
    that is, so a recipe's batch is not silently replaced."""
    assert main(["simulate", "--model", "llama3.1-8b", "--pp", "2", "--dp", "4", "--micro-batch-size", "2"]) == 0
    err = capsys.readouterr().err
    assert "--mb not given: 8 microbatches per pipeline (the default), a global batch of 64 sequences" in err
    assert main(["simulate", "--model", "llama3.1-8b", "--pp", "2", "--global-batch", "16"]) == 0
    assert "--mb not given" not in capsys.readouterr().err


def test_megatron_flag_names_are_accepted(capsys):
    """Megatron-LM's own names for three overlaps and the distributed optimizer mean pipesim's flags: the same
    layout, the same step."""
    base = ["simulate", "--model", "llama3.1-8b", "--tp", "2", "--pp", "2", "--dp", "2", "-s", "interleaved",
            "--mb", "8", "--sequence-parallel", "--json"]
    ours = ["--async-tp", "--distributed-optimizer", "--overlap-p2p"]
    megatron = ["--tp-comm-overlap", "--use-distributed-optimizer", "--overlap-p2p-communication"]
    reports = []
    for flags in (ours, megatron, []):
        assert main([*base, *flags]) == 0
        reports.append(json.loads(capsys.readouterr().out)["model_report"])
    assert reports[0] == reports[1]
    assert reports[0]["step_time_s"] != reports[2]["step_time_s"]


@pytest.mark.parametrize(("name", "preset"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3.1-8b"), ("Llama-2-7b-hf", "llama2-7b"),
    ("meta-llama/Meta-Llama-3-70B", "llama3.1-70b"), ("llama3-8b", "llama3.1-8b"),
    ("deepseek-ai/DeepSeek-V3", "deepseek-v3"), ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
    ("Llama-3.2-1B", "llama3.2-1b"), ("GPT3-175B", "gpt3-175b"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4-scout"), ("Llama-4-Maverick-17B-128E", "llama4-maverick"),
])
def test_hugging_face_names_and_llama_3_are_their_presets(name, preset):
    """A model named as its Hugging Face repository, or as Llama 3 (the same architecture as 3.1 at 8B and 70B),
    is the preset: the same spec, so the same prediction."""
    from pipesim.analytic.model_load import load_model, model_preset_key

    assert model_preset_key(name) == preset
    assert load_model(name) is MODEL_PRESETS[preset]
    assert model_preset_key("meta-llama/Llama-4-Behemoth") is None
