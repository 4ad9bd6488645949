"""pipesim's Python API: everything the ``pipesim`` command line does, as functions that return result objects.

Each command is one call here; the command only parses its flags, makes that call and prints the result,
so a notebook gets exactly what the command prints (``str(result)``) and its JSON (``result.to_dict()``),
plus the data behind it as DataFrames and figures drawn on the caller's axes.

Example:
    >>> import pipesim
    >>> r = pipesim.simulate("1f1b", pp=4, mb=8)
    >>> r.metrics.bubble_fraction            # (p − 1)/(m + p − 1) on uniform costs
    0.2727...
    >>> r.memory.over_time.groupby("rank")["activations"].max().tolist()
    [4.0, 3.0, 2.0, 1.0]

Defaults are the command line's (:mod:`pipesim.api.defaults`, which the argparse layer reads).
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the static view (type checkers, the API reference); at run time names load on use
    from pipesim.api.defaults import (
        DEFAULT_HARDWARE,
        DEFAULT_MICROBATCHES,
        DEFAULT_PP,
        DEFAULT_SCHEDULE,
        PLAN_DEFAULTS,
        SWEEP_DEFAULTS,
    )
    from pipesim.api.fitting import fit_chip
    from pipesim.api.listings import chips, frameworks, models
    from pipesim.api.model_options import ModelOptions
    from pipesim.api.model_setup import ModelSetup
    from pipesim.api.planning import PlanResult, plan, plan_request
    from pipesim.api.programs import ExportFormat, Validation, build_program, export, load_program, schedules, validate
    from pipesim.api.results import MemoryResult, SimResult
    from pipesim.api.scaling import ScalingResult, plan_scaling
    from pipesim.api.sensitivity import Sensitivity, sensitivity
    from pipesim.api.simulation import simulate
    from pipesim.api.sweeping import grid_size, sweep
    from pipesim.api.synthesis import SynthOutcome, synthesize
    from pipesim.api.timelines import Calibration, OverlayResult, calibrate, overlay

__all__ = [
    "DEFAULT_HARDWARE",
    "DEFAULT_MICROBATCHES",
    "DEFAULT_PP",
    "DEFAULT_SCHEDULE",
    "PLAN_DEFAULTS",
    "SWEEP_DEFAULTS",
    "Calibration",
    "ExportFormat",
    "MemoryResult",
    "ModelOptions",
    "ModelSetup",
    "OverlayResult",
    "PlanResult",
    "ScalingResult",
    "Sensitivity",
    "SimResult",
    "SynthOutcome",
    "Validation",
    "build_program",
    "calibrate",
    "chips",
    "export",
    "fit_chip",
    "frameworks",
    "grid_size",
    "load_program",
    "models",
    "overlay",
    "plan",
    "plan_request",
    "plan_scaling",
    "schedules",
    "sensitivity",
    "simulate",
    "sweep",
    "synthesize",
    "validate",
]

#: Where each exported name lives: ``import pipesim.api.defaults`` (which the command line does for its
#: defaults) must not load the planner, pandas or matplotlib, so names load from their module on first use.
_WHERE = {
    "DEFAULT_HARDWARE": "pipesim.api.defaults",
    "DEFAULT_MICROBATCHES": "pipesim.api.defaults",
    "DEFAULT_PP": "pipesim.api.defaults",
    "DEFAULT_SCHEDULE": "pipesim.api.defaults",
    "PLAN_DEFAULTS": "pipesim.api.defaults",
    "SWEEP_DEFAULTS": "pipesim.api.defaults",
    "fit_chip": "pipesim.api.fitting",
    "chips": "pipesim.api.listings",
    "frameworks": "pipesim.api.listings",
    "models": "pipesim.api.listings",
    "ModelOptions": "pipesim.api.model_options",
    "ModelSetup": "pipesim.api.model_setup",
    "PlanResult": "pipesim.api.planning",
    "plan": "pipesim.api.planning",
    "plan_request": "pipesim.api.planning",
    "ExportFormat": "pipesim.api.programs",
    "Validation": "pipesim.api.programs",
    "build_program": "pipesim.api.programs",
    "export": "pipesim.api.programs",
    "load_program": "pipesim.api.programs",
    "schedules": "pipesim.api.programs",
    "validate": "pipesim.api.programs",
    "MemoryResult": "pipesim.api.results",
    "SimResult": "pipesim.api.results",
    "ScalingResult": "pipesim.api.scaling",
    "plan_scaling": "pipesim.api.scaling",
    "Sensitivity": "pipesim.api.sensitivity",
    "sensitivity": "pipesim.api.sensitivity",
    "simulate": "pipesim.api.simulation",
    "grid_size": "pipesim.api.sweeping",
    "sweep": "pipesim.api.sweeping",
    "SynthOutcome": "pipesim.api.synthesis",
    "synthesize": "pipesim.api.synthesis",
    "Calibration": "pipesim.api.timelines",
    "OverlayResult": "pipesim.api.timelines",
    "calibrate": "pipesim.api.timelines",
    "overlay": "pipesim.api.timelines",
}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'pipesim.api' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later accesses skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
