"""From a schedule name to a checked Program: load → build → lower → validate, the path every entry point takes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pipesim.ir import Program, Schedule
from pipesim.loader import ScheduleSource, load_schedule
from pipesim.lowering import lower
from pipesim.validate import CommSemantics, validate


@dataclass(frozen=True)
class BuiltProgram:
    source: ScheduleSource
    schedule: Schedule
    program: Program


def build_program(
    spec: str,
    pp: int,
    microbatches: int,
    chunks: int | None = None,
    semantics: CommSemantics = CommSemantics.BUFFERED,
) -> BuiltProgram:
    """Load schedule ``spec``, build it for (pp, microbatches, chunks), lower and validate it."""
    return _build_cached(spec, pp, microbatches, chunks, semantics)


@lru_cache(maxsize=512)
def _build_cached(spec, pp, microbatches, chunks, semantics) -> BuiltProgram:
    # Cached: a sweep simulates one Program under many cost models, and building it is pure.
    source = load_schedule(spec)
    schedule = source.build(pp, microbatches, chunks)
    program = lower(schedule)
    validate(program, semantics)
    return BuiltProgram(source, schedule, program)
