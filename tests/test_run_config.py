"""``simulate --config``: a nanotron run config read as nanotron reads it, and simulated as the same run given by
flags; flags beside the file win; a file pipesim cannot read is a one-line refusal."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.io.run_config import _torchtitan as read_torchtitan
from pipesim.io.run_config import load_run_config

# nanotron's examples/config_tiny_llama.yaml (at 2411b02), the sections pipesim reads
TINY_LLAMA = {
    "model": {"ddp_bucket_cap_mb": 25, "dtype": "bfloat16", "make_vocab_size_divisible_by": 1,
              "model_config": {"hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 11008,
                               "is_llama_config": True, "max_position_embeddings": 128256,
                               "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 2,
                               "tie_word_embeddings": True, "vocab_size": 128256}},
    "optimizer": {"accumulate_grad_in_fp32": True, "zero_stage": 0},
    "parallelism": {"dp": 4, "expert_parallel_size": 1, "pp": 1, "pp_engine": "1f1b", "tp": 2,
                    "tp_linear_async_communication": True, "tp_mode": "REDUCE_SCATTER"},
    "tokens": {"batch_accumulation_per_replica": 1, "micro_batch_size": 3, "sequence_length": 4096},
}

# a pipelined one: the all-forward-all-backward engine, no sequence parallelism, every layer recomputed, ZeRO-1
PIPELINED = {
    "model": {"make_vocab_size_divisible_by": 128,
              "model_config": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
                               "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128000,
                               "tie_word_embeddings": True}},
    "optimizer": {"zero_stage": 1, "accumulate_grad_in_fp32": False},
    "parallelism": {"dp": 2, "tp": 2, "pp": 2, "pp_engine": "afab", "tp_mode": "ALL_REDUCE", "recompute_layer": True},
    "tokens": {"micro_batch_size": 2, "batch_accumulation_per_replica": 8, "sequence_length": 4096},
}


def _write(tmp_path, name: str, data: dict):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _json(capsys, *argv: str) -> dict:
    assert main(["simulate", "--json", *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_tiny_llama_read_as_nanotron_reads_it(tmp_path):
    stated = load_run_config(_write(tmp_path, "tiny", TINY_LLAMA))
    m = stated.model
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab) == (28, 2048, 16, 2, 11008, 128256)
    assert m.gated and m.rms_norm and m.tied_embeddings and not m.bias and not m.dropout and m.seq_len == 4096
    assert (stated.schedule, stated.pp, stated.microbatches) == ("1f1b", 1, 1)
    assert stated.options == {"framework": "nanotron", "tp": 2, "dp": 4, "cp": 1, "micro_batch_size": 3,
                              "seq_len": 4096, "zero": 0, "sequence_parallel": True, "overlap_tp_dgrad": True,
                              "column_input": "regather", "overlap_tp_local_shard": True}


def test_pipelined_config_defaults_and_padding(tmp_path):
    stated = load_run_config(_write(tmp_path, "pipelined", PIPELINED))
    assert stated.model.vocab == 128000  # already a multiple of 128 · tp 2 = 256
    assert (stated.schedule, stated.pp, stated.microbatches) == ("gpipe", 2, 8)  # afab: GPipe's order
    assert stated.options["recompute"] == "full" and stated.options["param_bytes"] == "16"
    assert "sequence_parallel" not in stated.options  # ALL_REDUCE, nanotron's default
    odd = {**PIPELINED, "model": {**PIPELINED["model"], "model_config": {
        **PIPELINED["model"]["model_config"], "vocab_size": 128001}}}
    assert load_run_config(_write(tmp_path, "odd", odd)).model.vocab == 128256  # padded to 256
    z = {**PIPELINED, "model": {**PIPELINED["model"], "model_config": {
        **PIPELINED["model"]["model_config"], "z_loss_enabled": True}}}
    assert load_run_config(_write(tmp_path, "z", z)).options["z_loss"] is True  # nanotron's LossWithZLoss


def test_a_config_simulates_as_the_same_run_by_flags(capsys, tmp_path):
    config = _write(tmp_path, "pipelined", PIPELINED)
    model = tmp_path / "pipelined_model" / "pipelined.yaml"
    model.parent.mkdir()
    c = PIPELINED["model"]["model_config"]
    model.write_text(yaml.safe_dump({
        "name": "pipelined", "layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "ffn_hidden": 8192,
        "vocab": 128000, "seq_len": 4096, "gated": True, "rms_norm": True, "bias": False, "dropout": False,
        "tied_embeddings": c["tie_word_embeddings"], "learned_positions": False}))
    by_flags = _json(capsys, "--model", str(model), "--framework", "nanotron", "-s", "gpipe", "--pp", "2", "--mb", "8",
                     "--tp", "2", "--dp", "2", "--micro-batch-size", "2", "--recompute", "full", "--zero", "1",
                     "--param-bytes", "16")
    by_config = _json(capsys, "--config", str(config))
    assert by_config["model_report"] == by_flags["model_report"]
    assert by_config["config"]["schedule"] == "gpipe"


def test_flags_beside_the_config_win(capsys, tmp_path):
    config = _write(tmp_path, "pipelined", PIPELINED)
    report = _json(capsys, "--config", str(config), "-s", "1f1b", "--mb", "16", "--dp", "1")
    assert report["config"]["schedule"] == "1f1b" and report["config"]["microbatches"] == 16
    assert report["model_report"]["layout"]["dp"] == 1 and report["model_report"]["layout"]["tp"] == 2


@pytest.mark.parametrize(("change", "fragment"), [
    (lambda d: d.pop("tokens"), "not a nanotron run config"),
    (lambda d: d["parallelism"].update(pp_engine="zb"), "pp_engine 'zb'"),
    (lambda d: d["parallelism"].update(tp=0), "tp: 0 must be a positive integer"),
    (lambda d: d["parallelism"].update(expert_parallel_size=2), "MoE configs are not read"),
    (lambda d: d["model"]["model_config"].update(hidden_act="gelu"), "hidden_act 'gelu'"),
    # values of the wrong type are named, not an internal error (a fuzzed file once made int('op') raise)
    (lambda d: d["optimizer"].update(zero_stage="op"), "zero_stage: 'op' must be an integer of 0 or more"),
    (lambda d: d["optimizer"].update(zero_stage=3), "zero_stage 3: nanotron's ZeRO stages are 0 and 1"),
    (lambda d: d["parallelism"].update(tp_mode="SEQUENCE"), "tp_mode 'SEQUENCE': nanotron's modes"),
    (lambda d: d["parallelism"].update(recompute_layer="yes"), "recompute_layer: 'yes' must be true or false"),
    (lambda d: d["model"]["model_config"].update(tie_word_embeddings=1), "tie_word_embeddings: 1 must be true or"),
])
def test_configs_pipesim_cannot_read_are_refused(tmp_path, change, fragment):
    data = json.loads(json.dumps(PIPELINED))
    change(data)
    with pytest.raises(PipesimError, match=fragment):
        load_run_config(_write(tmp_path, "bad", data))


def test_config_refusals_on_the_command_line(capsys, tmp_path):
    config = _write(tmp_path, "pipelined", PIPELINED)
    for argv, fragment in [(["--config", str(config), "--model", "llama3.2-1b"], "states its model; drop --model"),
                           (["--config", str(tmp_path / "none.yaml")], "no such file"),
                           (["--config", str(tmp_path)], "no such file")]:
        assert main(["simulate", *argv]) == 2
        err = capsys.readouterr().err
        assert fragment in err and err.count("\n") == 1


# --- torchtitan's TOML ---------------------------------------------------------------------------------------

# torchtitan's llama3_405b.toml (before 9810191, February 2026), the sections pipesim reads
TORCHTITAN_405B = """
[model]
name = "llama3"
flavor = "405B"
converters = ["float8"]

