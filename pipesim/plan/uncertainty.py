"""Which planned configurations the model cannot tell from the best (their error bands overlap), which may
not fit (their peak memory is within its band of the cap), which are of layouts no published run had (their
bands were measured on other layouts), which belong to a step group whose published runs pipesim missed one
way (:class:`pipesim.analytic.error_band.StepGroup`), which wait on communication for a tenth of the step or
more, where the published runs came out more optimistic than their own sources' other runs
(:class:`pipesim.analytic.error_band.CommunicationRecord`), and which are of a kind issue #24's held-out runs
showed pipesim off by more than its band (:class:`pipesim.analytic.held_out_kinds.HeldOutKind`).

Each step time carries the band that validation by source left out measured for its kind of run
(:mod:`pipesim.analytic.error_band`). A candidate whose fastest plausible time, ``t·(1 − b)``, is not above the
best one's slowest, ``t₀·(1 + b₀)``, might really be the faster of the two. This is conservative: errors of
runs of one kind are correlated (the left-out bias is shared), so rankings hold better than the bands alone
suggest; the planner's rank correlation on published layouts is reported beside the bands in the README.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.error_band import (
    StepGroup,
    chip_family,
    error_band,
    layout_features,
    may_not_fit,
    memory_band,
    step_groups,
    unvalidated,
)
from pipesim.analytic.held_out_kinds import HeldOutKind, RunTraits
from pipesim.plan.evaluate import communication_share

if TYPE_CHECKING:  # an Outcome's shape only: search.py imports this module
    from pipesim.plan.search import Outcome
    from pipesim.plan.space import PlanRequest


def band_of(outcome: Outcome, chip: ChipSpec) -> float:
    """The relative band of one candidate (0 when its kind is unvalidated: nothing to widen it by)."""
    if chip.achievable_fraction is not None:
        return 0.0
    return error_band(chip.name, outcome.candidate.precision).relative or 0.0


def overlaps_best(ranked: Sequence[Outcome], chip: ChipSpec) -> list[bool]:
    """For each of ``ranked`` (fastest first): does its band overlap the fastest one's?"""
    if not ranked:
        return []
    best = ranked[0].evaluation.step_time * (1 + band_of(ranked[0], chip))
    return [o.evaluation.step_time * (1 - band_of(o, chip)) <= best for o in ranked]


def validated_layout(outcome: Outcome, moe: bool) -> bool:
    """Whether published runs of the candidate's layout features (:func:`pipesim.analytic.error_band.unvalidated`)
    measured both its bands, step time and memory; if not, its bands were measured on other layouts."""
    from pipesim.analytic.validation_bands import MEMORY_REGIMES, STEP_REGIMES

    c = outcome.candidate
    features = layout_features(c.tp, c.pp, c.cp, int(c.sharding), moe)
    return not unvalidated(features, STEP_REGIMES) and not unvalidated(features, MEMORY_REGIMES)


def communication_share_of(outcome: Outcome, request: PlanRequest) -> float:
    """The share of a simulated candidate's step that waits on communication (its band's
    :func:`~pipesim.analytic.error_band.communication_record` reads it)."""
    c = outcome.candidate
    return communication_share(request.model_of(c), request.chip, request.layout_of(c), c.schedule)


def groups_of_candidate(outcome: Outcome) -> frozenset[StepGroup]:
    """The step groups of a candidate (:func:`pipesim.analytic.error_band.step_groups`): a group's published runs
    missed one way, and its record says which."""
    c = outcome.candidate
    return step_groups(c.microbatches, int(c.zero), c.dp * c.cp)


def held_out_kinds_of_candidate(outcome: Outcome, request: PlanRequest) -> frozenset[HeldOutKind]:
    """The kinds of run (:class:`~pipesim.analytic.held_out_kinds.HeldOutKind`), of step time and of peak memory,
    that issue #24's held-out runs showed pipesim off by more than its band, which the candidate is of."""
    c = outcome.candidate
    traits = RunTraits(chip_family(request.chip.name), request.model.seq_len, request.model_params, request.gpus,
                       c.tp, c.pp, c.recompute, c.sharding, request.param_bytes.grads)
    return traits.kinds(of_memory=False) | traits.kinds(of_memory=True)


def near_cap(outcome: Outcome, cap_gib: float) -> bool:
    """Does the candidate peak within the memory band of the cap (it fits as modelled, but may not)?"""
    return outcome.peak_gib is not None and may_not_fit(outcome.peak_gib, cap_gib, memory_band())
