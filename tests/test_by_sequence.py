"""pipesim.validation.by_sequence: rows' mean error by sequence length, on the chips a caller chooses."""

from dataclasses import replace

import pytest

from experiments.attention_by_sequence import ONE_RATE
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.by_sequence import error_by_sequence, sequence_of
from pipesim.validation.runs import predict
from pipesim.validation.sources import rows_of

# MosaicML's A100 80GB and 40GB rows, both modules: one software stack, 512 to 65,536 tokens
A100_ROWS = [r for r in rows_of("mosaicml2023", "mosaicml_small2023") if r.chip in ("a100-80gb", "a100-40gb")]


def test_groups_hold_every_row_once_and_average_its_errors():
    groups = error_by_sequence(A100_ROWS)
    assert [g.seq_len for g in groups] == sorted({sequence_of(r) for r in A100_ROWS})
    assert sum(g.rows for g in groups) == len(A100_ROWS)
    longest = [r for r in A100_ROWS if sequence_of(r) == groups[-1].seq_len]
    assert groups[-1].mean_error == pytest.approx(sum(predict(r).step_error for r in longest) / len(longest))


def test_the_measured_shape_flattens_the_drift_one_rate_leaves():
    """With one attention rate at every length the long sequences come out much slower than measured and the
    short ones faster; FlashAttention-2's measured A100 shape (the preset) takes most of that drift away."""
    flat = error_by_sequence(A100_ROWS, lambda name: replace(CHIP_PRESETS[name], **ONE_RATE))
    shaped = error_by_sequence(A100_ROWS)
    drift = shaped[-1].mean_error - shaped[0].mean_error
    flat_drift = flat[-1].mean_error - flat[0].mean_error
    assert flat_drift > 0.15 and abs(drift) < flat_drift / 2
