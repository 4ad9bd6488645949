"""The closed loop end to end, small: profile a 2-process gloo world, predict the executor's step with
simulate --hardware, run it for real, and hold the prediction within a factor of thirty of the measured step.
The bound guards the path (a broken table, unit or lookup is off by orders of magnitude: the H100 roofline
would predict this CPU's step ~1000× too fast), not the accuracy, which experiments/closed_loop.py reports with
its noise. It is wide because profile and run time the same shared cores at different moments: on the 2-core
machine with the rest of the suite running beside it, the prediction came out 20-55 % low when quiet and 3.4×
low under load, so a third-to-twice bound failed for a reason that was the machine's, not the code's; with eight
test workers on those two cores it came out 10.8× low once, so the bound is thirty, still far inside the
thousand a broken path gives."""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [pytest.mark.distributed,
              pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")]


def test_profile_predicts_the_executor_within_a_factor(tmp_path):
    from experiments.closed_loop import closed_loop
    from pipesim.analytic.chip_load import load_chip
    from pipesim.analytic.measured import CollectiveOp

    outcomes = closed_loop(tmp_path, fast=True, log=lambda _: None)
    assert len(outcomes) == 1
    outcome = outcomes[0]
    assert outcome.predicted > 0 and all(r > 0 for r in outcome.runs)
    ratio = outcome.predicted / outcome.measured
    assert 1 / 30 < ratio < 30, f"predicted {outcome.predicted:.3f} s, measured {outcome.measured:.3f} s"
    chip = load_chip(str(tmp_path / "closed_loop_cpu_2proc.yaml"))
    assert chip.measured.threads is not None and chip.measured.collective(CollectiveOp.P2P, 2) is not None
    assert chip.provenance["processes"] == 2 and chip.provenance["collective_backend"] == "gloo"
    assert not any(key in chip.provenance for key in ("host", "hostname"))
    # the host's time per kernel, measured (a CPU op's dispatch: microseconds, not the 10 µs preset's exact value)
    assert 1e-8 < chip.host_kernel_overhead < 1e-3 and chip.host_kernel_overhead != 10e-6
    assert chip.elementwise_backward_ratio > 0 and chip.elementwise_backward_ratio != 1.0  # measured, not the default
    # two processes cannot measure the speed spread: the fitted default stays, and the file says so
    notes = " ".join(chip.measured.notes)
    assert "gpu_speed_spread: the default" in notes
    # but they measure what a collective takes from GEMMs beside it, and every process burns a GEMM at once
    assert 0 <= chip.collective_sm_share <= 1 and "collective_sm_share = 1 − a window of" in notes
    assert chip.comm_sm_share == chip.collective_sm_share
    assert 0 < chip.sustained_clock_ratio <= 1 and "sustained_clock_ratio = a 1024³ fp32 GEMM" in notes
    # and the pair's synchronised sends ran (on a CPU a check of the path: gloo synchronises no device, 0 stays)
    assert chip.p2p_sync_overhead == 0.0 and "exchange differ by" in notes


def test_the_table_keeps_oversubscribed_configurations_apart():
    """Four processes on two cores time-slice the ranks (the model has a device per rank): the summary reports
    them apart from the configurations with a core per process, and the table says which is which."""
    from experiments.closed_loop import Config, Outcome, fits_cores, table

    fit, over = Outcome(Config("1f1b", 2, 1), 0.9, (1.0, 1.0, 1.0)), Outcome(Config("1f1b", 2, 2), 0.5, (1.0,))
    assert fits_cores(fit.config, 2) and not fits_cores(over.config, 2)
    text = table([fit, over], cores=2)
    assert "| 2 / 2 |" in text and "| 4 / 2 |" in text
    assert "1 configurations with a core per process: mean |error| 10.0%" in text
    assert "1 with more processes than cores: mean |error| 50.0%" in text
