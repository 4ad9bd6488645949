"""The interleaved 1F1B order's arithmetic (Narayanan et al. 2021, §2.2), shared by `interleaved` and its
combined-1F1B variant `interleaved-overlap`: the k-th forward and backward a rank runs, and the warm-up."""

from collections.abc import Callable

import numpy as np

from pipesim.errors import ScheduleError
from pipesim.program.blocks import Passes, backwards, forwards
from pipesim.program.ir import B, F, Instruction


def _check_groups(name: str, pp: int, microbatches: int) -> None:
    """Microbatches run in groups of pp: refuses an m that is not a multiple of pp."""
    if microbatches % pp != 0:
        lower = (microbatches // pp) * pp
        options = " or ".join(f"--mb {m}" for m in (lower, lower + pp) if m > 0)
        raise ScheduleError(
            f"{name} needs --mb to be a multiple of --pp {pp} (got --mb {microbatches}); use {options}"
        )


def _forward_ids(k, pp: int, chunks: int):
    """(microbatch, chunk) of the k-th forward: groups of pp microbatches through each chunk in turn (k an int
    or an integer array)."""
    return (k // (pp * chunks)) * pp + k % pp, (k // pp) % chunks


def _backward_ids(k, pp: int, chunks: int):
    """(microbatch, chunk) of the k-th backward: the forwards' order, with the chunks visited in reverse."""
    mb, chunk = _forward_ids(k, pp, chunks)
    return mb, chunks - 1 - chunk


def interleaved_passes(name: str, pp: int, microbatches: int,
                       chunks: int) -> tuple[int, Callable[[int], Instruction], Callable[[int], Instruction]]:
    """(passes per rank, the k-th forward, the k-th backward) as Instructions."""
    _check_groups(name, pp, microbatches)

    def forward(k: int) -> Instruction:
        return F(*_forward_ids(k, pp, chunks))

    def backward(k: int) -> Instruction:
        return B(*_backward_ids(k, pp, chunks))

    return microbatches * chunks, forward, backward


def interleaved_runs(name: str, pp: int, microbatches: int, chunks: int) -> tuple[Passes, Passes]:
    """Every forward and every backward a rank runs, in order, as two runs of passes (building blocks)."""
    _check_groups(name, pp, microbatches)
    k = np.arange(microbatches * chunks)
    return forwards(*_forward_ids(k, pp, chunks)), backwards(*_backward_ids(k, pp, chunks))


def warmup_forwards(pp: int, rank: int, chunks: int) -> int:
    """Forwards a rank runs before its first backward in interleaved 1F1B."""
    return 2 * (pp - rank - 1) + (chunks - 1) * pp
