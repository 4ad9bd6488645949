"""MosaicML llm-foundry, "MPT Training Benchmarks" (scripts/train/benchmarking/README.md, tables "H100 80GB
BF16", "A100 80GB with 1600 Gbps node-node interconnect (RoCE)" and "A100 40GB with 1600 Gbps node-node
interconnect (RoCE)"): tokens/s per GPU of MPT 7B–70B trained with PyTorch FSDP on the MosaicML platform.

Stated (per row): model, sequence length, GPUs, micro-batch size, gradient accumulation (= microbatches), global
batch, precision (amp_bf16, or bf16 PURE for the A100 80GB 70B rows and the whole A100 40GB table), sharding
strategy FULL_SHARD (ZeRO-3: weights, gradients and optimizer state sharded over every GPU, dp = GPUs, no tensor or
pipeline parallelism), activation checkpointing on or off (on → full recomputation: FSDP's checkpoint wrapper
around each block, ``activation_checkpointing_reentrant: false``), no CPU offload, and the throughput in tokens/s
per GPU (the column used here). Read from the repository's benchmark scripts of the table's commits
(scripts/train/benchmarking/submit_benchmarks.py and sweep.sh): ``attn_impl`` defaults to ``triton`` and sweep.sh
does not override it, so attention is llm-foundry's FlashAttention in Triton (``--attention triton``); ``norm_type:
low_precision_layernorm``; the H100 table and the A100 80GB rows regenerated with it (October 2023) ran the image
``mosaicml/pytorch:2.1.0_cu121``, the A100 40GB table (May 2023) the earlier ``1.13.1_cu117``; nothing is compiled,
so Composer runs the modules eagerly (``--elementwise eager``: for MPT, whose norm is one ``F.layer_norm`` kernel,
whose MLP is GELU and whose positions are ALiBi inside the attention kernel, that adds little beyond the attention
output's transpose copy). Inferred: no dropout, the model shapes of the pretrain yamls (see ``model_presets``), the
A100 preset's 25 GB/s per GPU inter-node (1600 Gbps = 8 × 200 Gb/s per node, as the header states); the H100 table
does not state its interconnect, taken as the preset's 400 Gb/s per GPU.

Not expressible / uncertain: FSDP's ``limit_all_gathers`` and its prefetch of the next block's all-gather
(pipesim models ZeRO-3's per-layer gathers with its own overlap rule); the MFU/HFU columns use MosaicML's own
FLOP count (no norms or activations), so only the token throughput is compared. The rows are 12-step runs
(the README's ``submit_benchmarks.py`` runs), not production training. Rows with 1B and smaller models are
left out (the table is kept to 7B and larger). No memory is published. The A100
40GB table gives within-model GPU-count series (7B and 13B on 8–128 GPUs at 2048 tokens), the others
sequence-length series at 8 GPUs.

Out-of-sample: none of these rows was looked at when the chip constants were chosen.
"""

from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels, Recompute, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE_H100 = "MosaicML llm-foundry MPT benchmarks, H100 80GB BF16 table"
SOURCE_A100 = "MosaicML llm-foundry MPT benchmarks, A100 80GB table"
SOURCE_A100_40 = "MosaicML llm-foundry MPT benchmarks, A100 40GB table"
SOURCE = SOURCE_H100

