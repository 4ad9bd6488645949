"""Alibaba's Megatron-LLaMA (``alibaba/Megatron-LLaMA``, README of the initial release d2e05b8, 3 August 2023,
unchanged at 25306de): LLaMA-13B training throughput on A100 80GB with Megatron-LM's distributed optimizer and
with Megatron-LLaMA's ``OverlappedDistributedOptimizer``, at 32, 256 and 512 GPUs.

Stated (the README): "8xA100-80GB devices and 4x200Gbps RDMA inter-bandwidth" (a node's four NICs: 100 Gb/s a GPU,
``--inter-node-gbps 100`` over the ``a100-80gb`` preset); "the average tokens per second on each GPU" when
reproducing LLaMA's training, 1,890 (256 GPUs) and 1,845 (512) with the ``OverlappedDistributedOptimizer``, 1,630
and 1,430 with Megatron-LM's ``DistributedOptimizer``, each with the days it would take (23.9, 12.2, 27.8 and 15.8);
and "our own LLaMA-13b model on four 8xA100-80GB devices", a global batch of 2,048 by gradient accumulation,
10 billion tokens in 40.3 hours: 2,154 tokens per second per GPU, the row on 32 GPUs ("Training Model TFLOPS"
180; the DeepSpeed column beside it, 146, states none of its settings and is not used).

Inferred, the model: LLaMA-13B (Touvron et al. 2023: 40 layers of 5,120, 40 heads, MLP 13,824, 32,000-token
vocabulary, the ``llama2-13b`` preset's shape at sequence 2,048). The README does not name the size it
"reproduces". The four stated day counts are 1.0T tokens at the four rates (1e12 / (1,890 × 256) s = 23.9 days;
12.2, 27.8 and 15.8 the same way): LLaMA-7B's or 13B's training length, not the 1.4T of the 33B and 65B; of the
two, the 13B is the README's other table's model and its example script's.

Stated by the example script of the same commit (``examples/LLaMA/LLaMA_13_slurm.sh``), taken as the rows'
layout: tp 2, pp 1, micro-batch 4, global batch 2,048, sequence 2,048, ``--sequence-parallel``, ``--recompute-
granularity selective``, ``--use-flash-attn``, ``--no-gradient-accumulation-fusion`` (each microbatch's BF16 weight
gradients added into the FP32 main gradients by a pass of their own: ``--grad-accumulation autograd``),
``--overlapped-distributed-optimizer``, BF16. Stated by the code of the same commit (Megatron-LM of mid-2023):
FlashAttention v1 (``flash_attn_unpadded_func``, flash-attn 1.x; the README: "We will continue to release
features such as ... FlashAttention2 in the future": ``--attention flash1``); Apex's fused RMSNorm; RoPE as
PyTorch ops on FP32 frequencies and SwiGLU as ``F.silu`` times the other ``torch.chunk`` half
(``--elementwise eager-fused-norm``); the optimizers: Megatron-LM's ``DistributedOptimizer`` of the time
reduce-scatters the FP32 gradients after the last microbatch's backward and all-gathers the parameters after the
step (``--distributed-optimizer``), Megatron-LLaMA's reduce-scatters bucket by bucket during that backward
(``--overlap-grad-reduce``) and all-gathers after the step (overlapping the gather with the forward came on 9
October 2023, e3d671a). Dp is what is left of the GPUs: 16, 128, 256, so 32, 4 and 2 microbatches a step.

Not modelled, stated by the script of that commit: hidden and attention dropout 0.1 (Megatron-LM's defaults; the
script set them to 0 in September 2023), and tied input and output embeddings (no ``--untie-embeddings-and-output-
weights``): with both, pipesim's rows run 0.4-0.5 % slower. Uncertain: that the README's runs used the example's
layout; the NICs' fabric (RoCE or InfiniBand); the software versions (the script's NGC 20.12 container is older than
FlashAttention: a placeholder).

Out-of-sample: gathered after every constant was fixed, never fitted to; FlashAttention v1's rate comes from Dao
2023's kernel benchmark (``pipesim.analytic.attention_shapes.flash1_slowdown``), not from these rows.
"""

from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels, GradAccumulation, Recompute, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "Megatron-LLaMA 2023 (Alibaba), README: LLaMA-13B on A100 80GB"
_TP, _MICRO, _BATCH, _SEQ = 2, 4, 2048, 2048


def _row(gpus: int, tokens_per_gpu: float, overlapped: bool) -> PublishedRun:
    optimizer = "OverlappedDistributedOptimizer" if overlapped else "DistributedOptimizer"
    return PublishedRun(f"{SOURCE}: {optimizer}", "llama2-13b", "a100-80gb", gpus, _BATCH, tp=_TP,
                        micro_batch=_MICRO, seq_len=_SEQ, sequence_parallel=True, recompute=Recompute.SELECTIVE,
                        attention=AttentionKernel.FLASH1, elementwise=ElementwiseKernels.EAGER_FUSED_NORM,
                        grad_accumulation=GradAccumulation.AUTOGRAD, zero=ZeroStage.OPTIMIZER,
                        overlap_grad_reduce=overlapped, inter_node_gbps=100, tokens_per_gpu=tokens_per_gpu)


ROWS = [
    # 10B tokens in 40.3 hours on 32 GPUs: 1e10 / (40.3 · 3600) / 32
    _row(32, round(1e10 / (40.3 * 3600) / 32), overlapped=True),
    _row(256, 1890, overlapped=True), _row(512, 1845, overlapped=True),
    _row(256, 1630, overlapped=False), _row(512, 1430, overlapped=False),
]
