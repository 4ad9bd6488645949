"""The within-source attribution of step-time errors to the step's composition (pipesim/validation/
residual_composition.py), on rows built by hand so each answer is known."""

import numpy as np
import pytest

from pipesim.analytic.time_breakdown import RankTime
from pipesim.validation.residual_composition import (
    Composition,
    Row,
    composition_of,
    exposure_bins,
    within_source_contrasts,
    within_source_slopes,
)


def _composition(exposed_comm: float = 0.0, grad_sync: float = 0.0, idle: float = 0.0) -> Composition:
    return Composition(exposed_comm, grad_sync, p2p=0.0, a2a=0.0, host_wait=0.0, optimizer=0.0, idle=idle)


def test_a_ranks_step_splits_into_shares_by_hand():
    rank = RankTime(rank=0, compute=6.0, exposed_comm=1.0, p2p_wire=0.5, p2p_sync=0.5, grad_sync=1.0,
                    optimizer=0.5, idle=0.5)  # a 10 s step
    shares = composition_of(rank)
    assert (shares.exposed_comm, shares.p2p, shares.grad_sync, shares.optimizer) == pytest.approx((0.1, 0.1, 0.1, 0.05))
    assert shares.communication == pytest.approx(0.3)
    assert shares.share("communication") == shares.communication and shares.share("idle") == pytest.approx(0.05)
    with pytest.raises(ValueError):
        composition_of(RankTime(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0))


def test_source_intercepts_take_what_differs_between_sources():
    """Across the sources the error rises with the share (each source's level is higher where its shares are),
    within each it falls by 0.5 per unit share: the fit reports the within-source slope, exactly."""
    rows = []
    for level, source in enumerate("abcde"):
        for share in (0.1 * level, 0.1 * level + 0.05, 0.1 * level + 0.1):
            rows.append(Row(source, 0.2 * level - 0.5 * share, _composition(exposed_comm=share)))
    (slope,) = within_source_slopes(rows, ("exposed_comm",))
    assert slope.slope == pytest.approx(-0.5)
    assert slope.standard_error == pytest.approx(0.0, abs=1e-9)  # every source alone gives the same slope
    assert (slope.sources, slope.rows) == (5, 15)


def test_each_source_weighs_the_same_however_many_rows_it_has():
    """Two sources over the same shares, slopes −1 and +1: the fit is 0 whether one has 3 rows or 300."""
    shares = np.linspace(0.0, 0.2, 3)
    for many in (1, 100):
        rows = [Row("long", -s, _composition(exposed_comm=s)) for s in np.repeat(shares, many)]
        rows += [Row("short", s, _composition(exposed_comm=s)) for s in shares]
        rows += [Row("third", 0.0, _composition(exposed_comm=s)) for s in shares]
        (slope,) = within_source_slopes(rows, ("exposed_comm",))
        assert slope.slope == pytest.approx(0.0, abs=1e-9)
        assert slope.standard_error > 0.3  # leaving one source out moves it: the sources disagree


def test_parts_fitted_together_and_a_part_without_spread_reports_nothing():
    rng = np.random.default_rng(0)
    rows = []
    for source in "abcdef":
        for _ in range(20):
            comm, sync = rng.uniform(0, 0.2), rng.uniform(0, 0.1)
            rows.append(Row(source, -0.3 * comm - 1.0 * sync + rng.normal(0, 0.002),
                            _composition(exposed_comm=comm, grad_sync=sync)))
    comm, sync, idle = within_source_slopes(rows, ("exposed_comm", "grad_sync", "idle"))
    assert comm.slope == pytest.approx(-0.3, abs=0.02) and sync.slope == pytest.approx(-1.0, abs=0.04)
    assert 0 < comm.standard_error < 0.02 and abs(comm.t) > 10
    assert (idle.slope, idle.standard_error, idle.sources, idle.t) == (0.0, 0.0, 0, 0.0)  # every idle share is 0


def test_bins_pool_rows_by_their_communication_and_close_the_last():
    rows = [Row("a", -0.1, _composition(exposed_comm=0.15)), Row("b", 0.1, _composition(grad_sync=0.12)),
            Row("a", 0.02, _composition()), Row("c", -0.2, _composition(exposed_comm=1.0))]
    bins = exposure_bins(rows, edges=(0.0, 0.1, 0.2, 1.0))
    assert [(b.low, b.high, b.rows, b.sources) for b in bins] == [(0.0, 0.1, 1, 1), (0.1, 0.2, 2, 2), (0.2, 1.0, 1, 1)]
    middle = bins[1]
    assert (middle.mean_abs, middle.bias) == pytest.approx((0.1, 0.0))


def test_contrasts_take_the_sources_with_rows_on_both_sides():
    rows = [Row("a", -0.2, _composition(exposed_comm=0.3)), Row("a", -0.05, _composition()),
            Row("b", 0.1, _composition(exposed_comm=0.3)), Row("b", 0.0, _composition(grad_sync=0.01)),
            Row("c", -0.3, _composition(exposed_comm=0.5))]  # no rows below: no contrast
    contrasts = within_source_contrasts(rows, threshold=0.1)
    assert [c.source for c in contrasts] == ["a", "b"]  # most optimistic difference first
    assert contrasts[0].difference == pytest.approx(-0.15) and contrasts[1].difference == pytest.approx(0.1)
    assert (contrasts[0].bound_rows, contrasts[0].other_rows) == (1, 1)
