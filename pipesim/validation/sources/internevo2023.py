"""Shanghai AI Laboratory's InternEvo (then InternLM's training code): the "FLOPS Testing" tables of its training
performance document (``InternLM/InternEvo``, ``doc/en/train_performance.md`` as of c18bec9, 8 July 2023, "fix the
performance evaluation mistakes", unchanged since): InternLM-7B pre-training on 8 to 1,024 A100 80GB, tokens per
GPU per second at every scale, with and without activation checkpointing, at one to four microbatches a step.

Stated (the document): "GPU nvidia_a100-sxm4-80gb", "Inter-machine bandwidth 4 * 100Gb RoCE" (a node's: with
eight GPUs a node, 50 Gb/s a GPU, a quarter of a DGX A100's eight 200 Gb/s NICs: ``--inter-node-gbps 50`` over the
``a100-80gb`` preset); per row tp 1, ``zero1`` 8, ``pack_sample_into_one`` True, activation checkpointing on or off,
the GPU count, sequence 2048, ``micro_bsz`` (sequences a microbatch), ``micro_num`` (microbatches a step), the
global batch and the measured TGS ("the average number of tokens processed per GPU per second"), with a TFLOPS
column from Megatron's formula (which the TGS reproduce: 96·l·h²·(1 + s/6h + V/16lh) a token, recomputation
counted). The row takes the TGS; its step is micro_bsz × micro_num × 2,048 tokens over it, as ``train.py``
computes TGS from each step's wall time (``record_current_batch_training_metrics``: the tokens of the data-parallel
rank over the time since the step's start, its data loading included).

Stated by the code of the same commit:

- *The model* (``configs/7B_sft.py``, ``internlm/model/modeling_internlm.py``): the ``internlm-7b`` preset; BF16;
  apex's fused RMSNorm, flash-attn's rotary kernel and its FlashAttention, version 1 (the install document of the
  same commit, ``doc/install.md``: "flash-attention (version v1.0.5)"; ``--attention flash1``, modelled a release
  after these rows were added: 11.0 → 5.7 %) (``FlashSelfAttention`` on packed qkv
  views, no relayout copies), the MLP ``w3(F.silu(w1(x)) * w2(x))``: two column linears and an eager SwiGLU
  (``--mlp-up split``), no dropout (rates 0), flash-attn's cross-entropy kernel on the vocabulary-parallel logits
  (``FlashGPTLMLoss``: ``--loss fused``).
- *The data* with ``pack_sample_into_one`` (``PackedDatasetWithoutCuSeqlen``): each micro-batch row cut into
  2,048-token pieces (``cu_seqlens`` every ``seq_len``), so every piece is causal attention over 2,048 tokens: a
  micro-batch of ``micro_bsz`` sequences.
- *Checkpointing* (``checkpoint=True``): each layer recomputed whole in the backward (``--recompute full``).
- *The gradients* (``HybridZeroOptimizer``): the BF16 parameters' gradients summed by autograd over the
  microbatches (``--grad-accumulation autograd``), then all-reduced over every data-parallel rank in 16 bits
  (``reduce_tensor`` with ``dst_rank`` None: ``dist.all_reduce``, average; ``--param-bytes 16``), bucket by bucket
  as hooks fill them during the last microbatch's backward only (the scheduler sets ``skip_grad_reduce`` for the
  others; ``zero_overlap_communication``): ``--overlap-grad-reduce``.
- *The optimizer state* (``zero1=8``): the FP32 master weights and Adam's moments divided over the eight GPUs of a
  node, each node a replica; after its update each owner broadcasts its BF16 shard within the node
  (``broadcast_params``, waited for before the next step in this release): ``--distributed-optimizer
  --shard-group 8``, pipesim's hybrid ZeRO-1 (the all-reduce over every rank, an all-gather in the
  group, which moves the broadcasts' bytes).

Inferred, not modelled: the attention biases (the preset leaves them out); the residual cast to FP32 before each
norm (``_residual.float()``: under 0.5 % of a layer); ``--elementwise eager-activation`` (nanotron's, the eager
SwiGLU this code runs) also counts four relayout copies that this code's packed q, k, v views do not make (about
1 % of a layer's time).

Not used: the document's "Throughput Measurement" table (``pack_sample_into_one`` False: attention over samples
whose lengths it does not state; its tp 1, ``zero1`` 8 row repeats this table's checkpoint-off column at six of
its eight GPU counts), whose ``zero1=-1`` rows shard over every data-parallel rank and gather the parameters by a
broadcast from each of up to 1,024 owners (a broadcast a rank, each over up to 1,024 ranks, where pipesim
models one all-gather), and tp 2 rows; and the GPU memory table
(A800, a later release, the measure not stated).

Uncertain: which steps a row averages; the NCCL release and the RoCE fabric's topology; the GPUs, given as A100
SXM4 80GB here and as A800 in the memory table of a later release.

What pipesim says (``python experiments/published_runs.py``): the rows of eight sequences a microbatch with
checkpointing run 5–10 % slower than predicted at every scale, and those of four microbatches a step without it
9–11 % up to 512 GPUs, as other A100 sources do (Hagemann et al.'s −11 %); the steps of fewer tokens on 512 and
1,024 GPUs 14–36 %. Two of those run the same step with and without checkpointing and measure it alike (1.750 and
1.746 s on 1,024 GPUs), which says the step there is not its compute: the all-reduce of 15 GB of gradients over 128
nodes through four 100 Gb/s NICs each takes about as long as the whole step, where pipesim's ring (the NICs' line
rate at NCCL's A100 ring share) takes 0.74 s and hides most of it behind the backward. The pattern of issue #24's
held-out runs, one microbatch a step and scale costing more than pipesim counts, on a source of its own.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to. One model on one cluster
at one layout: the rows form ranking groups by checkpointing and micro-batch.
"""

