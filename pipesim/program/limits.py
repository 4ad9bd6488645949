"""What a schedule accepts, declared in its own file as ``LIMITS`` so tools and tests need no list of names.

A schedule's ``build`` still raises its own one-line :class:`~pipesim.errors.ScheduleError` with the fix; the
declaration states the same rule as data, and a test checks the two agree for every built-in schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.errors import PipesimError


@dataclass(frozen=True)
class ScheduleLimits:
    """The (pp, microbatches, chunks) a schedule builds.

    - ``chunks``: the chunk counts per rank it runs (``None``: any v ≥ 1);
    - ``microbatches_multiple_of_pp``: m must be a multiple of pp (Megatron's interleaved groups of p);
    - ``min_microbatches_per_pp``: m ≥ this · pp (DualPipe-V fills both ends of the V: 2);
    - ``even_pp``, ``even_microbatches``: pp (m) must be even (DualPipe pairs rank r with rank pp−1−r and
      sends half the microbatches each way).
    """

    chunks: tuple[int, ...] | None = (1,)
    microbatches_multiple_of_pp: bool = False
    min_microbatches_per_pp: int = 0
    even_pp: bool = False
    even_microbatches: bool = False

    def accepts(self, pp: int, microbatches: int, chunks: int) -> bool:
        if self.chunks is not None and chunks not in self.chunks:
            return False
        if self.microbatches_multiple_of_pp and microbatches % pp:
            return False
        if (self.even_pp and pp % 2) or (self.even_microbatches and microbatches % 2):
            return False
        return microbatches >= self.min_microbatches_per_pp * pp

    def round_up(self, pp: int, microbatches: int) -> tuple[int, int]:
        """The smallest (pp, m) at or above the given ones that these limits accept (given an accepted chunks):
        what tests and sweeps that draw shapes at random use."""
        if self.even_pp:
            pp += pp % 2
        if self.microbatches_multiple_of_pp:
            microbatches = -(-microbatches // pp) * pp
        microbatches = max(microbatches, self.min_microbatches_per_pp * pp)
        if self.even_microbatches:
            microbatches += microbatches % 2
        return pp, microbatches


def interleaved_microbatch_group(pp: int, microbatches: int) -> int:
    """The microbatches interleaved 1F1B runs through each chunk before the next group starts: the smallest N ≥ pp
    whose last group is whole or holds at least pp, so pp itself when pp divides m. Megatron-Core's rule for its
    ``microbatch_group_size_per_vp_stage`` (``--microbatch-group-size-per-virtual-pipeline-stage``, default pp;
    ``forward_backward_pipelining_with_interleaving`` refuses a last group of 1 … pp−1 microbatches: "it
    introduces dependency bubbles"). Needs microbatches ≥ pp."""
    for group in range(pp, microbatches + 1):
        remainder = microbatches % group
        if remainder == 0 or remainder >= pp:
            return group
    raise ValueError(f"interleaved 1F1B needs at least as many microbatches as ranks (m={microbatches} < pp={pp})")


def check_microbatch_group(pp: int, microbatches: int, group: int) -> None:
    """Megatron-LM's ``--microbatch-group-size-per-virtual-pipeline-stage`` stated for an interleaved run: pipesim
    runs the group :func:`interleaved_microbatch_group` gives, so another one is refused in one line."""
    runs = interleaved_microbatch_group(pp, microbatches)
    if group != runs:
        raise PipesimError(f"--microbatch-group-size-per-virtual-pipeline-stage {group}: pipesim's interleaved "
                           f"schedule runs groups of {runs} at pp {pp} with {microbatches} microbatches (Megatron-"
                           "Core's default, or the least it accepts); other groups are not modelled: drop the flag")
