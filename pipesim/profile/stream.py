"""Memory-bound kernels as bytes per second: layer norm, residual add, GELU, softmax and cross-entropy over
the vocabulary, and a plain copy. Bytes are those read and written once (no cache reuse counted)."""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.measured import StreamKernel, StreamRow
from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats, median_seconds

# The kernels whose median rate stands for the cost model's element-wise work (norms, adds, activations).
ELEMENTWISE = (StreamKernel.LAYER_NORM, StreamKernel.ADD, StreamKernel.GELU)


@dataclass(frozen=True)
class StreamShape:
    kernel: StreamKernel
    rows: int  # tokens
    width: int  # hidden, or vocabulary for softmax / cross-entropy


def shapes(tokens: int, hidden: int, vocab: int) -> list[StreamShape]:
    return [StreamShape(StreamKernel.COPY, tokens, hidden), StreamShape(StreamKernel.LAYER_NORM, tokens, hidden),
            StreamShape(StreamKernel.ADD, tokens, hidden), StreamShape(StreamKernel.GELU, tokens, 4 * hidden),
            StreamShape(StreamKernel.SOFTMAX, tokens, vocab), StreamShape(StreamKernel.CROSS_ENTROPY, tokens, vocab)]


def time_stream(shape: StreamShape, device: Device, repeats: Repeats) -> StreamRow:
    import torch
    import torch.nn.functional as F

    dtype = torch.bfloat16 if device.cuda else torch.float32
    dev = device.torch_device
    x = torch.randn(shape.rows, shape.width, device=dev, dtype=dtype)
    y = torch.randn_like(x)
    elem = x.element_size() * x.numel()
    kind = shape.kernel
    if kind is StreamKernel.COPY:
        def run():
            y.copy_(x)
        moved = 2 * elem
    elif kind is StreamKernel.LAYER_NORM:
        weight = torch.ones(shape.width, device=dev, dtype=dtype)
        bias = torch.zeros(shape.width, device=dev, dtype=dtype)

        def run():
            return F.layer_norm(x, (shape.width,), weight, bias)
        moved = 2 * elem
    elif kind is StreamKernel.ADD:
        def run():
            return x + y
        moved = 3 * elem
    elif kind is StreamKernel.GELU:
        def run():
            return F.gelu(x)
        moved = 2 * elem
    elif kind is StreamKernel.SOFTMAX:
        def run():
            return torch.softmax(x.float(), dim=-1)
        moved = 2 * x.numel() * 4
    else:  # cross-entropy of FP32 logits against random targets
        logits = x.float()
        targets = torch.randint(shape.width, (shape.rows,), device=dev)

        def run():
            return F.cross_entropy(logits, targets)
        moved = x.numel() * 4
    seconds = median_seconds(run, repeats, device.cuda)
    return StreamRow(kind, float(moved), moved / seconds)
