"""The interleaved 1F1B order's arithmetic (Narayanan et al. 2021, §2.2), shared by `interleaved` and its
combined-1F1B variant `interleaved-overlap`: every forward and backward a rank runs, in order, and the warm-up."""

import numpy as np

from pipesim.errors import ScheduleError
from pipesim.program.blocks import Passes, backwards, forwards


def interleaved_runs(name: str, pp: int, microbatches: int, chunks: int) -> tuple[Passes, Passes]:
    """Every forward and every backward a rank runs, in order: microbatches in groups of pp through each chunk in
    turn, forwards down the chunks, backwards back up. Refuses an m that is not a multiple of pp."""
    if microbatches % pp != 0:
        lower = (microbatches // pp) * pp
        options = " or ".join(f"--mb {m}" for m in (lower, lower + pp) if m > 0)
        raise ScheduleError(
            f"{name} needs --mb to be a multiple of --pp {pp} (got --mb {microbatches}); use {options}"
        )
    k = np.arange(microbatches * chunks)  # the k-th forward (backward) of the rank
    microbatch = (k // (pp * chunks)) * pp + k % pp
    chunk = (k // pp) % chunks
    return forwards(microbatch, chunk), backwards(microbatch, chunks - 1 - chunk)


def warmup_forwards(pp: int, rank: int, chunks: int) -> int:
    """Forwards a rank runs before its first backward in interleaved 1F1B."""
    return 2 * (pp - rank - 1) + (chunks - 1) * pp
