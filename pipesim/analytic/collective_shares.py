"""How much of a node's link each NCCL collective reaches, by collective and by the size of the group.

One share of the link for every collective (``ChipSpec.collective_efficiency``) is what nccl-tests reports for
an all-reduce over a whole node. Measured tables say more: on an H100 NVSwitch node, OpenXLA's table of NCCL
collectives (:mod:`pipesim.validation.collective_shares`) has the 8-GPU all-reduce at 0.90 of NVLink's
450 GB/s bus bandwidth, the all-gather at 0.79, the reduce-scatter at 0.74, and groups of 2 GPUs — four of them
sharing the node, as tensor-parallel pairs do — at 0.46–0.62. A chip that carries such a table
(``ChipSpec.nvlink_collective_shares``) takes, for a collective whose group lies inside one node, the share of
its op at its group size, interpolated in log₂ of the ranks between measured sizes and held at the ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.interpolate import interpolate_log2
from pipesim.analytic.measured import CollectiveOp
from pipesim.errors import PipesimError, naming

#: The collectives a share table must describe (P2P is ``p2p_efficiency``'s).
SHARED_OPS: tuple[CollectiveOp, ...] = (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_GATHER,
                                        CollectiveOp.REDUCE_SCATTER)
#: ... and the one it may: a mixture-of-experts all-to-all, which without points takes the whole link.
OPTIONAL_OPS: tuple[CollectiveOp, ...] = (CollectiveOp.ALL_TO_ALL,)


@dataclass(frozen=True)
class CollectiveShares:
    """Per collective, ``(ranks, share)`` points: the share of the intra-node link's bandwidth (bus bandwidth,
    nccl-tests' convention) a collective over that many ranks of one node reaches at large sizes."""

    all_reduce: tuple[tuple[int, float], ...]
    all_gather: tuple[tuple[int, float], ...]
    reduce_scatter: tuple[tuple[int, float], ...]
    all_to_all: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        for op in SHARED_OPS + OPTIONAL_OPS:  # sorted once here: share() runs for every candidate's collectives
            object.__setattr__(self, op.value, tuple(sorted(getattr(self, op.value))))
            points = self.points(op)
            if not points and op in SHARED_OPS:
                raise PipesimError(f"collective shares: {op.value} has no points; give at least one ranks: share")
            if len({ranks for ranks, _ in points}) < len(points):
                raise PipesimError(f"collective shares: {op.value} lists a group size twice; give each once")
            for ranks, share in points:
                if ranks < 2 or not 0 < share <= 2:
                    raise PipesimError(f"collective shares: {op.value} {ranks}: {share} — ranks must be ≥ 2 and "
                                       "the share in (0, 2]")

    def points(self, op: CollectiveOp) -> tuple[tuple[int, float], ...]:
        """``op``'s ``(ranks, share)`` points, by ranks."""
        return getattr(self, op.value)

    def share(self, op: CollectiveOp, ranks: int) -> float:
        """The share at ``ranks``: linear in log₂(ranks) between the two nearest points, the end point's beyond;
        1.0 (the whole link) for an optional collective the table has no points of."""
        points = self.points(op)
        return interpolate_log2(points, ranks) if points else 1.0

    def to_dict(self) -> dict:
        return {op.value: {ranks: share for ranks, share in self.points(op)} for op in SHARED_OPS + OPTIONAL_OPS
                if self.points(op)}


def parse_collective_shares(value, source: str) -> CollectiveShares:
    """A chip file's ``nvlink_collective_shares``: ``{all_reduce: {2: 0.56, 8: 0.9}, all_gather: {...},
    reduce_scatter: {...}}`` and optionally ``all_to_all: {...}``; one-line errors naming the file and the entry."""
    if not isinstance(value, dict):
        raise PipesimError(f"{source}: nvlink_collective_shares must map each of "
                           f"{', '.join(op.value for op in SHARED_OPS)} to {{ranks: share}}")
    unknown = set(value) - {op.value for op in SHARED_OPS + OPTIONAL_OPS}
    if unknown:
        raise PipesimError(f"{source}: nvlink_collective_shares has unknown collective(s) {sorted(unknown)}; "
                           f"use {', '.join(op.value for op in SHARED_OPS + OPTIONAL_OPS)}")
    parsed = {}
    for op in SHARED_OPS + OPTIONAL_OPS:
        if op in OPTIONAL_OPS and op.value not in value:
            continue
        entry = value.get(op.value)
        if not isinstance(entry, dict) or not entry:
            raise PipesimError(f"{source}: nvlink_collective_shares.{op.value} must be a non-empty "
                               "{ranks: share} mapping")
        try:
            parsed[op.value] = tuple((int(r), float(s)) for r, s in entry.items())
        except (TypeError, ValueError):
            raise PipesimError(f"{source}: nvlink_collective_shares.{op.value} must map integer ranks to "
                               "numbers") from None
    with naming(source):
        return CollectiveShares(**parsed)
