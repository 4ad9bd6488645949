"""Black et al. 2022, "GPT-NeoX-20B: An Open-Source Autoregressive Language Model" (BigScience workshop, ACL 2022;
arXiv 2204.06745), §2.3 "Hardware" and §3 "Training": GPT-NeoX-20B's training throughput on 96 A100 40GB.

Stated (§2–3): the model (the ``neox-20b`` preset); twelve servers of eight A100-SXM4-40GB, each GPU reaching
the InfiniBand fabric through one of four ConnectX-6 HCAs; PyTorch 1.10, NCCL 2.10, a code base built on
Megatron and DeepSpeed; tensor parallel size 2 and pipeline parallel size 4 (one model replica per node, so
12-way data parallelism); ZeRO; "117 teraFLOPS per GPU" (the column used). The number was read from a
transcription of the paper, not its PDF.

Stated by the training configuration the repository publishes for this run (``configs/20B.yml``, "the
configuration file for the GPT-NeoX-20B model as it was trained on 96x 40GB A100 GPUs"): micro-batch 4 per GPU
and 32 gradient-accumulation steps (a 1,536-sequence batch; the paper's 1,538 contexts), ZeRO stage 1, FP16 with
dynamic loss scaling, activation checkpointing of every layer, Megatron's fused upper-triangular softmax and
bias-GeLU kernels, no dropout. The TFLOP/s is GPT-NeoX's own log line of the time ("approx flops per GPU",
``get_flops`` in ``megatron/logging.py`` at 166f72d of March 2022): per token ``6·N + 60·s·h·L`` with N every
parameter of the model, no recomputation counted; the row's step time is that count over the batch's tokens,
divided by 117 TFLOP/s and the 96 GPUs (43.8 s; read as hardware FLOPs it would be 47.7 s).

Inferred: DeepSpeed's pipeline engine (GPT-NeoX runs pipeline parallelism through it) with its 1F1B order and an
even split of the 44 layers (11 per stage); attention with the score matrix materialised (``--attention unfused``:
2022, fused softmax); FP16 gradients accumulated by autograd, a pass per microbatch (DeepSpeed's FP16 engine;
``--param-bytes 16 --grad-accumulation autograd``); every tensor-parallel collective waited for
(``--no-overlap-tp-dgrad``: at 166f72d the column-parallel linear's input gradient is all-reduced in the backward of
``_CopyToModelParallelRegion``, ``megatron/mpu/mappings.py``, a blocking autograd function); each tp rank's 1/tp
of a pipeline boundary tensor sent (DeepSpeed's pipeline engine partitions them, ``is_pipe_partitioned``:
``--p2p-tensor split``), each step's send and receive one blocking call after the other (``--p2p-calls
sequential``); the ``a100-40gb``
preset, whose network (one 200 Gb/s NIC per GPU) is twice this cluster's (one per two GPUs): it carries only the
once-a-step data-parallel sync here, about 1% of the step either way.

Known miss: pipesim is about 17 % too fast (21 % before the release that counted DeepSpeed's sequential sends),
as for GLM-130B (``glm130b_2022``), the other run on DeepSpeed's pipeline engine, on 8 times as many GPUs: the gap
is not one of scale (docs/validation-log.md).

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
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.params import total_params
from pipesim.validation.runs import PublishedRun

SOURCE = "Black et al. 2022, GPT-NeoX-20B, §2.3 and §3"

_GPUS, _BATCH, _TFLOPS = 96, 1536, 117.0


def _step_s() -> float:
    """GPT-NeoX's logged FLOP count of a step (6·N + 60·s·h·L per token) over the published rate."""
    m = MODEL_PRESETS["neox-20b"]
    per_token = 6 * total_params(m) + 60 * m.seq_len * m.hidden * m.layers
    return _BATCH * m.seq_len * per_token / (_TFLOPS * 1e12 * _GPUS)


ROWS = [
    PublishedRun(SOURCE, "neox-20b", "a100-40gb", _GPUS, _BATCH, tp=2, pp=4, micro_batch=4, recompute=Recompute.FULL,
                 attention=AttentionKernel.UNFUSED, zero=ZeroStage.OPTIMIZER, fp16_grads=True,
                 grad_accumulation=GradAccumulation.AUTOGRAD, overlap_tp_dgrad=False, p2p_tensor=BoundaryTensor.SPLIT,
                 p2p_calls=P2pCalls.SEQUENTIAL, framework=Framework.MEGATRON_DEEPSPEED, step_s=_step_s()),
]
