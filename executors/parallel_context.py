"""ParallelContext: every process group of a tp × cp × dp × pp job, built once from the pure Topology.

Why plain ``dist.new_group`` and not ``init_device_mesh``: the layout is already a pure, process-free
function (:class:`pipesim.topology.Topology`, tested without spawning anything), and building each group
with ``new_group(Topology.groups(...))`` makes the live groups *provably* the tested arithmetic. The
gradient-sync group is dp×cp, a flattened pair of mesh dims, which DeviceMesh only offers through a private
``_flatten`` API; and ``new_group`` behaves the same on gloo (CPU) and NCCL across the torch versions we
support. The layout (tp fastest, then cp, dp, pp) equals ``init_device_mesh(("pp","dp","cp","tp"))``, so
switching later is a local change.

Groups are returned as values and passed explicitly to every layer and the interpreter — never globals.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from pipesim.topology import Coordinates, Dim, Topology


def check_world(topology: Topology, world_size: int) -> None:
    """Raise PipesimError (one line) unless ``world_size == tp·cp·dp·pp``; needs no process group."""
    topology.check_world(world_size)


@dataclass(frozen=True, eq=False)
class ParallelContext:
    """This rank's coordinates and groups. Build with :meth:`create` after ``init_process_group``."""

    topology: Topology
    rank: int
    coords: Coordinates
    tp_group: dist.ProcessGroup
    cp_group: dist.ProcessGroup
    dp_group: dist.ProcessGroup
    pp_group: dist.ProcessGroup
    dp_cp_group: dist.ProcessGroup
    pp_ranks: tuple[int, ...]  # global rank of each pipeline rank that shares this rank's (tp, cp, dp)
    # Expert parallelism (folded over dp×cp, pipesim.topology): the all-to-all group (None: ep = 1) and the group
    # that syncs expert gradients (ep = 1: dp×cp itself; None: this rank holds the only copy of its experts).
    ep_group: dist.ProcessGroup | None = None
    expert_dp_group: dist.ProcessGroup | None = None
    # DualPipe (dual placement): this rank and its mirror pipeline rank pp−1−r at the same tp, cp, dp, which
    # hold the two copies of the same two slices (executors.mirror_grads); None for other placements.
    mirror_group: dist.ProcessGroup | None = None

    @classmethod
    def create(cls, topology: Topology, *, mirror: bool = False) -> ParallelContext:
        """Check the world size, then create every group (collectively: all ranks, same order); ``mirror``
        adds the mirror pairs of DualPipe's two model copies."""
        world = dist.get_world_size()
        topology.check_world(world)
        rank = dist.get_rank()
        mine: dict[tuple[Dim, ...], dist.ProcessGroup] = {}
        members: dict[tuple[Dim, ...], list[int]] = {}
        for dims in ((Dim.TP,), (Dim.CP,), (Dim.DP,), (Dim.PP,), (Dim.DP, Dim.CP)):
            # new_group is collective over the whole world: every rank creates every group, keeps its own.
            for ranks in topology.groups(*dims):
                group = dist.new_group(ranks)
                if rank in ranks:
                    mine[dims], members[dims] = group, ranks
        ep_group, expert_dp_group = None, mine[(Dim.DP, Dim.CP)]
        if topology.ep > 1:
            ep_group = _own_group(topology.ep_groups(), rank)
            replicated = topology.ep < topology.dp * topology.cp
            expert_dp_group = _own_group(topology.expert_dp_groups(), rank) if replicated else None
        mirror_group = None
        if mirror:
            pp = topology.pp
            pairs = [[line[r], line[pp - 1 - r]] for line in topology.groups(Dim.PP) for r in range(pp // 2)]
            mirror_group = _own_group(pairs, rank)
        return cls(
            topology=topology,
            rank=rank,
            coords=topology.coordinates(rank),
            tp_group=mine[(Dim.TP,)],
            cp_group=mine[(Dim.CP,)],
            dp_group=mine[(Dim.DP,)],
            pp_group=mine[(Dim.PP,)],
            dp_cp_group=mine[(Dim.DP, Dim.CP)],
            pp_ranks=tuple(members[(Dim.PP,)]),
            ep_group=ep_group,
            expert_dp_group=expert_dp_group,
            mirror_group=mirror_group,
        )

    @property
    def expert_replica(self) -> int:
        """Which copy of this rank's experts it holds: its EP group's index within its dp×cp group."""
        return (self.coords.dp * self.topology.cp + self.coords.cp) // self.topology.ep

    @property
    def pp_rank(self) -> int:
        return self.coords.pp

    @property
    def tp_rank(self) -> int:
        return self.coords.tp

    @property
    def tp(self) -> int:
        return self.topology.tp

    @property
    def dp_cp(self) -> int:
        return self.topology.dp * self.topology.cp

    def peer(self, pp_rank: int) -> int:
        """Global rank of pipeline rank ``pp_rank`` in this rank's pipeline (same tp, cp, dp)."""
        return self.pp_ranks[pp_rank]


def _own_group(groups: list[list[int]], rank: int) -> dist.ProcessGroup:
    """Create every group (new_group is collective over the world) and return this rank's."""
    own = None
    for ranks in groups:
        group = dist.new_group(ranks)
        if rank in ranks:
            own = group
    return own
