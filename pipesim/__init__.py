"""pipesim: simulate pipeline-parallel schedules, and replay the same instruction lists for real.

The schedule-author's API is importable from here:
``from pipesim import F, B, I, W, overlap, Schedule, Placement, ScheduleLimits`` (``overlap(F(..), B(..))``: an
overlapped forward-and-backward pair, docs/overlap.md).
"""

from pipesim.errors import PipesimError, ScheduleError
from pipesim.program.ir import B, F, I, Instruction, Placement, Schedule, W, overlap
from pipesim.program.limits import ScheduleLimits

__all__ = ["B", "F", "I", "Instruction", "PipesimError", "Placement", "Schedule", "ScheduleError", "ScheduleLimits",
           "W", "overlap"]
__version__ = "0.2.0"
