"""Cost model: how long each instruction takes on each stage, and what each microbatch costs in memory.

One convention for every schedule (the CLI, sweeps, figures and costs files): a stage's ``forward``,
``backward`` (``I``, ``W``), ``reduce_grad`` and ``activation`` are those of **one microbatch through one
rank's share of the model**. A schedule with v chunks per rank splits that share into v stages, so each chunk
takes 1/v of it (:meth:`CostModel.chunk_costs`): with the same F and B, 1F1B and interleaved do the same
work, and their makespans and peak memories compare directly (Narayanan et al. 2021, §2.2.2, count the
interleaved schedule's forward per chunk as t_f/v in the same way).

Defaults are unit costs (F=1, B=2; split backward I=1, W=1; communication 0). Stages can be overridden one
by one (an embedding on the first stage, the LM head on the last). The same object is read from and written
to a costs file (JSON or YAML), which calibration and the analytic model also produce.

The costs-file schema (every key optional; anything else is refused, naming the key)::

    time_unit: unit | s          # 'unit' for abstract costs (default), 's' for seconds
    convention: "per microbatch through one rank's share of the model; a chunk of v takes 1/v"  # if given
    num_stages: 4                # pp·v the values were calibrated on (integer ≥ 1), or null
    chunks: 2                    # with num_stages: the v of that pipeline (integer ≥ 1), or null
    p2p_latency: 0               # time per P2P transfer
    p2p_bandwidth: null          # bytes per time unit, > 0; null: bytes cost nothing
    optimizer_step: 0            # time of the optimizer step
    default: {forward: 1, backward: 2, backward_input: 1, backward_weight: 1, reduce_grad: 0,
              reduce_grad_async: 0,  # gradient sync run beside later work, waited for at STEP
              activation: 1, weight_grad_activation: 0.5, activation_bytes: null, p2p_bytes: 0,
              p2p_bandwidth: null,   # a boundary's own bandwidth (> 0) when it differs (crosses nodes)
              a2a_forward: 0, a2a_backward: 0,  # expert all-to-all inside forward / backward (≤ them)
              overlap_slowdown: 0,   # compute slowdown inside an overlapped pair, a fraction in [0, 1]
              held_to_step_end: 0}   # bytes each backward (B or I) leaves allocated until the step ends
    stages: {0: {forward: 1.5}}  # stage index (integer ≥ 0) → fields of 'default' to override

Every value is a number (booleans are refused), 0 or within ``COST_RANGE`` = [1e-12, 1e15];
``weight_grad_activation ≤ activation`` on every stage (M_W is part of M_B), ``a2a_forward ≤ forward`` and
``a2a_backward ≤ backward``. An overlapped F-and-B pair lasts :func:`pair_duration`.
"""

from __future__ import annotations

import enum
import json
import numbers
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from pipesim.errors import PipesimError, naming
from pipesim.program.ir import Op


class TimeUnit(str, enum.Enum):
    """The unit of every duration in a cost model (and of the timelines simulated from it).

    A ``str`` enum, so it reads and writes as its value in costs files, JSON summaries and labels.
    """

    UNIT = "unit"  # abstract cost units (the defaults F=1, B=2)
    SECONDS = "s"  # calibrated from measurements or derived from a model and a chip

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def parse(cls, value: object, source: str = "costs") -> TimeUnit:
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(repr(u.value) for u in cls)
            raise PipesimError(f"{source}: time_unit {value!r} is not one of {allowed}") from None


