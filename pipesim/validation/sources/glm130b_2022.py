"""Zeng et al. 2022, "GLM-130B: An Open Bilingual Pre-Trained Model" (ICLR 2023; arXiv 2210.02414), §2.3
"Platform-Aware Parallel Strategies and Model Configurations" and Appendix B.4 "Pipeline Parallel Analysis":
the model FLOPs utilisation of GLM-130B's pre-training on 96 DGX-A100 (8 × 40 GB) servers.

Stated (§2.3, App. B.4, the released model arguments): the model's shape (the ``glm-130b`` preset: 70 layers,
hidden 12288, 96 heads, GeGLU MLP of 32768, vocabulary 150528, sequence 2048); 768 A100 40GB; 4-way tensor and
8-way pipeline parallelism (so 24-way data parallelism); "the PipeDream-Flush implementation from DeepSpeed"
(1F1B); global batch 4,224 sequences and m = 176 microbatches per pipeline (App. B.4: bubble 3.8 %), so a
micro-batch of one sequence; the first and last stages one layer lighter (9 × 8 − 2 = 70 layers, for the
embedding at both ends); FP16 mixed precision with FP32 master weights and optimizer states (Apex O2); "hardware
FLOPs utilization (HFU) of 43.3% and model FLOPs utilization (MFU) of 32.5%" counted as Chowdhery et al. 2022 do
(6N + 12·L·H·Q·T per token, which pipesim's model FLOPs match to 0.01 %), of A100's 312 TFLOP/s. The MFU is the
column used here.

Inferred: full activation recomputation (the two utilisations' ratio, 1.332, is 4/3: every layer's forward runs
twice); ZeRO-1 (DeepSpeed's pipeline engine runs ZeRO ≤ 1, and without sharding the optimizer pipesim puts rank 0 at
66 GiB of the 40 available; with it, 22 GiB); FP16 gradients accumulated by autograd, a pass of their own per
microbatch (DeepSpeed's FP16 engine keeps ``.grad`` in 16 bits and has no accumulation fused into the
weight-gradient GEMM: ``--param-bytes 16 --grad-accumulation autograd``); attention with the score matrix
materialised and a fused softmax (Megatron's kernel; mid-2022, before FlashAttention reached these code bases);
fused element-wise kernels; blocking pipeline sends, each tp rank's 1/tp of a boundary tensor (DeepSpeed's
pipeline engine partitions them, ``is_pipe_partitioned``: ``--p2p-tensor split``; and its steps send and
receive one after the other: ``--p2p-calls sequential``); every tensor-parallel
collective waited for (``--no-overlap-tp-dgrad``: SwissArmyTransformer's ``ColumnParallelLinear`` all-reduces its
input gradient in the backward of ``copy_to_model_parallel_region``, a blocking autograd function,
``sat/mpu/layers.py``); the standard
DGX A100 network (8 × 200 Gb/s HDR per node: the ``a100-40gb`` preset). FP16 and BF16 have the same A100 tensor-core
peak, so the row runs as BF16.

Uncertain: the attention implementation (SwissArmyTransformer's reference attention is eager PyTorch, several
passes over the score matrix, where Megatron's fused softmax makes one), the cluster's network, and whether
the utilisation was measured on steady steps or averaged over a longer window.

Known miss: pipesim is about 17 % too fast (23 % before the release that counted DeepSpeed's sequential sends).
Other runs of this kind (A100, 100B+, full recomputation, DeepSpeed's pipeline engine) are reported as far below
Megatron-LM's own runs of the same shapes, which pipesim matches (Korthikanti et al. 2023); the mechanism is not
yet found (see docs/validation-log.md). SwissArmyTransformer's GLM-130B module (``sat/model/official/glm130B_model.py``)
runs the GeGLU, the 2D rotary embedding and DeepNorm's scaled residual as eager ops: as ``--elementwise
eager-fused-norm`` the row is 3 points slower, not the gap; which ops the training build fused is not stated,
so the row keeps the fused setting.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to.
"""

from pipesim.analytic.frameworks import Framework
from pipesim.analytic.layout import (
    AttentionKernel,
    BoundaryTensor,
    GradAccumulation,
    P2pCalls,
    Recompute,
    ZeroStage,
)
from pipesim.validation.runs import PublishedRun

SOURCE = "Zeng et al. 2022, GLM-130B, §2.3 and Appendix B.4"

A100_PEAK_TFLOPS = 312.0  # dense FP16/BF16 tensor-core peak, the denominator of the paper's utilisations

ROWS = [
    PublishedRun(SOURCE, "glm-130b", "a100-40gb", 768, 4224, tp=4, pp=8, micro_batch=1,
                 recompute=Recompute.FULL, attention=AttentionKernel.UNFUSED, zero=ZeroStage.OPTIMIZER,
                 fp16_grads=True, grad_accumulation=GradAccumulation.AUTOGRAD, first_last=8, overlap_tp_dgrad=False,
                 p2p_tensor=BoundaryTensor.SPLIT, p2p_calls=P2pCalls.SEQUENTIAL,
                 # SwissArmyTransformer's Megatron-style TP on DeepSpeed's pipeline engine: megatron-deepspeed's shape
                 framework=Framework.MEGATRON_DEEPSPEED, mfu_tflops=0.325 * A100_PEAK_TFLOPS),
]
