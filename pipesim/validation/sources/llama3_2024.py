"""Llama Team 2024, "The Llama 3 Herd of Models", Table 4: Llama 3 405B pre-training on H100 (BF16),
TFLOP/s per GPU.

Stated: 126 layers, tp 8, pp 16, interleaved pipeline, 16M tokens per step (2,048 sequences of 8,192), the
long-context stage at 131,072 tokens with context parallelism 16. Inferred: v = 2 (32 stages of 4 layers,
one layer fewer on the first and last: §3.3.2 balances the end stages), sequence parallelism, a sharded
optimizer (ZeRO-1), overlapped pipeline sends, fused attention.
"""

from pipesim.analytic.layout import Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "Llama Team 2024, The Llama 3 Herd of Models, Table 4"

_COMMON = dict(tp=8, pp=16, chunks=2, schedule="interleaved", sequence_parallel=True, zero=ZeroStage.OPTIMIZER,
               first_last=3, overlap_p2p=True, precision=Precision.BF16)
ROWS = [PublishedRun(SOURCE, "llama3.1-405b", "h100-sxm", gpus, batch, mfu_tflops=tf, **_COMMON)
        for gpus, batch, tf in [(8192, 2048, 430), (16384, 2048, 400)]]
ROWS.append(PublishedRun(SOURCE, "llama3.1-405b", "h100-sxm", 16384, 128, cp=16, seq_len=131072, mfu_tflops=380,
                         **_COMMON))