@dataclass(frozen=True)
class StageCosts:
    """Durations (in the model's time unit) and memory of one stage, per microbatch, as if the stage were a
    rank's whole share of the model (see the module docstring: a chunk of v takes 1/v of each).

    Memory follows Qi et al. 2024 (Zero Bubble): ``F`` stores ``activation`` (M_B); a fused ``B`` frees it
    all; a split backward's ``I`` frees ``activation − weight_grad_activation`` and ``W`` frees the
    ``weight_grad_activation`` (M_W) it kept for the weight gradient.
    """

    forward: float = 1.0
    backward: float = 2.0
    backward_input: float = 1.0
    backward_weight: float = 1.0
    reduce_grad: float = 0.0  # DP gradient sync of this stage's weights (0 when dp = 1): the rank is busy for it
    # The part of the gradient sync that runs after the REDUCE_GRAD row on the rank's data-parallel channel, beside
    # whatever the rank computes next (an asynchronous collective: Megatron-Core's DDP with overlap_grad_reduce
    # launches a chunk's reduce once its last backward is done and waits for all of them before the optimizer;
    # the executor's REDUCE_GRAD does the same). The chunks' reduces queue on one channel in the order issued,
    # and STEP starts once the rank's channel is free.
    reduce_grad_async: float = 0.0
    activation: float = 1.0  # M_B, in units of one microbatch through one rank's share of the model
    weight_grad_activation: float = 0.5  # M_W ≤ M_B
    activation_bytes: float | None = None  # bytes that one unit of `activation` stands for
    p2p_bytes: float = 0.0  # bytes of the activation (and gradient) crossing this stage's output boundary
    p2p_bandwidth: float | None = None  # this boundary's bandwidth when it differs (crosses nodes); None: the model's
    # Expert-parallel all-to-all (MoE dispatch + combine) per microbatch through the rank's share, INCLUDED in
    # forward / backward (and in backward_input: the all-to-all is on the input-gradient path). Sequential
    # instructions just take forward/backward; an overlapped pair hides one half's all-to-all behind the other
    # half's compute (pair_duration).
    a2a_forward: float = 0.0
    a2a_backward: float = 0.0
    # Fraction by which compute slows while an overlapped pair runs, from the SMs its communication kernels
    # take (DeepSeek-V3 §3.2.1 reserves 20 of the H800's 132 SMs for communication: about 0.15 when compute is
    # SM-bound). Applies to the compute of a whole pair; sequential instructions do not pay it.
    overlap_slowdown: float = 0.0
    # Bytes each backward of this stage (its B, or its I when split) leaves allocated until the step ends, beyond
    # the activations it frees: what a pipeline runtime holds of the tensors it sent and has not yet waited for
    # (torch.distributed.pipelining's multi-stage runtime: the stage's output and the input gradient), or of the
    # outputs it returns from the step. Bytes per backward, not a rank's share: a chunk holds all of it.
    held_to_step_end: float = 0.0

    def duration(self, op: Op) -> float:
        return _DURATION_FIELD[op](self)


_DURATION_FIELD = {
    Op.F: lambda c: c.forward,
    Op.B: lambda c: c.backward,
    Op.I: lambda c: c.backward_input,
    Op.W: lambda c: c.backward_weight,
    Op.REDUCE_GRAD: lambda c: c.reduce_grad,
}
_STAGE_FIELDS = {f.name for f in fields(StageCosts)}
# What a chunk of v holds 1/v of: its compute, its share of the gradient sync and its activations. Bytes per
# activation unit and the boundary tensor crossing to the next stage do not shrink with v.
_PER_RANK_SHARE = (
    "forward",
    "backward",
    "backward_input",
    "backward_weight",
    "reduce_grad",
    "reduce_grad_async",
    "activation",
    "weight_grad_activation",
    "a2a_forward",
    "a2a_backward",
)


def pair_duration(forward: StageCosts, backward: StageCosts, backward_op: Op = Op.B) -> float:
    """Duration of an overlapped pair: ``forward``'s F together with ``backward``'s B (or I).

    DeepSeek-V3 (2024), §3.2.1 and Figure 4: each chunk of the pair is split into attention, all-to-all
    dispatch, MLP and all-to-all combine, and the two chunks' pieces are interleaved so that one half's
    communication runs while the other half computes. With ``c_f = F − a2a_f`` and ``c_b = B − a2a_b`` the
    compute of each half, and ``s`` the overlap slowdown (the larger of the two stages'),

        pair = (c_f + c_b)·(1 + s) + max(0, a2a_f − c_b) + max(0, a2a_b − c_f)

    — all compute, slowed by the SMs communication holds, plus whatever part of each half's all-to-all the
    other half's compute cannot cover. With no all-to-all and no slowdown it is exactly F + B, the two run
    one after the other. For an I the all-to-all is capped at the I's own duration.
    """
    total_b = backward.duration(backward_op)
    a2a_f = min(forward.a2a_forward, forward.forward)
    a2a_b = min(backward.a2a_backward, total_b)
    compute_f = forward.forward - a2a_f
    compute_b = total_b - a2a_b
    slowdown = max(forward.overlap_slowdown, backward.overlap_slowdown)
    return (compute_f + compute_b) * (1.0 + slowdown) + max(0.0, a2a_f - compute_b) + max(0.0, a2a_b - compute_f)