# (model, sequence, GPUs, micro-batch, grad accumulation, activation checkpointing, tokens/s per GPU)
_H100 = [
    ("mpt-70b", 2048, 64, 8, 4, True, 1039), ("mpt-70b", 2048, 32, 2, 16, True, 882),
    ("mpt-30b", 8192, 8, 1, 21, True, 1384), ("mpt-30b", 4096, 8, 1, 21, True, 1802),
    ("mpt-30b", 2048, 32, 14, 3, True, 2308), ("mpt-30b", 2048, 16, 10, 3, True, 2263),
    ("mpt-30b", 2048, 8, 3, 21, True, 2002), ("mpt-30b", 1024, 8, 6, 21, True, 2084),
    ("mpt-13b", 32768, 8, 1, 3, True, 1976), ("mpt-13b", 16384, 8, 3, 3, True, 2985),
    ("mpt-13b", 4096, 8, 10, 3, True, 4717), ("mpt-13b", 2048, 64, 2, 1, False, 4800),
    ("mpt-13b", 2048, 32, 2, 1, False, 4811), ("mpt-13b", 2048, 16, 2, 1, False, 4767),
    ("mpt-13b", 2048, 8, 2, 1, False, 4792), ("mpt-13b", 1024, 8, 40, 3, True, 5502),
    ("mpt-7b", 65536, 8, 1, 2, True, 1956), ("mpt-7b", 32768, 8, 2, 2, True, 3318),
    ("mpt-7b", 8192, 8, 8, 2, True, 6935), ("mpt-7b", 4096, 8, 16, 2, True, 8611),
    ("mpt-7b", 2048, 8, 6, 1, False, 10643), ("mpt-7b", 1024, 8, 64, 2, True, 10203),
]
_A100 = [
    ("mpt-70b", 2048, 64, 8, 4, True, 410), ("mpt-70b", 2048, 32, 2, 16, True, 373),
    ("mpt-30b", 8192, 8, 1, 21, True, 574), ("mpt-30b", 4096, 8, 1, 21, True, 814),
    ("mpt-30b", 2048, 8, 3, 21, True, 916), ("mpt-30b", 1024, 8, 6, 21, True, 946),
    ("mpt-30b", 512, 8, 12, 21, True, 967),
    ("mpt-13b", 32768, 8, 1, 3, True, 1016), ("mpt-13b", 16384, 8, 3, 3, True, 1431),
    ("mpt-13b", 8192, 8, 5, 3, True, 1795), ("mpt-13b", 4096, 8, 10, 3, True, 2060),
    ("mpt-13b", 2048, 8, 2, 3, False, 2262), ("mpt-13b", 1024, 8, 40, 3, True, 2330),
    ("mpt-7b", 65536, 8, 1, 2, True, 1013), ("mpt-7b", 32768, 8, 2, 2, True, 1672),
    ("mpt-7b", 16384, 8, 4, 2, True, 2453), ("mpt-7b", 8192, 8, 8, 2, True, 3206),
    ("mpt-7b", 4096, 8, 16, 2, True, 3684), ("mpt-7b", 2048, 8, 6, 2, False, 4641),
    ("mpt-7b", 1024, 8, 64, 2, True, 4357),
]
_A100_40 = [
    ("mpt-70b", 2048, 128, 4, 1, True, 376), ("mpt-70b", 2048, 64, 2, 1, True, 276),
    ("mpt-30b", 2048, 128, 6, 1, True, 865), ("mpt-30b", 2048, 32, 4, 1, True, 857),
    ("mpt-13b", 8192, 8, 1, 16, True, 1407), ("mpt-13b", 4096, 8, 2, 16, True, 1603),
    ("mpt-13b", 2048, 128, 16, 1, True, 1972), ("mpt-13b", 2048, 64, 16, 1, True, 1976),
    ("mpt-13b", 2048, 32, 14, 1, True, 1998), ("mpt-13b", 2048, 16, 10, 1, True, 1993),
    ("mpt-13b", 2048, 8, 4, 16, True, 1668), ("mpt-13b", 1024, 8, 8, 16, True, 1727),
    ("mpt-13b", 512, 8, 16, 16, True, 1763),
    ("mpt-7b", 16384, 8, 1, 4, True, 2249), ("mpt-7b", 8192, 8, 3, 4, True, 2887),
    ("mpt-7b", 4096, 8, 6, 4, True, 3366), ("mpt-7b", 2048, 128, 18, 1, True, 3623),
    ("mpt-7b", 2048, 64, 18, 1, True, 3665), ("mpt-7b", 2048, 32, 18, 1, True, 3725),
    ("mpt-7b", 2048, 16, 16, 1, True, 3645), ("mpt-7b", 2048, 8, 12, 4, True, 3679),
    ("mpt-7b", 1024, 8, 24, 4, True, 3854), ("mpt-7b", 512, 8, 48, 4, True, 3895),
]

ROWS = [
    PublishedRun(source, name, chip, gpus, mbs * accum * gpus, micro_batch=mbs, seq_len=seq,
                 recompute=Recompute.FULL if ckpt else Recompute.NONE, zero=ZeroStage.PARAMETERS,
                 elementwise=ElementwiseKernels.EAGER, attention=AttentionKernel.TRITON,
                 tokens_per_gpu=tokens)
    for source, chip, table in ((SOURCE_H100, "h100-sxm", _H100), (SOURCE_A100, "a100-80gb", _A100),
                                (SOURCE_A100_40, "a100-40gb", _A100_40))
    for name, seq, gpus, mbs, accum, ckpt, tokens in table
]
