"""What changing one setting does, measured against predicted: pairs of published runs that differ in one setting.

Two runs of one job (source, model, chip, sequence, global batch) that differ in exactly one setting, say the
micro-batch size, measured a step-time ratio; pipesim predicts one too. The ratio's error, ``log(measured ratio) −
log(predicted ratio)``, is free of everything the two runs share: the chip's constants, the network, the
software's fixed costs. So it tests the one mechanism the setting moves, on every source that varied it, where a
row's own error mixes them all. Grouped by the setting that changed, in the direction its value grows (for
recomputation and the kernels, from the cheaper choice to the dearer one), a group whose pairs lean one way says
pipesim under- or over-counts what that setting costs: ``python experiments/setting_pairs.py``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels, Recompute
from pipesim.validation.runs import Comparison

# The settings a pair may differ in, each read as a number that orders its values (the direction a ratio is taken
# in: from the lower value to the higher). Recomputation from none to full, the element-wise kernels from fused
# to all eager (the fewer fused kernels, the higher), the attention kernel from FlashAttention-2 to the slower
# fused ones (Triton's, v1's) and the unfused, the ZeRO stage from less sharded to more.
_RECOMPUTE_ORDER = {Recompute.NONE: 0, Recompute.SELECTIVE: 1, Recompute.PER_OP: 2, Recompute.FULL: 3}
_ELEMENTWISE_ORDER = {ElementwiseKernels.FUSED: 0, ElementwiseKernels.EAGER_ACTIVATION: 1,
                      ElementwiseKernels.EAGER_FUSED_NORM: 2, ElementwiseKernels.EAGER: 3}
_ATTENTION_ORDER = {AttentionKernel.FUSED: 0, AttentionKernel.TRITON: 1, AttentionKernel.FLASH1: 2,
                    AttentionKernel.UNFUSED: 3}
SETTINGS: dict[str, Callable] = {
    "tp": lambda r: r.tp,
    "pp": lambda r: r.pp,
    "cp": lambda r: r.cp,
    "virtual stages": lambda r: r.chunks,
    "micro-batch": lambda r: r.micro_batch,
    "recomputation": lambda r: _RECOMPUTE_ORDER[r.recompute],
    "sequence parallelism": lambda r: int(r.sequence_parallel),
    "element-wise kernels unfused": lambda r: _ELEMENTWISE_ORDER[r.elementwise],
    "attention kernel slower": lambda r: _ATTENTION_ORDER[r.attention],
    "ZeRO stage": lambda r: int(r.zero),
    "GPUs": lambda r: r.gpus,
}


def _job(c: Comparison) -> tuple:
    r = c.run
    return (r.source, r.model, r.chip, r.seq_len, r.global_batch, r.precision.value, r.schedule)


@dataclass(frozen=True)
class SettingPair:
    setting: str
    source: str
    low: Comparison  # the run with the lower value of the setting
    high: Comparison

    @property
    def measured_ratio(self) -> float:
        return self.high.published_step_s / self.low.published_step_s

    @property
    def predicted_ratio(self) -> float:
        return self.high.report.step_time / self.low.report.step_time

    @property
    def residual(self) -> float:
        """log(measured ratio) − log(predicted ratio): positive where the change costs more than pipesim says."""
        return math.log(self.measured_ratio) - math.log(self.predicted_ratio)


def setting_pairs(comparisons: Iterable[Comparison], source_of: Callable[[object], str]) -> list[SettingPair]:
    """Every pair of rows of one job that differ in exactly one of :data:`SETTINGS`; a row differing in one
    setting from several others makes a pair with each. Rows that publish no step time are left out."""
    jobs: dict[tuple, list[Comparison]] = {}
    for c in comparisons:
        if c.published_step_s is not None:
            jobs.setdefault(_job(c), []).append(c)
    pairs = []
    for rows in jobs.values():
        values = [{name: read(c.run) for name, read in SETTINGS.items()} for c in rows]
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                differ = [name for name in SETTINGS if values[i][name] != values[j][name]]
                # at a fixed data-parallel size the GPU count follows tp, pp and cp: the pair is theirs
                if len(differ) > 1 and differ[-1] == "GPUs" and rows[i].run.dp == rows[j].run.dp:
                    differ = differ[:-1]
                if len(differ) != 1:
                    continue
                name = differ[0]
                low, high = (rows[i], rows[j]) if values[i][name] < values[j][name] else (rows[j], rows[i])
                pairs.append(SettingPair(name, source_of(rows[i].run), low, high))
    return pairs


@dataclass(frozen=True)
class SettingEffect:
    """One setting's pairs: how many, over how many sources, and their residuals' median (in %) and the share
    of the pairs on the median's side; the mean measured and predicted ratios."""

    setting: str
    pairs: int
    sources: int
    median_residual: float
    agreeing: float
    measured: float  # geometric mean of the measured ratios
    predicted: float


def setting_effects(pairs: list[SettingPair]) -> list[SettingEffect]:
    """:class:`SettingEffect` per setting, in :data:`SETTINGS` order, the settings with a pair only."""
    effects = []
    for name in SETTINGS:
        own = [p for p in pairs if p.setting == name]
        if not own:
            continue
        residuals = [p.residual for p in own]
        median = statistics.median(residuals)
        side = sum(1 for r in residuals if (r > 0) == (median > 0) and r != 0) / len(residuals)
        effects.append(SettingEffect(
            name, len(own), len({p.source for p in own}), math.expm1(median), side,
            math.exp(statistics.fmean(math.log(p.measured_ratio) for p in own)),
            math.exp(statistics.fmean(math.log(p.predicted_ratio) for p in own))))
    return effects
