"""The interleaved 1F1B order's arithmetic (Narayanan et al. 2021, §2.2), shared by `interleaved` and its
combined-1F1B variant `interleaved-overlap`: the k-th forward and backward a rank runs, and the warm-up."""

from collections.abc import Callable

from pipesim.errors import ScheduleError
from pipesim.program.ir import B, F, Instruction


def interleaved_passes(name: str, pp: int, microbatches: int,
                       chunks: int) -> tuple[int, Callable[[int], Instruction], Callable[[int], Instruction]]:
    """(passes per rank, the k-th forward, the k-th backward): microbatches run in groups of pp through each
    chunk in turn, forwards down the chunks, backwards back up. Refuses an m that is not a multiple of pp."""
    if microbatches % pp != 0:
        lower = (microbatches // pp) * pp
        options = " or ".join(f"--mb {m}" for m in (lower, lower + pp) if m > 0)
        raise ScheduleError(
            f"{name} needs --mb to be a multiple of --pp {pp} (got --mb {microbatches}); use {options}"
        )

    def forward(k: int) -> Instruction:
        return F((k // (pp * chunks)) * pp + k % pp, (k // pp) % chunks)

    def backward(k: int) -> Instruction:
        return B((k // (pp * chunks)) * pp + k % pp, chunks - 1 - (k // pp) % chunks)

    return microbatches * chunks, forward, backward


def warmup_forwards(pp: int, rank: int, chunks: int) -> int:
    """Forwards a rank runs before its first backward in interleaved 1F1B."""
    return 2 * (pp - rank - 1) + (chunks - 1) * pp
