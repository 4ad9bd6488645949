"""Collectives among the processes ``torchrun`` launched (NCCL on GPUs, gloo on CPUs): all-reduce,
reduce-scatter, all-gather and P2P over a size sweep, fitted to ``t = latency + bytes / bandwidth`` per group
size. ``bytes`` is the whole buffer (all-reduce's, and the unsharded one of reduce-scatter and all-gather), a
P2P send's message, so :mod:`pipesim.analytic.comm` reads the fit with the bytes it already counts.
One process: nothing to measure (the chip file says so)."""

from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import dataclass

from pipesim.analytic.measured import CollectiveOp, CollectiveRow
from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats

QUICK_SIZES = tuple(4**i * 4096 for i in range(5))  # 4 KiB … 1 MiB
FULL_SIZES = tuple(4**i * 4096 for i in range(8))  # 4 KiB … 64 MiB


@dataclass(frozen=True)
class CollectiveResult:
    rows: tuple[CollectiveRow, ...]
    skipped: tuple[str, ...]  # "op over n ranks: why"


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``t = a + N/β`` through (bytes, seconds): (latency ≥ 0, bandwidth)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0
    if slope <= 0:  # flat: latency-bound over the whole sweep; the largest size's rate as the bandwidth
        x, y = max(points)
        return max(mean_y, 0.0), x / y
    latency = mean_y - slope * mean_x
    if latency < 0:
        latency = 0.0
        slope = sum(x * y for x, y in points) / sum(x * x for x, _ in points)
    return latency, 1.0 / slope


def _timed(fn, repeats: Repeats, device: Device, group) -> float:
    import torch
    import torch.distributed as dist

    for _ in range(repeats.warmup):
        fn()
    times = []
    for _ in range(max(repeats.repeats, 3)):
        dist.barrier(group=group)
        if device.cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def group_sizes(world: int) -> list[int]:
    return sorted({world, 2}) if world > 2 else ([2] if world == 2 else [])


def measure(device: Device, sizes: tuple[int, ...], repeats: Repeats, tick=lambda: None) -> CollectiveResult:
    """Every op over each group size (the first ``n`` ranks); rank 0's clock (all ranks take part)."""
    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")  # *_tensor renames
    rows: list[CollectiveRow] = []
    skipped: list[str] = []
    world, rank, dev = dist.get_world_size(), dist.get_rank(), device.torch_device
    dtype = torch.bfloat16 if device.cuda else torch.float32
    for n in group_sizes(world):
        group = dist.new_group(list(range(n))) if n < world else None
        member = rank < n
        for op in CollectiveOp:
            if op is CollectiveOp.P2P and n != 2:
                continue  # a send has two ends: measured once, between ranks 0 and 1
            if op is CollectiveOp.ALL_TO_ALL:
                continue  # the cost model takes a MoE all-to-all from the link and its share, not a fit
            points, error = [], None
            for nbytes in sizes:
                elems = max(n, nbytes // (2 if device.cuda else 4) // n * n)
                seconds = float("nan")
                if member and error is None:
                    try:
                        seconds = _one(op, elems, n, rank, dtype, dev, repeats, device, group)
                    except (RuntimeError, NotImplementedError, ValueError) as err:
                        error = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                dist.barrier()
                tick()
                points.append((elems * (2 if device.cuda else 4), seconds))
            failed = [error] if error else []
            flags = torch.tensor([1.0 if failed else 0.0], device=dev)
            dist.all_reduce(flags)  # every rank agrees whether the op ran
            if flags.item() or not member:
                if flags.item():
                    skipped.append(f"{op.value} over {n} ranks: {failed[0] if failed else 'failed on a peer'}")
                continue
            latency, bandwidth = fit(points)
            rows.append(CollectiveRow(op, n, latency, bandwidth))
        if group is not None:
            dist.destroy_process_group(group)
    # rank 0's rows are the record (every member measured the same collective)
    shared = [rows, skipped]
    dist.broadcast_object_list(shared, src=0)
    return CollectiveResult(tuple(shared[0]), tuple(shared[1]))


def _one(op, elems, n, rank, dtype, dev, repeats, device, group) -> float:
    import torch
    import torch.distributed as dist

    x = torch.ones(elems, dtype=dtype, device=dev)
    if op is CollectiveOp.ALL_REDUCE:
        return _timed(lambda: dist.all_reduce(x, group=group), repeats, device, group)
    if op is CollectiveOp.REDUCE_SCATTER:
        out = torch.empty(elems // n, dtype=dtype, device=dev)
        return _timed(lambda: dist.reduce_scatter_tensor(out, x, group=group), repeats, device, group)
    if op is CollectiveOp.ALL_GATHER:
        shard = torch.ones(elems // n, dtype=dtype, device=dev)
        return _timed(lambda: dist.all_gather_into_tensor(x, shard, group=group), repeats, device, group)
    # P2P between ranks 0 and 1 (the group of two): a ping-pong, half of it is one send
    def ping_pong():
        if rank == 0:
            dist.send(x, 1)
            dist.recv(x, 1)
        elif rank == 1:
            dist.recv(x, 0)
            dist.send(x, 0)

    return _timed(ping_pong, repeats, device, group) / 2
