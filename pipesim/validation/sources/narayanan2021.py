"""Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
Table 1: hardware TFLOP/s per A100 (80 GB, DGX A100 nodes, 8 × 200 Gb/s HDR), weak scaling 1.7B–1T.

Stated: model shape, tp, pp, GPUs, global batch, micro-batch 1, full recomputation, 1F1B (PTD-P without
interleaving for these rows), mixed precision. Inferred: unfused attention (2021, before FlashAttention),
FP16 gradients all-reduced (Megatron-LM's 2021 default; ``--accumulate-allreduce-grads-in-fp32`` was opt-in),
gradients accumulated by a pass of their own every microbatch (``--grad-accumulation autograd``: Megatron-LM's
LocalDDP of the paper's time adds each parameter's ``.grad`` into its ``main_grad`` buffer from a backward hook,
``megatron/model/distributed.py`` at aed2f75 of April 2021; the weight-gradient GEMM accumulating in place,
``--gradient-accumulation-fusion``, arrived in 83b1e42 of February 2022), blocking pipeline sends, sequence 2048,
every tensor-parallel collective waited for (``--no-overlap-tp-dgrad``: the column-parallel linears' backward
all-reduce became asynchronous beside the weight-gradient GEMM only with ``--async-tensor-model-parallel-allreduce``,
added in September 2021, 16c9044, and made the default the same day, 3f65246). Stated: the scatter/gather of
pipeline boundary tensors (§4.1: each tp rank sends 1/tp over the network, the receivers all-gather it over
NVLink; ``--p2p-tensor split``).
"""

from pipesim.analytic.layout import AttentionKernel, BoundaryTensor, GradAccumulation, Recompute
from pipesim.validation.runs import PublishedRun

SOURCE = "Narayanan et al. 2021, Megatron-LM on A100, Table 1"

ROWS = [
    PublishedRun(SOURCE, name, "a100-80gb", gpus, batch, tp=tp, pp=pp, recompute=Recompute.FULL,
                 attention=AttentionKernel.UNFUSED, fp16_grads=True, grad_accumulation=GradAccumulation.AUTOGRAD,
                 overlap_tp_dgrad=False, p2p_tensor=BoundaryTensor.SPLIT, hfu_tflops=tf)
    for name, tp, pp, gpus, batch, tf in [
        ("gpt-1.7b", 1, 1, 32, 512, 137), ("gpt-3.6b", 2, 1, 64, 512, 138), ("gpt-7.5b", 4, 1, 128, 512, 142),
        ("gpt-18.4b", 8, 1, 256, 1024, 135), ("gpt-39.1b", 8, 2, 512, 1536, 138),
        ("gpt-76.1b", 8, 4, 1024, 1792, 140), ("gpt-145.6b", 8, 8, 1536, 2304, 148),
        ("gpt-310.1b", 8, 16, 1920, 2160, 155), ("gpt-529.6b", 8, 35, 2520, 2520, 163),
        ("gpt-1008b", 8, 64, 3072, 3072, 163)]
]
