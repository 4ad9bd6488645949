"""The interleaved 1F1B order's arithmetic (Narayanan et al. 2021, §2.2; Megatron-Core's schedule table), shared by
`interleaved` and its combined-1F1B variant `interleaved-overlap`: every forward and backward a rank runs, in
order, and the warm-up.

Microbatches go through a rank's chunks in groups: each group of N microbatches runs its forwards on chunk 0,
then on chunk 1, and so on, before the next group starts; backwards visit the chunks in reverse. Narayanan et
al.'s groups are of p, which needs m to be a multiple of p. Megatron-Core generalises the group
(``microbatch_group_size_per_vp_stage``, ``--microbatch-group-size-per-virtual-pipeline-stage``, default p):
any N in [p, m], the last group holding what remains, refused when that remainder is neither 0 nor at least p
("it introduces dependency bubbles", ``forward_backward_pipelining_with_interleaving``); the warm-up is
``2(p−r−1) + (v−1)·N``. PyTorch's ``ScheduleInterleaved1F1B`` takes ``N = m / ⌊m/p⌋`` rounds' worth. pipesim
takes the smallest valid N: p when m is a multiple of p (the paper's order, unchanged), otherwise the least N
that Megatron-Core accepts (:func:`pipesim.program.limits.interleaved_microbatch_group`, which a launch line
states). Any m ≥ p
then has an order; on uniform costs it keeps the closed form's bubble, ``(p−1)/(v·m)`` (tests/test_closed_forms.py).
"""

import numpy as np

from pipesim.errors import ScheduleError
from pipesim.program.blocks import Passes, backwards, forwards
from pipesim.program.limits import interleaved_microbatch_group as microbatch_group


def interleaved_runs(name: str, pp: int, microbatches: int, chunks: int) -> tuple[Passes, Passes]:
    """Every forward and every backward a rank runs, in order: microbatches in groups
    (:func:`microbatch_group`) through each chunk in turn, forwards down the chunks, backwards back up. Refuses
    fewer microbatches than ranks, which no group can hold."""
    if microbatches < pp:
        raise ScheduleError(
            f"{name} needs at least as many microbatches as ranks, --mb ≥ --pp {pp} (got --mb {microbatches}); "
            f"use --mb {pp} or more"
        )
    group = microbatch_group(pp, microbatches)
    microbatch, chunk = [], []
    for start in range(0, microbatches, group):
        members = np.arange(start, min(start + group, microbatches))  # the last group: what remains
        microbatch.append(np.tile(members, chunks))
        chunk.append(np.repeat(np.arange(chunks), len(members)))
    microbatch, chunk = np.concatenate(microbatch), np.concatenate(chunk)
    return forwards(microbatch, chunk), backwards(microbatch, chunks - 1 - chunk)


def warmup_forwards(pp: int, rank: int, chunks: int, microbatches: int) -> int:
    """Forwards a rank runs before its first backward in interleaved 1F1B: ``2(p−r−1) + (v−1)·N``."""
    return 2 * (pp - rank - 1) + (chunks - 1) * microbatch_group(pp, microbatches)
