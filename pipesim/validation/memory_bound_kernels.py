"""The HBM share PyTorch's memory-bound kernels reach where they cannot load vectorised, from a published table of
measured kernel times: the chip fields ``strided_memory_efficiency`` and ``converting_memory_efficiency``.

**The table.** Liger-Kernel's benchmark results (``github.com/linkedin/Liger-Kernel``,
``benchmark/data/all_benchmark_data.csv`` at ead96b6, August 2026): median forward times of the reference
implementations it compares its Triton kernels against, on an NVIDIA H100 80GB HBM3 (SXM) and an
A100-SXM4-80GB. The rows used, the two largest sizes of each sweep, are shipped as
``pipesim/validation/data/liger_memory_bound.csv``. A kernel benchmark, not a training run: no published row
informs these constants, so validation does not refit them (:mod:`pipesim.validation.constants`).

**Why some kernels stream slower.** ATen runs an element-wise op with vectorised loads only when every operand is
contiguous and of the op's own dtype; otherwise it takes an unrolled path that loads an element at a time
(``gpu_kernel_impl`` in ``aten/src/ATen/native/cuda/CUDALoops.cuh``: the no-cast branch and the contiguity
test). Two kinds of work a training step runs as PyTorch ops fall on that path:

- *strided*: a gated MLP's activation on the output of one fused gate-and-up GEMM (Megatron-Core's
  ``linear_fc1``, nanotron's ``gate_up_proj``) reads the two halves of one tensor, each row of each half a
  stride apart. Measured on H100: torch's ``silu(gate) * up`` over ``torch.chunk`` (pipesim's eager activation,
  5d: 10 bytes per inner element) at 0.54 of HBM, and Megatron-Core's ``bias_swiglu_impl``, jit-fused, on the same
  halves (3d: 6 bytes, pipesim's fused activation) at 0.56: fusing does not restore the vectorised loads.
  Liger's own kernel, which indexes the two halves itself, reaches 0.92.
- *converting*: the eager chains that go through FP32 and back, with broadcasts and rotated or complex views:
  RMSNorm's eight kernels and RoPE's (pipesim's ``--elementwise eager``). Measured on H100: Llama 4's RoPE in
  the complex form (``xq.float()``, the complex product, ``type_as``: exactly the 16 + 2d bytes an element pipesim
  counts) at 0.70. On A100: Hugging Face's ``LlamaRMSNorm`` on BF16 input with the benchmark's FP32 weight (38
  bytes an element: its last product writes FP32) at 0.67, and its rotate-half RoPE on transposed query and key
  views (20 bytes an element) at 0.44.

The controls, contiguous ops of one dtype, stream near ``memory_efficiency`` (0.9): on H100 torch's
``relu(x)`` then ``square`` at 0.92 and Liger's SwiGLU at 0.92; on A100, ``F.cross_entropy`` on FP32 logits at
0.83 (a softmax's three reads and one write) and Liger's RMSNorm at 0.76. A100's contiguous kernels thus reach
somewhat less than the 0.9 its preset takes; that field is not changed here (its two controls disagree by more
than that gap).

**Each case's share**: the bytes pipesim counts for the op over the time between the sweep's two sizes (which
cancels a fixed per-kernel cost), over the chip's HBM bandwidth (:func:`case_shares`). A preset's value is the
mean of its chip's cases of the kind (:func:`derived_shares`); chips with no case of a kind take the H100's
(its default), a transfer stated where the field is documented.

What is uncertain: one or two cases a kind and chip; the benchmarks' shapes (a few thousand rows of 8–32k
elements) against a training step's; which PyTorch release each benchmark ran (August 2025 to July 2026 on
H100, September 2024 on A100). Not modelled though measured: the losses. Megatron-LM's unfused cross-entropy
reaches 0.77 (forward) and 0.83 (backward) at pipesim's byte counts and its compiled one 0.60 and 0.50 (the same
table, ``megatron_cross_entropy``); these chains mix vectorised and unvectorised kernels, and the backward times
there include the forward and a sum's gradient, so no single share is read from them.
"""

from __future__ import annotations

import csv
import enum
import statistics
from dataclasses import dataclass
from importlib import resources

from pipesim.analytic.chip_presets import CHIP_PRESETS

TABLE = "liger_memory_bound.csv"


class StreamKind(enum.Enum):
    """How a measured kernel loads its operands."""

    STRIDED = "strided"  # reads the halves of one tensor
    CONVERTING = "converting"  # an eager chain through FP32 and back
    VECTORISED = "vectorised"  # contiguous operands of one dtype: the control


