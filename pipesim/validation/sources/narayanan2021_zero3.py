"""Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
§5.2 and **Table 2** ("Comparison of PTD Parallelism to ZeRO-3 (without model parallelism)"): TFLOP/s per A100
80GB of GPT-3 175B and the 530B model, with ZeRO-3 (DeepSpeed, data parallelism only) and with PTD-P (tensor +
pipeline + data parallelism), at a fixed global batch on a growing number of GPUs.

**Not an independent source.** It is the paper whose Table 1 is the in-sample source ``narayanan2021`` (same
cluster, software and team); Table 2's rows were not looked at when any constant was chosen, so they are added
as held-out rows, but leaving this module out of a fit still fits on Table 1's rows of the same system. Its
left-out error is therefore an optimistic estimate of a truly new source's.

Stated (Table 2, §5.2): the models (174.6B: GPT-3, 96 layers, hidden 12288, 96 heads, ``gpt3-175b``; 529.6B:
Table 1's, 105 layers, hidden 20480, 128 heads, ``gpt-529.6b``); model-parallel size 1 for ZeRO-3 (data
parallelism only, ZeRO stage 3 through the DeepSpeed library integrated into Megatron-LM) and 96 / 280 for PTD-P;
global batch 1536 (175B) and 2240 (530B; 2560 for the ZeRO-3 row on 640 GPUs, marked * in the table); GPUs;
micro-batch (4 / 2 / 1 for ZeRO-3 as GPUs double, 1 for PTD-P); achieved TFLOP/s per GPU (the column used). The
global batch is kept fixed as GPUs are added, so every ZeRO-3 row runs one microbatch per step.

Inferred: PTD-P's split of the model-parallel size, tp 8 × pp 12 (175B) and tp 8 × pp 35 (530B, as Table 1's
530B row; 96 = 8 × 12 keeps tensor parallelism inside the 8-GPU node as the paper recommends, §5.4.1); the
settings of the in-sample Table 1 rows, from the same paper and cluster: full activation recomputation (the
TFLOP/s column counts it: "achieved", Narayanan's hardware FLOPs, ``hfu_tflops``), 1F1B without interleaving
for PTD-P, unfused attention (2021), FP16 gradients reduced in 16 bits (``--param-bytes 16``) and accumulated by a
pass of their own every microbatch (``--grad-accumulation autograd``, Megatron-LM's LocalDDP hook before
gradient-accumulation fusion: see ``narayanan2021``; the ZeRO-3 rows run one microbatch, where it costs nothing),
blocking pipeline sends, sequence 2048; ZeRO-3 rows as ``--zero 3`` over dp = GPUs (weights, gradients and
optimizer state sharded, each layer all-gathered when it runs), the DeepSpeed prefetching modelled by pipesim's
own ZeRO-3 overlap rule; and DeepSpeed's ZeRO-3 of its time, which communicated tensor by tensor
(``--zero-collectives per-tensor``): the paper appeared in April 2021, ZeRO-3 was released in DeepSpeed v0.3.13
(March 2021), and every release up to v0.5.5 (November 2021) gathers each parameter tensor on its own, after a
``torch.cuda.synchronize()``, through a list of one view per rank that PyTorch's NCCL process group copies view
by view (``partition_parameters.py``: ``_allgather_param``, ``_reduce_scatter_gradient``). That cost grows with
the ranks: it is why the measured ZeRO-3 step does not shrink from 768 to 1,536 GPUs (66.7 s both), where a
per-layer gather's ring predicts it halving.

Uncertain: the PTD-P split and schedule; DeepSpeed ZeRO-3's bucket sizes and prefetch depth (pipesim has one
ZeRO-3 rule for FSDP and DeepSpeed); whether the ZeRO-3 runs recomputed (assumed, as the PTD-P runs and as the
memory of a 530B model at micro-batch 4 on 640 GPUs requires). No memory is published. Each model's six rows
(three ZeRO-3, three PTD-P) form a ranking group; the source's title keeps them apart from Table 1's rows.

Out-of-sample: added after the constants were fixed (issue #24), never fitted to.
"""

from pipesim.analytic.layout import (
    AttentionKernel,
    BoundaryTensor,
    GradAccumulation,
    Recompute,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.validation.runs import PublishedRun

SOURCE = "Narayanan et al. 2021 Table 2 (PTD-P vs ZeRO-3), Megatron-LM on A100"

_COMMON = dict(recompute=Recompute.FULL, attention=AttentionKernel.UNFUSED, fp16_grads=True,
               grad_accumulation=GradAccumulation.AUTOGRAD, overlap_tp_dgrad=False,
               p2p_tensor=BoundaryTensor.SPLIT)  # Megatron-LM of April 2021 (its §4.1 scatter/gather)
ROWS = [
    # ZeRO-3 without model parallelism: dp = GPUs, one microbatch per step
    *(PublishedRun(SOURCE, model, "a100-80gb", gpus, batch, micro_batch=mbs, zero=ZeroStage.PARAMETERS,
                   zero_collectives=ZeroCollectives.PER_TENSOR, hfu_tflops=tf, **_COMMON)
      for model, batch, gpus, mbs, tf in [
          ("gpt3-175b", 1536, 384, 4, 144), ("gpt3-175b", 1536, 768, 2, 88), ("gpt3-175b", 1536, 1536, 1, 44),
          ("gpt-529.6b", 2560, 640, 4, 138), ("gpt-529.6b", 2240, 1120, 2, 98), ("gpt-529.6b", 2240, 2240, 1, 48)]),
    # PTD-P: tensor 8 × pipeline (96 / 280 model-parallel), micro-batch 1
    *(PublishedRun(SOURCE, model, "a100-80gb", gpus, batch, tp=8, pp=pp, hfu_tflops=tf, **_COMMON)
      for model, pp, batch, gpus, tf in [
          ("gpt3-175b", 12, 1536, 384, 153), ("gpt3-175b", 12, 1536, 768, 149), ("gpt3-175b", 12, 1536, 1536, 141),
          ("gpt-529.6b", 35, 2240, 560, 171), ("gpt-529.6b", 35, 2240, 1120, 167),
          ("gpt-529.6b", 35, 2240, 2240, 159)]),
]
