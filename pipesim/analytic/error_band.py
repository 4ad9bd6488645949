"""How far a model-based step time can be trusted: the error that validation by source left out measured on
published runs of the same kind (``python experiments/validation_loso.py --update-bands`` writes the table
in :mod:`.validation_bands`); and a peak memory: the error on every published memory row (:func:`memory_band`).

A kind is the chip family and the GEMM precision: what the fitted constants and the kernels' rates depend on.
The band is a 90/90 tolerance bound on the absolute left-out step-time error over that kind's published rows
(:func:`tolerance_bound`): with 90% confidence, at least nine runs in ten of a validated kind land inside it.
A plain 90th percentile of a few dozen rows would claim more than the rows show: from 8 rows it is their
largest error but one, below the true 90th percentile about as often as above it. A kind with too few rows for
the bound (fewer than ``MIN_ROWS``, 22) takes the bound of all rows pooled, or its own rows' largest error where
that is wider, and says so; a chip no published run was measured on, or a precision no run of its family used,
gets no band, only that remark. Beside the band, a run hears what the published runs of its framework
(:class:`FrameworkRecord`) and of its step group (:class:`GroupRecord`) showed, left out, where those lean one way;
and a step that waits on communication for a tenth of its time or more, how such published steps came out against
their own sources' other runs (:class:`CommunicationRecord`); and a run of a kind issue #24's held-out runs showed
pipesim off by more than its band, how far those runs were off, carried to this release
(:class:`~pipesim.analytic.held_out_kinds.HeldOutRecord`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.analytic.frameworks import runs_megatron_core
from pipesim.analytic.held_out_kinds import HeldOutKind, HeldOutRecord, RunTraits, held_out_records
from pipesim.analytic.layout import Layout, Precision
from pipesim.analytic.params import total_params

if TYPE_CHECKING:
    from pipesim.analytic.model_spec import ModelSpec

COVERAGE = 0.9  # share of runs of a kind the band is to hold
CONFIDENCE = 0.9  # how sure the rows make us that it does
# A step whose busiest rank waits on communication (exposed collectives, the gradient sync, pipeline sends) for
# this share of its time or more is communication-bound (:class:`CommunicationRecord`); set while looking at the
# published rows pooled by their communication share (docs/validation-log.md), so the record describes those rows
COMMUNICATION_BOUND = 0.10


def tolerance_rank(rows: int, coverage: float = COVERAGE, confidence: float = CONFIDENCE) -> int | None:
    """The smallest ``k`` whose ``k``-th smallest of ``rows`` samples lies above the population's ``coverage``
    quantile with probability ``confidence``, whatever the distribution; None when even the largest does not.

    The ``k``-th smallest sample exceeds that quantile exactly when fewer than ``k`` samples fall below it,
    and how many do is Binomial(rows, coverage): the distribution-free one-sided tolerance bound of order
    statistics (Hahn & Meeker 1991, "Statistical Intervals": distribution-free tolerance bounds)."""
    below = 0.0  # P(Binomial(rows, coverage) ≤ k − 1), summed term by term
    for k in range(1, rows + 1):
        below += math.comb(rows, k - 1) * coverage ** (k - 1) * (1 - coverage) ** (rows - k + 1)
        if below >= confidence:
            return k
    return None


def tolerance_bound(values: list[float], coverage: float = COVERAGE, confidence: float = CONFIDENCE) -> float | None:
    """The upper tolerance bound of ``values`` (:func:`tolerance_rank`), or None for too few of them."""
    k = tolerance_rank(len(values), coverage, confidence)
    return None if k is None else sorted(values)[k - 1]


MIN_ROWS = next(n for n in range(1, 1000) if tolerance_rank(n) is not None)  # 22
_FAMILIES = {"a100-80gb": "a100", "a100-40gb": "a100", "a800-80gb": "a100", "h100-sxm": "hopper",
             "h100-96gb-hbm2e": "hopper", "h200": "hopper", "h800": "hopper", "b200": "blackwell",
             "gb200": "blackwell", "b300": "blackwell", "gb300": "blackwell"}


def chip_family(chip_name: str) -> str | None:
    """``hopper``, ``a100``, ``blackwell``, …: the family a preset's published runs are pooled in; None for a chip
    no published run validates."""
    return _FAMILIES.get(chip_name)


def run_kind(chip_name: str, precision: Precision) -> str | None:
    """``hopper-bf16``, ``a100-bf16``, …; None for a chip no published run validates."""
    family = chip_family(chip_name)
    return None if family is None else f"{family}-{precision.value}"


def run_traits(chip_name: str, layout: Layout, model: ModelSpec | None = None) -> RunTraits:
    """What :class:`~pipesim.analytic.held_out_kinds.HeldOutKind`'s predicates read of a run as it runs (without
    ``model``, no sequence and no parameters: enough for the kinds of peak memory alone)."""
    return RunTraits(chip_family(chip_name), model.seq_len if model is not None else 0,
                     total_params(model) if model is not None else 0.0, layout.world_size, layout.tp, layout.pp,
                     layout.recompute, layout.sharding, layout.param_bytes.grads)


@dataclass(frozen=True)
class ErrorBand:
    relative: float | None  # ± this fraction of the step time; None: unvalidated
    kind: str | None
    rows: int  # published rows the band was measured on
    basis: str  # what it is, in words
    validated: bool = True  # False: measured on other kinds of run than the one it is given for
    framework: FrameworkRecord | None = None  # the named framework's published runs, when it is not Megatron
    groups: tuple[GroupRecord, ...] = ()  # the published runs of each step group the run belongs to
    communication: CommunicationRecord | None = None  # when the step is communication-bound
    held_out: tuple[HeldOutRecord, ...] = ()  # issue #24's held-out runs of this kind, carried to this release

    def text(self) -> str:
        records = ([self.framework.text()] if self.framework is not None else []) + [g.text() for g in self.groups]
        if self.communication is not None:
            records.append(self.communication.text())
        records += [h.text() for h in self.held_out]
        note = "".join(f"; {record}" for record in records)
        if self.relative is None:
            return f"(no band: {self.basis}{note})"
        return f"± {self.relative:.0%} ({self.basis}{note})"

    def to_dict(self) -> dict:
        return {"relative": self.relative, "kind": self.kind, "rows": self.rows, "basis": self.basis,
                "validated": self.validated,
                "framework": None if self.framework is None else self.framework.to_dict(),
                "groups": [g.to_dict() for g in self.groups],
                "communication": None if self.communication is None else self.communication.to_dict(),
                "held_out": [h.to_dict() for h in self.held_out]}


@dataclass(frozen=True)
class FrameworkRecord:
    """What validation by source left out measured on the published runs of one training framework other than
    Megatron-LM (whose code most rows ran, and whose kernels are pipesim's defaults): a band pools every framework
    of a kind, and a framework whose steps pipesim misses one way should say so beside it."""

    name: str
    rows: int  # 0: no published run names the framework
    sources: int = 0
    lowest: float = 0.0  # signed left-out step-time errors: predicted / published − 1
    highest: float = 0.0

    def text(self) -> str:
        if not self.rows:
            return f"no published {self.name} run validates --framework {self.name}'s settings"
        runs = "run" if self.rows == 1 else "runs"
        return _record_text(f"{self.name} {runs}", self.rows, self.sources, self.lowest, self.highest)

    def to_dict(self) -> dict:
        return {"name": self.name, "rows": self.rows, "sources": self.sources, "lowest": self.lowest,
                "highest": self.highest}


def _span(lowest: float, highest: float) -> str:
    """``12–21%`` of two signed errors of one sign (by magnitude), ``−5…+8%`` of two of either."""
    if lowest < 0 < highest:
        return f"{lowest:+.0%}…{highest:+.0%}"
    small, large = sorted((abs(lowest), abs(highest)))
    return f"{small * 100:.0f}–{large:.0%}"


def _record_text(what: str, rows: int, sources: int, lowest: float, highest: float,
                 mean: float | None = None) -> str:
    """``the 2 published nanotron runs (1 source) came out 12–21% faster than measured (pipesim too fast), left
    out``: a group of published runs' signed left-out errors in words that follow their signs; ``mean``, where
    given and the signs are mixed, says which way they lean."""
    span = f"{abs(lowest):.0%}" if rows == 1 else _span(lowest, highest)
    if highest < 0:
        direction = "faster than measured (pipesim too fast)"
    elif lowest > 0:
        direction = "slower than measured (pipesim too slow)"
    else:
        direction = "off the measured step"
        if mean is not None and mean:
            way = "faster than measured (pipesim too fast)" if mean < 0 else "slower than measured (pipesim too slow)"
            direction += f", on average {abs(mean):.0%} {way}"
    source = "1 source" if sources == 1 else f"{sources} sources"
    return f"the {rows} published {what} ({source}) came out {span} {direction}, left out"


def framework_record(framework: str | None) -> FrameworkRecord | None:
    """The published-run record of ``framework`` (a ``--framework`` name); None for none named or one that runs
    Megatron-Core (megatron, nemo: pipesim's defaults, and most rows', NeMo's and Megatron-LM's runs pooled in the
    bands, whose rows state each setting a recipe sets)."""
    from pipesim.analytic.validation_bands import FRAMEWORKS

    if framework is None or runs_megatron_core(framework):
        return None
    rows, sources, lowest, highest = FRAMEWORKS.get(framework, (0, 0, 0.0, 0.0))
    return FrameworkRecord(framework, rows, sources, lowest, highest)


class StepGroup(enum.Enum):
    """A way of running a step, across chips and precisions, that validation by source left out found pipesim
    misses one way on the published runs of it: a band pools every run of a kind, and a run of such a group
    should hear what its group's runs showed (:class:`GroupRecord`), as one under a named framework does.

    ``ONE_MICROBATCH``: one microbatch per pipeline a step, the gradients synchronised over data-parallel replicas
    that hold the whole weights (no ZeRO, or ZeRO-1 and Megatron's distributed optimizer): the whole step is one
    forward, one backward, the bucketed gradient sync beside it and the optimizer step after it, with nothing to
    amortise a per-step cost over. Runs that shard their weights (ZeRO-3, FSDP) or their gradients per layer are
    not in it: their one-microbatch rows are not off that way."""

    ONE_MICROBATCH = "one-microbatch"

    @property
    def description(self) -> str:
        return {StepGroup.ONE_MICROBATCH: "runs of one microbatch a step with replicated weights"}[self]

    @property
    def mark(self) -> str:
        """How ``plan`` marks a candidate of the group (with a footnote quoting the group's record)."""
        return {StepGroup.ONE_MICROBATCH: "1mb"}[self]


def step_groups(microbatches: int, sharding: int, replicas: int) -> frozenset[StepGroup]:
    """The step groups of a run of ``microbatches`` per pipeline with ZeRO stage ``sharding`` over ``replicas``
    (dp·cp) ranks that synchronise gradients (one replica: no sync, no group, whatever the stage asked)."""
    one = microbatches == 1 and sharding <= 1 and replicas > 1
    return frozenset({StepGroup.ONE_MICROBATCH}) if one else frozenset()


def groups_of(layout: Layout) -> frozenset[StepGroup]:
    """:func:`step_groups` of a layout as it runs (DualPipe's two copies each take half the microbatches)."""
    return step_groups(layout.microbatches // layout.model_copies, int(layout.sharding), layout.shards)


@dataclass(frozen=True)
class GroupRecord:
    """What validation by source left out measured on the published runs of one :class:`StepGroup`: their
    rows, sources, and the lowest, highest and mean signed left-out step-time error."""

    group: StepGroup
    rows: int  # 0: no published run is of the group
    sources: int = 0
    lowest: float = 0.0  # signed left-out step-time errors: predicted / published − 1
    highest: float = 0.0
    mean: float = 0.0

    def text(self) -> str:
        if not self.rows:
            return f"no published run is of the {self.group.value} group ({self.group.description})"
        return _record_text(self.group.description, self.rows, self.sources, self.lowest, self.highest, self.mean)

    def to_dict(self) -> dict:
        return {"group": self.group.value, "description": self.group.description, "rows": self.rows,
                "sources": self.sources, "lowest": self.lowest, "highest": self.highest, "mean": self.mean}


@dataclass(frozen=True)
class CommunicationRecord:
    """What validation by source left out measured on the published runs whose busiest rank waits on communication
    for :data:`COMMUNICATION_BOUND` of the step or more, each against its own source's other runs
    (:func:`pipesim.validation.residual_composition.within_source_contrasts`): a lean *relative* to the same
    system's compute-bound runs, the comparison ``plan`` makes between layouts, which a band pooled over sources
    does not show (those runs' sources lean both ways as a whole)."""

    share: float  # this step's share spent waiting on communication
    sources: int  # published sources with runs on both sides of the threshold
    leaning: int  # of them, those whose difference has the median's sign
    median_difference: float  # the median over those sources of (bound runs' mean − others' mean) signed error

    def text(self) -> str:
        return f"{self.share:.0%} of the step waits on communication: {self.lean_text()}"

    def lean_text(self) -> str:
        """What the published runs showed, without this step's share."""
        way = "more optimistic (pipesim too fast)" if self.median_difference < 0 else "less optimistic"
        return (f"published steps that waited for {COMMUNICATION_BOUND:.0%} or more came out "
                f"{abs(self.median_difference):.1%} {way} than their own sources' other runs (the median of "
                f"{self.sources} sources, {self.leaning} leaning that way), left out")

    def to_dict(self) -> dict:
        return {"share": self.share, "threshold": COMMUNICATION_BOUND, "sources": self.sources,
                "leaning": self.leaning, "median_difference": self.median_difference}


def communication_record(share: float | None) -> CommunicationRecord | None:
    """The published runs' record for a step that waits on communication for ``share`` of its time; None below
    :data:`COMMUNICATION_BOUND` (or without a share, or where no source had runs on both sides)."""
    from pipesim.analytic.validation_bands import COMMUNICATION

    sources, leaning, median = COMMUNICATION
    if share is None or share < COMMUNICATION_BOUND or not sources:
        return None
    return CommunicationRecord(share, sources, leaning, median)


def group_records(groups: frozenset[StepGroup] | None) -> tuple[GroupRecord, ...]:
    """The published-run record of each of ``groups``, in :class:`StepGroup` order."""
    from pipesim.analytic.validation_bands import STEP_GROUPS

    return tuple(GroupRecord(g, *STEP_GROUPS.get(g.value, (0,))) for g in StepGroup if groups and g in groups)


class LayoutFeature(enum.Enum):
    """What changes how a step runs and what a rank keeps, beyond the model's size and the chip: the parallelisms
    and shardings of a layout. A band measured on runs without a feature says nothing sure about runs with it."""

    TENSOR_PARALLEL = "tp"
    PIPELINE = "pp"
    CONTEXT_PARALLEL = "cp"
    SHARDED_GRADIENTS = "zero-2"  # gradients and optimizer state sharded
    SHARDED_WEIGHTS = "zero-3"  # weights too (ZeRO-3, FSDP): gathered per layer, or per stage under pipelining
    EXPERTS = "moe"


# Megatron-style tensor and pipeline parallelism act independently of each other (tp splits a layer's work,
# weights and activations; pp chooses the layers, the microbatches in flight and the bubble): a layout with both
# is validated when each was. The others change what is gathered, kept and waited for together with the rest of
# the layout (ZeRO-3 with tp or pp, ring attention, routed experts): those need a published row of the same
# combination. The held-out runs of issue #24 that pipesim missed most (step time 21-51%, memory 14-52%) were
# such combinations: FSDP with TP, FSDP with PP, long context with CP.
INDEPENDENT_FEATURES = frozenset({LayoutFeature.TENSOR_PARALLEL, LayoutFeature.PIPELINE})


def layout_features(tp: int, pp: int, cp: int, zero: int, moe: bool) -> frozenset[LayoutFeature]:
    """The features of a layout (``zero``: the stage that shards, 0 when nothing does; ZeRO-1, Megatron's
    distributed optimizer, is not a feature: it changes neither the passes nor what they keep)."""
    features = {LayoutFeature.TENSOR_PARALLEL: tp > 1, LayoutFeature.PIPELINE: pp > 1,
                LayoutFeature.CONTEXT_PARALLEL: cp > 1, LayoutFeature.SHARDED_GRADIENTS: zero == 2,
                LayoutFeature.SHARDED_WEIGHTS: zero >= 3, LayoutFeature.EXPERTS: moe}
    return frozenset(f for f, on in features.items() if on)


def features_of(layout: Layout, moe: bool) -> frozenset[LayoutFeature]:
    """:func:`layout_features` of a layout as it runs (its sharding is none when dp·cp is 1: nothing to shard)."""
    return layout_features(layout.tp, layout.pp, layout.cp, int(layout.sharding), moe)


def unvalidated(features: frozenset[LayoutFeature], regimes: tuple[tuple[str, ...], ...]) -> frozenset[LayoutFeature]:
    """What of ``features`` no published row (the rows' feature sets: ``regimes``) covers; empty if covered."""
    covered = [frozenset(LayoutFeature(name) for name in regime) for regime in regimes]
    if features - INDEPENDENT_FEATURES:  # one row must have all of them
        return frozenset() if any(features <= regime for regime in covered) else features
    return features - frozenset().union(*covered)


def _coverage(basis: str, features: frozenset[LayoutFeature] | None,
              regimes: tuple[tuple[str, ...], ...]) -> tuple[str, bool]:
    """``basis`` with a remark when no published row had ``features``, and whether one had."""
    missing = frozenset() if features is None else unvalidated(features, regimes)
    if not missing:
        return basis, True
    names = [f.value for f in LayoutFeature if f in missing]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    together = " together" if len(names) > 1 else ""
    return f"{basis}; none had {listed}{together}: not validated for this layout", False


def error_band(chip_name: str, precision: Precision, features: frozenset[LayoutFeature] | None = None,
               framework: str | None = None, groups: frozenset[StepGroup] | None = None,
               communication_share: float | None = None,
               held_out: frozenset[HeldOutKind] | None = None) -> ErrorBand:
    """The step-time band of this kind of run; given the layout's ``features``, it says when no published row
    had them (:func:`unvalidated`); given a ``framework`` other than Megatron, what its published runs showed
    (:func:`framework_record`); given the run's step ``groups``, what each one's published runs showed
    (:func:`group_records`); given the share of the step that waits on communication, what the
    communication-bound published runs showed against their sources' others (:func:`communication_record`); given
    the run's ``held_out`` kinds, how far issue #24's held-out runs of each were off, carried to this release."""
    from pipesim.analytic.validation_bands import BANDS, POOLED, STEP_REGIMES

    record = framework_record(framework)
    grouped = group_records(groups)
    waits = communication_record(communication_share)
    known = held_out_records(held_out)
    kind = run_kind(chip_name, precision)
    if kind is None:
        return ErrorBand(None, None, 0, f"no published run on {chip_name} validates it", framework=record,
                         groups=grouped, communication=waits, held_out=known)
    relative, rows, largest = BANDS.get(kind, (None, 0, 0.0))
    if not rows:  # the chip's family was validated, but never at this precision (Blackwell in BF16)
        return ErrorBand(None, kind, 0, f"no published {precision.value} run on {chip_name} validates it",
                         framework=record, groups=grouped, communication=waits, held_out=known)
    if relative is None or rows < MIN_ROWS:
        of_kind = rows
        relative, rows = POOLED
        basis = f"left-out error, 90/90 bound over all {rows} published rows: only {of_kind} of kind {kind}"
        if largest > relative:  # never narrower than an error the kind's own rows showed
            relative = largest
            basis = (f"left-out error: the largest of the {of_kind} published {kind} runs, too few for a 90/90 "
                     f"bound, wider than all {rows} rows' bound")
    else:
        basis = f"left-out error, 90/90 bound over {rows} published {kind} runs"
    basis, validated = _coverage(basis, features, STEP_REGIMES)
    return ErrorBand(relative, kind, rows, basis, validated, record, grouped, waits, known)


def memory_band(features: frozenset[LayoutFeature] | None = None,
                held_out: frozenset[HeldOutKind] | None = None) -> ErrorBand:
    """The peak-memory error validation measured: a 90/90 bound on ``|error|`` over every published peak-memory
    row. No fitted constant moves memory, so in sample is left out. One band for every kind of run: the rows are
    too few to split by kind (most of them are one source's, pure pipelining on A100). Given a layout's
    ``features``, the band says when no published row had them (:func:`unvalidated`): it was measured on other
    kinds of run and may not hold; given the run's ``held_out`` kinds of peak memory, how far issue #24's held-out
    runs of each were off, carried to this release."""
    from pipesim.analytic.validation_bands import MEMORY, MEMORY_REGIMES

    relative, rows, sources = MEMORY
    basis, validated = _coverage(f"90/90 bound over {rows} published peak-memory rows from {sources} sources",
                                 features, MEMORY_REGIMES)
    return ErrorBand(relative, "peak-memory", rows, basis, validated, held_out=held_out_records(held_out))


def may_not_fit(peak: float, capacity: float, band: ErrorBand) -> bool:
    """Whether a peak under ``capacity`` is within its error band of it (the same units for both)."""
    return band.relative is not None and peak <= capacity < peak * (1 + band.relative)
