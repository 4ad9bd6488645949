"""pipesim profile's measured speed spread (pipesim.profile.spread): the processes' speeds from one table timed by
all of them at once, by hand, and the chip file carrying it (or saying why it keeps the fitted default)."""

import math
import statistics

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import chip_from_dict
from pipesim.analytic.measured import GemmDtype, GemmRow, StreamKernel, StreamRow
from pipesim.profile.chip_file import MAX_SPREAD, Measurements, chip_dict
from pipesim.profile.device import Device, DeviceKind
from pipesim.profile.spread import MIN_PROCESSES, process_speeds, speed_spread

SHAPES = [1.0e9, 2.0e9, 5.0e9]  # a typical process's rates on three shapes


def _rates(factors, noise=None):
    """Each process runs every shape at its own factor of the typical rate (times a per-shape noise)."""
    noise = noise or [[1.0] * len(SHAPES) for _ in factors]
    return [[rate * f * n for rate, n in zip(SHAPES, row, strict=True)] for f, row in zip(factors, noise, strict=True)]


def test_speeds_are_each_process_over_the_median_one():
    speeds = process_speeds(_rates([1.0, 0.9, 1.1, 1.0, 0.95]))
    assert speeds == pytest.approx([1.0, 0.9, 1.1, 1.0, 0.95])
    factors = [1.0, 0.98, 1.03, 0.97, 1.01, 1.0, 0.99, 1.02]
    assert speed_spread(_rates(factors)) == pytest.approx(statistics.stdev(math.log(f) for f in factors))


def test_one_shapes_noise_averages_out_over_the_shapes():
    # every process equally fast, each shape of each process off by its own ±3 %: the spread is far below 3 %
    noise = [[1.03, 0.97, 1.0], [0.97, 1.0, 1.03], [1.0, 1.03, 0.97], [1.0, 1.0, 1.0]]
    assert speed_spread(_rates([1.0] * 4, noise)) < 0.005


def test_too_few_processes_measure_nothing_and_bad_tables_are_refused():
    assert speed_spread(_rates([1.0, 0.5, 2.0][: MIN_PROCESSES - 1])) is None
    with pytest.raises(ValueError):
        process_speeds([[1.0, 2.0], [1.0]])


def _measurements(spread):
    m = Measurements(GemmDtype.FP32, gemm=[GemmRow(256, 256, 256, GemmDtype.FP32, 1e11)],
                     stream=[StreamRow(k, 1e8, 1e10) for k in (StreamKernel.LAYER_NORM, StreamKernel.COPY)])
    m.gpu_speed_spread = spread
    return m


@pytest.mark.parametrize("spread", [None, 0.013, 0.5])
def test_the_chip_file_carries_the_measured_spread_or_says_why_not(spread):
    data = chip_dict(_measurements(spread), Device(DeviceKind.CPU, "cpu", 1), 16.0, {}, "probe")
    chip = chip_from_dict(data, "probe")
    notes = " ".join(data["measured"]["notes"])
    if spread is None:
        assert "gpu_speed_spread" not in data and chip.gpu_speed_spread == CHIP_PRESETS["h100-sxm"].gpu_speed_spread
        assert "fewer than four processes" in notes
    else:
        assert chip.gpu_speed_spread == pytest.approx(min(spread, MAX_SPREAD))
        assert "gpu_speed_spread = the standard deviation" in notes
        assert ("kept to the field's bound" in notes) == (spread > MAX_SPREAD)
