"""What a collective running beside compute takes from it (chip field ``collective_sm_share``).

The cost model overlaps collectives with the passes where the framework does (the data-parallel reduce beside the
last backward, the parameter gather beside the next forward, ZeRO-3's per-layer gathers, TP overlap), and charges
the compute beside them for what the collective takes: ``σ`` of the chip while it runs
(:func:`pipesim.analytic.comm.contended_overlap`). A preset takes σ as NCCL's CTAs over the SMs (24 of an H100's
132: 18 %, where Hu et al. 2025 measured compute 18.9 % slower on average while a collective overlaps it). This
module measures it on the machine a profile runs on: every process times a window of back-to-back GEMMs alone,
then again while all-reduces it queued just before run on their own stream (NCCL's on a GPU; gloo's worker
threads on a CPU) for longer than the window; the compute lost is ``σ = 1 − alone / beside``. What it measures
is the whole contention, SMs, memory bandwidth and, on a CPU, the cores gloo's threads take; at one buffer size
and the all-reduce alone (reduce-scatters and all-gathers run the same kernels' loops).

Needs two processes or more (``torchrun``); one process keeps the preset's rule, and the chip file says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats, median_seconds, seconds_once

GEMM_SIZE = {True: 4096, False: 512}  # keyed by device.cuda: a product a quarter-second window holds many of
COMM_BYTES = {True: 256 * 2**20, False: 16 * 2**20}  # an all-reduce long enough to be bandwidth-bound
WINDOW_SECONDS = 0.25
COVER = 1.5  # the all-reduces queued last this many windows, so the GEMMs never run alone
PAIRS = 3  # alone and beside, alternated: the median of each
CONTENTION_MISSING = ("collective_sm_share: not measured (one process): an overlapped collective takes "
                      "collective_ctas / sm_count of the compute")
REDUCE_REPEATS = Repeats(warmup=1, repeats=5)


@dataclass(frozen=True)
class ContentionRun:
    gemm_size: int
    comm_bytes: int
    ranks: int
    alone_s: float  # one window of GEMMs, nothing beside it
    beside_s: float  # the same window with all-reduces running beside it

    field = "collective_sm_share"  # the chip field it measures

    @property
    def share(self) -> float:
        """σ: the share of the compute's rate the collective took, in [0, 1]."""
        return min(1.0, max(0.0, 1.0 - self.alone_s / self.beside_s))

    @property
    def value(self) -> float:
        return round(self.share, 4)

    @property
    def note(self) -> str:
        """How the chip file's figure was measured (``measured.notes``)."""
        return (f"collective_sm_share = 1 − a window of {self.gemm_size}³ GEMMs alone ({self.alone_s * 1e3:.4g} ms) "
                f"over the same window beside {self.comm_bytes / 2**20:g} MiB all-reduces over {self.ranks} "
                f"processes ({self.beside_s * 1e3:.4g} ms), every process at once: what an overlapped collective "
                f"takes from the compute beside it")


def measure(device: Device, repeats: Repeats) -> ContentionRun:
    """Every process at once: GEMM windows alone and beside queued all-reduces over all processes. The
    collective calls are the same on every process (a fixed count; the queue's length agreed on), or they
    would wait for each other forever."""
    import torch
    import torch.distributed as dist

    size, nbytes = GEMM_SIZE[device.cuda], COMM_BYTES[device.cuda]
    dtype = torch.bfloat16 if device.cuda else torch.float32
    a = torch.randn(size, size, device=device.torch_device, dtype=dtype)
    b = torch.randn(size, size, device=device.torch_device, dtype=dtype)
    buffer = torch.zeros(nbytes // a.element_size(), device=device.torch_device, dtype=dtype)  # sums stay 0
    one_gemm = median_seconds(lambda: a @ b, repeats, device.cuda)
    per_window = max(1, round(WINDOW_SECONDS / one_gemm))

    def window():
        for _ in range(per_window):
            a @ b

    dist.barrier()
    # a fixed count of calls (no time budget): every process must make the same collective calls
    one_reduce = median_seconds(lambda: dist.all_reduce(buffer), REDUCE_REPEATS, device.cuda)
    wanted = math.ceil(COVER * per_window * one_gemm / one_reduce)
    queued = torch.tensor([max(1, wanted)], device=device.torch_device)
    dist.all_reduce(queued, op=dist.ReduceOp.MAX)  # the same count of reduces queued on every process
    queued = int(queued.item())
    alone, beside = [], []
    for _ in range(PAIRS):
        dist.barrier()
        alone.append(seconds_once(window, device.cuda))
        dist.barrier()
        works = [dist.all_reduce(buffer, async_op=True) for _ in range(queued)]
        beside.append(seconds_once(window, device.cuda))  # the GEMMs' stream alone is timed; the reduces go on
        for work in works:
            work.wait()
        if device.cuda:
            torch.cuda.synchronize()
    return ContentionRun(size, nbytes, dist.get_world_size(), statistics.median(alone), statistics.median(beside))