def _chunk_share(costs: StageCosts, chunks: int) -> StageCosts:
    """One chunk-stage's values when a rank holds ``chunks`` of them: 1/v of the per-rank share."""
    return replace(costs, **{name: getattr(costs, name) / chunks for name in _PER_RANK_SHARE})


ACTIVATION_UNIT = "microbatches through one rank's share of the model"
COST_CONVENTION = "per microbatch through one rank's share of the model; a chunk of v takes 1/v"
# None allowed: memory is reported in activation units only; the boundary uses the model's p2p_bandwidth.
_OPTIONAL_FIELDS = {"activation_bytes", "p2p_bandwidth"}
_TOP_KEYS = (
    "time_unit",
    "convention",
    "num_stages",
    "chunks",
    "p2p_latency",
    "p2p_bandwidth",
    "optimizer_step",
    "default",
    "stages",
)
TIME_UNITS = tuple(unit.value for unit in TimeUnit)
# Every duration, byte count, memory amount and bandwidth of a costs file is 0 or inside this range: wide enough
# for picoseconds to hours and for bytes up to a petabyte, narrow enough that sums over any Program pipesim can
# build stay finite and their ratios (bubble, MFU) are numbers.
COST_RANGE = (1e-12, 1e15)


@dataclass(frozen=True)
class CostModel:
    """Per-stage costs (a default plus overrides) and the communication model.

    A transfer across a stage boundary takes ``p2p_latency + p2p_bytes / p2p_bandwidth`` and holds its
    directed link for that long, so transfers on one link serialize.
    """

    default: StageCosts = StageCosts()
    overrides: dict[int, dict[str, float]] = field(default_factory=dict)
    p2p_latency: float = 0.0
    p2p_bandwidth: float | None = None  # bytes per time unit; None means bytes cost nothing
    optimizer_step: float = 0.0
    time_unit: TimeUnit = TimeUnit.UNIT  # a plain "unit"/"s" string is accepted and converted
    # pp·v of the pipeline the per-stage values were measured on (calibration), or None when they do not
    # depend on it; a costs file for 4 stages cannot describe a 2-stage pipeline.
    num_stages: int | None = None
    # With num_stages: the chunks per rank v of the pipeline measured on. Its pp·v stages are the same slices of
    # the model on any pp×v with that product, so a stage takes value / (this v) whatever v it is reused with
    # (chunk_costs); None: a stage of a v-chunk schedule takes value / v, the convention's 1/v.
    chunks: int | None = None

    def __post_init__(self) -> None:
        # A TimeUnit or its value; anything else is refused by TimeUnit.parse with the allowed values.
        object.__setattr__(self, "time_unit", TimeUnit.parse(self.time_unit))
        _check_costs(self)
        if self.chunks is not None and (self.num_stages is None or self.num_stages % self.chunks):
            raise PipesimError(
                f"chunks={self.chunks} is the v of the pipeline the costs were calibrated on: it "
                f"needs num_stages (its pp·v, a multiple of {self.chunks}); got {self.num_stages}"
            )

    def stage(self, stage: int) -> StageCosts:
        """The values of ``stage`` as written (per rank's share of the model)."""
        values = self.overrides.get(stage)
        if not values:
            return self.default
        # Kept beside the fields (not in __eq__), as the chunk shares below: the planner's bounds and the
        # simulator's durations ask for every stage, and `replace` costs more than their arithmetic. The
        # overrides are never changed after construction (with_overrides makes a new model).
        made = self.__dict__.setdefault("_stages", {})
        costs = made.get(stage)
        if costs is None:
            costs = made[stage] = replace(self.default, **values)
        return costs

    def chunk_costs(self, stage: int, chunks: int) -> StageCosts:
        """What one chunk-stage of a schedule with ``chunks`` chunks per rank costs: 1/v of the rank's share.

        For values calibrated on a pipeline of ``num_stages`` stages with ``self.chunks`` chunks per rank, the
        v they were multiplied by is the recorded one: a stage is the same slice of the model on every pp×v
        of that product (``check_pipeline``), so it takes what was measured, whatever ``chunks`` is now.
        """
        if self.chunks is not None:
            chunks = self.chunks
        if chunks == 1:
            return self.stage(stage)
        if stage in self.overrides:
            shares = self.__dict__.setdefault("_stage_chunk_shares", {})
            share = shares.get((stage, chunks))
            if share is None:
                share = shares[stage, chunks] = _chunk_share(self.stage(stage), chunks)
            return share
        # Every stage without overrides shares one value: kept beside the fields (not in __eq__), since a
        # sweep asks for it per stage, twice per point, and `replace` re-validates each time.
        shares = self.__dict__.setdefault("_default_chunk_shares", {})
        share = shares.get(chunks)
        if share is None:
            share = shares[chunks] = _chunk_share(self.default, chunks)
        return share

    def shape_costs(self, shape) -> list[StageCosts]:
        """What each stage of ``shape`` (a :class:`~pipesim.program.ir.PipelineShape`) costs: the chunk share of
        the model slice it runs. Under the dual placement stage pp+s is a copy of slice s and, since each
        microbatch passes one chunk per rank, takes a whole rank's share (``shape.chunk_share`` is 1)."""
        return [self.chunk_costs(shape.slice_of(s), shape.chunk_share) for s in range(shape.num_stages)]

    def shape_transfer_times(self, shape) -> list[float]:
        """:meth:`transfer_time` of each stage of ``shape`` (of the model slice it runs)."""
        return [self.transfer_time(shape.slice_of(s)) for s in range(shape.num_stages)]

    def check_pipeline(self, num_stages: int, source: str = "the cost model") -> None:
        """Refuse per-stage values that cannot describe a pipeline of ``num_stages`` = pp·v stages."""
        if self.num_stages is not None and self.num_stages != num_stages:
            raise PipesimError(
                f"{source} was calibrated on a pipeline of {self.num_stages} stages (pp·v), but this one has "
                f"{num_stages}: simulate with --pp and --chunks whose product is {self.num_stages}, or calibrate "
                f"a run with {num_stages} stages"
            )
        beyond = sorted(s for s in self.overrides if s >= num_stages)
        if beyond:
            raise PipesimError(
                f"{source} sets costs for stage {beyond[0]}, but this pipeline has stages 0..{num_stages - 1} "
                "(pp·v of them): use a pipeline with more stages, or remove that stage from the costs"
            )

    def transfer_time(self, stage: int) -> float:
        """Duration of sending the boundary tensor of ``stage`` (its output, or its input gradient)."""
        costs = self.stage(stage)
        bandwidth = costs.p2p_bandwidth or self.p2p_bandwidth
        bandwidth_term = costs.p2p_bytes / bandwidth if bandwidth else 0.0
        return self.p2p_latency + bandwidth_term

    def is_uniform(self) -> bool:
        """True when every stage costs the same and communication is free: where closed forms hold."""
        return not self.overrides and self.p2p_latency == 0 and (self.default.p2p_bytes == 0 or not self.p2p_bandwidth)

    def with_overrides(self, overrides: dict[int, dict[str, float]], source: str = "cost override") -> CostModel:
        """These per-stage values on top of the current ones; ``source`` names where they came from in errors."""
        merged = {s: dict(v) for s, v in self.overrides.items()}
        for stage, values in overrides.items():
            merged.setdefault(stage, {}).update(values)
        with naming(source):
            return replace(self, overrides=merged)

    # --- files ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "time_unit": self.time_unit.value,
            "p2p_latency": self.p2p_latency,
            "p2p_bandwidth": self.p2p_bandwidth,
            "optimizer_step": self.optimizer_step,
            "convention": COST_CONVENTION,
            **({"num_stages": self.num_stages} if self.num_stages is not None else {}),
            **({"chunks": self.chunks} if self.chunks is not None else {}),
            "default": asdict(self.default),
            "stages": {str(s): dict(v) for s, v in sorted(self.overrides.items())},
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "costs") -> CostModel:
        """Read the costs-file schema (module docstring): every key, type and range checked, errors name the key."""
        if not isinstance(data, dict):
            raise PipesimError(
                f"{source}: expected a mapping of key: value at the top level, e.g. default: {{forward: 1.0}}"
            )
        unknown = [k for k in data if k not in _TOP_KEYS]
        if unknown:
            raise PipesimError(f"{source}: unknown key {unknown[0]!r}; allowed: {', '.join(_TOP_KEYS)}")
        default = _stage_fields(data.get("default"), source, "default")
        stages = data.get("stages")
        if stages is None:
            stages = {}
        if not isinstance(stages, dict):
            raise PipesimError(
                f"{source}: 'stages' must map a stage index to its fields, e.g. stages: "
                f"{{0: {{forward: 1.5}}}}, not {type(stages).__name__} {_short(stages)}"
            )
        overrides = {
            _stage_index(key, source): _stage_fields(values, source, f"stages.{key}") for key, values in stages.items()
        }
        time_unit = data.get("time_unit", "unit")
        if time_unit not in TIME_UNITS:
            raise PipesimError(
                f"{source}: time_unit={_short(time_unit)} must be one of {', '.join(TIME_UNITS)} "
                "('unit' for abstract costs, 's' for seconds)"
            )
        convention = data.get("convention", COST_CONVENTION)
        if convention != COST_CONVENTION:
            raise PipesimError(
                f"{source}: convention={_short(convention)} is not how pipesim reads costs "
                f"({COST_CONVENTION!r}); convert the values, or drop the key if they already are"
            )
        bandwidth = data.get("p2p_bandwidth")
        with naming(source):
            model = cls(
                default=StageCosts(**default),
                overrides=overrides,
                p2p_latency=_number(data.get("p2p_latency", 0.0), source, "p2p_latency"),
                p2p_bandwidth=None if bandwidth is None else _number(bandwidth, source, "p2p_bandwidth"),
                optimizer_step=_number(data.get("optimizer_step", 0.0), source, "optimizer_step"),
                time_unit=TimeUnit(time_unit),
                num_stages=_stage_count(data.get("num_stages"), source),
                chunks=_stage_count(data.get("chunks"), source, "chunks"),
            )
            _check_costs(model, user_input=True)
        return model

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        from pipesim.io.spec_files import read_mapping

        path = Path(path)
        if not path.exists():
            raise PipesimError(f"costs file {path} does not exist; write one with 'pipesim calibrate' or by hand")
        return cls.from_dict(read_mapping(path, "costs"), source=f"costs file {path}")

    def save(self, path: str | Path) -> None:
        from pipesim.io.atomic import write_text_atomic

        path = Path(path)
        data = self.to_dict()
        is_yaml = path.suffix.lower() in (".yaml", ".yml")
        if is_yaml:
            import yaml  # only to write a costs file as YAML

            text = yaml.safe_dump(data, sort_keys=False)
        else:
            text = json.dumps(data, indent=2)
        write_text_atomic(path, text + ("" if text.endswith("\n") else "\n"))