[training]
local_batch_size = 2
seq_len = 8192

[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
tensor_parallel_degree = 8
enable_async_tensor_parallel = true
pipeline_parallel_degree = 1
context_parallel_degree = 1

[activation_checkpoint]
mode = "full"

[compile]
enable = true
components = ["model", "loss"]
"""

TORCHTITAN_PIPELINED = """
[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 8
global_batch_size = 64
seq_len = 4096

[parallelism]
data_parallel_shard_degree = 2
pipeline_parallel_degree = 4
pipeline_parallel_schedule = "Interleaved1F1B"
pipeline_parallel_microbatch_size = 2

[activation_checkpoint]
mode = "selective"
selective_ac_option = "2"
"""


def _toml(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_torchtitan_405b_read_as_torchtitan_runs_it(tmp_path):
    stated = load_run_config(_toml(tmp_path, "llama3_405b", TORCHTITAN_405B))
    assert (stated.model, stated.schedule, stated.pp, stated.microbatches, stated.global_batch) == (
        "llama3.1-405b", "1f1b", 1, 1, None)
    assert stated.needs_gpus  # data_parallel_shard_degree = -1: the GPUs left
    assert stated.options == {"framework": "torchtitan", "tp": 8, "cp": 1, "micro_batch_size": 2, "seq_len": 8192,
                              "zero": 3, "async_tp": True, "fp8": True, "fp8_recipe": "tensorwise",
                              "elementwise": "fused", "loss": "compiled", "recompute": "full"}


def test_torchtitan_float8_all_gather_reaches_the_fsdp_runs_only(tmp_path):
    gathered = TORCHTITAN_405B + "\n[float8]\nenable_fsdp_float8_all_gather = true\n"
    assert load_run_config(_toml(tmp_path, "fp8_gather", gathered)).options["fp8_all_gather"] is True
    # without FSDP (one data-parallel shard) there is nothing to gather: the key changes nothing, nor without float8
    unsharded = gathered.replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 1")
    assert "fp8_all_gather" not in load_run_config(_toml(tmp_path, "unsharded", unsharded)).options
    bf16 = gathered.replace('converters = ["float8"]\n', "")
    assert "fp8_all_gather" not in load_run_config(_toml(tmp_path, "bf16", bf16)).options
    # a plan of the file's job keeps the switch for its FP8 candidates under FSDP (plan_request's fp8_all_gather)
    from pipesim.io.run_config import plan_job

    job = plan_job(load_run_config(_toml(tmp_path, "fp8_gather", gathered)), gpus=512)
    assert job.space["fp8_all_gather"] is True and job.space["precision"] == ["fp8"]


def test_torchtitan_compiles_only_the_components_it_names(tmp_path):
    model_only = TORCHTITAN_405B.replace('components = ["model", "loss"]', 'components = ["model"]')
    options = load_run_config(_toml(tmp_path, "model_only", model_only)).options
    assert options["elementwise"] == "fused" and "loss" not in options
    unnamed = TORCHTITAN_405B.replace('components = ["model", "loss"]\n', "")  # torchtitan's default: both
    assert load_run_config(_toml(tmp_path, "unnamed", unnamed)).options["loss"] == "compiled"
    off = TORCHTITAN_405B.replace("enable = true", "enable = false")
    assert not {"elementwise", "loss"} & set(load_run_config(_toml(tmp_path, "off", off)).options)


def test_torchtitan_pipeline_batch_and_layer_ac(tmp_path):
    stated = load_run_config(_toml(tmp_path, "pp", TORCHTITAN_PIPELINED))
    # a looped schedule runs two stages a rank; 8 sequences a rank in microbatches of 2, the global batch of 64
    # over dp 2 then makes 64 / (2 · 2) = 16 microbatches a pipeline
    assert (stated.schedule, stated.pp, stated.chunks, stated.global_batch) == ("interleaved", 4, 2, 64)
    assert stated.options["dp"] == 2 and stated.options["micro_batch_size"] == 2
    # every second layer recomputed in full: 32 layers over 8 chunks, 2 of each chunk's 4
    assert stated.options["recompute"] == "full" and stated.options["recompute_layers"] == 2


def test_a_torchtitan_config_simulates_as_the_same_run_by_flags(capsys, tmp_path):
    config = _toml(tmp_path, "pp", TORCHTITAN_PIPELINED)
    by_config = _json(capsys, "--config", str(config))
    by_flags = _json(capsys, "--model", "llama3.1-8b", "--framework", "torchtitan", "-s", "interleaved", "--pp", "4",
                     "--chunks", "2", "--dp", "2", "--zero", "3", "--micro-batch-size", "2", "--global-batch", "64",
                     "--seq-len", "4096", "--recompute", "full", "--recompute-layers", "2")
    assert by_config == by_flags
    assert by_config["config"]["microbatches"] == 16


def test_torchtitans_context_parallel_rotation_is_its_exchange(tmp_path):
    """context_parallel_degree with its rotation: the default all-gather, or the all-to-all shuffle (a ring);
    at cp 1 the framework's default stands unstated."""
    long = TORCHTITAN_405B.replace("context_parallel_degree = 1", "context_parallel_degree = 4")
    assert load_run_config(_toml(tmp_path, "cp", long)).options["cp_comm_type"] == "allgather"
    ring = long.replace("context_parallel_degree = 4",
                        'context_parallel_degree = 4\ncontext_parallel_rotate_method = "alltoall"')
    assert load_run_config(_toml(tmp_path, "ring", ring)).options["cp_comm_type"] == "p2p"
    assert "cp_comm_type" not in load_run_config(_toml(tmp_path, "one", TORCHTITAN_405B)).options
    with pytest.raises(PipesimError, match="context_parallel_rotate_method 'ring'"):
        load_run_config(_toml(tmp_path, "bad", long.replace("context_parallel_degree = 4",
                                                            'context_parallel_degree = 4\n'
                                                            'context_parallel_rotate_method = "ring"')))


@pytest.mark.parametrize(("change", "fragment"), [
    (('flavor = "8B"', 'flavor = "debugmodel"'), "Llama 3 flavours"),
    (("data_parallel_shard_degree = 2", "data_parallel_shard_degree = 2\ndata_parallel_replicate_degree = 2"),
     "HSDP"),
    (('"Interleaved1F1B"', '"InterleavedZeroBubble"'), "no pipesim equivalent"),
    (('selective_ac_option = "2"', 'selective_ac_option = "x"'), "selective_ac_option 'x'"),
    (("local_batch_size = 8", "local_batch_size = 7"), "not a multiple"),
    # values of the wrong type are named, not an internal error (a fuzzed file once made `"model" in 3` raise)
    (("[activation_checkpoint]", "[compile]\nenable = true\ncomponents = 3\n\n[activation_checkpoint]"),
     "components: 3 must be a list of strings"),
    (('flavor = "8B"', 'flavor = "8B"\nconverters = "float8"'), "converters: 'float8' must be a list of strings"),
    (('"Interleaved1F1B"', '["Interleaved1F1B"]'), "pipeline_parallel_schedule: .* must be a string"),
    (("pipeline_parallel_microbatch_size = 2", "pipeline_parallel_microbatch_size = 2\n"
      "pipeline_parallel_first_stage_less_layers = -1"), "first_stage_less_layers: -1 must be an integer of 0"),
])
def test_torchtitan_configs_pipesim_cannot_read_are_refused(tmp_path, change, fragment):
    with pytest.raises(PipesimError, match=fragment):
        load_run_config(_toml(tmp_path, "bad", TORCHTITAN_PIPELINED.replace(*change)))


def test_the_gpus_torchtitan_leaves_open_are_asked_for(capsys, tmp_path):
    config = _toml(tmp_path, "llama3_405b", TORCHTITAN_405B)
    assert main(["simulate", "--config", str(config)]) == 2
    assert "add --gpus N" in capsys.readouterr().err
    report = _json(capsys, "--config", str(config), "--gpus", "64")
    assert report["model_report"]["layout"]["dp"] == 8 and report["model_report"]["layout"]["zero"] == 3


# --- plan --config: the layout for a run's own job -------------------------------------------------------------


def test_a_nanotron_configs_job_by_hand(tmp_path):
    from pipesim.io.run_config import plan_job

    job = plan_job(load_run_config(_write(tmp_path, "tiny", TINY_LLAMA)))
    # the file states every degree: tp 2 × dp 4 GPUs; 3 sequences × 1 microbatch × dp 4 a step
    assert (job.gpus, job.global_batch) == (8, 12)
    assert job.space == {"framework": "nanotron", "seq_len": 4096, "precision": ["bf16"], "overlap_tp_dgrad": True,
                         "column_input": "regather", "overlap_tp_local_shard": True}
    assert job.micro_batch == 3  # plan searches it beside its defaults


def test_a_torchtitan_configs_job_takes_the_gpus_it_leaves_open(tmp_path):
    from pipesim.io.run_config import plan_job

    stated = load_run_config(_toml(tmp_path, "llama3_405b", TORCHTITAN_405B))
    with pytest.raises(PipesimError, match="add --gpus N"):
        plan_job(stated)
    job = plan_job(stated, gpus=512)
    assert job.global_batch == 2 * 512 // 8  # local batch 2 on each of the 64 data-parallel ranks
    assert job.space["precision"] == ["fp8"] and job.space["elementwise"] == "fused"
    assert job.space["loss"] == "compiled"  # the code's loss is kept for every candidate


def test_plan_keeps_a_configs_z_loss_when_the_flag_is_unset(tmp_path):
    """A nanotron file's z_loss_enabled reaches every candidate plan evaluates; the CLI's unset --z-loss (None)
    does not clear it: the file's own layout is timed as simulate times the file."""
    import pipesim

    z = {**TINY_LLAMA, "model": {**TINY_LLAMA["model"], "model_config": {
        **TINY_LLAMA["model"]["model_config"], "z_loss_enabled": True}}}
    config = _write(tmp_path, "z", z)
    result = pipesim.plan(config=config, schedules=["1f1b"], recompute=["none"], zero=[0], cp=[1],
                          micro_batch_sizes=[3], z_loss=None)
    own = [o.evaluation.step_time for o in result.search.outcomes if o.evaluation is not None
           and (o.candidate.tp, o.candidate.dp, o.candidate.sequence_parallel) == (2, 4, True)]
    with_z = pipesim.simulate(config=config).step_time
    assert own == [pytest.approx(with_z, rel=1e-9)]
    assert with_z > pipesim.simulate(config=_write(tmp_path, "plain", TINY_LLAMA)).step_time


def test_plan_of_a_config_ranks_its_own_layout_at_simulates_time(tmp_path):
    import pipesim

    config = _write(tmp_path, "tiny", TINY_LLAMA)
    result = pipesim.plan(config=config, schedules=["1f1b"], recompute=["none"], zero=[0], cp=[1])
    own = {o.candidate: o.evaluation.step_time for o in result.search.outcomes if o.evaluation is not None}
    assert {c.micro_batch_size for c in own} >= {1, 2, 3, 4}  # the file's 3 among plan's own sizes
    mine = [t for c, t in own.items() if (c.tp, c.dp, c.micro_batch_size, c.sequence_parallel) == (2, 4, 3, True)]
    assert mine == [pytest.approx(pipesim.simulate(config=config).step_time, rel=1e-9)]
    with pytest.raises(PipesimError, match="states its model"):
        pipesim.plan("llama3.2-1b", config=config)
    with pytest.raises(PipesimError, match="plan needs a model, the GPUs and the global batch"):
        pipesim.plan(gpus=8)


# Any value where a run config has a key (the fuzzing that found seven internal errors, kept as a property): the
# reader gives a RunConfig or one line (its own, naming the file, or the model's or the split's), never another
# exception.
_ANY = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                 st.text(max_size=8), st.lists(st.one_of(st.integers(-3, 9), st.text(max_size=6)), max_size=3),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _leaves(data: dict, path: tuple = ()) -> list[tuple]:
    return [leaf for key, value in data.items()
            for leaf in (_leaves(value, (*path, key)) if isinstance(value, dict) else [(*path, key)])]


def _with(data: dict, changes: list[tuple[tuple, object]]) -> dict:
    data = json.loads(json.dumps(data))
    for path, value in changes:
        section = data
        for key in path[:-1]:
            if not isinstance(section.get(key), dict):
                section[key] = {}
            section = section[key]
        section[path[-1]] = value
    return data


# every key the torchtitan reader reads, by section
_TORCHTITAN_KEYS = [("model", k) for k in ("name", "flavor", "converters")] + [
    ("training", k) for k in ("local_batch_size", "batch_size", "global_batch_size", "seq_len",
                              "mixed_precision_param")] + [
    ("parallelism", k) for k in (
        "data_parallel_shard_degree", "data_parallel_replicate_degree", "tensor_parallel_degree",
        "enable_async_tensor_parallel", "pipeline_parallel_degree", "pipeline_parallel_schedule",
        "pipeline_parallel_microbatch_size", "pipeline_parallel_first_stage_less_layers",
        "pipeline_parallel_last_stage_less_layers", "pipeline_parallel_layers_per_stage",
        "pipeline_parallel_schedule_csv", "context_parallel_degree", "context_parallel_rotate_method",
        "expert_parallel_degree", "fsdp_reshard_after_forward")] + [
    ("activation_checkpoint", "mode"), ("activation_checkpoint", "selective_ac_option"), ("compile", "enable"),
    ("compile", "components"), ("float8", "enable_float8_linear"), ("float8", "enable_fsdp_float8_all_gather")]


def _one_line_or_read(read) -> None:
    try:
        read()
    except PipesimError as err:  # the file's reader or the model and split it builds: one line either way
        assert "\n" not in str(err)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(_leaves(TINY_LLAMA) + _leaves(PIPELINED)), _ANY), min_size=1, max_size=3))
def test_any_value_in_a_nanotron_config_reads_or_is_one_line(tmp_path, changes):
    base = PIPELINED if any(path not in _leaves(TINY_LLAMA) for path, _ in changes) else TINY_LLAMA
    changes = [(path, value) for path, value in changes if path in _leaves(base)]
    path = tmp_path / "fuzzed.yaml"
    path.write_text(yaml.safe_dump(_with(base, changes)))
    _one_line_or_read(lambda: load_run_config(path))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_TORCHTITAN_KEYS), _ANY), min_size=1, max_size=3))
def test_any_value_in_a_torchtitan_config_reads_or_is_one_line(changes):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11's; pipesim reads TOML from 3.11 on (the module says)
    data = _with(tomllib.loads(TORCHTITAN_PIPELINED), changes)
    _one_line_or_read(lambda: read_torchtitan(data, "fuzzed.toml"))
