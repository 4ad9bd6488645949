"""What a synchronising pipeline send costs the device beyond its bytes (chip field ``p2p_sync_overhead``).

Megatron-LM's pipeline engine sends a pass's output with a batched isend/irecv, waits for it, and synchronises
the device (``batch_p2p_sync``, on by default): the host has nothing queued when the next pass starts, so the
device idles while the host launches it. The preset's 0.33 ms was derived from Qi et al. 2024's A100 profile
(``experiments/p2p_sync_overhead.py``). This module measures it between processes 0 and 1 of a profile: the
same loop of passes (GEMMs of about :data:`PASS_SECONDS`), each followed by a small batched exchange with the
peer, runs once with the device synchronised after every exchange and once without; the difference per pass
is the overhead (at least 0). The other processes wait. The exchange is small on purpose: its bytes are the
P2P fit's; what is measured here is the synchronisation alone.

On a CPU the device is the host: there is nothing to synchronise, the two loops are the same, and the chip file
keeps 0 (the executor posts its sends and goes on); the measurement runs there only as a check of the path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats, median_seconds

PASS_SECONDS = 1e-3  # one pass's GEMMs: long enough that the exchange is a small part, as a layer stack's is
PASS_GEMM = {True: 2048, False: 256}  # keyed by device.cuda
EXCHANGE_ELEMENTS = 1024  # a small message: the bytes' time is the P2P fit's, not this
CALLS = {False: 100, True: 30}  # passes per loop, keyed by quick
ONE_GEMM = Repeats(warmup=2, repeats=5)
# How a chip file's note on a measured overhead begins (chip_file writes it, compare reads it)
P2P_SYNC_NOTE = "p2p_sync_overhead = processes 0 and 1's "
P2P_SYNC_MISSING = "p2p_sync_overhead: not measured (one process): the field's default stands"


@dataclass(frozen=True)
class P2pSyncRun:
    calls: int
    synchronised_s: float  # the whole loop, the device synchronised after each exchange
    free_s: float  # the same loop, the host running ahead

    field = "p2p_sync_overhead"  # the chip field it measures (on a GPU)

    @property
    def difference(self) -> float:
        """Seconds per pass the synchronised loop took beyond the free one (noise can make it negative)."""
        return (self.synchronised_s - self.free_s) / self.calls

    @property
    def overhead(self) -> float:
        """Seconds of idle device per synchronising exchange, at least 0."""
        return max(0.0, self.difference)

    @property
    def value(self) -> float:
        return self.overhead

    @property
    def note(self) -> str:
        """How the chip file's figure was measured (``measured.notes``)."""
        return (f"{P2P_SYNC_NOTE}{self.calls} passes, each followed by a batched isend/irecv, with the device "
                f"synchronised after each ({self.synchronised_s * 1e3:.4g} ms) and without "
                f"({self.free_s * 1e3:.4g} ms), the difference per pass (at least 0)")


def measure(device: Device, quick: bool) -> P2pSyncRun | None:
    """Processes 0 and 1 time the two loops, the others wait; None on the others. Every collective call here
    is made by every process (the pass length agreed on by all), so none waits for a call that never comes."""
    import torch
    import torch.distributed as dist

    size = PASS_GEMM[device.cuda]
    dtype = torch.bfloat16 if device.cuda else torch.float32
    a = torch.randn(size, size, device=device.torch_device, dtype=dtype)
    b = torch.randn(size, size, device=device.torch_device, dtype=dtype)
    wanted = torch.tensor([max(1, round(PASS_SECONDS / median_seconds(lambda: a @ b, ONE_GEMM, device.cuda)))],
                          device=device.torch_device)
    dist.all_reduce(wanted, op=dist.ReduceOp.MAX)  # the same passes on both ends of the pair
    per_pass = int(wanted.item())
    rank = dist.get_rank()
    run = None
    if rank < 2:
        peer = 1 - rank
        send = torch.ones(EXCHANGE_ELEMENTS, device=device.torch_device, dtype=dtype)
        recv = torch.empty_like(send)

        def loop(synchronised: bool) -> float:
            _settle(device)
            start = time.perf_counter()
            for _ in range(CALLS[quick]):
                for _ in range(per_pass):
                    a @ b
                ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]
                for request in dist.batch_isend_irecv(ops):
                    request.wait()
                if synchronised:
                    _settle(device)
            _settle(device)
            return time.perf_counter() - start

        loop(True)  # warm: NCCL's first P2P between the pair sets up its connection
        run = P2pSyncRun(CALLS[quick], loop(True), loop(False))
    dist.barrier()
    return run


def _settle(device: Device) -> None:
    """Wait for the device (a GPU's queue; nothing on a CPU, where the host is the device)."""
    if device.cuda:
        import torch

        torch.cuda.synchronize()
