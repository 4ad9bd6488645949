"""From a schedule name to a checked Program: load → build → lower → validate, the path every entry point takes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pipesim.program.grouped import P2PLowering, grouped_program
from pipesim.program.ir import Program, Schedule
from pipesim.program.loader import ScheduleSource, load_schedule
from pipesim.program.lowering import lower
from pipesim.program.validate import CommSemantics, validate, validate_static


@dataclass(frozen=True)
class BuiltProgram:
    source: ScheduleSource
    schedule: Schedule
    program: Program


DEFAULT_PP, DEFAULT_MICROBATCHES = 4, 8


def build_program(
    spec: str,
    pp: int | None,
    microbatches: int | None,
    chunks: int | None = None,
    semantics: CommSemantics | None = CommSemantics.BUFFERED,
    p2p: P2PLowering = P2PLowering.EAGER,
) -> BuiltProgram:
    """Load schedule ``spec``, build it for (pp, microbatches, chunks), lower and validate it.

    ``None`` for pp or microbatches means the file's own (a PyTorch CSV fixes both) or the defaults 4 and 8.
    ``semantics=None`` skips only the progress (deadlock) proof, for callers about to simulate: the
    simulator proves it on the way under the same buffered semantics and names the same cycle.
    ``p2p=GROUPED`` returns the grouped-safe Program of :mod:`pipesim.program.grouped` (proven there).
    """
    return _build_cached(spec, pp, microbatches, chunks, semantics, p2p)


@lru_cache(maxsize=512)
def _build_cached(spec, pp, microbatches, chunks, semantics, p2p) -> BuiltProgram:
    # Cached: a sweep simulates one Program under many cost models, and building it is pure.
    source = load_schedule(spec)
    fixed = source.fixed_shape
    if pp is None:
        pp = fixed.pp if fixed else DEFAULT_PP
    if microbatches is None:
        microbatches = fixed.microbatches if fixed else DEFAULT_MICROBATCHES
    schedule = source.build(pp, microbatches, chunks)
    program = lower(schedule)
    if p2p is P2PLowering.GROUPED:
        program = grouped_program(program)  # validates under buffered and grouped semantics
    if semantics is None:
        validate_static(program)
    else:
        validate(program, semantics)
    return BuiltProgram(source, schedule, program)
