"""Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning" (arXiv 2307.08691),
§4.3 and Table 1 ("Training speed (TFLOPs/s/GPU) of GPT-style models on 8×A100 GPUs"): end-to-end training of
GPT-3 1.3B and 2.7B at 2k and 8k context on one node of 8 A100 80GB SXM4, with and without FlashAttention.

Stated (§4.3, Table 1): GPT-style models of 1.3B and 2.7B parameters, 8×A100 80GB SXM4, 2k and 8k context, and
TFLOP/s per GPU for a baseline "without FlashAttention" (142, 72, 149, 80), for FlashAttention (189, 170, 189,
175) and for FlashAttention-2 (196, 220, 205, 225), counted as ``6·seqlen·params + 12·layers·hidden·seqlen²``
per sequence (no causal halving, no recomputation counted: model FLOPs). Each row's step time is that count over
the step's sequences divided by the published rate and the 8 GPUs (``step_s`` below; the count uses the preset's
own parameters, learned positions at the row's length included).

Inferred from the paper's training code (Dao-AILab/flash-attention, training/configs/experiment/pile/gpt3xl-flash
{,-8k}.yaml and gpt3-2.7B-flash{,-8k}.yaml, which the README points to for these GPT-3 runs): the shapes (1.3B:
24 layers, hidden 2048, 16 heads; 2.7B: 32 layers, hidden 2560, 32 heads; the ``gpt3-1.3b`` and ``gpt3-2.7b``
presets, vocabulary 51,200 where the code pads GPT-2's 50,257 to 50,264: 0.2 % of the FLOPs); GPT-2 modules
with learned positions, tied embeddings and dropout 0.1 (transformers' GPT2Config defaults); BF16; data
parallelism over the 8 GPUs with the optimizer state sharded (``DDPStrategyZero1``: ZeRO-1); global batch 512
sequences at 2k and 128 at 8k (1M tokens); per-GPU micro-batch 8 (1.3B, 2k) or 4 (the others) for 80GB GPUs,
the rest as PyTorch Lightning's gradient accumulation (``experiment/pile/base.yaml``: ``accumulate_grad_batches``
from the global batch; ``precision: bf16`` autocasts over FP32 weights), so autograd adds every microbatch's FP32
gradients into ``.grad`` in a pass of its own (``--grad-accumulation autograd``);
fused element-wise kernels (``fused_dropout_add_ln``, ``fused_mlp``, ``fused_bias_fc``) and an in-place
cross-entropy; no activation checkpointing with FlashAttention ("we don't need any activation checkpointing").
FlashAttention-2 rows run ``--attention fused`` (the A100 preset's attention rates are FlashAttention-2's own,
Dao 2023 Fig. 4–7: a consistency check of those rates more than an independent test).

Baseline rows ("without FlashAttention"): the same code with standard PyTorch attention (``--attention unfused``:
scores materialised, softmax and dropout stored). Inferred: the micro-batch and recomputation, which the paper
does not give. Standard attention stores ≥ 5·heads·s² bytes per sequence and layer, so the FlashAttention
configs' micro-batches do not fit; these rows take the largest power-of-two micro-batch that pipesim's memory
model fits in 80 GB without recomputation (2k: 4 for 1.3B, 2 for 2.7B), and at 8k, where none fits, full
recomputation (per-block checkpointing) with the largest that fits then (4 for 1.3B, 2 for 2.7B). Uncertain:
all of this for the baseline; whether the baseline was this repository's model or Megatron-LM's; the FLOP count
charges no recomputation, so a baseline that recomputed is slower per counted FLOP, as modelled.

FlashAttention (v1) rows (the table's middle column: 189, 170, 189, 175): the FlashAttention-2 rows' configs with
flash-attn 1.x's kernel (``--attention flash1``: FA2's rates over v1's measured ratio at the layer's shape, from
the same paper's Figure 4, :func:`pipesim.analytic.attention_shapes.flash1_slowdown`). Inferred: that the v1
runs used the same micro-batch and no recomputation (the memory of the two kernels is the same); the paper
states only that both columns train the same models. No memory is published. Each model and context's three
rows are too few for a ranking group.

Out-of-sample: added after the constants were fixed (issue #24), never fitted to; the FlashAttention (v1) rows
added with ``--attention flash1``, whose ratio is read from the same paper's kernel figure, not from these rows.
"""

from pipesim.analytic.layout import AttentionKernel, GradAccumulation, Recompute, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.params import total_params
from pipesim.validation.runs import PublishedRun

SOURCE = "Dao 2023, FlashAttention-2, Table 1"
_GPUS = 8


def _step_s(model: str, seq: int, batch: int, tflops: float) -> float:
    """The paper's FLOP count for the step (6·s·N + 12·L·h·s² per sequence) over the published rate."""
    m = MODEL_PRESETS[model].with_shape(seq, 1)
    per_sequence = 6 * seq * total_params(m) + 12 * m.layers * m.hidden * seq**2
    return batch * per_sequence / (tflops * 1e12 * _GPUS)


ROWS = []
# (model, context, global batch, FA2 micro-batch, FA2 TFLOP/s, FA1 TFLOP/s, baseline micro-batch, baseline
# recompute, baseline TFLOP/s)
for _model, _seq, _batch, _mbs, _fa2, _fa1, _base_mbs, _base_rc, _base in [
    ("gpt3-1.3b", 2048, 512, 8, 196, 189, 4, Recompute.NONE, 142),
    ("gpt3-1.3b", 8192, 128, 4, 220, 170, 4, Recompute.FULL, 72),
    ("gpt3-2.7b", 2048, 512, 4, 205, 189, 2, Recompute.NONE, 149),
    ("gpt3-2.7b", 8192, 128, 4, 225, 175, 2, Recompute.FULL, 80),
]:
    for _att, _micro, _rc, _tf in [(AttentionKernel.FUSED, _mbs, Recompute.NONE, _fa2),
                                   (AttentionKernel.FLASH1, _mbs, Recompute.NONE, _fa1),
                                   (AttentionKernel.UNFUSED, _base_mbs, _base_rc, _base)]:
        ROWS.append(PublishedRun(SOURCE, _model, "a100-80gb", _GPUS, _batch, micro_batch=_micro, seq_len=_seq,
                                 attention=_att, recompute=_rc, zero=ZeroStage.OPTIMIZER,
                                 grad_accumulation=GradAccumulation.AUTOGRAD,
                                 step_s=_step_s(_model, _seq, _batch, _tf)))
