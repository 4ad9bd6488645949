"""The clock: CUDA events on a GPU, ``time.perf_counter`` on a CPU; warmup runs, then the median of repeats."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Repeats:
    """How many untimed warmup calls, and how many timed ones the median is taken over."""

    warmup: int
    repeats: int
    min_seconds: float = 0.0  # keep repeating (up to 10× repeats) until the timed calls add up to this


QUICK = Repeats(warmup=1, repeats=3)
FULL = Repeats(warmup=3, repeats=10, min_seconds=0.2)


def median_seconds(fn: Callable[[], object], repeats: Repeats, cuda: bool) -> float:
    """Median seconds of one ``fn()`` call."""
    for _ in range(repeats.warmup):
        fn()
    if cuda:
        return _cuda_median(fn, repeats)
    times: list[float] = []
    while len(times) < repeats.repeats or (sum(times) < repeats.min_seconds and len(times) < 10 * repeats.repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cuda_median(fn: Callable[[], object], repeats: Repeats) -> float:
    import torch

    times: list[float] = []
    torch.cuda.synchronize()
    while len(times) < repeats.repeats or (sum(times) < repeats.min_seconds and len(times) < 10 * repeats.repeats):
        times.append(seconds_once(fn, cuda=True))
    return statistics.median(times)


def seconds_once(fn: Callable[[], object], cuda: bool) -> float:
    """Seconds of one ``fn()`` call, timed on the current stream alone (CUDA events; the host clock on a CPU):
    nothing else is waited for, so work queued elsewhere (a collective on its own stream) runs on beside it."""
    if not cuda:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3
