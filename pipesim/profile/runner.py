"""The order of a profile: GEMMs, attention, memory-bound kernels, collectives; one progress bar; the file.

Several processes (``torchrun``) time the compute kernels *at the same time*, each on its own share of the
machine, as the executor's processes run: on a CPU with ``--threads`` per process that is the rate a stage
gets while its neighbours compute too. The table keeps the median over the processes.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, replace

from pipesim.analytic.measured import GemmDtype
from pipesim.errors import PipesimError
from pipesim.profile import attention, collectives, contention, gemm, host, p2p_sync, stream, sustained
from pipesim.profile.chip_file import Measurements, chip_dict, write_chip_file
from pipesim.profile.device import Device, memory_gib, open_device, provenance
from pipesim.profile.spread import speed_spread
from pipesim.profile.timing import FULL, QUICK


@dataclass(frozen=True)
class ProfileRequest:
    output: str
    quick: bool = False
    threads: int | None = None  # CPU threads per process; None: torch's default
    model: object | None = None  # a ModelSpec whose exact shapes are timed too
    tps: tuple[int, ...] = (1,)
    name: str | None = None
    command: tuple[str, ...] = ()
    progress: bool = True
    sustain_seconds: float | None = None  # the GEMM burn's length; None: the device's default, 0: no burn


@dataclass(frozen=True)
class ProfileResult:
    path: str
    data: dict
    device: Device
    skipped: tuple[str, ...]


def _init_distributed() -> tuple[int, int, str | None]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world == 1:
        return 0, 1, None
    import torch
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group(backend, rank=rank, world_size=world)
    return rank, world, backend


def _gathered(value, world: int) -> list:
    """Every process's ``value`` (its rows, or one figure), in rank order."""
    if world == 1:
        return [value]
    import torch.distributed as dist

    gathered: list = [None] * world
    dist.all_gather_object(gathered, value)
    return gathered


def _median_over_ranks(rows: list, rate_fields: tuple[str, ...], world: int, gathered: list | None = None) -> list:
    if world == 1:
        return rows
    gathered = gathered if gathered is not None else _gathered(rows, world)
    return [replace(row, **{f: statistics.median(getattr(g[i], f) for g in gathered) for f in rate_fields})
            for i, row in enumerate(rows)]


def run_profile(request: ProfileRequest) -> ProfileResult:
    """Measure, combine over the processes, and (rank 0) write the chip file."""
    rank, world, backend = _init_distributed()
    try:
        return _run(request, rank, world, backend)
    finally:
        if world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


