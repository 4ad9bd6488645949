"""What a schedule accepts, declared in its own file as ``LIMITS`` so tools and tests need no list of names.

A schedule's ``build`` still raises its own one-line :class:`~pipesim.errors.ScheduleError` with the fix; the
declaration states the same rule as data, and a test checks the two agree for every built-in schedule.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScheduleLimits:
    """The (pp, microbatches, chunks) a schedule builds.

    - ``chunks``: the chunk counts per rank it runs (``None``: any v ≥ 1);
    - ``microbatches_multiple_of_pp``: m must be a multiple of pp (Megatron's interleaved groups of p);
    - ``min_microbatches_per_pp``: m ≥ this · pp (DualPipe-V fills both ends of the V: 2).
    """

    chunks: tuple[int, ...] | None = (1,)
    microbatches_multiple_of_pp: bool = False
    min_microbatches_per_pp: int = 0

    def accepts(self, pp: int, microbatches: int, chunks: int) -> bool:
        if self.chunks is not None and chunks not in self.chunks:
            return False
        if self.microbatches_multiple_of_pp and microbatches % pp:
            return False
        return microbatches >= self.min_microbatches_per_pp * pp
