"""Predictions held against published step-time measurements (Narayanan et al. 2021, A100, Table 1 / §5.1).

The issue's bar is 15 % on step time for dense GPT-style models. The chip's achievable fraction stays at the
preset default (0.6): it is not fitted to these rows. See experiments/narayanan2021_throughput.py.
"""

import pytest

from experiments.narayanan2021_throughput import predict


@pytest.mark.parametrize(("name", "tp", "pp", "gpus", "batch", "published", "schedule"), [
    ("gpt-1.7b", 1, 1, 32, 512, 137, "1f1b"),
    ("gpt-18.4b", 8, 1, 256, 1024, 135, "1f1b"),
    ("gpt-39.1b", 8, 2, 512, 1536, 138, "interleaved"),
    ("gpt-145.6b", 8, 8, 1536, 2304, 148, "interleaved"),
    ("gpt3-175b", 8, 8, 1024, 1536, 140, "interleaved"),
])
def test_throughput_within_15_percent_of_narayanan_2021(name, tp, pp, gpus, batch, published, schedule):
    report = predict(name, tp, pp, gpus, batch, schedule, 2)
    assert report.tflops_per_chip == pytest.approx(published, rel=0.15)
    # Same statement in step time: published FLOPs per step / published rate.
    published_step = report.hardware_flops / (published * 1e12 * gpus)
    assert report.step_time == pytest.approx(published_step, rel=0.15)
