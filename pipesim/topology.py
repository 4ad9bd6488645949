"""Rank layout of a tp × cp × dp × pp job: pure arithmetic, no processes, shared by the executor and the CLI.

Order (docs/architecture.md, "Executor"): tp fastest, then cp, dp, pp —
``rank = ((pp_rank·dp + dp_rank)·cp + cp_rank)·tp + tp_rank`` (nanotron's (pp, dp, tp) with Megatron's cp
slot). A group of one dimension joins the ranks that agree on every other coordinate. DP gradient sync runs
over dp×cp (each CP rank holds a slice of the sequence and full weights).

Expert parallelism (``ep``) is not a dimension of its own: as in Megatron-Core, the expert-parallel groups are
carved out of each dp×cp group — ``ep`` consecutive members of it (in rank order) hold the experts of one
replica between them, so ep divides dp·cp — and the members at the same position of each expert-parallel
group form an expert data-parallel group (dp·cp/ep ranks), over which the experts' gradients sync.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from itertools import product

from pipesim.errors import PipesimError


class Dim(enum.Enum):
    TP = "tp"
    CP = "cp"
    DP = "dp"
    PP = "pp"


# Fastest-varying first.
_ORDER = (Dim.TP, Dim.CP, Dim.DP, Dim.PP)


@dataclass(frozen=True)
class Coordinates:
    tp: int
    cp: int
    dp: int
    pp: int

    def of(self, dim: Dim) -> int:
        return getattr(self, dim.value)


@dataclass(frozen=True)
class Topology:
    """Sizes of each parallel dimension; every method is a pure function of them."""

    tp: int = 1
    cp: int = 1
    dp: int = 1
    pp: int = 1
    ep: int = 1  # expert-parallel degree, folded over dp×cp (module docstring)

    def __post_init__(self) -> None:
        for dim in _ORDER:
            size = self.size(dim)
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise PipesimError(f"--{dim.value} {size} must be a positive integer")
        if isinstance(self.ep, bool) or not isinstance(self.ep, int) or self.ep < 1:
            raise PipesimError(f"--ep {self.ep} must be a positive integer")
        if (self.dp * self.cp) % self.ep:
            raise PipesimError(f"--ep {self.ep} must divide dp·cp = {self.dp}·{self.cp} = {self.dp * self.cp}: "
                               "expert-parallel groups are carved out of the dp×cp ranks; raise --dp or lower --ep")

    def size(self, dim: Dim) -> int:
        return getattr(self, dim.value)

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def check_world(self, world_size: int) -> None:
        if world_size != self.world_size:
            raise PipesimError(
                f"world size {world_size} does not factor as tp·cp·dp·pp = {self.tp}·{self.cp}·{self.dp}·{self.pp}"
                f" = {self.world_size}; launch {self.world_size} processes or change --tp/--cp/--dp/--pp"
            )

    def rank(self, coords: Coordinates) -> int:
        return ((coords.pp * self.dp + coords.dp) * self.cp + coords.cp) * self.tp + coords.tp

    def coordinates(self, rank: int) -> Coordinates:
        if not 0 <= rank < self.world_size:
            raise PipesimError(f"rank {rank} is outside the world of {self.world_size}")
        rank, tp = divmod(rank, self.tp)
        rank, cp = divmod(rank, self.cp)
        pp, dp = divmod(rank, self.dp)
        return Coordinates(tp=tp, cp=cp, dp=dp, pp=pp)

    def groups(self, *dims: Dim) -> list[list[int]]:
        """All groups spanning ``dims`` (e.g. ``groups(Dim.DP, Dim.CP)`` for gradient sync), in rank order."""
        varying = set(dims)
        fixed = [d for d in _ORDER if d not in varying]
        result = []
        for fixed_values in product(*(range(self.size(d)) for d in reversed(fixed))):
            base = dict(zip(reversed(fixed), fixed_values, strict=True))
            members = []
            for values in product(*(range(self.size(d)) for d in reversed(_ORDER) if d in varying)):
                coords = dict(base)
                coords.update(zip([d for d in reversed(_ORDER) if d in varying], values, strict=True))
                members.append(self.rank(Coordinates(**{d.value: coords[d] for d in _ORDER})))
            result.append(sorted(members))
        return sorted(result)

    def ep_groups(self) -> list[list[int]]:
        """Expert-parallel groups: each dp×cp group cut into runs of ``ep`` consecutive members."""
        return sorted(g[i:i + self.ep] for g in self.groups(Dim.DP, Dim.CP) for i in range(0, len(g), self.ep))

    def expert_dp_groups(self) -> list[list[int]]:
        """Expert data-parallel groups: the members at one position of every expert-parallel group of a dp×cp
        group (they hold the same experts and sync their gradients)."""
        return sorted(g[i::self.ep] for g in self.groups(Dim.DP, Dim.CP) for i in range(self.ep))

    def group_of(self, rank: int, *dims: Dim) -> list[int]:
        for group in self.groups(*dims):
            if rank in group:
                return group
        raise AssertionError("every rank belongs to one group per dimension set")

    def describe(self) -> str:
        """Human-readable table of every group, for ``pipesim topology``."""
        lines = [f"world {self.world_size} = tp {self.tp} × cp {self.cp} × dp {self.dp} × pp {self.pp}"
                 " (tp fastest, then cp, dp, pp)"]
        for label, dims in (("tp", (Dim.TP,)), ("cp", (Dim.CP,)), ("dp", (Dim.DP,)), ("pp", (Dim.PP,)),
                            ("dp×cp (gradient sync)", (Dim.DP, Dim.CP))):
            groups = self.groups(*dims)
            listed = " ".join("{" + ",".join(map(str, g)) + "}" for g in groups)
            lines.append(f"{label} groups ({len(groups)}): {listed}")
        if self.ep > 1:
            for label, groups in (("ep (expert all-to-all, folded over dp×cp)", self.ep_groups()),
                                  ("expert dp (expert gradient sync)", self.expert_dp_groups())):
                listed = " ".join("{" + ",".join(map(str, g)) + "}" for g in groups)
                lines.append(f"{label} groups ({len(groups)}): {listed}")
        lines += self._grid()
        lines.append("rank → (tp, cp, dp, pp):")
        for rank in range(self.world_size):
            c = self.coordinates(rank)
            lines.append(f"  {rank:>4} → ({c.tp}, {c.cp}, {c.dp}, {c.pp})")
        return "\n".join(lines)

    def _grid(self) -> list[str]:
        """The Megatron/nanotron picture: one block per pipeline stage, a row per dp rank, a column per cp rank,
        each cell one tp group; a cp group is a row, a dp group a column, a pp group one cell position."""
        cells = {(c.pp, c.dp, c.cp): [] for c in map(self.coordinates, range(self.world_size))}
        for rank in range(self.world_size):
            c = self.coordinates(rank)
            cells[(c.pp, c.dp, c.cp)].append(str(rank))
        width = max(len("[" + " ".join(v) + "]") for v in cells.values())
        lines = ["grid (a block per pp rank; rows dp, columns cp; each cell a tp group):"]
        for pp in range(self.pp):
            lines.append(f"{f'  pp {pp}':<9}" + " ".join(f"{f'cp {cp}':>{width}}" for cp in range(self.cp)))
            for dp in range(self.dp):
                row = " ".join(f"{'[' + ' '.join(cells[(pp, dp, cp)]) + ']':>{width}}" for cp in range(self.cp))
                lines.append(f"{f'    dp {dp}':<9}" + row)
        return lines