def _check_costs(model: CostModel, *, user_input: bool = False) -> None:
    """Every value of the schema, type and range: a negative cost makes time run backwards, an absurd one makes
    sums overflow to inf (and ratios to NaN), a zero bandwidth makes a transfer take forever.

    ``user_input`` adds the lower end of ``COST_RANGE`` (a file or flag giving 1e-320 is a typo whose ratios
    overflow); values computed inside pipesim only need to be finite, ≥ 0 and at most its upper end.
    """

    def check(name: str, value: object, zero_ok: bool = True) -> None:
        _check_range(name, value, zero_ok=zero_ok, tiny_ok=not user_input)

    check("p2p_latency", model.p2p_latency)
    check("optimizer_step", model.optimizer_step)
    if model.p2p_bandwidth is not None:
        check("p2p_bandwidth", model.p2p_bandwidth, zero_ok=False)
    # StageCosts holds scalars only: a shallow copy of its fields is what asdict's deep copy gives, at a
    # fraction of the cost (every CostModel is checked, and the planner makes tens of thousands).
    default = dict(vars(model.default))
    stages = [("default", default)]
    for stage, values in model.overrides.items():
        if isinstance(stage, bool) or not isinstance(stage, numbers.Integral) or stage < 0:
            raise PipesimError(f"stage {stage!r} must be a stage index, an integer ≥ 0")
        if not isinstance(values, dict):
            raise PipesimError(f"stages.{stage} must map fields to values, e.g. {{forward: 1.5}}")
        unknown = [k for k in values if k not in _STAGE_FIELDS]
        if unknown:
            raise PipesimError(
                f"stage {stage} override has unknown field {unknown[0]!r}; use {', '.join(sorted(_STAGE_FIELDS))}"
            )
        stages.append((f"stages.{stage}", {**default, **values}))
    for where, values in stages:
        for key, value in values.items():
            if value is None and key in _OPTIONAL_FIELDS:
                continue
            check(f"{where}.{key}", value, zero_ok=key != "p2p_bandwidth")
        for part, whole in (("a2a_forward", "forward"), ("a2a_backward", "backward")):
            if values[part] > values[whole] * (1 + 1e-9):  # to_costs' sums may round a hair above
                raise PipesimError(
                    f"{where}: {part}={values[part]:g} exceeds {whole}={values[whole]:g}; the "
                    f"all-to-all time is included in {whole}, so it is at most {whole}"
                )
        if values["overlap_slowdown"] > 1:
            raise PipesimError(
                f"{where}: overlap_slowdown={values['overlap_slowdown']:g} must be a fraction in "
                "[0, 1] (0.15: compute runs 15% slower beside the all-to-all)"
            )
        if values["weight_grad_activation"] > values["activation"]:
            raise PipesimError(
                f"{where}: weight_grad_activation={values['weight_grad_activation']:g} exceeds activation="
                f"{values['activation']:g}; M_W is the part of M_B kept for W, so it is at most activation"
            )


