"""Where the published rows' step-time errors lean, grouped by a feature of how each run ran.

A group whose rows lean one way in one source says something about that source; a group whose *sources* lean
the same way says something about pipesim. So each group is summarised both over its rows and over its sources
(each source's mean error, then their median and range), and a group is called one-sided only when at least
four in five of at least three sources lean the way of their median, by 5 % or more. ``python
experiments/residual_groups.py`` prints the table for the presets' predictions; the one group it finds, one
microbatch a step with replicated weights, is :class:`pipesim.analytic.error_band.StepGroup` and carries a record
beside the band.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipesim.analytic.error_band import StepGroup
from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels, Precision, Recompute, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.validation.loso import run_step_groups
from pipesim.validation.runs import PublishedRun

MIN_SOURCES = 3  # fewer sources than this cannot show a lean that is pipesim's rather than one source's
AGREEING = 0.8  # the share of a group's sources that must lean the way of their median
# and by this much at least: about half the mean |left-out error| of a source (9.3 %), so that a lean smaller than
# a source's own scatter (ZeRO-0's +2 % over five sources) is not taken for one of pipesim's
MIN_LEAN = 0.05


def _one_microbatch(run: PublishedRun) -> bool:
    return StepGroup.ONE_MICROBATCH in run_step_groups(run)


def layers_per_virtual_stage(run: PublishedRun) -> float | None:
    """The model's layers over the pipeline's pp × v stages (a row names its model by preset); None for another."""
    model = MODEL_PRESETS.get(run.model)
    return None if model is None else model.layers / (run.pp * run.chunks)


def _interleaved_thin(run: PublishedRun) -> bool:
    # one layer a virtual stage (Megatron's usual at v 8-20), give or take a first or last stage's one layer fewer
    per_stage = layers_per_virtual_stage(run)
    return run.chunks > 1 and per_stage is not None and per_stage <= 1.1


def _interleaved_thick(run: PublishedRun) -> bool:
    per_stage = layers_per_virtual_stage(run)
    return run.chunks > 1 and per_stage is not None and per_stage >= 1.5


# Each feature a run can have, by what it changes: the parallelisms, the schedule, recomputation, the sharding,
# the scale, the sequence, the kernels and the precision. Each is a plain predicate on the row's stated layout.
FEATURES: dict[str, Callable[[PublishedRun], bool]] = {
    "tp 1": lambda r: r.tp == 1,
    "tp 2-4": lambda r: 2 <= r.tp <= 4,
    "tp 8+": lambda r: r.tp >= 8,
    "pp > 1": lambda r: r.pp > 1,
    "interleaved (v > 1)": lambda r: r.chunks > 1,
    "interleaved, one layer a virtual stage": _interleaved_thin,
    "interleaved, 1.5+ layers a virtual stage": _interleaved_thick,
    "cp > 1": lambda r: r.cp > 1,
    "sequence parallel": lambda r: r.sequence_parallel,
    "recompute none": lambda r: r.recompute is Recompute.NONE,
    "recompute full": lambda r: r.recompute is Recompute.FULL,
    "ZeRO-0": lambda r: r.zero is ZeroStage.NONE,
    "ZeRO-1": lambda r: r.zero is ZeroStage.OPTIMIZER,
    "ZeRO-3 / FSDP": lambda r: r.zero >= ZeroStage.PARAMETERS,
    "one microbatch a step, replicated weights": _one_microbatch,
    "64+ microbatches a step": lambda r: r.microbatches >= 64,
    "8 GPUs or fewer": lambda r: r.gpus <= 8,
    "1,024 GPUs or more": lambda r: r.gpus >= 1024,
    "sequence 16k+": lambda r: (r.seq_len or 0) >= 16384,
    "unfused attention": lambda r: r.attention is AttentionKernel.UNFUSED,
    "eager element-wise ops": lambda r: r.elementwise is not ElementwiseKernels.FUSED,
    "FP8": lambda r: r.precision is Precision.FP8,
}


@dataclass(frozen=True)
class GroupLean:
    """How one feature's rows lean: signed errors are predicted / published − 1 (negative: pipesim too fast)."""

    feature: str
    rows: int
    sources: int
    mean: float  # over the rows
    source_median: float  # of each source's mean error
    source_low: float  # the lowest and highest source mean
    source_high: float
    agreeing: int  # sources whose mean error has the sign of the source median

    @property
    def one_sided(self) -> bool:
        """Enough sources, nearly all of them (:data:`AGREEING`) leaning the way of their median, and by more than
        a source's own scatter (:data:`MIN_LEAN`): a lean of pipesim's, not of one source's."""
        return (self.sources >= MIN_SOURCES and self.agreeing >= AGREEING * self.sources
                and abs(self.source_median) >= MIN_LEAN)


def group_leans(rows: Iterable[tuple[str, PublishedRun, float]],
                features: dict[str, Callable[[PublishedRun], bool]] = FEATURES) -> list[GroupLean]:
    """Each feature's :class:`GroupLean` over ``rows`` of (source, run, signed step-time error); a feature no row
    has is left out."""
    rows = list(rows)
    leans = []
    for name, has in features.items():
        by_source: dict[str, list[float]] = {}
        for source, run, error in rows:
            if has(run):
                by_source.setdefault(source, []).append(error)
        if not by_source:
            continue
        errors = [e for v in by_source.values() for e in v]
        means = [statistics.fmean(v) for v in by_source.values()]
        median = statistics.median(means)
        agreeing = sum(m * median > 0 for m in means)
        leans.append(GroupLean(name, len(errors), len(by_source), statistics.fmean(errors), median, min(means),
                               max(means), agreeing))
    return leans
