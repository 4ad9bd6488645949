"""pipesim: simulate pipeline-parallel schedules, and replay the same instruction lists for real.

The schedule-author's API is importable from here:
``from pipesim import F, B, I, W, overlap, Schedule, Placement, ScheduleLimits`` (``overlap(F(..), B(..))``: an
overlapped forward-and-backward pair, docs/overlap.md), and the building blocks that write a rank's order as
phases over microbatch ranges (``forwards``, ``backwards``, ``input_grads``, ``weight_grads``, ``alternate``,
``overlapped``, ``Passes``; :mod:`pipesim.program.blocks`, for ``Schedule.from_blocks``).

So is the Python API of every command (:mod:`pipesim.api`): ``pipesim.simulate``, ``pipesim.plan``,
``pipesim.plan_scaling``,
``pipesim.sweep``, ``pipesim.calibrate``, ``pipesim.fit_chip``, ``pipesim.overlay``, ``pipesim.validate``,
``pipesim.synthesize``, ``pipesim.sensitivity``, ``pipesim.load_program``, ``pipesim.build_program``,
``pipesim.schedules``, ``pipesim.models``, ``pipesim.chips`` and their result classes. They load on first use,
so ``import pipesim`` stays cheap (no pandas, matplotlib, numba or the planner until a function is called).
"""

from importlib import import_module as _import_module

from pipesim.errors import PipesimError, ScheduleError
from pipesim.program.blocks import Passes, alternate, backwards, forwards, input_grads, overlapped, weight_grads
from pipesim.program.ir import B, F, I, Instruction, Placement, Schedule, W, overlap
from pipesim.program.limits import ScheduleLimits

#: The API names ``pipesim`` forwards to :mod:`pipesim.api`, loaded on first access.
_API_NAMES = (
    "Calibration", "MemoryResult", "ModelOptions", "OverlayResult", "PlanResult", "SimResult", "SynthOutcome",
    "Validation", "build_program", "calibrate", "chips", "export", "fit_chip", "frameworks", "load_program", "models",
    "overlay",
    "plan", "plan_scaling", "ScalingResult", "schedules", "Sensitivity", "sensitivity", "simulate", "sweep",
    "synthesize", "validate",
)

__all__ = ["B", "F", "I", "Instruction", "Passes", "PipesimError", "Placement", "Schedule", "ScheduleError",
           "ScheduleLimits", "W", "alternate", "backwards", "forwards", "input_grads", "overlap", "overlapped",
           "weight_grads",
           *_API_NAMES]
__version__ = "0.2.0"


def __getattr__(name: str):
    if name == "plan":  # the planner package, which calls pipesim.api.plan (see pipesim/plan/__init__.py)
        return _import_module("pipesim.plan")
    if name in _API_NAMES:
        value = getattr(_import_module("pipesim.api"), name)
        globals()[name] = value  # later accesses skip this hook
        return value
    raise AttributeError(f"module 'pipesim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API_NAMES))
