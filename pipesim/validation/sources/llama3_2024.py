"""Llama Team 2024, "The Llama 3 Herd of Models", Table 4: Llama 3 405B pre-training on H100 (BF16),
TFLOP/s per GPU.

Stated: 126 layers, tp 8, pp 16, interleaved pipeline, 16M tokens per step (2,048 sequences of 8,192), the
long-context stage at 131,072 tokens with context parallelism 16; §3.3.2 takes one layer off the first and the
last stage (the embedding and the output layer weigh on them). Inferred: v = 8, one layer per virtual stage,
so 16·8 = 128 stages with the first (embedding only) and the last (output layer only) empty: 126 exactly; a
sharded optimizer (ZeRO-1), sequence parallelism, overlapped pipeline sends, fused attention, and the
column-parallel linears' backward collective beside their weight-gradient GEMM as Megatron-LM and Transformer
Engine run it (the default; Meta's framework is not public, so uncertain).

Why v = 8 and not 2 (the value of earlier releases, 32 stages of 4 layers with 3 on the end stages, which also
gives 126): the 8,192- and 16,384-GPU rows keep 2,048 sequences per step, so the pipeline runs 32 and then 16
microbatches, and the interleaved bubble (p − 1)/(v·m) grows from 23% to 47% at v = 2, which would cut the
per-GPU throughput by about 16%; the paper measures 430 → 400 TFLOP/s (7%). At v = 8 pipesim's two errors
agree within 2 points (at v = 2 they differ by 12). This reads v off the ratio of the two rows, not off their
level. Uncertain: Meta's own schedule (§3.3.2 makes the number of microbatches flexible), which may differ
from Megatron's interleaving.

Memory says the inferred settings are not all Meta's: pipesim puts the busiest rank at 88.8 GiB in the first row
and 82.1 GiB in the other two, over the H100's 80 GB, without recomputation and with Megatron's interleaved
order keeping its in-flight microbatches. The paper states neither its recomputation nor its activation memory
savings, so the rows keep the tool's defaults; whatever Meta did to fit (recomputing some activations, fewer
microbatches in flight) would make pipesim's step slower, toward the measurement.

Context parallelism (the long-context row), stated in §3.3.2: "we utilize an all-gather based method where we
first all-gather the key (K) and value (V) tensors, and then compute attention output for the local query (Q)
tensor chunk", and "while the communication latency is exposed in the critical path" it is small beside the
attention at long sequences: ``--cp-comm-type allgather`` with Transformer Engine's kernels, whose all-gather
implementation (``AttnFuncWithCPAndKVAllGather``) cites this section and leaves the gather exposed (the row ran
the ring until the release that modelled the all-gather: −2.2 %, now +0.9 %).
"""

from pipesim.analytic.layout import CpComm, Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "Llama Team 2024, The Llama 3 Herd of Models, Table 4"

_COMMON = dict(tp=8, pp=16, chunks=8, schedule="interleaved", sequence_parallel=True, zero=ZeroStage.OPTIMIZER,
               first_last=0, overlap_p2p=True, precision=Precision.BF16)
ROWS = [PublishedRun(SOURCE, "llama3.1-405b", "h100-sxm", gpus, batch, mfu_tflops=tf, **_COMMON)
        for gpus, batch, tf in [(8192, 2048, 430), (16384, 2048, 400)]]
ROWS.append(PublishedRun(SOURCE, "llama3.1-405b", "h100-sxm", 16384, 128, cp=16, seq_len=131072, mfu_tflops=380,
                         cp_comm=CpComm.ALL_GATHER, **_COMMON))
