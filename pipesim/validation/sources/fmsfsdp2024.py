"""IBM foundation-model-stack, fms-fsdp (README.md, the throughput table; docs/train_details.md): Llama 2
pre-training with PyTorch FSDP on 128 A100s, tokens/s per GPU.

Stated: model size (Llama 2 7B, 13B, 70B — the 34B row is left out, its shape is not stated in what was
read), 128 A100 GPUs, sharding strategy (HSDP for 7B and 13B, FSDP for 70B), activation checkpointing
(off for 7B and 13B, on for 70B), per-GPU batch size (2, 1, 6), throughput in tokens/GPU/s (3760, 1700, 380),
SDPA FlashAttention-2, a 4k context, and for the 7B run an effective batch of 1M tokens (128 × 2 × 4096: one
microbatch, no gradient accumulation) with AdamW (docs/train_details.md). Inferred: A100 80GB (the README
says "A100"), the a100-80gb preset's inter-node bandwidth (IBM's cluster is not described there), one
microbatch per step for all three (the per-GPU batch is the whole local batch), BF16, full recomputation for
"activation checkpointing True" (FSDP's per-block wrapper), and eager PyTorch (``--elementwise eager``): the
repository's launch scripts (scripts/7b.sh, 13b.sh, 70b.sh) pass ``--use_torch_compile=False``, and fms's Llama
runs RMSNorm, RoPE and SwiGLU as separate PyTorch ops. Those scripts also show an AWS EFA cluster; whether the
README's runs used it is not stated, so the preset's interconnect stays.

Approximation: HSDP (weights and optimizer state sharded within a node, replicated across the 16 nodes,
gradients all-reduced across them) is not a pipesim layout; it is taken as ZeRO-3 over all 128 ranks, whose
per-layer all-gathers then cross nodes at the inter-node bandwidth where HSDP's stay on NVLink: expect pipesim
slower than measured on those two rows, and memory lower (1/128 of the weights instead of 1/8). No memory is
published.
"""

from pipesim.analytic.layout import ElementwiseKernels, Recompute, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "IBM fms-fsdp README, Llama 2 throughput on 128 A100"

ROWS = [
    PublishedRun(SOURCE, name, "a100-80gb", 128, 128 * batch, micro_batch=batch, seq_len=4096,
                 recompute=recompute, zero=ZeroStage.PARAMETERS, elementwise=ElementwiseKernels.EAGER,
                 tokens_per_gpu=tokens)
    for name, batch, recompute, tokens in [
        ("llama2-7b", 2, Recompute.NONE, 3760),  # HSDP
        ("llama2-13b", 1, Recompute.NONE, 1700),  # HSDP
        ("llama2-70b", 6, Recompute.FULL, 380),  # FSDP
    ]
]
