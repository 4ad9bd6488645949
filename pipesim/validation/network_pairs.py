"""Published runs that differ in their network alone: what the network cost them, against what pipesim says.

A source that ran one model with one code, batch and layout on two clusters whose nodes have different network
bandwidth measured what that bandwidth is worth to that training job; pipesim's prediction of the two moves by
what its collectives and their overlap make of it. The pairs here are rows of the step-time table alike in
everything :func:`pair_key` reads and apart in each GPU's share of its node's network (the row's
``inter_node_gbps``, else its chip preset's); the GPU count may differ, as the clusters did. Each pair is
compared as a ratio of throughputs per GPU (the faster network's row over the thinner one's), measured and
predicted, the prediction at each value of ZeRO-3's overlap share (``ChipSpec.zero3_overlap_share``: the share of
the per-layer collectives' kernel work taken to run beside compute), the one fitted constant that sets how much of
its collectives a sharded step waits for (:mod:`pipesim.validation.constants`).

What it cannot say: a pair's rows also differ in their GPU count and their cluster's other parts (its NVLink, its
hosts, its software build), which the ratio lumps with the network; and the published figures are rounded (a
two-digit MFU is ±1 %).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import combinations

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.runs import Comparison, PublishedRun, predict
from pipesim.validation.sources import module_of, platform_of

OVERLAP_SHARES: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)  # the constant's grid (validation.constants)


def network_gbps(run: PublishedRun) -> float:
    """Each GPU's share of its node's network in Gb/s as the row ran: its own where it states one, else its chip's."""
    if run.inter_node_gbps is not None:
        return run.inter_node_gbps
    return CHIP_PRESETS[run.chip].inter_node_bandwidth * 8 / 1e9


def _team(run: PublishedRun) -> str:
    """Whose code and scripts a row ran: its validation platform (a source module, or the module it shares a
    platform with: :func:`pipesim.validation.sources.platform_of`); a row of no module, its source's citation."""
    try:
        return platform_of(module_of(run))
    except KeyError:
        return run.source.split(",")[0]


def pair_key(run: PublishedRun) -> tuple:
    """What two rows must share to be a network pair: one team's code (:func:`_team`), the model, chip, sequence,
    micro-batch, layout and the settings that set a step's work."""
    return (_team(run), run.model, run.chip, run.seq_len, run.micro_batch, run.tp,
            run.pp, run.cp, run.chunks, run.microbatches, run.recompute, run.recompute_layers, run.zero,
            run.zero_collectives, run.shard_group, run.precision, run.elementwise, run.attention, run.loss,
            run.optimizer_bytes, run.framework)


@dataclass(frozen=True)
class NetworkPair:
    """Two rows of one job on a thinner and a faster network: their throughputs per GPU, measured and predicted."""

    thin: PublishedRun
    fast: PublishedRun
    measured: float  # the faster network's throughput per GPU over the thinner one's, as published
    predicted: dict[float, float]  # the same ratio as pipesim predicts it, at each overlap share

    @property
    def label(self) -> str:
        return (f"{self.thin.model} {self.thin.chip}: {self.thin.gpus} GPUs at {network_gbps(self.thin):g} Gb/s "
                f"→ {self.fast.gpus} at {network_gbps(self.fast):g}")


def _per_gpu(comparison: Comparison, step_s: float) -> float:
    """Tokens per second per GPU of a row's step of ``step_s`` seconds (published or predicted)."""
    return comparison.report.tokens_per_step / (step_s * comparison.run.gpus)


def _pair(thin: PublishedRun, fast: PublishedRun, shares: Sequence[float]) -> NetworkPair:
    """The pair's throughput ratios, each row predicted once per share (its published step is the same in each)."""
    compared = {share: [predict(r, chip=replace(CHIP_PRESETS[r.chip], zero3_overlap_share=share))
                        for r in (fast, thin)] for share in shares}
    predicted = {share: _per_gpu(f, f.report.step_time) / _per_gpu(t, t.report.step_time)
                 for share, (f, t) in compared.items()}
    f, t = compared[shares[0]]
    return NetworkPair(thin, fast, _per_gpu(f, f.published_step_s) / _per_gpu(t, t.published_step_s), predicted)


def network_pairs(rows: Iterable[PublishedRun], shares: Sequence[float] = OVERLAP_SHARES) -> list[NetworkPair]:
    """Every pair of step-time rows alike by :func:`pair_key` whose networks differ, thinner first."""
    groups: dict[tuple, list[PublishedRun]] = {}
    for run in rows:
        if run.measures_step:
            groups.setdefault(pair_key(run), []).append(run)
    pairs = []
    for members in groups.values():
        for a, b in combinations(members, 2):
            if network_gbps(a) == network_gbps(b):
                continue
            thin, fast = sorted((a, b), key=network_gbps)
            pairs.append(_pair(thin, fast, shares))
    return pairs
