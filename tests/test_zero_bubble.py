"""Zero-bubble schedules against Qi et al. 2024's closed forms, exactly, on uniform costs with no communication.

Bubble time is the paper's convention, ``max_r span_r − busy_r`` (``RankMetrics.span_bubble``); it is the
same on every rank. The grids stay inside the domain where the paper's shapes give the closed forms exactly
(measured, and documented in ``pipesim.sim.closed_forms.zero_bubble_bubble``):
1F1B and ZB-H1 need ``m ≥ p`` and ``T_W ≤ T_F``; ZB-H2 needs ``m ≥ 2p−1``, ``T_W ≤ T_F`` and
``2·T_W ≤ T_F + T_B``.
"""

from __future__ import annotations

import itertools

import pytest

from pipesim.errors import ScheduleError
from pipesim.program.build import build_program
from pipesim.program.validate import validate
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate

M_W = 0.25  # M_W ≠ M_B / 2, so the per-rank memory pattern tells M_B and M_W apart
TIMES = [0.5, 1.0, 1.5, 2.0]
COSTS = [(t_f, t_b, t_w) for t_f, t_b, t_w in itertools.product(TIMES, repeat=3) if t_w <= t_f]
SHAPES = [(p, m) for p in (1, 2, 3, 4, 6, 8) for m in (1, 2, 3, 5, 8, 11, 16, 24)]


def _costs(t_f: float, t_b: float, t_w: float) -> CostModel:
    return CostModel(StageCosts(forward=t_f, backward_input=t_b, backward_weight=t_w, weight_grad_activation=M_W))


def _check_bubble(result, expected: float, p: int, m: int, t_f: float, t_b: float, t_w: float) -> None:
    """Every rank's bubble time, against the longest span, is the closed form; every rank did m·(F+B+W)."""
    assert [r.span_bubble for r in result.metrics.ranks] == pytest.approx([expected] * p, abs=1e-9)
    assert [r.busy for r in result.metrics.ranks] == pytest.approx([m * (t_f + t_b + t_w)] * p, abs=1e-9)


@pytest.mark.parametrize(("p", "m"), [(p, m) for p, m in SHAPES if m >= p])
def test_1f1b_bubble_in_the_papers_terms(program_of, p, m):
    """The paper's baseline: 1F1B's fused backward costs T_B + T_W, and its bubble is (p−1)(T_F+T_B+T_W)."""
    for t_f, t_b, t_w in COSTS:
        costs = CostModel(StageCosts(forward=t_f, backward=t_b + t_w))
        result = simulate(program_of("1f1b", p, m), costs)
        _check_bubble(result, (p - 1) * (t_f + t_b + t_w), p, m, t_f, t_b, t_w)


@pytest.mark.parametrize(("p", "m"), [(p, m) for p, m in SHAPES if m >= p])
def test_zb_h1_bubble_and_memory(program_of, p, m):
    program = program_of("zb-h1", p, m)
    validate(program)
    for t_f, t_b, t_w in COSTS:
        result = simulate(program, _costs(t_f, t_b, t_w))
        _check_bubble(result, (p - 1) * (t_f + t_b - t_w), p, m, t_f, t_b, t_w)
    # Worker i (from 1) holds (p−i+1)·M_B + (i−1)·M_W at its peak; the first worker p·M_B, as 1F1B.
    peaks = result.memory.peak_activations
    assert peaks == pytest.approx([(p - i + 1) * 1.0 + (i - 1) * M_W for i in range(1, p + 1)], abs=1e-9)
    assert max(peaks) == pytest.approx(p * 1.0, abs=1e-9)


@pytest.mark.parametrize(("p", "m"), [(p, m) for p, m in SHAPES if m >= 2 * p - 1])
def test_zb_h2_bubble_and_memory(program_of, p, m):
    program = program_of("zb-h2", p, m)
    validate(program)
    for t_f, t_b, t_w in COSTS:
        if 2 * t_w > t_f + t_b:
            continue
        result = simulate(program, _costs(t_f, t_b, t_w))
        _check_bubble(result, (p - 1) * (t_f + t_b - 2 * t_w), p, m, t_f, t_b, t_w)
    peaks = result.memory.peak_activations
    assert peaks == pytest.approx([(2 * p - 2 * r - 1) * 1.0 + 2 * r * M_W for r in range(p)], abs=1e-9)
    assert max(peaks) == pytest.approx((2 * p - 1) * 1.0, abs=1e-9)


