"""The GEMM rate a training run sustains, against the rate a short run reaches (chip field
``sustained_clock_ratio``).

Every other table of a profile is a short run: a few timed calls, each shape after an idle moment, at the boost
clock. A training step holds every GPU of the node at its power limit for hours, and the tensor cores run at the
clock that limit sustains. Hugging Face's gpu-fryer measured the gap on an 8×H100 node, every GPU burning cuBLAS
8192² BF16 products for a minute: ~730 TFLOP/s sustained against the 792 of a short run (the H100 preset's 0.92,
``pipesim.analytic.chip_presets``). This module makes the same measurement on the machine a profile runs on:
every process at once (the whole node loaded, as in training) times one large product in a short run, then
burns it back to back for ``seconds``, timing windows of about :data:`WINDOW_SECONDS`; the sustained rate is the
median window of the run's last third (:func:`settled_rate`, after the clock has come down to where the power
limit holds it), and the ratio is it over the short run's, at most 1. The cost model scales the measured GEMM and
attention tables by it (both are short runs, both tensor-core bound); memory-bound kernels keep their rates (HBM
is not clocked down with the SMs).

A GPU comes down to its power-limited clock within seconds; its temperature settles over minutes, so a longer
burn (``--sustain-seconds``) measures a little lower. On a CPU the same burn measures the turbo clock's decay
under all cores' load.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipesim.analytic.measured import GemmDtype
from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats, median_seconds, seconds_once

WINDOW_SECONDS = 0.25  # each timed window of back-to-back products
SETTLED_SHARE = 1 / 3  # the last third of the windows: the clock has settled
# Burn length by (cuda, quick): a GPU reaches its power-limited clock within seconds (gpu-fryer burns a minute),
# a CPU's turbo budget lasts seconds to tens of seconds.
DEFAULT_SECONDS = {(True, False): 60.0, (True, True): 15.0, (False, False): 5.0, (False, True): 1.0}
# The product burned: gpu-fryer's 8192² on a GPU; on a CPU one a window holds many of (~20 ms on two cores)
BURN_SIZE = {True: 8192, False: 1024}
# How a chip file's note on a measured ratio begins (chip_file writes it, compare reads it), and its note without
SUSTAINED_NOTE = "sustained_clock_ratio = a "
SUSTAINED_MISSING = ("sustained_clock_ratio: not measured (--sustain-seconds 0): the tables' short-run rates are "
                     "taken as what a training run sustains")


@dataclass(frozen=True)
class SustainedRun:
    """One process's burn: the short run's rate and the settled rate of the same product."""

    size: int  # an M = N = K product
    dtype: GemmDtype
    burst_flops_per_s: float
    sustained_flops_per_s: float
    seconds: float  # how long the burn ran
    windows: int  # timed windows in it

    field = "sustained_clock_ratio"  # the chip field it measures

    @property
    def ratio(self) -> float:
        """The sustained rate over the short run's, at most 1 (a short run's rate is the ceiling by definition;
        a burn that measures above it has only measured noise)."""
        return min(1.0, self.sustained_flops_per_s / self.burst_flops_per_s)

    @property
    def value(self) -> float:
        return round(self.ratio, 4)

    @property
    def note(self) -> str:
        """How the chip file's figure was measured (``measured.notes``)."""
        return (f"{SUSTAINED_NOTE}{self.size}³ {self.dtype.value} GEMM's settled rate over a {self.seconds:.0f} s "
                f"burn on every process at once ({self.sustained_flops_per_s / 1e9:.4g} GFLOP/s, the median of the "
                f"last third of {self.windows} windows) over its short run's ({self.burst_flops_per_s / 1e9:.4g}), "
                f"at most 1: the GEMM and attention tables are short runs, and the cost model scales them by it")


def default_seconds(cuda: bool, quick: bool) -> float:
    return DEFAULT_SECONDS[(cuda, quick)]


def settled_rate(rates: Sequence[float]) -> float:
    """The median rate of the last :data:`SETTLED_SHARE` of the windows (at least one)."""
    if not rates:
        raise ValueError("a burn needs at least one timed window")
    tail = max(1, round(len(rates) * SETTLED_SHARE))
    return statistics.median(rates[-tail:])


def burn(device: Device, seconds: float, repeats: Repeats, barrier: Callable[[], None] = lambda: None
         ) -> SustainedRun:
    """Time the burn product in a short run, wait for every process (``barrier``), then burn it for
    ``seconds``."""
    import torch

    size = BURN_SIZE[device.cuda]
    dtype = GemmDtype.BF16 if device.cuda else GemmDtype.FP32
    torch_dtype = torch.bfloat16 if device.cuda else torch.float32
    a = torch.randn(size, size, device=device.torch_device, dtype=torch_dtype)
    b = torch.randn(size, size, device=device.torch_device, dtype=torch_dtype)
    flops = 2.0 * size ** 3
    barrier()  # the short run as the tables were timed: every process at once
    short = median_seconds(lambda: a @ b, repeats, device.cuda)
    per_window = max(1, round(WINDOW_SECONDS / short))

    def window():
        for _ in range(per_window):
            a @ b

    barrier()
    rates: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds or not rates:
        rates.append(flops * per_window / seconds_once(window, device.cuda))
    return SustainedRun(size, dtype, flops / short, settled_rate(rates), time.perf_counter() - started,
                        len(rates))

