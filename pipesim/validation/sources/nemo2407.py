"""NVIDIA NeMo 24.07 performance summary (DGX-H100, FP8 through Transformer Engine): tokens/s per GPU.

Stated: model, GPUs, global batch, micro-batch, tp, pp, cp, virtual pipeline size. Inferred: the
distributed optimizer (ZeRO-1), sequence parallelism when tp > 1, overlapped pipeline sends, fused
attention, the model's own sequence length.
"""

from pipesim.analytic.layout import Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "NVIDIA NeMo 24.07 performance summary (DGX-H100 FP8)"

ROWS = [
    PublishedRun(SOURCE, name, "h100-sxm", gpus, batch, tp=tp, pp=pp, cp=cp, chunks=vp, micro_batch=mbs,
                 schedule="interleaved" if vp > 1 else "1f1b", sequence_parallel=tp > 1, zero=ZeroStage.OPTIMIZER,
                 precision=Precision.FP8, overlap_p2p=True, tokens_per_gpu=tokens)
    for name, gpus, batch, mbs, tp, pp, cp, vp, tokens in [
        ("gpt3-175b", 128, 256, 1, 4, 8, 1, 6, 726), ("gpt3-175b", 512, 2048, 2, 4, 8, 1, 6, 782),
        ("llama2-7b", 8, 128, 1, 1, 1, 1, 1, 16847), ("llama2-13b", 16, 128, 1, 1, 4, 1, 10, 8646),
        ("llama2-70b", 64, 128, 1, 4, 4, 1, 20, 1707), ("llama3.1-8b", 8, 128, 1, 1, 1, 2, 1, 12036),
        ("llama3.1-70b", 64, 128, 1, 4, 4, 2, 5, 1533),
    ]
]
