"""Fused attention, forward and backward, through ``scaled_dot_product_attention`` (causal), at a model's
micro-batch, heads per tp rank, head size and sequence. Rates count FLOPs as the cost model does
(:func:`pipesim.analytic.kernels.attention_core_times`): ``4·b·s²·heads·d / 2`` for the causal forward and
2.5× that for the backward, so a measured time divides back into exactly that time."""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.measured import AttentionRow
from pipesim.profile.device import Device
from pipesim.profile.timing import Repeats, median_seconds


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    seq: int
    head_dim: int

    @property
    def forward_flops(self) -> float:
        return 4.0 * self.batch * self.seq * self.seq * self.heads * self.head_dim / 2


def model_shapes(model, tps: list[int]) -> list[AttentionShape]:
    return list(dict.fromkeys(AttentionShape(model.micro_batch, model.heads // tp, model.seq_len, model.head_dim)
                              for tp in tps))


def grid_shapes(device: Device, quick: bool) -> list[AttentionShape]:
    seqs = (512, 2048, 4096) if device.cuda else ((128, 512) if quick else (128, 256, 512, 1024))
    return [AttentionShape(1 if not device.cuda else 4, 8, s, 64) for s in seqs]


def time_attention(shape: AttentionShape, device: Device, repeats: Repeats) -> AttentionRow:
    import torch
    import torch.nn.functional as F

    dtype = torch.bfloat16 if device.cuda else torch.float32
    dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    q, k, v = (torch.randn(*dims, device=device.torch_device, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(*dims, device=device.torch_device, dtype=dtype)

    def forward():
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def backward():  # the backward alone, through the kept graph: (forward + backward) − forward, two noisy
        out.backward(grad, retain_graph=True)  # medians apart, came out at a fraction of the forward on a
        q.grad = k.grad = v.grad = None  # loaded CPU, where the backward really takes ~2.5× the forward

    fwd = median_seconds(forward, repeats, device.cuda)
    bwd = median_seconds(backward, repeats, device.cuda)
    return AttentionRow(shape.seq, shape.head_dim, shape.forward_flops / fwd, 2.5 * shape.forward_flops / bwd)
