"""Ranking is the planner's fidelity: does pipesim order the layouts of one job as the measurements do?

A *comparison group* is a set of published runs of one model at one sequence length on one system (one source,
one chip) that differ in how the job is laid out: schedule, parallel degrees, GPU count, micro-batch size,
microbatches, recomputation. A planner needs their order right more than their seconds. Throughput is
tokens per second per GPU, which compares runs of different batches and GPU counts. Per group: the Spearman
rank correlation between predicted and published throughput, and the share of pairs that pipesim orders as
the measurement does (ties in the published figure are not counted); and that share again over the pairs the
measurement sets more than :data:`APART` apart, the choices a planner's ranking decides (closer pairs are within
a run's own spread and the step-time band: for a planner they are ties, which its ``≈#1`` mark says).
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

import pandas as pd

from pipesim.validation.runs import Comparison

MIN_GROUP = 3
#: Published throughputs this far apart, relative, make a pair the planner must order; closer is a tie for it
#: (under the 8 % mean left-out error, which can flip such a pair without the model being wrong about either).
APART = 0.05


def group_key(c: Comparison) -> tuple:
    r = c.run
    return (r.source.split(",")[0], r.model, r.chip, r.seq_len)


@dataclass(frozen=True)
class GroupRanking:
    key: tuple
    labels: list[str]
    published: list[float]  # throughput, tokens per second per GPU
    predicted: list[float]

    @property
    def spearman(self) -> float:
        frame = pd.DataFrame({"published": self.published, "predicted": self.predicted})
        return float(frame.corr(method="spearman").iloc[0, 1])

    @property
    def pairs(self) -> tuple[int, int]:
        """(pairs ordered as measured, pairs compared)."""
        return self.pairs_apart(0.0)

    def pairs_apart(self, margin: float) -> tuple[int, int]:
        """(pairs ordered as measured, pairs compared) over the pairs whose published throughputs differ by more
        than ``margin`` of the lower one (0: every pair but exact ties)."""
        right = total = 0
        for i, j in itertools.combinations(range(len(self.published)), 2):
            low, high = sorted((self.published[i], self.published[j]))
            if high <= low * (1 + margin):
                continue
            total += 1
            right += (self.published[i] > self.published[j]) == (self.predicted[i] > self.predicted[j])
        return right, total


def rankings(comparisons: list[Comparison]) -> list[GroupRanking]:
    groups: dict[tuple, list[Comparison]] = {}
    for c in comparisons:
        groups.setdefault(group_key(c), []).append(c)
    def per_gpu(c: Comparison, step: float) -> float:
        return c.report.tokens_per_step / (step * c.run.gpus)

    return [GroupRanking(key, [c.run.label for c in members], [per_gpu(c, c.published_step_s) for c in members],
                         [per_gpu(c, c.report.step_time) for c in members])
            for key, members in groups.items() if len(members) >= MIN_GROUP]


@dataclass(frozen=True)
class RankingSummary:
    groups: int
    rows: int
    mean_spearman: float
    median_spearman: float
    pairs_right: int
    pairs: int
    apart_right: int = 0  # over the pairs published more than APART apart
    apart: int = 0

    @property
    def pair_accuracy(self) -> float:
        return self.pairs_right / self.pairs if self.pairs else float("nan")

    @property
    def apart_accuracy(self) -> float:
        return self.apart_right / self.apart if self.apart else float("nan")


def summarise(groups: list[GroupRanking]) -> RankingSummary:
    rho = [g.spearman for g in groups if len(set(g.published)) > 1]
    right = sum(g.pairs[0] for g in groups)
    total = sum(g.pairs[1] for g in groups)
    apart = [g.pairs_apart(APART) for g in groups]
    return RankingSummary(len(groups), sum(len(g.labels) for g in groups),
                          statistics.fmean(rho) if rho else float("nan"),
                          statistics.median(rho) if rho else float("nan"), right, total,
                          sum(a for a, _ in apart), sum(n for _, n in apart))
