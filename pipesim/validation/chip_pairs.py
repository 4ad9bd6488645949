"""The same published configuration measured on two chips: what the model gets wrong about one chip against the other.

A source that ran one configuration on two chips with one software stack (MosaicML's llm-foundry tables: the
same MPT models, sequence lengths, GPU counts, micro-batches and FSDP settings on H100 and on A100) cancels
everything the two measurements share: the framework's overheads, the kernels' implementation, the settings
pipesim has to infer. What is left in the ratio of pipesim's two errors, ``(1 + e_first) / (1 + e_second)``, is
the model's view of one chip against the other: 1 where pipesim has their relative speed right, below 1 where it
takes the first chip as faster against the second than it is.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.validation.runs import Comparison, PublishedRun, predict


def configuration(run: PublishedRun) -> tuple:
    """Everything of a row but its chip, its source and its measurement: rows with equal keys ran alike."""
    return (run.model, run.seq_len, run.gpus, run.global_batch, run.tp, run.pp, run.cp, run.chunks, run.micro_batch,
            run.schedule, run.recompute, run.sequence_parallel, run.attention, run.elementwise, run.loss, run.zero,
            run.precision)


@dataclass(frozen=True)
class ChipPair:
    """One configuration's rows on two chips, predicted."""

    first: Comparison
    second: Comparison

    @property
    def ratio(self) -> float:
        """``(1 + e_first) / (1 + e_second)``: pipesim's first-over-second speed error (1: right)."""
        return (1 + self.first.step_error) / (1 + self.second.step_error)

    @property
    def label(self) -> str:
        run = self.first.run
        return (f"{run.model} s{run.seq_len} {run.gpus} GPUs b{run.micro_batch} m{run.microbatches} "
                f"{run.recompute.value}")


def chip_pairs(runs: Iterable[PublishedRun], first: str, second: str,
               chips: Callable[[str], ChipSpec | None] = lambda _: None) -> list[ChipPair]:
    """Every configuration of ``runs`` measured on both chip presets ``first`` and ``second``, predicted on the
    chips ``chips(name)`` returns (None: the preset). A configuration listed twice on one chip keeps its first row."""
    by_chip: dict[str, dict[tuple, PublishedRun]] = {first: {}, second: {}}
    for run in runs:
        if run.chip in by_chip:
            by_chip[run.chip].setdefault(configuration(run), run)
    shared = [key for key in by_chip[first] if key in by_chip[second]]
    return [ChipPair(predict(by_chip[first][k], chips(first)), predict(by_chip[second][k], chips(second)))
            for k in shared]


def median_ratio(pairs: list[ChipPair]) -> float:
    return statistics.median(p.ratio for p in pairs)
