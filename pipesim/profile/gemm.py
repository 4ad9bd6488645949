"""GEMM timing: a standard (M, N, K) grid plus the exact products of a model's layers (forward, input
gradient, weight gradient), each timed as the executor computes it (``X·Wᵀ``, ``dY·W``, ``dYᵀ·X``).

Each timed call reads the operand a training step brings in from memory — the weight in the forward and the
input gradient, the stored input in the weight gradient — from a different copy, cycling through enough copies
to overflow the last-level cache (:data:`COLD_BYTES`): a step touches each layer's weights once per pass, so a
loop over one hot copy times a product the step never runs. On this project's 2-core CPU (32 MiB L3) the model's
products ran 5–12 % slower cold than hot; on a GPU (50 MB L2 on H100) the large products are cold either way.

Dtypes: BF16 on CUDA (what training runs; FP8 via ``torch._scaled_mm`` where the device has it), FP32 on CPU:
the executor computes in FP32 there (its weights are drawn as FP32 and never cast), so FP32 is the rate the
CPU cost terms need, whatever BF16 would reach. (Speed does not decide it: on this project's 2-core AVX-512
Xeon a single-thread 512³ BF16 product ran ~3× faster than FP32 — torch uses the CPU's BF16 dot-product
instructions — so a CPU BF16 table would predict an executor that does not exist.)
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.measured import GemmDtype, GemmRow
from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats, median_seconds

QUICK_GRID = (128, 256, 512, 1024)
FULL_GRID = (128, 256, 512, 1024, 2048, 4096)
GPU_GRID = (256, 1024, 2048, 4096, 8192)
# Bytes of copies the streamed operand cycles through: above the last-level cache of the CPUs profiled here
# (32 MiB) and of the GPUs of the presets (A100 40 MB, H100 50 MB L2).
COLD_BYTES = {False: 64 * 2**20, True: 128 * 2**20}  # keyed by device.cuda


@dataclass(frozen=True)
class GemmShape:
    """``(M×K)·(K×N)`` in the cost model's naming; ``pass_`` says which product of a linear layer it is."""

    m: int
    n: int
    k: int
    pass_: str = "grid"  # grid, forward, input-grad, weight-grad


def model_shapes(model, tps: list[int]) -> list[GemmShape]:
    """Every GEMM of one layer and of the LM head, per tp degree: what kernels.linear_times and head_times time."""
    from pipesim.analytic.kernels import linear_shapes
    from pipesim.analytic.layout import Layout

    shapes: list[GemmShape] = []
    tokens = model.micro_batch * model.seq_len
    for tp in tps:
        widths = [*linear_shapes(model, Layout(tp=tp)), (model.vocab // tp, model.hidden)]
        for n_out, k_in in widths:
            shapes += [GemmShape(tokens, n_out, k_in, "forward"), GemmShape(tokens, k_in, n_out, "input-grad"),
                       GemmShape(k_in, n_out, tokens, "weight-grad")]
    unique: dict[tuple[int, int, int], GemmShape] = {}
    for s in shapes:
        unique.setdefault((s.m, s.n, s.k), s)
    return list(unique.values())


def grid_shapes(device: Device, quick: bool) -> list[GemmShape]:
    sizes = GPU_GRID if device.cuda else (QUICK_GRID if quick else FULL_GRID)
    return [GemmShape(s, s, s) for s in sizes]


def time_gemm(shape: GemmShape, dtype: GemmDtype, device: Device, repeats: Repeats) -> GemmRow:
    """One product's achieved FLOP/s."""
    import torch

    dev = device.torch_device
    torch_dtype = {GemmDtype.BF16: torch.bfloat16, GemmDtype.FP32: torch.float32}.get(dtype, torch.bfloat16)
    m, n, k = shape.m, shape.n, shape.k
    if dtype is GemmDtype.FP8:
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major second operand (TN)
        one = torch.ones((), device=dev)

        def run():
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    elif shape.pass_ == "input-grad":  # dY[T, out] · W[out, in]
        a = torch.randn(m, k, device=dev, dtype=torch_dtype)
        ws = _copies(lambda: torch.randn(k, n, device=dev, dtype=torch_dtype), device)

        def run():
            return a @ next(ws)
    elif shape.pass_ == "weight-grad":  # dYᵀ · X, dY[T, out], X[T, in]: an (out × in) result, k = T
        dy = torch.randn(k, n, device=dev, dtype=torch_dtype)
        xs = _copies(lambda: torch.randn(k, m, device=dev, dtype=torch_dtype), device)

        def run():
            return dy.t() @ next(xs)
    else:  # forward and the grid: X[T, in] · W[out, in]ᵀ
        a = torch.randn(m, k, device=dev, dtype=torch_dtype)
        ws = _copies(lambda: torch.randn(n, k, device=dev, dtype=torch_dtype), device)

        def run():
            return a @ next(ws).t()
    seconds = median_seconds(run, repeats, device.cuda)
    return GemmRow(m, n, k, dtype, 2.0 * m * n * k / seconds)


def _copies(make, device: Device):
    """An endless cycle over enough copies of ``make()`` to overflow the last-level cache (at least two)."""
    from itertools import cycle

    first = make()
    count = max(2, -(-COLD_BYTES[device.cuda] // (first.numel() * first.element_size())))
    return cycle([first, *(make() for _ in range(count - 1))])
