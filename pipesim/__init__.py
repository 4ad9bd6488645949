"""pipesim: simulate pipeline-parallel schedules, and replay the same instruction lists for real."""

from pipesim.errors import PipesimError, ScheduleError

__all__ = ["PipesimError", "ScheduleError"]
__version__ = "0.1.0"
