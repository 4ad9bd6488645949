"""An order read from a file (a torch CSV, program text) as a schedule source: the loader's schedule-file
contract (``build``, ``DEFAULT_CHUNKS``) for a schedule whose pp, microbatches and chunks the file fixes."""

from __future__ import annotations

from types import ModuleType

from pipesim.errors import PipesimError
from pipesim.program.ir import Schedule


def fixed_order_module(schedule: Schedule, module_name: str, doc: str, what: str) -> ModuleType:
    """A module whose ``build`` returns ``schedule`` and refuses any other shape, naming ``what`` fixes it
    (e.g. ``torch CSV order.csv``) and the flag to drop."""
    shape = schedule.shape
    module = ModuleType(module_name)
    module.__doc__ = doc
    module.DEFAULT_CHUNKS = shape.chunks
    module.FIXED_SHAPE = shape

    def build(pp: int, microbatches: int, chunks: int) -> Schedule:
        for flag, asked, fixed in (("--pp", pp, shape.pp), ("--mb", microbatches, shape.microbatches),
                                   ("--chunks", chunks, shape.chunks)):
            if asked != fixed:
                raise PipesimError(f"{flag} {asked} disagrees with {what}, which fixes {flag} {fixed}; "
                                   f"drop {flag} or pass {flag} {fixed}")
        return schedule

    module.build = build
    return module