def test_zb_h2_is_zero_bubble_when_passes_cost_the_same(program_of):
    result = simulate(program_of("zb-h2", 8, 32), _costs(1.0, 1.0, 1.0))
    assert max(r.span_bubble for r in result.metrics.ranks) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("name", ["zb-h1", "zb-h2"])
@pytest.mark.parametrize(("p", "m"), [(p, m) for p, m in SHAPES if m < p])
def test_small_microbatch_counts_still_valid(program_of, name, p, m):
    """Outside the closed form's domain the schedules stay complete and deadlock-free (buffered sends, as
    the executor; like 1F1B, they need batched P2P under rendezvous sends)."""
    validate(program_of(name, p, m))


@pytest.mark.parametrize(("name", "k"), [("zb-h1", 1), ("zb-h2", 2)])
def test_analytic_hook_matches_simulation(name, k):
    from pipesim.program.build import build_program
    from pipesim.program.loader import load_schedule

    p, m, costs = 4, 16, _costs(1.5, 1.0, 0.5)
    analytic = load_schedule(name).analytic(p, m, 1, costs.default)
    result = simulate(build_program(name, p, m).program, costs)
    assert analytic.span_bubble == pytest.approx((p - 1) * (1.5 + 1.0 - k * 0.5), abs=1e-12)
    assert max(r.span_bubble for r in result.metrics.ranks) == pytest.approx(analytic.span_bubble, abs=1e-9)
    # Outside the claimed domain (T_W > T_F) the hook declines rather than print a wrong number.
    assert load_schedule(name).analytic(p, m, 1, _costs(0.5, 1.0, 1.0).default) is None


@pytest.mark.parametrize(("p", "m", "v"), [(p, m, v) for p in (1, 2, 4) for m in (1, 2, 4, 8) for v in (1, 2, 3)])
def test_looped_bfs_is_valid_and_holds_gpipe_memory(program_of, p, m, v):
    program = program_of("looped-bfs", p, m, v)
    validate(program)
    result = simulate(program)
    # Every microbatch's forward on every chunk before any backward: all m microbatches of the rank's share.
    assert max(result.memory.peak_activations) == pytest.approx(m, abs=1e-9)


@pytest.mark.parametrize("p", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("m", [1, 2, 5, 8, 13, 24])
def test_zb_v_validates_on_its_v_placement(p, m):
    """ZB-V sends chunk-0 activations and chunk-1 gradients down one link in an order the receiver does not
    consume them in; lowering posts receives in send order, so every (p, m) validates."""
    program = build_program("zb-v", p, m).program
    assert program.shape.placement.value == "v"
    assert simulate(program).metrics.makespan > 0


@pytest.mark.parametrize(("p", "m"), [(4, 16), (4, 32), (8, 64)])
def test_zb_v_near_zero_bubble_at_1f1b_memory(p, m):
    """Qi et al. 2024 (controllable memory, ZB-V): with T_F = T_B = T_W, no rank idles inside its span and
    the peak activation equals 1F1B's first rank (p microbatches through a rank's share of the model)."""
    equal = CostModel(StageCosts(forward=1, backward=2, backward_input=1, backward_weight=1,
                                 weight_grad_activation=0.5))
    result = simulate(build_program("zb-v", p, m).program, equal)
    assert max(r.span_bubble for r in result.metrics.ranks) == pytest.approx(0.0, abs=1e-9)
    one_f_one_b = simulate(build_program("1f1b", p, m).program).memory.peak_activations
    assert list(result.memory.peak_activations) == pytest.approx([one_f_one_b[0]] * p)
    # The only idle time is the ramp: ranks start and finish their spans at different times.
    assert result.metrics.bubble_fraction < (p - 1) / (m + p - 1) / 3


@pytest.mark.parametrize("p", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("extra", [0, 1, 5, 16])
def test_dualpipe_v_validates_and_beats_1f1b(p, extra):
    m = 2 * p + extra
    program = build_program("dualpipe-v", p, m).program
    per_chunk = CostModel(StageCosts(forward=1, backward=2, backward_input=1, backward_weight=1))
    dualpipe = simulate(program, per_chunk).metrics.bubble_fraction
    one_f_one_b = simulate(build_program("1f1b", p, m).program).metrics.bubble_fraction
    assert dualpipe <= one_f_one_b + 1e-12


def test_dualpipe_v_needs_two_microbatches_per_rank():
    with pytest.raises(ScheduleError, match=r"at least 2·pp microbatches \(--mb 5 < 8\); use --mb 8"):
        build_program("dualpipe-v", 4, 5)