from pipesim.analytic.layout import (
    AttentionKernel,
    ElementwiseKernels,
    GradAccumulation,
    LossKernel,
    MlpUp,
    Recompute,
    ZeroStage,
)
from pipesim.validation.runs import PublishedRun

SOURCE = "InternEvo 2023, InternLM-7B training performance on A100 (doc/en/train_performance.md, FLOPS Testing)"
_SEQ = 2048
# (activation checkpointing, GPUs, micro_bsz, micro_num, TGS): the two "FLOPS Testing" tables, in their order
_TABLE = [
    (True, 8, 8, 1, 3314), (True, 16, 8, 1, 3268), (True, 32, 8, 1, 3323), (True, 64, 8, 1, 3217),
    (True, 128, 8, 1, 3260), (True, 256, 8, 1, 3215), (True, 512, 8, 1, 3199), (True, 1024, 8, 1, 3163),
    (True, 512, 4, 1, 2963), (True, 1024, 2, 1, 2341), (True, 1024, 4, 1, 2796),
    (False, 8, 2, 4, 4103), (False, 16, 2, 4, 3939), (False, 32, 2, 4, 3919), (False, 64, 2, 4, 3944),
    (False, 128, 2, 4, 3928), (False, 256, 2, 4, 3920), (False, 512, 2, 4, 3900), (False, 1024, 2, 4, 3625),
    (False, 512, 2, 2, 3084), (False, 1024, 2, 1, 2346), (False, 1024, 2, 2, 2817),
]

ROWS = [
    PublishedRun(SOURCE, "internlm-7b", "a100-80gb", gpus, gpus * micro_bsz * micro_num, micro_batch=micro_bsz,
                 seq_len=_SEQ, recompute=Recompute.FULL if checkpoint else Recompute.NONE,
                 elementwise=ElementwiseKernels.EAGER_ACTIVATION, loss=LossKernel.FUSED, mlp_up=MlpUp.SPLIT,
                 attention=AttentionKernel.FLASH1,
                 grad_accumulation=GradAccumulation.AUTOGRAD, fp16_grads=True, overlap_grad_reduce=True,
                 zero=ZeroStage.OPTIMIZER, shard_group=8,
                 inter_node_gbps=50, tokens_per_gpu=tgs,
                 note=f"{'checkpointing' if checkpoint else 'no checkpointing'}, {micro_num} microbatch"
                      f"{'es' if micro_num > 1 else ''}")
    for checkpoint, gpus, micro_bsz, micro_num, tgs in _TABLE
]
