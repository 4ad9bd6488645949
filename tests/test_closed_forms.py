"""The simulator against the closed forms of docs/architecture.md, exactly, on uniform costs with no communication."""

from __future__ import annotations

import pytest

from pipesim.program.ir import Op
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate

GRID = [(p, m) for p in (1, 2, 3, 4, 6, 8) for m in (1, 2, 3, 4, 5, 8, 13, 16, 32)]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("p", "m"), GRID)
def test_bubble_fraction_gpipe_1f1b(program_of, schedule, p, m):
    result = simulate(program_of(schedule, p, m))
    assert result.metrics.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), abs=1e-9)
    assert result.metrics.bubble_overhead == pytest.approx((p - 1) / m, abs=1e-9)


@pytest.mark.parametrize(("forward", "backward"), [(1.0, 2.0), (0.7, 1.9), (3.0, 3.0)])
def test_bubble_fraction_holds_for_any_uniform_f_and_b(program_of, forward, backward):
    costs = CostModel(StageCosts(forward=forward, backward=backward))
    for p, m in [(4, 16), (8, 5)]:
        result = simulate(program_of("1f1b", p, m), costs)
        assert result.metrics.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), abs=1e-9)
        assert result.metrics.makespan == pytest.approx((m + p - 1) * (forward + backward), abs=1e-9)


@pytest.mark.parametrize(("p", "m"), GRID)
def test_peak_activations_1f1b_and_gpipe(program_of, p, m):
    one_f_one_b = simulate(program_of("1f1b", p, m)).memory.peak_activations
    assert one_f_one_b == tuple(float(min(p - r, m)) for r in range(p))
    gpipe = simulate(program_of("gpipe", p, m)).memory.peak_activations
    assert gpipe == tuple(float(m) for _ in range(p))


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("v", [1, 2, 3, 4])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_interleaved_bubble_overhead(program_of, p, v, groups):
    m = p * groups
    result = simulate(program_of("interleaved", p, m, v))
    assert result.metrics.bubble_overhead == pytest.approx((p - 1) / (v * m), abs=1e-9)


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("v", [2, 3])
@pytest.mark.parametrize("extra", [1, 2, 3, 5])
def test_interleaved_bubble_overhead_when_pp_does_not_divide_m(program_of, p, v, extra):
    """Megatron-Core's larger microbatch groups keep the closed form where p does not divide m."""
    m = 2 * p + extra
    for costs in (CostModel(), CostModel(StageCosts(forward=0.7, backward=1.9))):
        result = simulate(program_of("interleaved", p, m, v), costs)
        assert result.metrics.bubble_overhead == pytest.approx((p - 1) / (v * m), abs=1e-9)


@pytest.mark.parametrize(("p", "m", "group"), [(4, 8, 4), (4, 9, 5), (4, 10, 5), (4, 11, 6), (4, 13, 7),
                                               (3, 7, 4), (8, 12, 12), (8, 17, 9), (2, 5, 3)])
def test_the_microbatch_group_is_the_least_that_megatron_core_accepts(p, m, group):
    """Megatron-Core's rule (``forward_backward_pipelining_with_interleaving``): a group N in [p, m] whose last,
    partial group is empty or holds at least p; pipesim takes the least such N (m = 11, p = 4: N = 4 leaves 3
    and N = 5 leaves 1, both refused; N = 6 leaves 5)."""
    from pipesim.program.limits import interleaved_microbatch_group

    assert interleaved_microbatch_group(p, m) == group
    assert m % group == 0 or m % group >= p
    assert all(0 < m % smaller < p for smaller in range(p, group))


@pytest.mark.parametrize(("p", "v"), [(2, 2), (4, 2), (4, 4), (8, 2)])
def test_interleaved_activation_growth(program_of, p, v):
    """Korthikanti et al. 2023: the first rank holds p·(1 + (p−1)/(p·v)) microbatches' worth of activations
    (in pipesim's unit, one microbatch through a rank's share of the model: a chunk holds 1/v of it)."""
    m = 4 * p
    peak = simulate(program_of("interleaved", p, m, v)).memory.peak_activations[0]
    assert peak == pytest.approx(p * (1 + (p - 1) / (p * v)), abs=1e-9)


def _warmup_forwards(order) -> int:
    """Forwards before the steady state: the steady state's own first F precedes the first B."""
    return next(i for i, ins in enumerate(order) if ins.op is not Op.F) - 1


@pytest.mark.parametrize(("p", "m"), [(4, 8), (4, 2), (8, 16), (3, 1)])
def test_megatron_warmup_1f1b(p, m):
    from pipesim.program.loader import load_schedule

    schedule = load_schedule("1f1b").build(p, m)
    for r, order in enumerate(schedule.orders):
        if min(p - r - 1, m) < m:
            assert _warmup_forwards(order) == min(p - r - 1, m)


@pytest.mark.parametrize(("p", "m", "v", "group"), [(4, 8, 2, 4), (4, 4, 2, 4), (2, 8, 4, 2), (8, 8, 3, 8),
                                                    (4, 10, 2, 5), (4, 11, 3, 6)])
def test_megatron_warmup_interleaved(p, m, v, group):
    """Megatron-Core's warm-up, ``2(p−r−1) + (v−1)·N`` with N the microbatch group (p when p divides m)."""
    from pipesim.program.loader import load_schedule

    schedule = load_schedule("interleaved").build(p, m, v)
    for r, order in enumerate(schedule.orders):
        expected = min(2 * (p - r - 1) + (v - 1) * group, m * v)
        counted = _warmup_forwards(order) if expected < m * v else sum(ins.op is Op.F for ins in order)
        assert counted == expected