@dataclass(frozen=True)
class MeasuredOp:
    """What one benchmark row measured, as pipesim counts it: ``bytes_per_element`` of ``rows × width``."""

    kind: StreamKind
    bytes_per_element: float
    label: str


# (kernel, provider) → the op as pipesim counts its bytes (d = 2, BF16). The gated activation: eager 5d, fused 3d
# (kernels._activation_bytes_per_element); RoPE in the complex form 16 + 2d (kernels._rope_bytes); Hugging Face's
# RMSNorm on BF16 with an FP32 weight: to(fp32) 2 + 4, pow 4 + 4, mean 4, × rsqrt 4 + 4, to(bf16) 4 + 2, the FP32
# weight's product 2 + 4; its rotate-half RoPE: q·cos 2 + 2, the negated half 1 + 1, the concatenation 2 + 2,
# ·sin 2 + 2, the sum 2 + 2 + 2; relu then square 2 + 2 each; Liger's kernels read and write once; F.cross_entropy on
# FP32 logits: three reads and a write of 4.
OPS: dict[tuple[str, str], MeasuredOp] = {
    ("megatron_swiglu", "torch"): MeasuredOp(StreamKind.STRIDED, 10, "torch silu(gate) * up over torch.chunk"),
    ("megatron_swiglu", "megatron"): MeasuredOp(StreamKind.STRIDED, 6, "Megatron-Core bias_swiglu_impl (compiled)"),
    ("megatron_swiglu", "liger"): MeasuredOp(StreamKind.VECTORISED, 6, "Liger SwiGLU (Triton, halves indexed)"),
    ("llama4_rope", "huggingface"): MeasuredOp(StreamKind.CONVERTING, 20, "Llama 4 RoPE, complex form (eager)"),
    ("relu_squared", "torch"): MeasuredOp(StreamKind.VECTORISED, 8, "torch relu then square"),
    ("rms_norm", "huggingface"): MeasuredOp(StreamKind.CONVERTING, 38, "Hugging Face LlamaRMSNorm (eager)"),
    ("rope", "huggingface"): MeasuredOp(StreamKind.CONVERTING, 20, "Hugging Face rotate-half RoPE (eager)"),
    ("rms_norm", "liger"): MeasuredOp(StreamKind.VECTORISED, 4, "Liger RMSNorm (Triton)"),
    ("cross_entropy", "huggingface"): MeasuredOp(StreamKind.VECTORISED, 16, "F.cross_entropy on FP32 logits"),
}
# The benchmark's GPU → the preset it is
GPUS = {"NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA A100-SXM4-80GB": "a100-80gb"}
# The presets each measured chip's shares set (the same die: HBM and NVLink differ, not the kernels' loads)
FAMILIES = {"h100-sxm": ("h100-sxm", "h100-96gb-hbm2e", "h800", "h200"),
            "a100-80gb": ("a100-80gb", "a100-40gb", "a800-80gb")}
FIELDS = {StreamKind.STRIDED: "strided_memory_efficiency", StreamKind.CONVERTING: "converting_memory_efficiency"}


@dataclass(frozen=True)
class CaseShare:
    """One measured op's streaming rate as a share of its chip's HBM bandwidth."""

    chip: str
    op: MeasuredOp
    share: float


def load_rows() -> list[dict[str, str]]:
    """The shipped table's rows (comment lines start with ``#``)."""
    text = resources.files("pipesim.validation.data").joinpath(TABLE).read_text()
    return list(csv.DictReader(line for line in text.splitlines() if line and not line.startswith("#")))


def case_shares() -> list[CaseShare]:
    """Each measured op's share: its counted bytes between the sweep's two sizes over the time between them."""
    sweeps: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for row in load_rows():
        sweeps.setdefault((row["gpu"], row["kernel"], row["provider"]), []).append(row)
    shares = []
    for (gpu, kernel, provider), (small, large) in sweeps.items():
        op = OPS[(kernel, provider)]
        chip = GPUS[gpu]
        elements = int(large["rows"]) * int(large["width"]) - int(small["rows"]) * int(small["width"])
        seconds = (float(large["ms"]) - float(small["ms"])) * 1e-3
        shares.append(CaseShare(chip, op, op.bytes_per_element * elements / seconds / CHIP_PRESETS[chip].hbm_bandwidth))
    return shares


def derived_shares() -> dict[tuple[str, StreamKind], float]:
    """(chip, kind) → the mean share of the chip's measured cases of that kind, rounded to the presets' 0.01."""
    grouped: dict[tuple[str, StreamKind], list[float]] = {}
    for case in case_shares():
        grouped.setdefault((case.chip, case.op.kind), []).append(case.share)
    return {key: round(statistics.mean(values), 2) for key, values in grouped.items()}
