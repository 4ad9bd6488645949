"""Interleaved 1F1B with overlapped F-and-B pairs ("combined 1F1B": Megatron-Core's
``--overlap-moe-expert-parallel-comm``, which hides MoE all-to-all inside interleaved 1F1B).

The order of interleaved 1F1B (Narayanan et al. 2021, §2.2.2; ``schedules/interleaved.py``): ``v`` chunks
per rank in loop placement, forwards visiting the chunks in groups of p microbatches and backwards the chunks
in reverse. In the steady state every forward runs *together with* a backward of another microbatch, as one
overlapped pair (:func:`~pipesim.program.ir.overlap`, timed by :func:`~pipesim.sim.costs.pair_duration`): the
all-to-all of one half hides behind the other half's attention and expert compute.

A backward cannot overlap the forward it depends on, and in plain interleaved 1F1B the last rank's first
steady-state forward *is* the forward of its next backward. So each rank warms up with one forward more than
interleaved 1F1B (``2(p−r−1) + (v−1)·N + 1``, capped at m·v; N the microbatch group, p when p divides m): every
pair then joins the forward of a later microbatch with the backward of an earlier one, and each rank holds one more
chunk's activations (1/v of a microbatch through its share) than interleaved 1F1B at its peak. Where a forward and
the backward it would meet are still the same microbatch and chunk (m·v ≤ the warm-up), they run one after the
other.
"""

from pipesim.program.blocks import overlapped
from pipesim.program.ir import Placement, Schedule
from pipesim.program.limits import ScheduleLimits
from schedules._interleaved_order import interleaved_runs, warmup_forwards

DEFAULT_CHUNKS = 2
LIMITS = ScheduleLimits(chunks=None, min_microbatches_per_pp=1)


def build(pp: int, microbatches: int, chunks: int = DEFAULT_CHUNKS) -> Schedule:
    fwd, bwd = interleaved_runs("interleaved-overlap", pp, microbatches, chunks)
    total = len(fwd)
    ranks = []
    for rank in range(pp):
        warmup = min(warmup_forwards(pp, rank, chunks, microbatches) + 1, total)
        steady = total - warmup
        ranks.append([
            fwd[:warmup],                                # warmup: one forward more than interleaved 1F1B
            overlapped(fwd[warmup:], bwd[:steady]),      # steady state: each forward with a backward, one pair
            bwd[steady:],                                # cooldown: drain the backwards still owed
        ])
    return Schedule.from_blocks(
        "interleaved-overlap", ranks, microbatches=microbatches, chunks=chunks, placement=Placement.LOOP
    )
