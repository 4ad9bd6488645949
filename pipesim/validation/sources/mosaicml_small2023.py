"""MosaicML llm-foundry, "MPT Training Benchmarks" (scripts/train/benchmarking/README.md): the rows the
``mosaicml2023`` module leaves out — MPT 125M–3B on 8–128 GPUs from the tables "H100 80GB BF16", "A100 80GB with
1600 Gbps node-node interconnect (RoCE)" and "A100 40GB with 1600 Gbps node-node interconnect (RoCE)", and every
row of "H100 80GB BF16 (Large Scale, >= 128 GPUs)" (MPT 1B–70B on 128–512 GPUs, added to the README in January
2024). Tokens/s per GPU of PyTorch FSDP training on the MosaicML platform.

Stated (per row): model, sequence length, GPUs, micro-batch size, gradient accumulation (= microbatches), global
batch, precision (amp_bf16; bf16 PURE in the A100 40GB table), sharding strategy — FULL_SHARD (ZeRO-3) or, for the
large-scale table's 1B and 3B rows, SHARD_GRAD_OP (ZeRO-2: gradients and optimizer state sharded; FSDP gathers each
block's weights before its forward, keeps them through its backward and reduce-scatters its gradients after it, in
every microbatch: ``--zero 2 --zero-collectives per-layer``) — activation checkpointing on or off, no CPU offload,
and the throughput in tokens/s per GPU (the column used here). Model shapes: the pretrain yamls (``mpt-125m`` …
``mpt-3b`` in ``model_presets``; the NumParams column of every row matches pipesim's count at that sequence
length).

Inferred, as in ``mosaicml2023`` (same report, same benchmark scripts): ``attn_impl: triton`` (the default of
``submit_benchmarks.py`` at both commits that wrote these tables, October 2023 and January 2024, not overridden by
``sweep.sh``; ``--attention triton``), modules run eagerly (nothing compiled; ``--elementwise eager``), no dropout,
the A100 presets' 25 GB/s per GPU between nodes (the tables' 1600 Gbps per node) and the H100 preset's 400 Gb/s
per GPU (not stated). Uncertain: the large-scale table's software (January 2024: ``pip install .[gpu-flash2]``
and the script's Triton default together; its image is not stated), and whether its nodes are those of the
8-GPU table.

Why a source of its own: these are the smallest models and the largest GPU counts MosaicML published, the two
regions the held-out runs of issue #24 say pipesim is most optimistic in (small models on one node; FSDP at
scale), gathered after every constant was fixed and not fitted to when added; two constants fitted since read
them (the Hopper training GEMM ratio, ZeRO-3's overlap share), and validation refits those without them. They
share the system and the software with ``mosaicml2023``, so validation leaves the two modules out together
(``sources.PLATFORM_OF``). The H100 FP8 table is left out (its Transformer Engine layers and amax
settings are not stated per row). No memory is published.
"""

from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels, Recompute, ZeroCollectives, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE_H100 = "MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, H100 80GB BF16 table"
SOURCE_H100_SCALE = ("MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, H100 80GB BF16 large-scale "
                     "table")
SOURCE_A100 = "MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, A100 80GB table"
SOURCE_A100_40 = "MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, A100 40GB table"
SOURCE = SOURCE_H100

