"""Rank layout of tp × cp × dp × pp: pure arithmetic, and the ParallelContext's world-size check."""

import pytest

from pipesim.errors import PipesimError
from pipesim.topology import Coordinates, Dim, Topology


def test_sixteen_ranks_all_dims_two():
    t = Topology(tp=2, cp=2, dp=2, pp=2)
    assert t.group_of(0, Dim.TP) == [0, 1]
    assert t.group_of(0, Dim.CP) == [0, 2]
    assert t.group_of(0, Dim.DP) == [0, 4]
    assert t.group_of(0, Dim.PP) == [0, 8]
    assert t.group_of(0, Dim.DP, Dim.CP) == [0, 2, 4, 6]
    assert t.coordinates(13) == Coordinates(tp=1, cp=0, dp=1, pp=1)


@pytest.mark.parametrize("sizes", [(2, 2, 2, 2), (1, 1, 1, 4), (4, 1, 2, 3), (3, 2, 1, 2)])
def test_round_trip_and_partition(sizes):
    t = Topology(*sizes)
    for rank in range(t.world_size):
        assert t.rank(t.coordinates(rank)) == rank
    for dims in ((Dim.TP,), (Dim.CP,), (Dim.DP,), (Dim.PP,), (Dim.DP, Dim.CP)):
        groups = t.groups(*dims)
        assert sorted(r for g in groups for r in g) == list(range(t.world_size))
        size = 1
        for d in dims:
            size *= t.size(d)
        assert all(len(g) == size for g in groups)


def test_bad_world_size_is_one_line():
    with pytest.raises(PipesimError) as err:
        Topology(tp=2, dp=2, pp=2).check_world(6)
    message = str(err.value)
    assert "\n" not in message and "world size 6" in message and "tp·cp·dp·pp" in message
