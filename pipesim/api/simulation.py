"""``pipesim.simulate``: one training step of a schedule, on abstract costs or a real model on a real chip."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pipesim.api.defaults import DEFAULT_PP, default_schedule
from pipesim.api.model_options import ModelOptions, check_no_model_options
from pipesim.api.results import SimResult
from pipesim.api.unit_costs import memory_limit_units, planned_shape, unit_cost_model
from pipesim.errors import PipesimError, ScheduleError
from pipesim.program.build import build_program
from pipesim.program.limits import check_microbatch_group
from pipesim.program.loader import load_schedule
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import Engine
from pipesim.sim.simulator import simulate as run_simulation

if TYPE_CHECKING:
    from pipesim.analytic.chip_spec import ChipSpec
    from pipesim.analytic.model_spec import ModelSpec

__all__ = ["simulate"]

_COST_ARGS = ("costs", "forward", "backward", "backward_input", "backward_weight", "comm", "activation_bytes")


def _check_named_inputs(schedule: object, model: object, hardware: object, config: object) -> None:
    """The arguments that name a thing (a schedule, a model, a chip, a config file) are names, paths or the thing:
    a number there (a runs file's ``model: 7``) is named in one line, not an internal error further in. (The
    model's and chip's classes load only for a value that is neither a name nor a path: a run on unit costs loads
    no model.)"""
    named = (("schedule", schedule, "a schedule's name, file or Program text"),
             ("model", model, "a preset's name, a model file or a ModelSpec"),
             ("hardware", hardware, "a preset's name, a chip file or a ChipSpec"),
             ("config", config, "a run config file's path"))
    for name, value, what in named:
        if value is None or isinstance(value, str | Path) or _is_spec(name, value):
            continue
        raise PipesimError(f"simulate(): {name}={value!r} must be {what}")


def _is_spec(name: str, value: object) -> bool:
    """Whether ``value`` is the object ``name`` may be given as beside its name: a ModelSpec, a ChipSpec."""
    if name == "model":
        from pipesim.analytic.model_spec import ModelSpec

        return isinstance(value, ModelSpec)
    if name == "hardware":
        from pipesim.analytic.chip_spec import ChipSpec

        return isinstance(value, ChipSpec)
    return False


def simulate(
    schedule: str | Path | None = None,
    pp: int | None = None,
    mb: int | None = None,
    chunks: int | None = None,
    *,
    costs: str | Path | CostModel | None = None,
    forward: float | None = None,
    backward: float | None = None,
    backward_input: float | None = None,
    backward_weight: float | None = None,
    comm: float | None = None,
    activation_bytes: float | None = None,
    stage_cost: Mapping[int, Mapping[str, float]] | Iterable[tuple[int, Mapping[str, float]]] = (),
    model: str | ModelSpec | None = None,
    hardware: str | ChipSpec | None = None,
    memory_limit: float | None = None,
    engine: str | Engine = Engine.AUTO,
    global_batch: int | None = None,
    microbatch_group: int | None = None,
    config: str | Path | None = None,
    **model_options: object,
) -> SimResult:
    """Simulate one training step of ``schedule`` (what ``pipesim simulate`` prints, as an object).

    Either abstract costs (``costs`` file or model, ``forward``/``backward``/... values; default F=1, B=2,
    I=W=1 cost units) or a real model on a chip (``model`` and ``hardware``: costs in seconds from FLOPs and
    bytes), not both.

    Args:
        schedule: a built-in name (:func:`pipesim.schedules`), a schedule ``.py`` file, a PyTorch action
            ``.csv`` or Program text (default: ``1f1b``, or ``interleaved`` where ``chunks`` or the model option
            ``num_layers_per_virtual_pipeline_stage`` asks for several chunks per rank, as Megatron-LM
            interleaves them).
        pp: pipeline ranks (default 4; a .csv or Program text fixes it).
        mb: microbatches per step (default 8; a .csv or Program text fixes it).
        chunks: model chunks per rank, v (default: the schedule's own, 2 for interleaved).
        costs: a costs file (.json/.yaml) or a :class:`~pipesim.sim.costs.CostModel`; the values below
            override its defaults.
        forward: the forward time F of a stage, per microbatch through one rank's share of the model (each of
            v chunks takes 1/v; default 1).
        backward: the fused backward time B (default 2).
        backward_input: the split backward's input-gradient time I (default 1).
        backward_weight: the split backward's weight-gradient time W (default 1).
        comm: P2P latency per transfer (default 0).
        activation_bytes: bytes of one microbatch's activations through a rank's share (adds byte peaks).
        stage_cost: per-stage overrides, ``{stage: {field: value}}``.
        model: a model preset (:func:`pipesim.models`), a .yaml/.json file, or a ``ModelSpec``.
        hardware: a chip preset, file or ``ChipSpec`` (default h100-sxm); only with ``model``.
        memory_limit: activation memory per rank for schedules that synthesise their order (zb-auto), in
            microbatch units (GiB of activations with ``model``; default 2·pp units).
        engine: ``"auto"`` (default), ``"graph"`` or ``"simpy"``: all give the same timeline.
        global_batch: with ``model``, sequences per optimizer step, as recipes state it: ``mb`` becomes
            ``global_batch / (micro_batch_size · dp)`` (``mb`` given too must agree).
        config: a training framework's run configuration file (nanotron's YAML, torchtitan's TOML:
            :mod:`pipesim.io.run_config`): its model, layout, schedule and batch, under its framework; the
            arguments given here win over what it states.
        microbatch_group: Megatron-LM's ``--microbatch-group-size-per-virtual-pipeline-stage`` as a launch line
            states it, for the interleaved schedule: it must be the group pipesim runs
            (:func:`~pipesim.program.limits.interleaved_microbatch_group`).
        **model_options: with ``model`` only, the fields of :class:`~pipesim.api.model_options.ModelOptions`
            (``tp``, ``dp``, ``cp``, ``zero``, ``recompute``, ``sequence_parallel``, ``fp8``, ...).

    Returns:
        A :class:`~pipesim.api.results.SimResult`.

    Raises:
        PipesimError: bad input, named in one line.
    """
    _check_named_inputs(schedule, model, hardware, config)
    if isinstance(schedule, Path):  # a schedule file given as a path
        schedule = str(schedule)
    if config is not None:
        model, schedule, pp, mb, chunks, global_batch, model_options = _with_config(
            config, model, schedule, pp, mb, chunks, global_batch, model_options)
    options = ModelOptions.from_keywords("simulate", model_options)
    engine = Engine(engine)
    if options.num_layers_per_virtual_pipeline_stage is not None and model is not None and chunks is None:
        chunks = _chunks_of_layers_per_chunk(model, options, pp)  # model_setup checks a --chunks given beside it
    if options.pipeline_model_parallel_layout is not None and chunks is None:
        from pipesim.analytic.pipeline_layout import parse_pipeline_layout

        chunks = parse_pipeline_layout(options.pipeline_model_parallel_layout).chunks(
            pp if pp is not None else DEFAULT_PP)
    if schedule is None:
        schedule = default_schedule(chunks)
    pipeline_ranks = pp if pp is not None else DEFAULT_PP  # what a built-in schedule runs on; a file may fix its own
    if global_batch is not None:
        if model is None:
            raise PipesimError("--global-batch counts sequences of a real model; add --model NAME, or give --mb "
                               "(microbatches per step) for unit costs")
        from pipesim.api.model_setup import microbatches_of_global_batch

        mb = microbatches_of_global_batch(global_batch, model, options, mb, pipeline_ranks)
    values = dict(forward=forward, backward=backward, backward_input=backward_input,
                  backward_weight=backward_weight, comm=comm, activation_bytes=activation_bytes)
    def costs_for(shape):
        # Checked where the shape is known, as the command always has (the order its errors come in).
        if model is None:
            check_no_model_options(options, hardware)
        else:
            clash = [f"--{k.replace('_', '-')}" for k in _COST_ARGS
                     if (costs if k == "costs" else values[k]) is not None]
            if clash or stage_cost:
                flag = clash[0] if clash else "--stage-cost"
                raise PipesimError(f"{flag} sets unit costs, but --model derives the costs from FLOPs and bytes; "
                                   "drop one")
        setup = None
        if options.gpus is not None and shape.pp != pipeline_ranks:
            raise PipesimError(f"--gpus {options.gpus}: the schedule fixes pp = {shape.pp}, not the {pipeline_ranks} "
                               f"the GPUs were divided by; add --pp {shape.pp}")
        if model is not None:  # the analytic model loads only for a model-based run
            from pipesim.api.model_setup import model_setup

            setup = model_setup(model, hardware, options, shape)
        cost_model = setup.costs if setup else unit_cost_model(shape.num_slices, costs, stage_cost=stage_cost,
                                                               **values)
        return setup, cost_model

    if model is not None and options.framework is not None and isinstance(schedule, str):
        from pipesim.analytic.frameworks import knobs
        from pipesim.program.loader import builtin_names

        if schedule in builtin_names():  # a file or Program text is the user's own order
            knobs(options.framework).check_schedule(schedule, options.framework)
    if model is not None and isinstance(schedule, str):
        options = options.for_schedule(schedule, pipeline_ranks)  # unasked, the sends as the framework runs them
    source = load_schedule(schedule)
    try:
        built, setup, cost_model, limit = _built(schedule, source, pp, mb, chunks, memory_limit, costs_for)
    except ScheduleError as err:
        if global_batch is None or "--mb" not in str(err):
            raise
        # The user gave a batch, not --mb: say which --mb it came to, or the fix reads as a flag they never set.
        raise ScheduleError(f"{err} (--global-batch {global_batch} gives --mb {mb}; raise --global-batch or lower "
                            "--dp or --micro-batch-size)") from None
    if microbatch_group is not None:
        shape = built.program.shape
        if schedule != "interleaved":
            raise PipesimError("--microbatch-group-size-per-virtual-pipeline-stage groups the interleaved schedule's "
                               f"microbatches, not {schedule}'s; drop it or use --schedule interleaved")
        check_microbatch_group(shape.pp, shape.microbatches, microbatch_group)
    raw = run_simulation(built.program, cost_model, check=False, engine=engine)
    if not (math.isfinite(raw.metrics.makespan) and math.isfinite(raw.metrics.ideal)):
        raise PipesimError("the costs overflow: the makespan is not a finite number; use smaller costs")
    shape = built.program.shape
    analytic = built.source.analytic(shape.pp, shape.microbatches, shape.chunks, cost_model.default)
    return SimResult(built, raw, analytic, setup, limit)


def _with_config(config, model, schedule, pp, mb, chunks, global_batch, model_options: dict) -> tuple:
    """simulate()'s arguments with what a run's configuration file states (:mod:`pipesim.io.run_config`) where
    they were not given: the model always (``model`` given too is refused), each argument and option given wins."""
    if model is not None:
        raise PipesimError(f"--config {config} states its model; drop --model")
    from pipesim.io.run_config import load_run_config

    stated = load_run_config(config)
    if mb is None and global_batch is None:
        mb, global_batch = stated.microbatches, stated.global_batch
    options = {**stated.options, **{k: v for k, v in model_options.items() if v is not None}}
    if stated.needs_gpus and options.get("dp") is None and options.get("gpus") is None:
        raise PipesimError(f"--config {config} leaves the data-parallel degree to the GPUs the run has "
                           "(data_parallel_shard_degree = -1); add --gpus N (or --dp)")
    return (stated.model, schedule or stated.schedule, pp if pp is not None else stated.pp, mb,
            chunks if chunks is not None else stated.chunks, global_batch, options)


def _chunks_of_layers_per_chunk(model, options: ModelOptions, pp: int | None) -> int:
    """Chunks per rank from Megatron-LM's ``--num-layers-per-virtual-pipeline-stage``."""
    from pipesim.analytic.model_load import load_model
    from pipesim.analytic.stage_split import chunks_of_layers_per_chunk

    spec = load_model(model, options.seq_len) if isinstance(model, str) else model
    split = options.stage_split()
    return chunks_of_layers_per_chunk(spec.layers, pp if pp is not None else DEFAULT_PP,
                                      options.num_layers_per_virtual_pipeline_stage, split.embedding_as_layer,
                                      split.loss_as_layer)


def _built(schedule, source, pp, mb, chunks, memory_limit, costs_for):
    """The Program, its setup and costs, and the memory limit in activation units: a cost-aware schedule
    (zb-auto) is built for its costs, on the shape the build will have; any other is built first."""
    if source.build_options:
        shape = planned_shape(source, pp, mb, chunks)
        setup, cost_model = costs_for(shape)
        limit = memory_limit_units(memory_limit, cost_model, shape, setup is not None)
        built = build_program(schedule, pp, mb, chunks, semantics=None,  # the run proves progress
                              costs=cost_model, memory_limit=limit)
        return built, setup, cost_model, limit
    built = build_program(schedule, pp, mb, chunks, semantics=None,
                          memory_limit=memory_limit)  # a limit here is an error naming zb-auto
    setup, cost_model = costs_for(built.program.shape)
    return built, setup, cost_model, None
