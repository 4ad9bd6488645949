"""DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv 2412.19437): the pre-training cost of DeepSeek-V3 on
its H800 cluster.

Stated: 2048 H800 GPUs, 8 per node with NVLink/NVSwitch inside and InfiniBand across nodes (§3.1); 16-way
pipeline parallelism, 64-way expert parallelism spanning 8 nodes, ZeRO-1 data parallelism, no tensor
parallelism (§3.2); the DualPipe schedule with its overlapped forward-and-backward chunks, which hide the
all-to-all "fully" (§3.2.1); FP8 mixed-precision GEMMs (§3.3); 180K H800 GPU-hours per trillion tokens
(§1, Table 1: 2664K GPU-hours for 14.8T tokens), i.e. 1e12 / (180,000 · 3600) = 1543.2 tokens per GPU-second;
sequence length 4096 and a batch of 15,360 sequences after the first 469B tokens (§4.2); recomputation of
every RMSNorm and MLA up-projection in the backward, activations of some operators cached in FP8 (§3.2.3).

Inferred (stated nowhere in the report): a micro-batch of 1 sequence, so 15360 / 128 = 120 microbatches per
pipeline step; the layer split over the 16 model slices DualPipe places (rank r holds slice r of one copy and
slice 15 − r of the other): 3 layers with the embedding on slice 0, 4 on each of slices 1–13, 3 on slices 14
and 15 (the last beside the output head), the 61 layers as even as whole layers allow; the H800 preset
(H100 compute, NVLink 200 GB/s one way, 50 GB/s IB per GPU); balanced routing (their auxiliary-loss-free
balancing: ``moe_imbalance`` 1); no recomputation in pipesim's sense (pipesim's selective recompute is the
attention core, which DeepSeek does not recompute; their RMSNorm/up-projection recomputation is not modelled).
The schedule is pipesim's ``dualpipe`` (both directions, two model copies, the overlapped pairs timed by
``pipesim.sim.costs.pair_duration``).

Not modelled, each making pipesim slower than the run: node-limited routing with DeepEP's forwarding (a token
crosses IB at most once per node, to at most 4 nodes, then fans out over NVLink; pipesim sends every routed
copy over the links, 8 copies) and the FP8 dispatch (pipesim sends BF16 both ways). And one
making it faster: the multi-token-prediction module (one more layer and output head on the last stage). No
memory is published.
"""

from pipesim.analytic.layout import Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "DeepSeek-V3 technical report (arXiv 2412.19437), pre-training on 2048 H800"

ROWS = [
    PublishedRun(SOURCE, "deepseek-v3", "h800", 2048, 15360, pp=16, chunks=2, schedule="dualpipe",
                 seq_len=4096, zero=ZeroStage.OPTIMIZER, precision=Precision.FP8, ep=64,
                 stage_layers=(3, *[4] * 13, 3, 3), tokens_per_gpu=1e12 / (180_000 * 3600)),
]
