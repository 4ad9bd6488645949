"""The headline number: calibrate from one measured CPU run (pp=2, gloo), predict a different run.

GPipe is predicted from 1F1B's calibration (another schedule), 1F1B and interleaved from their own runs
with half the microbatches. The target is 5% (README reports the measured errors); this shared 2-core
machine's step times wander by ±15% between steps, and a calibration on the very run it predicts lands
within about ±5% of it, so the test allows 25%: wide enough not to flake, tight enough to catch a broken
model (a missing communication cost or a wrong stage mapping is off by far more).
"""

from __future__ import annotations

import pytest

from executors.model import ModelConfig
from experiments.predicted_vs_measured import predict_all

pytestmark = pytest.mark.distributed

MODEL = ModelConfig(layers=4, hidden=128, heads=4, seq_len=64, micro_batch_size=4, vocab=256)


def test_calibrated_prediction_of_another_run():
    predictions = predict_all(MODEL, calibration_mb=4, target_mb=8, steps=4, rounds=2)
    assert [p.schedule for p in predictions] == ["gpipe", "1f1b", "interleaved"]
    for p in predictions:
        assert abs(p.error) < 0.25, f"{p.schedule}: predicted {p.makespan_predicted:.4f} s, measured " \
                                    f"{p.makespan_measured:.4f} s ({p.error:+.1%})"
        # The predicted timeline is the same Program as the measured one: every instruction matches.
        assert len(p.predicted) == len(p.measured)
