"""The host's time to issue one kernel: a chain of tiny autograd-recorded ops, each one kernel, whose device
work is far shorter than its launch, so the chain runs at the host's pace (chip field
``host_kernel_overhead``, the cost model's host floor: :func:`pipesim.analytic.kernels.layer_kernel_counts`).

On a GPU the CUDA events around the chain measure what the device waited for the host; on a CPU the host is
the device, and the chain's time is each op's dispatch (the measured tables' rates already include it, so
there the floor never binds, and the figure is what an op costs the executor's thread)."""

from __future__ import annotations

from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats, median_seconds

CHAIN = 200  # ops per timed call: enough that the events' own cost is a small share


def time_host_overhead(device: Device, repeats: Repeats) -> float:
    """Seconds the host takes per kernel, median over the repeats."""
    import torch

    x = torch.zeros(8, device=device.torch_device, requires_grad=True)

    def run():
        y = x
        for _ in range(CHAIN):
            y = y + 1.0  # one kernel, and an autograd node, as a training forward records
        return y

    return median_seconds(run, repeats, device.cuda) / CHAIN
