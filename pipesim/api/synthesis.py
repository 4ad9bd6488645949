"""``pipesim.synthesize``: the best split-backward compute order for the costs and a per-rank activation limit
(Zero Bubble's automatic schedule, ``zb-auto``), as a Program that can be simulated, written and executed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.model_spec import ModelSpec
from pipesim.api.defaults import DEFAULT_MICROBATCHES, DEFAULT_PP, SYNTH_DEFAULTS
from pipesim.api.model_options import ModelOptions, check_no_model_options
from pipesim.api.model_setup import model_setup
from pipesim.api.unit_costs import memory_limit_units, unit_cost_model
from pipesim.errors import PipesimError
from pipesim.program.ir import Program
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import SimulationResult
from pipesim.synth.problem import SynthesisProblem
from pipesim.synth.search import SynthesisResult

__all__ = ["SynthOutcome", "synthesize"]


@dataclass(frozen=True, eq=False)
class SynthOutcome:
    """A synthesised order: the search's result, its lowered Program and one simulation of it."""

    problem: SynthesisProblem
    search: SynthesisResult
    program: Program
    simulated: SimulationResult
    costs: CostModel
    memory_limit: float
    method: str

    def to_dict(self) -> dict:
        """What ``pipesim synthesize --json`` prints."""
        shape, result = self.program.shape, self.search
        return {
            "shape": {"pp": shape.pp, "microbatches": shape.microbatches, "chunks": shape.chunks,
                      "placement": shape.placement.value},
            "memory_limit": self.memory_limit,
            "method": self.method,
            "origin": result.origin,
            "max_stage_span": result.evaluation.max_span,
            "bubble_rate": result.bubble_rate,
            "makespan": self.simulated.metrics.makespan,
            "peak_activations": list(self.simulated.memory.peak_activations),
            "proven_optimal": result.optimal,
            "solver_bound": result.solver_bound,
            "seconds": result.timings,
            "notes": list(result.notes),
        }

    def text(self) -> str:
        """What ``pipesim synthesize`` prints (without its "wrote FILE" line)."""
        result, unit = self.search, self.costs.time_unit
        peaks = self.simulated.memory.peak_activations
        lines = [
            f"zb-auto: {self.problem.describe()}",
            f"best: {result.origin}",
            f"longest stage span {result.evaluation.max_span:.6g} {unit}   bubble rate {result.bubble_rate:.4f} "
            "(Qi et al. 2024: (span − m·(F+B+W)) / span)   makespan "
            f"{self.simulated.metrics.makespan:.6g} {unit}",
            "peak activations per rank: " + " ".join(f"{p:g}" for p in peaks) + f"  (limit {self.memory_limit:g})",
        ]
        if result.solver_bound is not None:
            state = "optimal" if result.optimal else f"solver bound {result.solver_bound:.6g}"
            lines.append(f"cp-sat: {state}")
        lines.append("time: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()))
        lines += [f"note: {note}" for note in result.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def order_text(self, path: str | Path) -> str:
        """The order as a PyTorch action CSV (``path`` ending .csv) or Program text (any other name)."""
        from pipesim.io.torch_csv import export_rows, rows_to_text

        if Path(path).suffix.lower() == ".csv":
            return rows_to_text(export_rows(self.program))
        return self.program.to_text()

    def write(self, path: str | Path) -> None:
        """Write the order (atomically) for ``simulate``, ``validate``, ``export`` and the executor."""
        from pipesim.io.atomic import write_text_atomic

        write_text_atomic(path, self.order_text(path))


def synthesize(
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
    method: str = SYNTH_DEFAULTS.method,
    exact_seconds: float = SYNTH_DEFAULTS.exact_seconds,
    exact_max_tasks: int = SYNTH_DEFAULTS.exact_max_tasks,
    **model_options: object,
) -> SynthOutcome:
    """Find the best split-backward order (``pipesim synthesize``); arguments as :func:`pipesim.simulate`'s.

    Args:
        memory_limit: activation memory per rank in microbatch units (GiB with ``model``; default 2·pp units).
        method: ``"greedy"``, ``"local"`` (default: greedy, then local search) or ``"exact"`` (then CP-SAT).
        exact_seconds: CP-SAT time limit.
        exact_max_tasks: skip CP-SAT above this many F/I/W passes.
    """
    from pipesim.program.lowering import lower
    from pipesim.program.validate import CommSemantics, validate
    from pipesim.sim.simulator import simulate as run_simulation
    from pipesim.synth.search import Method, default_memory_limit, synthesis_shape
    from pipesim.synth.search import synthesize as search

    shape = synthesis_shape(pp or DEFAULT_PP, mb or DEFAULT_MICROBATCHES, chunks or 1)
    options = ModelOptions.from_keywords("synthesize", model_options)
    values = dict(forward=forward, backward=backward, backward_input=backward_input,
                  backward_weight=backward_weight, comm=comm, activation_bytes=activation_bytes)
    if model is None:
        check_no_model_options(options, hardware)
        setup = None
        cost_model = unit_cost_model(shape.num_stages, costs, stage_cost=stage_cost, **values)
    else:
        given = (["costs"] if costs is not None else []) + [k for k, v in values.items() if v is not None]
        if given or stage_cost:
            flag = f"--{given[0].replace('_', '-')}" if given else "--stage-cost"
            raise PipesimError(f"{flag} sets unit costs, but --model derives the costs from FLOPs and bytes; drop one")
        setup = model_setup(model, hardware, options.for_schedule("zb-auto", shape.pp), shape)
        cost_model = setup.costs
    limit = memory_limit_units(memory_limit, cost_model, shape, setup is not None)
    limit = default_memory_limit(shape) if limit is None else limit
    problem = SynthesisProblem.from_costs(shape, cost_model, limit)
    result = search(problem, Method(method), exact_seconds=exact_seconds, exact_max_tasks=exact_max_tasks)
    program = lower(result.schedule("zb-auto"))
    validate(program, CommSemantics.BUFFERED)  # valid by construction; proven anyway
    simulated = run_simulation(program, cost_model, check=False)
    peaks = simulated.memory.peak_activations
    if max(peaks) > limit + 1e-9:  # the evaluator and the simulator share one memory model: a bug if reached
        raise PipesimError(f"internal: synthesised order peaks at {max(peaks):g} > limit {limit:g}")
    return SynthOutcome(problem, result, program, simulated, cost_model, limit, method)
