"""A training framework's own run configuration as a simulation: the model, the layout and the batch it states.

``pipesim simulate --config FILE`` (and ``pipesim.simulate(config=FILE)``) reads the file a run was launched with,
so its settings need no translating into flags; ``pipesim plan --config FILE`` plans that run's job
(:func:`plan_job`). Read so far:

- **nanotron's YAML** (``run_train.py --config-file``; its ``Config`` dataclasses in ``nanotron/config/``, read at
  2411b02): ``parallelism`` (``dp``, ``tp``, ``pp``, ``context_parallel_size``; ``pp_engine`` 1f1b, or afab, its
  default, which is GPipe's order; ``tp_mode`` REDUCE_SCATTER is sequence parallelism, ALL_REDUCE, its default,
  is not; ``tp_linear_async_communication`` overlaps the column linears' input-gradient collective with the
  weight-gradient GEMM (``--overlap-tp-dgrad``) and, under sequence parallelism, their input's second gather
  with the input-gradient GEMM (``--column-input regather``) and each all-gather with the GEMM of the rank's
  own shard (``--overlap-tp-local-shard``: ``_ColumnLinearAsyncCommunication``, ``_RowLinearAsyncCommunication``);
  ``recompute_layer`` recomputes every layer; ``tp_recompute_allgather`` false keeps the gathered input),
  ``tokens`` (``micro_batch_size``, ``batch_accumulation_per_replica`` microbatches, ``sequence_length``),
  ``optimizer`` (``zero_stage``; ``accumulate_grad_in_fp32`` false keeps BF16 gradients, 16 bytes a parameter)
  and ``model.model_config`` (a Llama or Qwen2 config: widths, heads, key/value heads, vocabulary padded as
  nanotron pads it, to ``make_vocab_size_divisible_by`` × tp, tied or untied embeddings; ``z_loss_enabled``,
  ``--z-loss``), under
  ``--framework nanotron``. Qwen2's q/k/v biases (about a millionth of the FLOPs) are not modelled; mixture-of-
  experts configs are refused.

- **torchtitan's TOML** (``--job.config_file``; its ``JobConfig`` as of the last release with TOML configs,
  torchtitan before 9810191, February 2026): ``[model]`` (``name = "llama3"``, ``flavor`` 8B, 70B or 405B: the
  Llama 3.1 presets; ``converters = ["float8"]``, or the older ``[float8] enable_float8_linear``, are FP8
  linears with tensor-wise scaling, and ``[float8] enable_fsdp_float8_all_gather`` under FSDP their weights
  gathered in FP8: ``--fp8-all-gather``), ``[training]`` (``local_batch_size``, or the older ``batch_size``,
  ``global_batch_size``, ``seq_len``), ``[parallelism]`` (``data_parallel_shard_degree``, FSDP over it, -1 its
  default being "the GPUs left", so ``--gpus`` is needed then; ``fsdp_reshard_after_forward`` never is ZeRO-2's
  shape; ``tensor_parallel_degree`` with ``enable_async_tensor_parallel``; ``pipeline_parallel_degree``,
  ``_schedule`` (1F1B, GPipe, Interleaved1F1B, LoopedBFS, ZBVZeroBubble, DualPipeV) with two stages a rank for
  the looped ones or as ``_layers_per_stage`` gives, ``_microbatch_size``, ``_first/last_stage_less_layers``;
  ``context_parallel_degree`` with ``context_parallel_rotate_method``, ``allgather`` its default, ``alltoall``
  the ring), ``[activation_checkpoint]`` (``mode`` none, full or selective, torchtitan's
  default; ``selective_ac_option`` "op" per-op, its default "2" a full recomputation of every second layer,
  taken as half of each chunk's) and ``[compile]`` (``enable`` with "model" in ``components`` fuses the
  element-wise ops, with "loss" compiles the loss: ``--loss compiled``; both are the default), under
  ``--framework torchtitan``. HSDP (replicate and shard degrees both above 1) and FP32 parameters are refused.

Anything the file does not state keeps pipesim's (or the framework's) default, and a flag given beside the file
wins over it, as a flag wins over a framework's default.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipesim.analytic.megatron_model import padded_vocab
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import ModelSpec
from pipesim.errors import PipesimError


@dataclass(frozen=True)
class RunConfig:
    """What a run's configuration file states, as ``simulate``'s arguments (None: not stated)."""

    source: str  # the file, for messages
    model: ModelSpec | str  # a spec, or a preset's name
    schedule: str | None = None
    pp: int | None = None
    microbatches: int | None = None
    chunks: int | None = None
    global_batch: int | None = None  # where the microbatches follow from the data-parallel degree
    options: dict[str, Any] = field(default_factory=dict)  # ModelOptions fields
    needs_gpus: bool = False  # the data-parallel degree is "the GPUs left": --gpus (or --dp) must say how many


@dataclass(frozen=True)
class PlanJob:
    """What ``plan --config`` searches for: the run's model, GPUs and global batch, and what the file fixes that is
    not a layout (the framework, the sequence, the precision, the element-wise kernels)."""

    model: ModelSpec | str
    gpus: int
    global_batch: int
    space: dict[str, Any]  # plan_request keyword arguments
    micro_batch: int | None = None  # the run's own micro-batch size, to be among those searched


def plan_job(stated: RunConfig, gpus: int | None = None, global_batch: int | None = None) -> PlanJob:
    """The job a run configuration describes, for a planner to find its layout: ``gpus`` (default the file's own
    count, where it states every degree) and ``global_batch`` (default the file's: stated, or the micro-batch ×
    microbatches × data-parallel degree its layout gives)."""
    o = stated.options
    model_parallel = o.get("tp", 1) * o.get("cp", 1) * (stated.pp or 1)
    dp = o.get("dp")
    if gpus is None:
        if dp is None:
            raise PipesimError(f"--config {stated.source} leaves the data-parallel degree to the GPUs the run has; "
                               "add --gpus N")
        gpus = model_parallel * dp
    if global_batch is None:
        global_batch = stated.global_batch
    if global_batch is None:
        if gpus % model_parallel:
            raise PipesimError(f"--gpus {gpus} is not a multiple of the config's tp·cp·pp = {model_parallel}; give "
                               "--global-batch as well")
        global_batch = o.get("micro_batch_size", 1) * (stated.microbatches or 1) * (dp or gpus // model_parallel)
    space: dict[str, Any] = {"framework": o.get("framework"), "seq_len": o.get("seq_len"),
                             "precision": ["fp8" if o.get("fp8") else "bf16"]}
    # the switches the file sets that are the code's, not the layout's: kept for every candidate
    for key in ("elementwise", "loss", "z_loss", "overlap_tp_dgrad", "column_input", "overlap_tp_local_shard",
                "param_bytes", "fp8_all_gather"):
        if key in o:
            space[key] = o[key]
    return PlanJob(stated.model, gpus, global_batch, space, o.get("micro_batch_size"))


def load_run_config(path: str | Path) -> RunConfig:
    """The run configuration in ``path`` (see the module doc for the formats read); a one-line error otherwise."""
    path = Path(path)
    if not path.is_file():
        raise PipesimError(f"--config {path}: no such file")
    if path.suffix == ".toml":
        return _torchtitan(_toml(path), str(path))
    if path.suffix not in (".yaml", ".yml"):
        raise PipesimError(f"--config {path}: pipesim reads nanotron's YAML (.yaml) and torchtitan's TOML (.toml) "
                           "run configs; for another framework give the layout as flags (--framework, --tp, ...)")
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise PipesimError(f"--config {path}: not valid YAML ({' '.join(str(err).split())[:120]})") from None
    if not isinstance(data, dict) or not {"parallelism", "tokens", "model"} <= data.keys():
        raise PipesimError(f"--config {path}: not a nanotron run config (it needs 'parallelism', 'tokens' and "
                           "'model' sections)")
    return _nanotron(data, str(path))


def _section(data: dict, key: str, source: str) -> dict:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise PipesimError(f"--config {source}: '{key}' must be a mapping")
    return value


def _typed(section: dict, key: str, source: str, default, valid: Callable[[object], bool], what: str):
    """``key``'s value where ``valid`` takes it; ``default`` where the file leaves it out or gives null; a one-line
    error naming the key and ``what`` it must be otherwise."""
    value = section.get(key)
    if value is None:
        return default
    if not valid(value):
        raise PipesimError(f"--config {source}: {key}: {value!r} must be {what}")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(section: dict, key: str, source: str, default: int | None = None) -> int | None:
    return _typed(section, key, source, default, lambda v: _is_int(v) and v >= 1, "a positive integer")


def _count(section: dict, key: str, source: str, default: int) -> int:
    return _typed(section, key, source, default, lambda v: _is_int(v) and v >= 0, "an integer of 0 or more")


def _flag(section: dict, key: str, source: str, default: bool = False) -> bool:
    return _typed(section, key, source, default, lambda v: isinstance(v, bool), "true or false")


def _text(section: dict, key: str, source: str, default: str) -> str:
    return _typed(section, key, source, default, lambda v: isinstance(v, str), "a string")


def _texts(section: dict, key: str, source: str, default: list[str]) -> list[str]:
    return _typed(section, key, source, default,
                  lambda v: isinstance(v, list) and all(isinstance(item, str) for item in v), "a list of strings")


def _nanotron(data: dict, source: str) -> RunConfig:
    parallelism = _section(data, "parallelism", source)
    tokens = _section(data, "tokens", source)
    optimizer = _section(data, "optimizer", source)
    model = _section(data, "model", source)
    tp = _positive(parallelism, "tp", source, 1)
    pp = _positive(parallelism, "pp", source, 1)
    engine = _text(parallelism, "pp_engine", source, "afab").lower()
    if engine not in ("1f1b", "afab"):
        raise PipesimError(f"--config {source}: pp_engine {engine!r}: nanotron's engines are 1f1b and afab")
    tp_mode = _text(parallelism, "tp_mode", source, "ALL_REDUCE").upper()
    if tp_mode not in ("ALL_REDUCE", "REDUCE_SCATTER"):
        raise PipesimError(f"--config {source}: tp_mode {tp_mode!r}: nanotron's modes are ALL_REDUCE and "
                           "REDUCE_SCATTER")
    sequence_parallel = tp_mode == "REDUCE_SCATTER"
    zero = _count(optimizer, "zero_stage", source, 0)
    if zero > 1:
        raise PipesimError(f"--config {source}: zero_stage {zero}: nanotron's ZeRO stages are 0 and 1")
    options: dict[str, Any] = {
        "framework": "nanotron", "tp": tp, "dp": _positive(parallelism, "dp", source, 1),
        "cp": _positive(parallelism, "context_parallel_size", source, 1),
        "micro_batch_size": _positive(tokens, "micro_batch_size", source),
        "seq_len": _positive(tokens, "sequence_length", source),
        "zero": zero,
    }
    if (parallelism.get("expert_parallel_size") or 1) != 1:
        raise PipesimError(f"--config {source}: expert parallelism: nanotron's MoE configs are not read; give the "
                           "layout as flags")
    if _flag(parallelism, "recompute_layer", source):
        options["recompute"] = "full"
    if tp > 1:  # what only tensor parallelism changes (stated at tp 1 it would only earn "changes nothing" notes)
        options["sequence_parallel"] = sequence_parallel or None
        asynchronous = _flag(parallelism, "tp_linear_async_communication", source)
        if asynchronous:  # the backward's reduce-scatter (or all-reduce) beside the weight-gradient GEMM
            options["overlap_tp_dgrad"] = True
        if sequence_parallel:
            if not _flag(parallelism, "tp_recompute_allgather", source, True):
                options["column_input"] = "saved"
            elif asynchronous:  # the input gathered again beside the input-gradient GEMM, not waited for
                options["column_input"] = "regather"
            if asynchronous:
                options["overlap_tp_local_shard"] = True
    if not _flag(optimizer, "accumulate_grad_in_fp32", source, True):
        options["param_bytes"] = "16"
    if _flag(_section(model, "model_config", source), "z_loss_enabled", source):  # LossWithZLoss
        options["z_loss"] = True
    spec = _nanotron_model(model, tp, options["seq_len"], source)
    return RunConfig(source, spec, schedule="1f1b" if engine == "1f1b" or pp == 1 else "gpipe", pp=pp,
                     microbatches=_positive(tokens, "batch_accumulation_per_replica", source, 1),
                     options={k: v for k, v in options.items() if v is not None})


def _nanotron_model(model: dict, tp: int, seq_len: int | None, source: str) -> ModelSpec:
    """A nanotron Llama or Qwen2 ``model_config`` (Hugging Face's field names) as a ModelSpec."""
    config = _section(model, "model_config", source)
    if config.get("moe_config"):
        raise PipesimError(f"--config {source}: a mixture-of-experts model_config is not read; use a model file")
    hidden_act = _text(config, "hidden_act", source, "silu")
    if hidden_act not in ("silu", "swiglu"):
        raise PipesimError(f"--config {source}: hidden_act {hidden_act!r}: nanotron's Llama and Qwen2 MLPs are "
                           "gated SiLU; for another model use a model file")
    layers = _positive(config, "num_hidden_layers", source, 32)
    heads = _positive(config, "num_attention_heads", source, 32)
    vocab = padded_vocab(_positive(config, "vocab_size", source, 32000),
                         _positive(model, "make_vocab_size_divisible_by", source, 1) * tp)
    return ModelSpec(
        Path(source).stem, layers, _positive(config, "hidden_size", source, 4096), heads,
        _positive(config, "intermediate_size", source, 11008), vocab,
        seq_len or _positive(config, "max_position_embeddings", source, 2048),
        kv_heads=_positive(config, "num_key_value_heads", source, heads), gated=True,
        tied_embeddings=_flag(config, "tie_word_embeddings", source), dropout=False, bias=False, rms_norm=True,
        learned_positions=False,
    )


def _toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        raise PipesimError(f"--config {path}: reading TOML needs Python 3.11 or later") from None
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise PipesimError(f"--config {path}: not valid TOML ({err})") from None


# torchtitan's Llama 3 flavours and the presets they are
# torchtitan's context_parallel_rotate_method (JobConfig.parallelism, c97876e, December 2024) as --cp-comm-type: its
# all-to-all shuffle passes each rank's K/V shard to the next, a ring
_TORCHTITAN_CP_ROTATIONS = {"allgather": "allgather", "alltoall": "p2p"}
_TORCHTITAN_LLAMA3 = {"8B": "llama3.1-8b", "70B": "llama3.1-70b", "405B": "llama3.1-405b"}
# torchtitan's schedule names (torch.distributed.pipelining) and pipesim's; the looped ones run several stages a rank
_TORCHTITAN_SCHEDULES = {"1F1B": "1f1b", "GPipe": "gpipe", "Interleaved1F1B": "interleaved", "LoopedBFS": "looped-bfs",
                         "ZBVZeroBubble": "zb-v", "DualPipeV": "dualpipe-v"}
_SINGLE_STAGE = {"1F1B", "GPipe"}


def _torchtitan(data: dict, source: str) -> RunConfig:
    model = _section(data, "model", source)
    training = _section(data, "training", source)
    parallelism = _section(data, "parallelism", source)
    checkpointing = _section(data, "activation_checkpoint", source)
    compile_ = _section(data, "compile", source)
    name, flavor = model.get("name"), str(model.get("flavor"))  # compared with strings only: any value is read
    if name != "llama3" or flavor not in _TORCHTITAN_LLAMA3:
        raise PipesimError(f"--config {source}: model {name} {flavor}: pipesim reads torchtitan's Llama 3 flavours "
                           f"({', '.join(_TORCHTITAN_LLAMA3)}); for another model use --model with flags")
    preset = _TORCHTITAN_LLAMA3[flavor]
    param_dtype = _text(training, "mixed_precision_param", source, "bfloat16")
    if param_dtype != "bfloat16":
        raise PipesimError(f"--config {source}: mixed_precision_param {param_dtype}: pipesim "
                           "models BF16 parameters in the passes")
    replicate = _positive(parallelism, "data_parallel_replicate_degree", source, 1)
    shard = parallelism.get("data_parallel_shard_degree")
    shard = -1 if shard is None else shard
    if shard != -1:
        shard = _positive(parallelism, "data_parallel_shard_degree", source)
    if replicate > 1 and shard != 1:
        raise PipesimError(f"--config {source}: HSDP (replicate {replicate} × shard {shard}) is not modelled; give "
                           "the layout as flags (--zero 3 shards over all of dp)")
    tp = _positive(parallelism, "tensor_parallel_degree", source, 1)
    pp = _positive(parallelism, "pipeline_parallel_degree", source, 1)
    local = _positive(training, "local_batch_size", source) or _positive(training, "batch_size", source, 8)
    micro = _positive(parallelism, "pipeline_parallel_microbatch_size", source, 1) if pp > 1 else local
    if local % micro:
        raise PipesimError(f"--config {source}: local_batch_size {local} is not a multiple of "
                           f"pipeline_parallel_microbatch_size {micro}")
    options: dict[str, Any] = {
        "framework": "torchtitan", "tp": tp, "cp": _positive(parallelism, "context_parallel_degree", source, 1),
        "micro_batch_size": micro, "seq_len": _positive(training, "seq_len", source, 2048),
    }
    rotate = _text(parallelism, "context_parallel_rotate_method", source, "allgather")
    if rotate not in _TORCHTITAN_CP_ROTATIONS:
        raise PipesimError(f"--config {source}: context_parallel_rotate_method {rotate!r}: give "
                           f"{' or '.join(_TORCHTITAN_CP_ROTATIONS)}")
    if options["cp"] > 1:  # the framework's default otherwise (no note on an unused one)
        options["cp_comm_type"] = _TORCHTITAN_CP_ROTATIONS[rotate]
    if (parallelism.get("expert_parallel_degree") or 1) != 1:
        raise PipesimError(f"--config {source}: expert parallelism: Llama 3 has no experts")
    dp = replicate if shard == 1 else None if shard == -1 else shard
    if dp is not None:
        options["dp"] = dp
    if replicate == 1:  # FSDP over the data-parallel ranks: ZeRO-3, or ZeRO-2's shape when never resharded
        options["zero"] = 2 if parallelism.get("fsdp_reshard_after_forward") == "never" else 3
    if tp > 1 and _flag(parallelism, "enable_async_tensor_parallel", source):
        options["async_tp"] = True
    converters = _texts(model, "converters", source, [])
    float8 = _section(data, "float8", source)
    if "float8" in converters or _flag(float8, "enable_float8_linear", source):
        options["fp8"], options["fp8_recipe"] = True, "tensorwise"
        if (_flag(float8, "enable_fsdp_float8_all_gather", source) and options.get("zero") == 3
                and options.get("dp") != 1):
            # FSDP's gathers in FP8 (over one shard there is nothing to gather)
            options["fp8_all_gather"] = True
    compiled = _texts(compile_, "components", source, ["model", "loss"]) if _flag(compile_, "enable", source) else []
    if "model" in compiled:
        options["elementwise"] = "fused"
    if "loss" in compiled:  # torch.compile(cross_entropy_loss): the FP32 cast and the loss in Inductor's kernels
        options["loss"] = "compiled"
    schedule, chunks = _torchtitan_pipeline(parallelism, pp, source)
    spec_layers = MODEL_PRESETS[preset].layers
    mode = _text(checkpointing, "mode", source, "selective")
    if mode == "full":
        options["recompute"] = "full"
    elif mode == "selective":
        option = str(checkpointing.get("selective_ac_option", "2"))
        if option == "op":
            options["recompute"] = "per-op"
        elif option.isdigit() and int(option) >= 1:
            options["recompute"] = "full"
            every = int(option)
            if every > 1:  # every n-th layer of each model part: as many as the first ceil(L/n) of each chunk
                options["recompute_layers"] = math.ceil(spec_layers / (pp * (chunks or 1)) / every)
        else:
            raise PipesimError(f"--config {source}: selective_ac_option {option!r}: give 'op' or a layer interval")
    elif mode != "none":
        raise PipesimError(f"--config {source}: activation_checkpoint mode {mode!r} is not modelled (none, "
                           "selective or full)")
    first = _count(parallelism, "pipeline_parallel_first_stage_less_layers", source, 1)
    last = _count(parallelism, "pipeline_parallel_last_stage_less_layers", source, 1)
    if pp > 1 and (first, last) != (1, 1):
        from pipesim.analytic.stage_split import effective_layer_split

        options["stage_layers"] = effective_layer_split(spec_layers, pp * (chunks or 1), first, last)
    global_batch = training.get("global_batch_size", -1)
    microbatches = None
    if global_batch in (-1, None):
        microbatches, global_batch = local // micro, None
    else:
        global_batch = _positive(training, "global_batch_size", source)
    return RunConfig(source, preset, schedule=schedule, pp=pp, microbatches=microbatches, chunks=chunks,
                     global_batch=global_batch, options=options, needs_gpus=dp is None)


def _torchtitan_pipeline(parallelism: dict, pp: int, source: str) -> tuple[str, int | None]:
    """The schedule and stages per rank torchtitan's ``pipeline_parallel.py`` builds."""
    name = _text(parallelism, "pipeline_parallel_schedule", source, "1F1B")
    if parallelism.get("pipeline_parallel_schedule_csv"):
        raise PipesimError(f"--config {source}: a schedule CSV: give it to --schedule instead")
    if pp == 1:
        return "1f1b", None
    if name not in _TORCHTITAN_SCHEDULES:
        raise PipesimError(f"--config {source}: pipeline_parallel_schedule {name!r} has no pipesim equivalent; use "
                           f"one of {', '.join(_TORCHTITAN_SCHEDULES)} or --schedule")
    per_stage = parallelism.get("pipeline_parallel_layers_per_stage")
    if per_stage is None:
        return _TORCHTITAN_SCHEDULES[name], None if name in _SINGLE_STAGE else 2
    raise PipesimError(f"--config {source}: pipeline_parallel_layers_per_stage is not read; give --chunks and "
                       "--stage-layers")
