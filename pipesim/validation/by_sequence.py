"""Published rows' step-time error by sequence length: the evidence for how attention's rate depends on its shape.

Attention's share of a layer grows with the sequence (its FLOPs per token grow as the sequence, the linears' do
not), so a kernel rate that is wrong at some sequence lengths shows as an error that drifts with the length
across otherwise alike rows, whatever the model. :func:`error_by_sequence` groups rows by their sequence and
averages the signed error of each group, predicted on the chips a caller chooses (the presets as shipped, or a
variant of one, to set two kernel models side by side on the same rows).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.validation.runs import PublishedRun, predict


@dataclass(frozen=True)
class SequenceGroup:
    """The rows of one sequence length: how many, and their mean signed step-time error."""

    seq_len: int
    rows: int
    mean_error: float


def sequence_of(run: PublishedRun) -> int:
    """The row's sequence length: its own, or its model preset's where the row does not state one."""
    return run.seq_len if run.seq_len is not None else MODEL_PRESETS[run.model].seq_len


def error_by_sequence(runs: Iterable[PublishedRun],
                      chips: Callable[[str], ChipSpec | None] = lambda _: None) -> list[SequenceGroup]:
    """Mean signed step-time error of ``runs`` by sequence length, shortest first, each row predicted on
    ``chips(run.chip)`` (None: the preset). Rows without a published step are left out."""
    errors: dict[int, list[float]] = {}
    for run in runs:
        error = predict(run, chips(run.chip)).step_error
        if error is not None:
            errors.setdefault(sequence_of(run), []).append(error)
    return [SequenceGroup(seq, len(values), statistics.fmean(values)) for seq, values in sorted(errors.items())]
