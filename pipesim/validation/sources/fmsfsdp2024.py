"""IBM foundation-model-stack, fms-fsdp (README.md, the throughput table; docs/train_details.md): Llama 2
pre-training with PyTorch FSDP on 128 A100s, tokens/s per GPU.

Stated: model size (Llama 2 7B, 13B, 34B, 70B), 128 A100 GPUs, sharding strategy (HSDP for 7B and 13B, FSDP for
34B and 70B), activation checkpointing (off for 7B and 13B, on for 34B and 70B), per-GPU batch size (2, 1, 8, 6),
throughput in tokens/GPU/s (3760, 1700, 772, 380), SDPA FlashAttention-2, a 4k context, and for the 7B run an
effective batch of 1M tokens (128 × 2 × 4096: one microbatch, no gradient accumulation) with AdamW
(docs/train_details.md). The 34B shape is fms-fsdp's ``llama2_34b`` (fms_fsdp/utils/config_utils.py: the
``llama2-34b`` preset). The cluster: the PyTorch blog of the same team and months (``pytorch_fsdp_blog2024``)
trains the 7B model of this table "on 128 A100 GPUs with 400Gbps network connectivity and GPU direct RDMA".

Inferred: A100 80GB (the README says "A100"; the blog, 80GB); the blog's 400 Gb/s as each node's total, 50 Gb/s a
GPU (``--inter-node-gbps 50``; an A100 system's NICs are 200 Gb/s at most, so it cannot be each GPU's); HSDP as
FSDP's HYBRID_SHARD within a node (``--shard-group 8``: weights and optimizer state sharded over the node's eight
GPUs, each reduced shard all-reduced across the 16 nodes), FSDP as FULL_SHARD over all 128 (``--zero 3``);
gradients reduced in BF16 (fms-fsdp's ``bfSixteen`` mixed-precision policy, ``reduce_dtype`` BF16:
``--param-bytes 16``); one microbatch per step for all four (the per-GPU batch is the whole local batch), BF16,
full recomputation for "activation checkpointing True" (FSDP's per-block wrapper), and eager PyTorch
(``--elementwise eager``): the repository's launch scripts (scripts/7b.sh, 13b.sh, 34b.sh, 70b.sh) pass
``--use_torch_compile=False``, and fms's Llama runs RMSNorm, RoPE and SwiGLU as separate PyTorch ops. Those
scripts also show an AWS EFA cluster and other batch sizes; the README's runs are taken as the blog's cluster.
No memory is published.

Revised since first added: the rows ran ZeRO-3 over all 128 ranks on the a100-80gb preset's network (200 Gb/s a
GPU) with FP32 gradient reduction, the 34B row left out (its shape unread), until the blog's cluster and fms-fsdp's
policy were read and pipesim modelled hybrid sharding.

Since ZeRO-3's serialised share is taken of the collectives' kernel work rather than of their wait on the network
(pipesim.analytic.comm.prefetched_overlap; read from the blog's two H100 clusters, ``pytorch_fsdp_blog2024``), these
rows are +0…+15 %; at a serialised share of the whole collective they were +16…+28 %. What remains on the thin
network is the SMs the collectives hold while they run beside the layers (``comm_sm_share``), where the team
reports "almost full overlap".
"""

from pipesim.analytic.layout import ElementwiseKernels, Recompute, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "IBM fms-fsdp README, Llama 2 throughput on 128 A100"

_HSDP = {"llama2-7b", "llama2-13b"}

ROWS = [
    PublishedRun(SOURCE, name, "a100-80gb", 128, 128 * batch, micro_batch=batch, seq_len=4096,
                 recompute=recompute, zero=ZeroStage.PARAMETERS, shard_group=8 if name in _HSDP else None,
                 elementwise=ElementwiseKernels.EAGER, fp16_grads=True, inter_node_gbps=50, tokens_per_gpu=tokens)
    for name, batch, recompute, tokens in [
        ("llama2-7b", 2, Recompute.NONE, 3760),  # HSDP
        ("llama2-13b", 1, Recompute.NONE, 1700),  # HSDP
        ("llama2-34b", 8, Recompute.FULL, 772),  # FSDP
        ("llama2-70b", 6, Recompute.FULL, 380),  # FSDP
    ]
]
