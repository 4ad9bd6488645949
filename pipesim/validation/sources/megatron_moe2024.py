"""NVIDIA Megatron-LM, megatron/core/transformer/moe/README.md (Megatron-Core MoE): "With MCore v0.9, we've
achieved remarkable performance of 468 TFLOPS for Mixtral 8X7B bf16 training", and its "Reference Best
Parallel Mapping" table for Mixtral 8x7B (dropless, all-to-all dispatcher, BF16, 64 GPUs, sequence 4096,
TP 1, EP 8, PP 4, VP 8, micro-batch 1, global batch 256) on 8×H100 80GB HBM3 servers with NVLink 4 and
8×400 Gb/s InfiniBand (its "Detailed Benchmark Information"). Not the Megatron-MoE-ModelZoo repository,
and not the Megatron-LM README's scaling table.

Stated: the model, the parallel mapping, the batch, the precision and the cluster; 468 TFLOP/s per GPU.
Inferred: that the 468 TFLOP/s was measured at that reference mapping (the README gives them in one section,
the mapping for v0.8 and the figure for v0.9) and that it is Megatron's model-FLOPs throughput (its
``num_floating_point_operations``: forward and backward of the top-k experts, full s² attention, no
recomputation); VP 8 = 8 model chunks per rank (one layer each: 32 layers / (4 · 8)); the distributed
optimizer and overlapped P2P of the README's example script and best-practice list (``--use-distributed-
optimizer``, VPP's P2P overlap); no recomputation; balanced routing (aux loss, measured after the early
imbalance the README warns about: ``moe_imbalance`` 1); the h100-sxm preset. The data-parallel gradient
reduce-scatter and parameter all-gather that ``--overlap-grad-reduce``/``--overlap-param-gather`` hide are
counted as exposed by pipesim (slower than the run by their time).
"""

from pipesim.analytic.layout import ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "Megatron-Core MoE README (megatron/core/transformer/moe), Mixtral 8x7B on 64 H100"

ROWS = [
    PublishedRun(SOURCE, "mixtral-8x7b", "h100-sxm", 64, 256, pp=4, chunks=8, schedule="interleaved",
                 seq_len=4096, zero=ZeroStage.OPTIMIZER, overlap_p2p=True, ep=8, mfu_tflops=468),
]
