"""Within-model ranking (pipesim/validation/ranking.py), by hand: the pairs ordered as measured, over every pair
and over the pairs the measurement sets far enough apart for a planner's ranking to decide."""

import pytest

from pipesim.validation.ranking import APART, GroupRanking, summarise


def _group(published, predicted):
    return GroupRanking(("source", "model", "chip", 2048), [f"layout {i}" for i in range(len(published))],
                        list(published), list(predicted))


def test_pairs_count_every_pair_but_ties_and_the_apart_ones_only_past_the_margin():
    # published throughputs 100, 103, 120, 200; pipesim swaps the first two (3 % apart) and the last two (67 %)
    g = _group([100, 103, 120, 200], [102, 101, 130, 125])
    # pairs: (100,103) wrong, (100,120) right, (100,200) right, (103,120) right, (103,200) right, (120,200) wrong
    assert g.pairs == (4, 6)
    # 5 % apart or more: all but (100,103); of those, only (120,200) is wrong
    assert APART == 0.05 and g.pairs_apart(APART) == (4, 5)
    assert g.pairs_apart(0.5) == (2, 3)  # (100,200), (103,200) right; (120,200) wrong
    tied = _group([100, 100, 150], [1, 2, 3])
    assert tied.pairs == (2, 2)  # an exact tie in the measurement is no pair


def test_summary_sums_the_pairs_of_every_group():
    a = _group([100, 103, 120, 200], [102, 101, 130, 125])
    b = _group([10, 20, 40], [1, 2, 3])  # perfectly ordered, every pair apart
    s = summarise([a, b])
    assert (s.groups, s.rows, s.pairs_right, s.pairs) == (2, 7, 7, 9)
    assert (s.apart_right, s.apart) == (7, 8) and s.apart_accuracy == pytest.approx(7 / 8)
    assert s.median_spearman == pytest.approx((a.spearman + b.spearman) / 2)
