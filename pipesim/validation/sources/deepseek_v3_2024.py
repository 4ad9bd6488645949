"""DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv 2412.19437): the pre-training cost of DeepSeek-V3 on
its H800 cluster.

Stated: 2048 H800 GPUs, 8 per node with NVLink/NVSwitch inside and InfiniBand across nodes (§3.1); 16-way
pipeline parallelism, 64-way expert parallelism spanning 8 nodes, ZeRO-1 data parallelism, no tensor
parallelism (§3.2); the DualPipe schedule with its overlapped forward-and-backward chunks, which hide the
all-to-all "fully" (§3.2.1); FP8 mixed-precision GEMMs (§3.3); 180K H800 GPU-hours per trillion tokens
(§1, Table 1: 2664K GPU-hours for 14.8T tokens), i.e. 1e12 / (180,000 · 3600) = 1543.2 tokens per GPU-second;
sequence length 4096 and a batch of 15,360 sequences after the first 469B tokens (§4.2); recomputation of
every RMSNorm and MLA up-projection in the backward, activations of some operators cached in FP8 (§3.2.3).

Also stated, and modelled since this release: node-limited routing, each token's 8 experts on at most 4 of the 8
nodes its expert-parallel group spans (§2.1.2: the ``deepseek-v3`` preset's 8 groups, 4 a token), and a dispatch
that crosses InfiniBand at most once per destination node and fans out over NVLink (§3.2.2, DeepEP's normal
kernels: ``moe_dispatcher`` deepep); the dispatch in FP8 (§3.3.3: the activations before the experts' up
projections and the gradients before their down projections, ``moe_dispatch_fp8``), the combine in BF16; one
multi-token-prediction module (§2.2, D = 1: a MoE layer, a 2h→h projection and the shared head's second pass, on
the last model slice, sharing the embedding with the model on DualPipe's end rank, §3.2.3); recomputation of
every RMSNorm and of MLA's up projections (§3.2.3) and of the experts' SwiGLU output from its cached input
(§3.3.3): ``--recompute-modules layernorm mla_up_proj moe_act``; AdamW's moments in BF16 beside FP32 master weights
and gradients (§3.3.2, "Low-Precision Optimizer States"): ``--param-bytes 2+4+8``.

Inferred (stated nowhere in the report): a micro-batch of 1 sequence, so 15360 / 128 = 120 microbatches per pipeline
step; the layer split over the 16 model slices DualPipe places (rank r holds slice r of one copy and slice 15 − r of
the other): 3 layers with the embedding on slice 0, 4 on each of slices 1–14, 2 on slice 15 beside the
multi-token-prediction module and the two passes through the output head. That is the most even split whole layers
allow once the module and its head sit on the last slice: rank 0, which holds slices 0 and 15, runs 5 layers, the
module's layer and two heads (each head's GEMM ~1.6 layers' active compute) against 8 layers on every other rank; the
split without the module in mind (3, 4 × 13, 3, 3) leaves rank 0 two layers more and would give +17 %. The dense first
three layers make which end takes the extra layer matter: (4, 4 × 14, 1) gives +5.8 % where this split gives +5.9 %,
(2, 4 × 14, 3), a MoE layer more on rank 0, +11 %: the split is the row's largest uncertainty. It was chosen by the
balance argument above, with these splits' errors in view (the row was simulated at each before the choice), so the
row is not a blind test of the split. The H800 preset (H100 compute, NVLink 200 GB/s one way, 50 GB/s IB per GPU);
balanced routing (their auxiliary-loss-free balancing: ``moe_imbalance`` 1); the schedule is pipesim's ``dualpipe``
(both directions, two model copies, the overlapped pairs timed by ``pipesim.sim.costs.pair_duration``).

Not modelled: the activations DeepSeek caches in FP8 beyond the linears' inputs (the SwiGLU inputs, §3.3.3;
memory only, and no memory is published: pipesim's 116 GiB peak on rank 1, over the H800's 80, says more is kept
in FP8 or dropped than it counts); DeepEP's kernels taking 20 of the 132 SMs where pipesim's overlap takes the
chip's ``comm_sm_share`` (24).
"""

from pipesim.analytic.layout import (
    MoeDispatcher,
    OptimizerBytes,
    Precision,
    Recompute,
    RecomputeModule,
    ZeroStage,
)
from pipesim.validation.runs import PublishedRun

SOURCE = "DeepSeek-V3 technical report (arXiv 2412.19437), pre-training on 2048 H800"

ROWS = [
    PublishedRun(SOURCE, "deepseek-v3", "h800", 2048, 15360, pp=16, chunks=2, schedule="dualpipe",
                 seq_len=4096, zero=ZeroStage.OPTIMIZER, precision=Precision.FP8, ep=64,
                 moe_dispatcher=MoeDispatcher.DEEPEP, moe_dispatch_fp8=True, recompute=Recompute.SELECTIVE,
                 recompute_modules=(RecomputeModule.LAYERNORM, RecomputeModule.MLA_UP_PROJ,
                                    RecomputeModule.MOE_ACT),
                 stage_layers=(3, *[4] * 14, 2), param_bytes=OptimizerBytes.parse("2+4+8"),
                 tokens_per_gpu=1e12 / (180_000 * 3600)),
]