def in_cost_range(value: float) -> bool:
    """0, or a number in ``COST_RANGE`` (false for NaN and ±inf): what files and flags may give."""
    return value == 0 or COST_RANGE[0] <= value <= COST_RANGE[1]


def _check_range(name: str, value: object, *, zero_ok: bool, tiny_ok: bool) -> None:
    low, high = COST_RANGE
    # The usual case, a computed float in range, without the numbers.Real check below (an ABC isinstance):
    # every cost model the planner builds checks about a hundred of them. NaN fails the comparison and
    # takes the full path, as anything else does.
    if type(value) is float and tiny_ok and 0.0 <= value <= high and (zero_ok or value != 0.0):
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PipesimError(f"{name}={_short(value)} must be a number")
    fits = 0 <= value <= high if tiny_ok else in_cost_range(value)
    if not fits or (value == 0 and not zero_ok):
        rule = f"a number in [{low:g}, {high:g}]" if not zero_ok else f"0 or a number in [{low:g}, {high:g}]"
        fix = "; omit it (or null) for transfers whose bytes cost nothing" if name.endswith("p2p_bandwidth") else ""
        raise PipesimError(f"{name}={value!r} must be {rule}{fix}")


def _number(value: object, source: str, name: str) -> float:
    """A number of the file as a float; YAML and JSON booleans are refused, not read as 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PipesimError(f"{source}: {name}={_short(value)} must be a number")
    return float(value)


def _stage_fields(values: object, source: str, where: str) -> dict[str, float | None]:
    """The fields of ``default`` or of one stage override, as floats (None kept for the optional ones)."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise PipesimError(
            f"{source}: '{where}' must map fields to values, e.g. {{forward: 1.0, backward: 2.0}}, "
            f"not {type(values).__name__} {_short(values)}"
        )
    fields_read: dict[str, float | None] = {}
    for key, value in values.items():
        if key not in _STAGE_FIELDS:
            raise PipesimError(f"{source}: unknown field {key!r} in '{where}'; use {', '.join(sorted(_STAGE_FIELDS))}")
        fields_read[key] = (
            None if value is None and key in _OPTIONAL_FIELDS else _number(value, source, f"{where}.{key}")
        )
    return fields_read


def _stage_count(value: object, source: str, key: str = "num_stages") -> int | None:
    """``num_stages`` (``chunks``): null, or the pp·v (the v) an integer ≥ 1, the values were calibrated on."""
    if value is None:
        return None
    what = "pp·v" if key == "num_stages" else "chunks per rank v"
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**6:
        raise PipesimError(f"{source}: {key}={_short(value)} must be the pipeline's {what}, an integer ≥ 1, or null")
    return value


def _stage_index(key: object, source: str) -> int:
    """A stage key: an integer ≥ 0, or its decimal text (JSON keys are always strings)."""
    text = key.strip() if isinstance(key, str) else None
    if isinstance(key, int) and not isinstance(key, bool):
        index = key
    elif text is not None and text.isdigit() and len(text) < 10:
        index = int(text)
    else:
        index = -1
    if index < 0:
        raise PipesimError(f"{source}: stage {_short(key)} in 'stages' must be a stage index, an integer ≥ 0")
    return index


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