# (model, sequence, GPUs, micro-batch, grad accumulation, activation checkpointing, ZeRO stage, tokens/s per GPU)
_H100_SCALE = [
    ("mpt-70b", 2048, 512, 8, 1, True, 3, 1007), ("mpt-70b", 2048, 256, 8, 1, True, 3, 1035),
    ("mpt-70b", 2048, 128, 8, 1, True, 3, 1058), ("mpt-30b", 2048, 512, 8, 1, True, 3, 2115),
    ("mpt-30b", 2048, 256, 8, 1, True, 3, 2148), ("mpt-30b", 2048, 128, 8, 1, True, 3, 2199),
    ("mpt-13b", 2048, 512, 16, 1, True, 3, 4952), ("mpt-13b", 2048, 256, 16, 1, True, 3, 4989),
    ("mpt-13b", 2048, 128, 16, 1, True, 3, 5080), ("mpt-7b", 2048, 512, 6, 1, False, 3, 9670),
    ("mpt-7b", 2048, 256, 6, 1, False, 3, 10119), ("mpt-7b", 2048, 128, 6, 1, False, 3, 10475),
    ("mpt-3b", 2048, 512, 8, 1, False, 2, 21664), ("mpt-3b", 2048, 256, 8, 1, False, 2, 22772),
    ("mpt-3b", 2048, 128, 8, 1, False, 2, 23422), ("mpt-1b", 2048, 512, 12, 1, False, 2, 39837),
    ("mpt-1b", 2048, 256, 12, 1, False, 2, 42555), ("mpt-1b", 2048, 128, 12, 1, False, 2, 44123),
]
_H100 = [
    ("mpt-3b", 65536, 8, 1, 2, True, 3, 3262), ("mpt-3b", 32768, 8, 3, 6, True, 3, 5873),
    ("mpt-3b", 16384, 8, 1, 6, False, 3, 11152), ("mpt-3b", 8192, 8, 3, 6, False, 3, 16578),
    ("mpt-3b", 4096, 8, 5, 6, False, 3, 20964), ("mpt-3b", 2048, 64, 6, 3, False, 3, 22525),
    ("mpt-3b", 2048, 32, 6, 3, False, 3, 23021), ("mpt-3b", 2048, 16, 10, 3, False, 3, 24142),
    ("mpt-3b", 1024, 8, 20, 6, False, 3, 27046), ("mpt-3b", 512, 8, 40, 6, False, 3, 27965),
    ("mpt-1b", 65536, 8, 1, 2, True, 3, 5506), ("mpt-1b", 32768, 8, 1, 4, False, 3, 12025),
    ("mpt-1b", 16384, 8, 2, 4, False, 3, 19649), ("mpt-1b", 8192, 8, 3, 4, False, 3, 29157),
    ("mpt-1b", 4096, 8, 7, 4, False, 3, 38535), ("mpt-1b", 2048, 64, 20, 1, False, 3, 44402),
    ("mpt-1b", 2048, 32, 20, 1, False, 3, 45130), ("mpt-1b", 2048, 16, 20, 1, False, 3, 46037),
    ("mpt-1b", 2048, 8, 14, 1, False, 3, 45455), ("mpt-1b", 1024, 8, 18, 4, False, 3, 48910),
    ("mpt-1b", 512, 8, 56, 4, False, 3, 52275), ("mpt-760m", 32768, 8, 1, 2, False, 3, 16291),
    ("mpt-760m", 16384, 8, 3, 2, False, 3, 27815), ("mpt-760m", 8192, 8, 6, 2, False, 3, 41825),
    ("mpt-760m", 4096, 8, 12, 2, False, 3, 55459), ("mpt-760m", 2048, 32, 24, 1, False, 3, 67971),
    ("mpt-760m", 2048, 16, 24, 1, False, 3, 68551), ("mpt-760m", 2048, 8, 24, 2, False, 3, 63147),
    ("mpt-760m", 1024, 8, 48, 2, False, 3, 78581), ("mpt-760m", 512, 8, 96, 2, False, 3, 83749),
]
_A100 = [
    ("mpt-3b", 65536, 8, 1, 2, True, 3, 1767), ("mpt-3b", 32768, 8, 3, 6, True, 3, 3029),
    ("mpt-3b", 16384, 8, 1, 6, False, 3, 5529), ("mpt-3b", 8192, 8, 3, 6, False, 3, 7695),
    ("mpt-3b", 4096, 8, 5, 6, False, 3, 9457), ("mpt-3b", 2048, 8, 10, 2, False, 3, 10811),
    ("mpt-3b", 1024, 8, 20, 6, False, 3, 11580), ("mpt-3b", 512, 8, 40, 6, False, 3, 12127),
    ("mpt-1b", 65536, 8, 1, 2, True, 3, 3044), ("mpt-1b", 32768, 8, 1, 4, False, 3, 6275),
    ("mpt-1b", 16384, 8, 2, 4, False, 3, 9956), ("mpt-1b", 8192, 8, 3, 4, False, 3, 13814),
    ("mpt-1b", 4096, 8, 7, 4, False, 3, 17807), ("mpt-1b", 2048, 8, 14, 4, False, 3, 20513),
    ("mpt-1b", 1024, 8, 18, 4, False, 3, 22112), ("mpt-1b", 512, 8, 56, 4, False, 3, 23148),
    ("mpt-760m", 65536, 8, 1, 2, True, 3, 4143), ("mpt-760m", 32768, 8, 1, 2, False, 3, 8802),
    ("mpt-760m", 16384, 8, 3, 2, False, 3, 14274), ("mpt-760m", 8192, 8, 6, 2, False, 3, 20933),
    ("mpt-760m", 4096, 8, 12, 2, False, 3, 27351), ("mpt-760m", 2048, 8, 24, 2, False, 3, 32434),
    ("mpt-760m", 1024, 8, 48, 2, False, 3, 29765), ("mpt-760m", 512, 8, 96, 2, False, 3, 29446),
    ("mpt-350m", 65536, 8, 1, 2, False, 3, 7524), ("mpt-350m", 32768, 8, 2, 2, False, 3, 13652),
    ("mpt-350m", 16384, 8, 4, 2, False, 3, 23559), ("mpt-350m", 8192, 8, 8, 2, False, 3, 36569),
    ("mpt-350m", 4096, 8, 16, 2, False, 3, 49555), ("mpt-350m", 2048, 8, 32, 2, False, 3, 58782),
    ("mpt-350m", 1024, 8, 64, 2, False, 3, 64813), ("mpt-350m", 512, 8, 128, 2, False, 3, 69330),
    ("mpt-125m", 65536, 8, 1, 2, False, 3, 20368), ("mpt-125m", 32768, 8, 2, 2, False, 3, 36407),
    ("mpt-125m", 16384, 8, 4, 2, False, 3, 60040), ("mpt-125m", 8192, 8, 8, 2, False, 3, 90392),
    ("mpt-125m", 4096, 8, 16, 2, False, 3, 118396), ("mpt-125m", 2048, 8, 40, 2, False, 3, 142830),
    ("mpt-125m", 2048, 8, 32, 2, False, 3, 141737), ("mpt-125m", 1024, 8, 64, 2, False, 3, 156468),
    ("mpt-125m", 512, 8, 128, 2, False, 3, 165681),
]
_A100_40 = [
    ("mpt-3b", 32768, 8, 1, 4, True, 3, 2955), ("mpt-3b", 16384, 8, 2, 8, True, 3, 4465),
    ("mpt-3b", 8192, 8, 1, 8, False, 3, 7149), ("mpt-3b", 4096, 8, 2, 8, False, 3, 8777),
    ("mpt-3b", 2048, 128, 6, 1, False, 3, 9538), ("mpt-3b", 2048, 64, 6, 1, False, 3, 9736),
    ("mpt-3b", 2048, 32, 6, 1, False, 3, 9914), ("mpt-3b", 2048, 16, 5, 1, False, 3, 9750),
    ("mpt-3b", 2048, 8, 5, 8, False, 3, 10065), ("mpt-3b", 1024, 8, 10, 8, False, 3, 10731),
    ("mpt-3b", 512, 8, 20, 8, False, 3, 11324), ("mpt-1b", 32768, 8, 1, 4, True, 3, 5095),
    ("mpt-1b", 16384, 8, 1, 8, False, 3, 9715), ("mpt-1b", 8192, 8, 2, 8, False, 3, 13474),
    ("mpt-1b", 4096, 8, 4, 8, False, 3, 16856), ("mpt-1b", 2048, 128, 10, 1, False, 3, 18647),
    ("mpt-1b", 2048, 64, 10, 1, False, 3, 19001), ("mpt-1b", 2048, 32, 10, 1, False, 3, 15555),
    ("mpt-1b", 2048, 16, 8, 1, False, 3, 19085), ("mpt-1b", 2048, 8, 8, 8, False, 3, 19271),
    ("mpt-1b", 1024, 8, 16, 8, False, 3, 20959), ("mpt-1b", 512, 8, 32, 8, False, 3, 21782),
    ("mpt-760m", 32768, 8, 1, 4, True, 3, 7183), ("mpt-760m", 16384, 8, 1, 4, False, 3, 13914),
    ("mpt-760m", 8192, 8, 3, 4, False, 3, 20106), ("mpt-760m", 4096, 8, 6, 4, False, 3, 25863),
    ("mpt-760m", 2048, 128, 12, 1, False, 3, 28940), ("mpt-760m", 2048, 64, 12, 1, False, 3, 29344),
    ("mpt-760m", 2048, 32, 12, 1, False, 3, 29648), ("mpt-760m", 2048, 16, 12, 1, False, 3, 29607),
    ("mpt-760m", 2048, 8, 12, 4, False, 3, 30173), ("mpt-760m", 1024, 8, 24, 4, False, 3, 33422),
    ("mpt-760m", 512, 8, 48, 4, False, 3, 34938), ("mpt-350m", 32768, 8, 1, 4, False, 3, 13416),
    ("mpt-350m", 16384, 8, 2, 4, False, 3, 22896), ("mpt-350m", 8192, 8, 4, 4, False, 3, 34933),
    ("mpt-350m", 4096, 8, 8, 4, False, 3, 46833), ("mpt-350m", 2048, 128, 18, 1, False, 3, 51934),
    ("mpt-350m", 2048, 64, 18, 1, False, 3, 52689), ("mpt-350m", 2048, 32, 18, 1, False, 3, 53811),
    ("mpt-350m", 2048, 16, 18, 1, False, 3, 55413), ("mpt-350m", 2048, 8, 16, 4, False, 3, 55995),
    ("mpt-350m", 1024, 8, 32, 4, False, 3, 62523), ("mpt-350m", 512, 8, 64, 4, False, 3, 66284),
    ("mpt-125m", 32768, 8, 1, 4, False, 3, 32651), ("mpt-125m", 16384, 8, 2, 3, False, 3, 55484),
    ("mpt-125m", 8192, 8, 5, 3, False, 3, 86858), ("mpt-125m", 4096, 8, 13, 3, False, 3, 115162),
    ("mpt-125m", 2048, 128, 26, 1, False, 3, 123936), ("mpt-125m", 2048, 64, 26, 1, False, 3, 125234),
    ("mpt-125m", 2048, 32, 26, 1, False, 3, 127122), ("mpt-125m", 2048, 16, 26, 1, False, 3, 130535),
    ("mpt-125m", 2048, 8, 26, 3, False, 3, 136334), ("mpt-125m", 1024, 8, 52, 3, False, 3, 148289),
    ("mpt-125m", 512, 8, 104, 3, False, 3, 156735),
]

ROWS = [
    PublishedRun(source, name, chip, gpus, mbs * accum * gpus, micro_batch=mbs, seq_len=seq,
                 recompute=Recompute.FULL if ckpt else Recompute.NONE, zero=ZeroStage(zero),
                 zero_collectives=ZeroCollectives.PER_LAYER if zero == 2 else ZeroCollectives.BUCKETED,
                 elementwise=ElementwiseKernels.EAGER, attention=AttentionKernel.TRITON,
                 tokens_per_gpu=tokens)
    for source, chip, table in ((SOURCE_H100_SCALE, "h100-sxm", _H100_SCALE), (SOURCE_H100, "h100-sxm", _H100),
                                (SOURCE_A100, "a100-80gb", _A100), (SOURCE_A100_40, "a100-40gb", _A100_40))
    for name, seq, gpus, mbs, accum, ckpt, zero, tokens in table
]
