"""Memory-bound kernels as bytes per second: layer norm, residual add, GELU, softmax and cross-entropy over
the vocabulary, and a plain copy. Bytes are those read and written once (no cache reuse counted). Also the two
kinds of work PyTorch cannot load vectorised, counted as the cost model counts them: ``silu(gate) * up`` over
the halves of one tensor (5 element sizes per inner element) and eager RMSNorm's chain through FP32 (28 + 4
element sizes per element): the chip's ``strided_memory_efficiency`` and ``converting_memory_efficiency``."""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.measured import StreamKernel, StreamRow
from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats, median_seconds

# The kernels whose median rate stands for the cost model's element-wise work (norms, adds, activations).
ELEMENTWISE = (StreamKernel.LAYER_NORM, StreamKernel.ADD, StreamKernel.GELU)
# The kernels whose rate over the best stream rate is each unvectorised share (the chip fields they set)
UNVECTORISED_FIELDS = {StreamKernel.STRIDED_GLU: "strided_memory_efficiency",
                       StreamKernel.RMS_NORM_CHAIN: "converting_memory_efficiency"}


@dataclass(frozen=True)
class StreamShape:
    kernel: StreamKernel
    rows: int  # tokens
    width: int  # hidden, or vocabulary for softmax / cross-entropy


def shapes(tokens: int, hidden: int, vocab: int) -> list[StreamShape]:
    return [StreamShape(StreamKernel.COPY, tokens, hidden), StreamShape(StreamKernel.LAYER_NORM, tokens, hidden),
            StreamShape(StreamKernel.ADD, tokens, hidden), StreamShape(StreamKernel.GELU, tokens, 4 * hidden),
            StreamShape(StreamKernel.SOFTMAX, tokens, vocab), StreamShape(StreamKernel.CROSS_ENTROPY, tokens, vocab),
            StreamShape(StreamKernel.STRIDED_GLU, tokens, 4 * hidden),
            StreamShape(StreamKernel.RMS_NORM_CHAIN, tokens, hidden)]


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
    elif kind is StreamKernel.STRIDED_GLU:  # width: the inner width; the input holds gate and up side by side
        both = torch.randn(shape.rows, 2 * shape.width, device=dev, dtype=dtype)

        def run():
            gate, up = both.chunk(2, dim=-1)
            return F.silu(gate) * up
        moved = 5 * elem
    elif kind is StreamKernel.RMS_NORM_CHAIN:
        weight = torch.ones(shape.width, device=dev, dtype=dtype)

        def run():
            wide = x.float()
            return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x) * weight
        moved = (28 + 4 * x.element_size()) * x.numel()
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


def time_backward_ratio(tokens: int, hidden: int, device: Device, repeats: Repeats) -> float:
    """Backward over forward time of the element-wise kernels the cost model prices as memory-bound (layer norm
    over ``hidden``, GELU over ``4·hidden``): the median of their two ratios, each the time of a forward with
    autograd recording plus its backward, less the forward, over the forward. The chip field
    ``elementwise_backward_ratio`` (on a GPU's fused kernels about 1, Qi et al. 2024; eager CPU kernels more)."""
    import statistics

    import torch
    import torch.nn.functional as F

    dtype = torch.bfloat16 if device.cuda else torch.float32
    dev = device.torch_device
    ratios = []
    for width, op in ((hidden, "layer_norm"), (4 * hidden, "gelu")):
        x = torch.randn(tokens, width, device=dev, dtype=dtype, requires_grad=True)
        grad = torch.randn(tokens, width, device=dev, dtype=dtype)
        weight = torch.ones(width, device=dev, dtype=dtype, requires_grad=True)
        bias = torch.zeros(width, device=dev, dtype=dtype, requires_grad=True)

        def forward(x=x, weight=weight, bias=bias, op=op, width=width):
            return F.layer_norm(x, (width,), weight, bias) if op == "layer_norm" else F.gelu(x)

        inputs = (x, weight, bias) if op == "layer_norm" else (x,)

        def both(forward=forward, grad=grad, inputs=inputs):
            # autograd.grad, not backward(): no .grad accumulation, which a training step's activations never pay
            torch.autograd.grad(forward(), inputs, grad)

        fwd = median_seconds(forward, repeats, device.cuda)
        ratios.append(max(0.0, median_seconds(both, repeats, device.cuda) - fwd) / fwd)
    return statistics.median(ratios)
