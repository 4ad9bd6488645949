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
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import yaml

from pipesim.errors import PipesimError
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
    reduce_grad: float = 0.0  # DP gradient sync of this stage's weights (0 when dp = 1)
    activation: float = 1.0  # M_B, in units of one microbatch through one rank's share of the model
    weight_grad_activation: float = 0.5  # M_W ≤ M_B
    activation_bytes: float | None = None  # bytes that one unit of `activation` stands for
    p2p_bytes: float = 0.0  # bytes of the activation (and gradient) crossing this stage's output boundary
    p2p_bandwidth: float | None = None  # this boundary's bandwidth when it differs (crosses nodes); None: the model's

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
_PER_RANK_SHARE = ("forward", "backward", "backward_input", "backward_weight", "reduce_grad", "activation",
                   "weight_grad_activation")
ACTIVATION_UNIT = "microbatches through one rank's share of the model"
COST_CONVENTION = "per microbatch through one rank's share of the model; a chunk of v takes 1/v"


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "time_unit", TimeUnit.parse(self.time_unit))
        for stage, values in self.overrides.items():
            unknown = set(values) - _STAGE_FIELDS
            if unknown:
                raise PipesimError(
                    f"cost override for stage {stage} has unknown field(s) {sorted(unknown)}; "
                    f"use {sorted(_STAGE_FIELDS)}"
                )
        _check_costs(self)

    def stage(self, stage: int) -> StageCosts:
        """The values of ``stage`` as written (per rank's share of the model)."""
        values = self.overrides.get(stage)
        return replace(self.default, **values) if values else self.default

    def chunk_costs(self, stage: int, chunks: int) -> StageCosts:
        """What one chunk-stage of a schedule with ``chunks`` chunks per rank costs: 1/v of the rank's share."""
        costs = self.stage(stage)
        if chunks == 1:
            return costs
        return replace(costs, **{name: getattr(costs, name) / chunks for name in _PER_RANK_SHARE})

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
        return not self.overrides and self.p2p_latency == 0 and (
            self.default.p2p_bytes == 0 or not self.p2p_bandwidth
        )

    def with_overrides(self, overrides: dict[int, dict[str, float]]) -> CostModel:
        merged = {s: dict(v) for s, v in self.overrides.items()}
        for stage, values in overrides.items():
            merged.setdefault(stage, {}).update(values)
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
            "default": asdict(self.default),
            "stages": {str(s): dict(v) for s, v in sorted(self.overrides.items())},
        }

    @classmethod
    def from_dict(cls, data: dict, source: str = "costs") -> CostModel:
        if not isinstance(data, dict):
            raise PipesimError(f"{source}: expected a mapping at the top level")
        known = {"time_unit", "p2p_latency", "p2p_bandwidth", "optimizer_step", "convention", "num_stages", "default",
                 "stages"}
        unknown = set(data) - known
        if unknown:
            raise PipesimError(f"{source}: unknown key(s) {sorted(unknown)}; allowed: {sorted(known)}")
        default = data.get("default") or {}
        bad = set(default) - _STAGE_FIELDS
        if bad:
            raise PipesimError(f"{source}: unknown field(s) {sorted(bad)} in 'default'; use {sorted(_STAGE_FIELDS)}")
        try:
            overrides = {int(s): dict(v) for s, v in (data.get("stages") or {}).items()}
            return cls(
                default=StageCosts(**default),
                overrides=overrides,
                p2p_latency=float(data.get("p2p_latency", 0.0)),
                p2p_bandwidth=data.get("p2p_bandwidth"),
                optimizer_step=float(data.get("optimizer_step", 0.0)),
                time_unit=TimeUnit.parse(data.get("time_unit", TimeUnit.UNIT.value), source),
                num_stages=None if data.get("num_stages") is None else int(data["num_stages"]),
            )
        except (TypeError, ValueError) as err:
            raise PipesimError(f"{source}: {err}") from None

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        from pipesim.io.spec_files import read_mapping

        path = Path(path)
        if not path.is_file():
            raise PipesimError(f"costs file {path} does not exist; write one with 'pipesim calibrate' or by hand")
        return cls.from_dict(read_mapping(path, "costs"), source=f"costs file {path}")

    def save(self, path: str | Path) -> None:
        from pipesim.io.atomic import write_text_atomic

        path = Path(path)
        data = self.to_dict()
        text = yaml.safe_dump(data, sort_keys=False) if path.suffix in (".yaml", ".yml") else json.dumps(data, indent=2)
        write_text_atomic(path, text + ("" if text.endswith("\n") else "\n"))


def _check_costs(model: CostModel) -> None:
    """Durations and memory must be finite and non-negative: a negative cost makes time run backwards."""
    checks = [("p2p_latency", model.p2p_latency), ("optimizer_step", model.optimizer_step)]
    checks += [(f"default.{k}", v) for k, v in asdict(model.default).items() if v is not None]
    checks += [(f"stages.{s}.{k}", v) for s, vals in model.overrides.items() for k, v in vals.items() if v is not None]
    if model.p2p_bandwidth is not None:
        checks.append(("p2p_bandwidth", model.p2p_bandwidth))
    for name, value in checks:
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise PipesimError(f"cost {name}={value!r} must be a finite number ≥ 0")
        if name.endswith("p2p_bandwidth") and value == 0:
            raise PipesimError(f"cost {name}=0 would make every transfer take forever; give bytes per time "
                               "unit > 0, or leave it out for free transfers")
