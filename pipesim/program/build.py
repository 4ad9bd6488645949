"""From a schedule name to a checked Program: load → build → lower → validate, the path every entry point takes."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache

from pipesim.errors import PipesimError
from pipesim.program.grouped import P2PLowering, grouped_program
from pipesim.program.ir import Program, Schedule
from pipesim.program.loader import ScheduleSource, load_schedule, source_version
from pipesim.program.lowering import lower
from pipesim.program.validate import CommSemantics, validate, validate_static
from pipesim.sim.costs import CostModel


@dataclass(frozen=True)
class BuiltProgram:
    source: ScheduleSource
    schedule: Schedule
    program: Program

    @property
    def name(self) -> str:
        """The one name every output shows (simulate, lower, sweeps, figures, the executor): the one the
        schedule gives itself in ``Schedule.from_orders(name, ...)``; the file it came from is ``source.path``."""
        return self.program.name


DEFAULT_PP, DEFAULT_MICROBATCHES = 4, 8


def build_program(
    spec: str,
    pp: int | None,
    microbatches: int | None,
    chunks: int | None = None,
    semantics: CommSemantics | None = CommSemantics.BUFFERED,
    p2p: P2PLowering = P2PLowering.EAGER,
    *,
    costs: CostModel | None = None,
    memory_limit: float | None = None,
) -> BuiltProgram:
    """Load schedule ``spec``, build it for (pp, microbatches, chunks), lower and validate it.

    ``None`` for pp or microbatches means the file's own (a PyTorch CSV fixes both) or the defaults 4 and 8.
    ``semantics=None`` skips only the progress (deadlock) proof, for callers about to simulate: the
    simulator proves it on the way under the same buffered semantics and names the same cycle.
    ``p2p=GROUPED`` returns the grouped-safe Program of :mod:`pipesim.program.grouped` (proven there).
    ``costs`` and ``memory_limit`` reach schedules whose build takes them (``zb-auto``); ``costs`` is dropped
    for the others, so their cached Program is shared across cost models.
    """
    if costs is not None and "costs" not in load_schedule(spec).build_options:
        costs = None
    costs_key = None if costs is None else json.dumps(costs.to_dict(), sort_keys=True)
    return _build_cached(spec, source_version(spec), pp, microbatches, chunks, semantics, p2p, costs_key,
                         memory_limit)


#: Peak memory per lowered instruction of a whole job (schedule, columns, table, timeline arrays), measured:
#: `pipesim simulate --pp 64 --mb 8192 --json` peaks at ~0.9 GB for 3.1 M instructions, ~0.15 GB of it imports.
BYTES_PER_INSTRUCTION = 256
#: Instructions lowered per (rank, microbatch, chunk): RECV, F, SEND and RECV, B, SEND (a split W adds one).
INSTRUCTIONS_PER_MICROBATCH_STAGE = 6


def estimated_instructions(pp: int, microbatches: int, chunks: int) -> int:
    """About how many instructions a Program of this shape holds (exact Python ints: no overflow)."""
    return INSTRUCTIONS_PER_MICROBATCH_STAGE * pp * microbatches * chunks + 2 * pp


def available_memory() -> int:
    """Bytes this machine can give a new job now (MemAvailable), or its physical memory where unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40  # unknown: only absurd sizes are refused


def check_fits(pp: int, microbatches: int, chunks: int, available: int | None = None) -> None:
    """Refuse, before any work, a configuration whose Program would not fit in memory."""
    rows = estimated_instructions(pp, microbatches, chunks)
    need = rows * BYTES_PER_INSTRUCTION
    available = available_memory() if available is None else available
    if need > available:
        raise PipesimError(
            f"pp={pp} × microbatches={microbatches} × chunks={chunks} lowers to about {rows:.3g} instructions, "
            f"which need about {need / 2**30:.3g} GiB; {available / 2**30:.3g} GiB is available: use a smaller "
            "--pp, --mb or --chunks"
        )


@lru_cache(maxsize=512)
def _build_cached(spec, version, pp, microbatches, chunks, semantics, p2p, costs_key, memory_limit) -> BuiltProgram:
    # Cached: a sweep simulates one Program under many cost models, and building it is pure. The costs travel
    # as their JSON text, which is hashable and equal exactly when the cost models are; a file's version (its
    # content digest: loader.source_version) keys what was built from it, so an edited file is built again.
    costs = None if costs_key is None else CostModel.from_dict(json.loads(costs_key))
    source = load_schedule(spec)
    fixed = source.fixed_shape
    if pp is None:
        pp = fixed.pp if fixed else DEFAULT_PP
    if microbatches is None:
        microbatches = fixed.microbatches if fixed else DEFAULT_MICROBATCHES
    resolved_chunks = source.default_chunks if chunks is None else chunks
    if all(isinstance(v, int) and v > 0 for v in (pp, microbatches, resolved_chunks)):
        check_fits(pp, microbatches, resolved_chunks)  # bad values get the schedule's own error below
    schedule = source.build(pp, microbatches, chunks, costs=costs, memory_limit=memory_limit)
    program = lower(schedule)
    if p2p is P2PLowering.GROUPED:
        program = grouped_program(program)  # validates under buffered and grouped semantics
    if semantics is None:
        validate_static(program)
    else:
        validate(program, semantics)
    return BuiltProgram(source, schedule, program)