def _run(request: ProfileRequest, rank: int, world: int, backend: str | None) -> ProfileResult:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    device = open_device(request.threads, rank, world)
    repeats = QUICK if request.quick else FULL
    dtype = GemmDtype.BF16 if device.cuda else GemmDtype.FP32
    gemm_shapes = gemm.grid_shapes(device, request.quick)
    att_shapes = attention.grid_shapes(device, request.quick)
    tokens, hidden, vocab = (512, 512, 8192) if request.quick else (2048, 1024, 32768)
    if request.model is not None:
        model = request.model
        gemm_shapes += gemm.model_shapes(model, list(request.tps))
        att_shapes = attention.model_shapes(model, list(request.tps)) + att_shapes
        tokens, hidden, vocab = model.micro_batch * model.seq_len, model.hidden, model.vocab
    fp8_ok, fp8_reason = device.has_fp8
    fp8_shapes = [s for s in gemm_shapes if s.m % 16 == 0 and s.n % 16 == 0 and s.k % 16 == 0] if fp8_ok else []
    stream_shapes = stream.shapes(tokens, hidden, vocab)
    if device.cuda:  # a model's small tensors are launch-bound on a GPU: a 256 MiB copy gives the HBM rate
        stream_shapes.append(stream.StreamShape(stream.StreamKernel.COPY, 32768, 4096))
    sizes = collectives.QUICK_SIZES if request.quick else collectives.FULL_SIZES
    n_coll = sum(len(sizes) * (4 if n == 2 else 3) for n in collectives.group_sizes(world))
    n_coll += 2 if world > 1 else 0  # the collective beside GEMMs (contention), the synchronised sends (p2p_sync)
    burn_seconds = (sustained.default_seconds(device.cuda, request.quick) if request.sustain_seconds is None
                    else request.sustain_seconds)
    total = (len(gemm_shapes) + len(fp8_shapes) + len(att_shapes) + len(stream_shapes) + 2 + n_coll
             + (1 if burn_seconds > 0 else 0))
    measured = Measurements(dtype)
    if not fp8_ok:
        measured.notes.append(fp8_reason)
    if device.cuda is False:
        measured.notes.append(f"CPU: GEMMs in FP32 (the executor's dtype on CPU), {device.threads} thread(s) per "
                              f"process, {world} process(es) measuring at once")
    with Progress(TextColumn("{task.description:<28}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), disable=not request.progress or rank != 0, transient=True) as bar:
        task = bar.add_task("GEMMs", total=total)

        def tick(what: str):
            bar.update(task, advance=1, description=what)

        rows = []
        for s in gemm_shapes:
            rows.append(gemm.time_gemm(s, dtype, device, repeats))
            tick(f"GEMM {s.m}×{s.n}×{s.k}")
        for s in fp8_shapes:
            rows.append(gemm.time_gemm(s, GemmDtype.FP8, device, repeats))
            tick(f"FP8 GEMM {s.m}×{s.n}×{s.k}")
        per_rank = _gathered(rows, world)
        measured.gemm = _dedupe(_median_over_ranks(rows, ("flops_per_s",), world, per_rank))
        measured.gpu_speed_spread = speed_spread([[r.flops_per_s for r in mine] for mine in per_rank])
        rows = []
        for s in att_shapes:
            rows.append(attention.time_attention(s, device, repeats))
            tick(f"attention s={s.seq} d={s.head_dim}")
        measured.attention = _dedupe_attention(_median_over_ranks(rows, ("forward_flops_per_s",
                                                                         "backward_flops_per_s"), world))
        rows = []
        for s in stream_shapes:
            rows.append(stream.time_stream(s, device, repeats))
            tick(f"{s.kernel.value} {s.rows}×{s.width}")
        measured.stream = _median_over_ranks(rows, ("bytes_per_s",), world)
        measured.host_kernel_overhead = _median_value(host.time_host_overhead(device, repeats), world)
        tick("kernel launch")
        measured.elementwise_backward_ratio = _median_value(
            stream.time_backward_ratio(tokens, hidden, device, repeats), world)
        tick("element-wise backward")
        skipped: tuple[str, ...] = ()
        if world > 1:
            result = collectives.measure(device, sizes, repeats, lambda: tick("collectives"))
            measured.collectives = list(result.rows)
            skipped = result.skipped
            measured.notes += [f"not measured: {s}" for s in skipped]
            bar.update(task, description="GEMMs beside all-reduces")
            measured.contention = _median_over_ranks([contention.measure(device, repeats)],
                                                     ("alone_s", "beside_s"), world)[0]
            tick("GEMMs beside all-reduces")
            bar.update(task, description="synchronised sends")
            measured.p2p_sync = _gathered(p2p_sync.measure(device, request.quick), world)[0]  # process 0's pair
            tick("synchronised sends")
        if burn_seconds > 0:  # last: the burn leaves the chips hot, which no other table should time
            bar.update(task, description=f"sustained GEMM ({burn_seconds:g} s)")
            burned = sustained.burn(device, burn_seconds, repeats, _barrier(world))
            measured.sustained = _median_over_ranks([burned], ("burst_flops_per_s", "sustained_flops_per_s"),
                                                    world)[0]
            tick("sustained GEMM")
    data = chip_dict(measured, device, memory_gib(device), provenance(device, list(request.command), backend),
                     request.name)
    if rank == 0:
        write_chip_file(request.output, data)
    return ProfileResult(request.output, data, device, skipped)


def _median_value(value: float, world: int) -> float:
    return statistics.median(_gathered(value, world))


def _barrier(world: int):
    """Every process waits for the others (nothing to wait for alone)."""
    if world == 1:
        return lambda: None
    import torch.distributed as dist

    return dist.barrier


def _dedupe(rows):
    """One row per (shape, dtype): the model's shapes can repeat the grid's."""
    seen, out = set(), []
    for r in rows:
        key = (r.m, r.n, r.k, r.dtype)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _dedupe_attention(rows):
    """One row per (seq, head_dim): the first (the model's own heads) wins."""
    seen, out = set(), []
    for r in rows:
        if (r.seq, r.head_dim) not in seen:
            seen.add((r.seq, r.head_dim))
            out.append(r)
    return out


def check_request(request: ProfileRequest) -> None:
    if request.model is not None:
        for tp in request.tps:
            if request.model.heads % tp or request.model.ffn_hidden % tp or request.model.vocab % tp:
                raise PipesimError(f"--tp {tp} does not divide model {request.model.name}'s heads, ffn_hidden "
                                   f"and vocab; use a divisor of {request.model.heads}")
