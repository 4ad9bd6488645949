"""Hagemann et al. 2023, "Efficient Parallelization Layouts for Large-Scale Distributed Model Training" (NeurIPS
2023 WANT workshop; COLM 2024; arXiv 2311.05610): an ablation of training layouts for LLaMA-shaped 13B, 30B and
65B models on DGX A100 80GB, every trial's step time published as spreadsheets in the authors' repository
(``Aleph-Alpha/NeurIPS-WANT-submission-efficient-parallelization-layouts`` at e13c2cb, ``data/*.xlsx`` and
``data/seqpara/*.xlsx``, columns "Trial ID", "World Size", "Average Step Time", "Average MFU",
``activation_checkpointing_type``, ``kernel``, ``micro_batch_size``, ``model_parallel_size``,
``pipe_parallel_size`` and, in ``seqpara/``, ``sequence_parallel``). Ten sheets: one model, sequence length and
GPU count each; hundreds of layouts measured on one system with one code base, the within-model comparisons a
planner needs (issue #24, item 5).

The rows: every trial that ran (no "OOM Error" or "Other Error") with FlashAttention-2, with and without the
framework's RMSNorm kernel (``kernel`` "flash_attention2 + RMS kernel" and "flash_attention2"): 248 of the 401
that ran; and every one with FlashAttention v1.0.8 (``kernel`` "flash_attentionv1.0.8", no RMS kernel named:
eager RMSNorm; ``--attention flash1``, FlashAttention-2's rate over the ratio Dao 2023 measured between the two,
:func:`pipesim.analytic.attention_shapes.flash1_slowdown`): 104 more, added once that kernel was modelled, with
their 121 out-of-memory trials. 102 layouts ran with both, the test of the ratio itself
(``tests/test_published_runs.py``). Left out: the "torch" and "fused" attention kernels, which the public code
no longer has ("fused" is not in it at all), so what they ran is not stated.

Stated by the data: the layout of every trial (tp = ``model_parallel_size``, pp = ``pipe_parallel_size``, the
micro-batch, full recomputation of every layer or none, sequence parallelism) and its step time, a whole
optimizer step. Stated by the sheets' own columns: the batch, 4,194,304 tokens a step in every sheet (2,048
sequences of 2,048 or 512 of 8,192): the "Average MFU" column, 312 TFLOP/s per A100 and the code's model-FLOPs
count (6·N + 12·L·h·s per token), and the "Average TFlops Aleph Alpha" column agree on it in every row only with
a 128,000-token vocabulary, untied (Aleph Alpha's tokenizer, ``alpha-001-128k``), not LLaMA's 32,000, and with
the MLP widths the framework's ``mlp_factor`` allows (13824, 17888, 22016): the presets ``aa-llama-13b``,
``aa-llama-30b``, ``aa-llama-65b``.

Stated by the paper (Section 3, as summarised; the body was not at hand): 32 DGX A100 nodes of 8 A100 80GB,
NVLink 3, 200 Gb/s HDR InfiniBand, tp inside a node. Not stated, inferred: eight HDR NICs a node, the standard
DGX A100 (the ``a100-80gb`` preset); the paper names one link speed, not the count.

Stated by Aleph Alpha's ``scaling`` framework (``Aleph-Alpha/scaling``, v0.1.0 78489292, 2024, released after
the paper; where the paper's code may differ, said): rank = (pp·dp + dp rank)·tp + tp rank (tp inside a node,
pipesim's default order); DeepSpeed-style 1F1B (``pipeline_schedule/train.py``) with blocking
``torch.distributed.send``/``recv``; stages split uniformly over the layer list ``[embedding, L layers, final
norm, head]`` (``pipe_partition_method`` "uniform", the default; the remainder to the first stages), so the last
stage has two layers fewer than its share and the first one fewer (``stage_layers``); Megatron-style column- and
row-parallel linears whose collectives all wait (``_CopyToModelParallelRegion.backward`` all-reduces the input
gradient after the linear's backward: ``--no-overlap-tp-dgrad``); sequence parallelism as Korthikanti et al.'s,
the norm's output all-gathered and the gathered tensor saved by autograd for the column-parallel linear
(``--column-input saved``); gradients summed in BF16 ``.grad`` by autograd (``--grad-accumulation autograd
--param-bytes 16``); FP32 master weights and AdamW states; the output layer's logits all-gathered over tp and
``F.cross_entropy`` on the whole vocabulary's FP32 logits on every tp rank (``lm_head.py``, ``parallel_output``
off: ``--loss gathered``); FlashAttention-2 (``flash_attn_varlen_func``; v1's trials their own kernel); RoPE,
SwiGLU (two separate column-parallel GEMMs, ``ParallelSwiGLUMLP``'s ``dense_in`` and ``siglu_weight``, then
``silu(x) * gate``: ``--mlp-up split``; without sequence parallelism each all-reduces its own input gradient in
the backward), residual adds eager PyTorch, no ``torch.compile``; the "RMS
kernel" is flash-attn's ``ops.rms_norm``, without it RMSNorm runs as PyTorch ops through FP32
(``--elementwise eager-fused-norm`` and ``--elementwise eager``); ``every_layer`` checkpoints every item of a
stage, its layers, embedding and head (pipesim recomputes the layers: ``--recompute full``); each step's send
and receive one blocking call after the other (``RecvActivation`` then ``SendGrad``, ``SendActivation`` then
``RecvGrad``: ``--p2p-calls sequential``, a stage waits out the transfer it receives as well as the one it
sends); each tp rank sends its whole boundary tensor to the next stage (``PipeCommunicator.send_data``: the
layer's output as the rank holds it, all of it without sequence parallelism: ``--p2p-tensor whole``); the
gradients all-reduced whole after the pipeline flush, cast to FP32 for the wire (``optimizer/allreduce.py``,
``allreduce_tensor_in_float32``), then the BF16 parameters all-gathered from their ZeRO-1 shards
(``--zero-collectives all-reduce-fp32``: 10 bytes a parameter on the wire, not a reduce-scatter's 4).

Inferred: ZeRO-1 (optional in the code; without it the 13B at tp 1 × pp 1, the paper's best layout, needs about
224 GB a GPU, with it about 59: ``--zero 1``). Not modelled, stated: every attention call's host
synchronisation (``get_max_seq_length``'s ``.item()``); the head's recomputation under ``every_layer``.
Uncertain: the network (NIC count), the code the paper ran (2023) against the public release (2024), the
dropout (0 in the public defaults).

What the rows say (``python experiments/published_runs.py``): pipesim is too fast on every sheet, −9 % on average
at tp 1–2, −12 % at tp 4, −13 % at tp 8, and more so as the GPU count grows: the 30B sheet on 256 GPUs −16…−21 % by
tp, the sheets on 32–64 GPUs −2…−12 %. Issue #24's held-out pattern, scale costing more than pipesim counts, here
on a public source with every layout stated; the order of the layouts is right (Spearman +0.90…+0.99 per model).
Five of the framework's mechanisms were found in its code by these rows' own pairs and are modelled (−16.2 →
−11.0 % on the source, nothing fitted): the FP32 RMSNorm's and SwiGLU's backward as autograd runs them (the 22
pairs with and without the RMS kernel: the kernel saves ×0.86 of the step on average as measured, ×0.92 in
pipesim before, ×0.87 now), the gate and up projections' separate input-gradient all-reduces (the 39 pairs with
and without sequence parallelism: ×0.935 measured, ×0.96 before, ×0.943 now), whole boundary tensors from every
tp rank, sends and receives in turn, and the FP32 gradient all-reduce. docs/validation-log.md says what was checked.
What is left tracks the inter-node traffic: regressed on pipesim's shares of the step, the measured/predicted
ratio grows with the gradient sync's share (×4.9 of it) and the P2P's (×3.6), not with the TP collectives' or the
bubble. With two HDR NICs a node in place of eight (a quarter of the bandwidth) the source's mean error is 6.1 %
(bias −3.5 %) and the GPU-count trend is gone (−4.8, −3.2, −1.8, −7.9 % on 32–256 GPUs); one NIC overshoots (bias
+6.4 %). Not adopted: the paper's NIC count is not at hand, and choosing it from these rows would tune the source
to itself (``python experiments/hagemann_network.py``).

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.layout import (
    AttentionKernel,
    ColumnInput,
    ElementwiseKernels,
    GradAccumulation,
    LossKernel,
    MlpUp,
    P2pCalls,
    Recompute,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.stage_split import uniform_item_split
from pipesim.validation.runs import PublishedRun

SOURCE = "Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets)"
TOKENS_PER_STEP = 4_194_304  # the sheets' batch: 2,048 × 2,048 or 512 × 8,192 tokens


@dataclass(frozen=True)
class _Kernels:
    """A trial's ``kernel`` column: its attention kernel, and whether RMSNorm ran as the framework's kernel."""

    elementwise: ElementwiseKernels
    attention: AttentionKernel = AttentionKernel.FUSED


# "flash_attention2 + RMS kernel", "flash_attention2" and "flash_attentionv1.0.8" (no RMS kernel named: eager)
_RMS = _Kernels(ElementwiseKernels.EAGER_FUSED_NORM)
_EAGER = _Kernels(ElementwiseKernels.EAGER)
_V1 = _Kernels(ElementwiseKernels.EAGER, AttentionKernel.FLASH1)
_NONE, _FULL = Recompute.NONE, Recompute.FULL  # activation_checkpointing_type disabled / every_layer


@dataclass(frozen=True)
class _Sheet:
    path: str  # under data/ in the repository
    model: str
    seq_len: int
    gpus: int
    # (trial id, kernels, recompute, micro-batch, tp, pp, sequence parallel, average step time in s)
    trials: tuple[tuple[int, _Kernels, Recompute, int, int, int, int, float], ...]
    # the trials of the same kernels that stopped with "OOM Error" (no step time): (trial id, …, sequence parallel)
    out_of_memory: tuple[tuple[int, _Kernels, Recompute, int, int, int, int], ...] = ()


_SHEETS = (
    _Sheet("llama_13B_bfloat16_64_GPUs_all_runs.xlsx", "aa-llama-13b", 2048, 64, (
        (132178, _RMS, _NONE, 1, 1, 1, 0, 26.54),
        (132184, _RMS, _NONE, 2, 2, 1, 0, 29.704),
        (132187, _RMS, _NONE, 1, 1, 2, 0, 31.058),
        (132185, _RMS, _NONE, 1, 2, 1, 0, 31.286),
        (132186, _RMS, _NONE, 2, 1, 2, 0, 33.11),
        (132307, _EAGER, _NONE, 1, 1, 2, 0, 33.695),
        (132317, _EAGER, _NONE, 2, 2, 1, 0, 33.903),
        (132182, _RMS, _NONE, 1, 2, 2, 0, 34.842),
        (132175, _RMS, _NONE, 2, 2, 2, 0, 35.047),
        (132312, _EAGER, _NONE, 1, 2, 1, 0, 35.541),
        (132394, _EAGER, _FULL, 4, 1, 1, 0, 36.661),
        (132401, _EAGER, _FULL, 2, 1, 1, 0, 36.686),
        (132405, _EAGER, _FULL, 1, 1, 1, 0, 37.513),
        (132181, _RMS, _NONE, 4, 2, 2, 0, 37.567),
        (132315, _EAGER, _NONE, 2, 1, 2, 0, 38.274),
        (132316, _EAGER, _NONE, 1, 2, 2, 0, 39.637),
        (132310, _EAGER, _NONE, 2, 2, 2, 0, 39.825),
        (132336, _EAGER, _FULL, 8, 2, 1, 0, 43.24),
        (132392, _EAGER, _FULL, 4, 2, 1, 0, 44.104),
        (132404, _EAGER, _FULL, 1, 1, 2, 0, 44.133),
        (132397, _EAGER, _FULL, 2, 2, 1, 0, 44.448),
        (132403, _EAGER, _FULL, 1, 2, 1, 0, 47.123),
        (132399, _EAGER, _FULL, 2, 1, 2, 0, 47.367),
        (132396, _EAGER, _FULL, 2, 2, 2, 0, 53.565),
        (132393, _EAGER, _FULL, 4, 1, 2, 0, 55.605),
        (132390, _EAGER, _FULL, 4, 2, 2, 0, 56.609),
        (132335, _EAGER, _FULL, 8, 2, 2, 0, 65.468),
        (132337, _EAGER, _FULL, 8, 1, 2, 0, 72.819),
        (97719, _V1, _NONE, 1, 1, 2, 0, 33.584),
        (97713, _V1, _NONE, 2, 2, 2, 0, 37.7083),
        (97717, _V1, _NONE, 1, 2, 2, 0, 40.2478),
        (97718, _V1, _NONE, 1, 2, 1, 0, 40.5592),
        (97714, _V1, _NONE, 2, 2, 1, 0, 41.808),
        (97409, _V1, _FULL, 2, 1, 2, 0, 42.3031),
        (104137, _V1, _FULL, 1, 1, 2, 0, 42.3629),
        (104139, _V1, _FULL, 4, 1, 2, 0, 42.5382),
        (97406, _V1, _FULL, 4, 1, 1, 0, 43.1253),
        (104142, _V1, _FULL, 2, 1, 1, 0, 43.8937),
        (97474, _V1, _FULL, 1, 1, 1, 0, 44.3538),
        (97401, _V1, _FULL, 8, 1, 2, 0, 44.7163),
        (97404, _V1, _FULL, 4, 2, 1, 0, 47.0908),
        (104144, _V1, _FULL, 2, 2, 1, 0, 47.5049),
        (97403, _V1, _FULL, 4, 2, 2, 0, 49.7692),
        (104138, _V1, _FULL, 1, 2, 1, 0, 50.0456),
        (97399, _V1, _FULL, 8, 2, 2, 0, 50.1606),
        (97407, _V1, _FULL, 2, 2, 2, 0, 51.4402),
        (97411, _V1, _FULL, 1, 2, 2, 0, 53.4998),
    ), out_of_memory=(
        (132173, _RMS, _NONE, 8, 2, 2, 0), (132174, _RMS, _NONE, 8, 2, 1, 0), (132176, _RMS, _NONE, 8, 1, 2, 0),
        (132177, _RMS, _NONE, 4, 1, 2, 0), (132179, _RMS, _NONE, 2, 1, 1, 0), (132180, _RMS, _NONE, 4, 1, 1, 0),
        (132183, _RMS, _NONE, 4, 2, 1, 0), (132188, _RMS, _NONE, 8, 1, 1, 0), (132303, _EAGER, _NONE, 8, 2, 2, 0),
        (132304, _EAGER, _NONE, 4, 2, 1, 0), (132305, _EAGER, _NONE, 8, 1, 2, 0), (132306, _EAGER, _NONE, 4, 1, 2, 0),
        (132308, _EAGER, _NONE, 4, 1, 1, 0), (132311, _EAGER, _NONE, 8, 2, 1, 0), (132313, _EAGER, _NONE, 2, 1, 1, 0),
        (132314, _EAGER, _NONE, 1, 1, 1, 0), (132318, _EAGER, _NONE, 4, 2, 2, 0),
        (97705, _V1, _NONE, 8, 2, 2, 0), (97709, _V1, _NONE, 4, 2, 2, 0), (97707, _V1, _NONE, 8, 1, 2, 0),
        (97711, _V1, _NONE, 4, 1, 2, 0), (97715, _V1, _NONE, 2, 1, 2, 0), (97400, _V1, _FULL, 8, 2, 1, 0),
        (97706, _V1, _NONE, 8, 2, 1, 0), (97710, _V1, _NONE, 4, 2, 1, 0), (97402, _V1, _FULL, 8, 1, 1, 0),
        (97708, _V1, _NONE, 8, 1, 1, 0), (97712, _V1, _NONE, 4, 1, 1, 0), (97716, _V1, _NONE, 2, 1, 1, 0),
        (97720, _V1, _NONE, 1, 1, 1, 0),
    )),
    _Sheet("llama_13B_bfloat16_8k_seq_length_128_GPUs_all_runs.xlsx", "aa-llama-13b", 8192, 128, (
        (132276, _RMS, _NONE, 1, 2, 2, 0, 18.41),
        (132274, _RMS, _NONE, 1, 2, 4, 0, 19.32),
        (132273, _RMS, _NONE, 1, 4, 1, 0, 21.359),
        (132271, _RMS, _NONE, 1, 4, 2, 0, 21.942),
        (132468, _EAGER, _NONE, 1, 2, 4, 0, 21.927),
        (132270, _RMS, _NONE, 1, 4, 4, 0, 23.459),
        (132201, _RMS, _NONE, 2, 4, 4, 0, 23.782),
        (132426, _EAGER, _FULL, 1, 1, 2, 0, 24.62),
        (132465, _EAGER, _NONE, 1, 4, 2, 0, 25.991),
        (132425, _EAGER, _FULL, 1, 1, 4, 0, 26.285),
        (132422, _EAGER, _FULL, 1, 2, 1, 0, 26.625),
        (132464, _EAGER, _NONE, 1, 4, 4, 0, 26.942),
        (132420, _EAGER, _FULL, 1, 2, 2, 0, 27.417),
        (132411, _EAGER, _FULL, 2, 1, 2, 0, 27.532),
        (132419, _EAGER, _FULL, 1, 2, 4, 0, 28.083),
        (132428, _EAGER, _FULL, 1, 1, 1, 0, 28.147),
        (132333, _EAGER, _FULL, 2, 1, 4, 0, 29.085),
        (132328, _EAGER, _FULL, 2, 2, 2, 0, 29.189),
        (132331, _EAGER, _FULL, 2, 2, 4, 0, 30.082),
        (132327, _EAGER, _FULL, 2, 4, 1, 0, 32.127),
        (132418, _EAGER, _FULL, 1, 4, 1, 0, 32.572),
        (132325, _EAGER, _FULL, 2, 4, 2, 0, 34.636),
        (132416, _EAGER, _FULL, 1, 4, 2, 0, 34.764),
        (132324, _EAGER, _FULL, 2, 4, 4, 0, 36.074),
        (132415, _EAGER, _FULL, 1, 4, 4, 0, 36.71),
        (103838, _V1, _NONE, 1, 2, 4, 0, 24.8429),
        (103836, _V1, _NONE, 1, 4, 2, 0, 28.5242),
        (103678, _V1, _FULL, 1, 1, 2, 0, 28.731),
        (103835, _V1, _NONE, 1, 4, 4, 0, 29.2137),
        (103677, _V1, _FULL, 1, 1, 4, 0, 30.0256),
        (103676, _V1, _FULL, 1, 2, 1, 0, 30.1436),
        (103669, _V1, _FULL, 2, 1, 2, 0, 31.6494),
        (103675, _V1, _FULL, 1, 2, 2, 0, 31.865),
        (103661, _V1, _FULL, 2, 2, 2, 0, 32.9115),
        (103666, _V1, _FULL, 2, 1, 4, 0, 34.3331),
        (103664, _V1, _FULL, 2, 2, 4, 0, 34.6054),
        (103674, _V1, _FULL, 1, 2, 4, 0, 34.7469),
        (103663, _V1, _FULL, 2, 4, 1, 0, 35.8649),
        (103673, _V1, _FULL, 1, 4, 1, 0, 36.3279),
        (103672, _V1, _FULL, 1, 4, 2, 0, 37.6272),
        (103655, _V1, _FULL, 2, 4, 2, 0, 38.2564),
        (103671, _V1, _FULL, 1, 4, 4, 0, 38.6099),
        (103662, _V1, _FULL, 2, 4, 4, 0, 39.7641),
    ), out_of_memory=(
        (132191, _RMS, _NONE, 4, 4, 4, 0), (132192, _RMS, _NONE, 4, 4, 1, 0), (132193, _RMS, _NONE, 2, 4, 2, 0),
        (132194, _RMS, _NONE, 4, 2, 4, 0), (132195, _RMS, _NONE, 4, 4, 2, 0), (132196, _RMS, _NONE, 2, 4, 1, 0),
        (132197, _RMS, _NONE, 2, 2, 4, 0), (132198, _RMS, _NONE, 4, 1, 1, 0), (132199, _RMS, _NONE, 4, 2, 2, 0),
        (132200, _RMS, _NONE, 4, 1, 2, 0), (132202, _RMS, _NONE, 2, 2, 2, 0), (132203, _RMS, _NONE, 2, 2, 1, 0),
        (132204, _RMS, _NONE, 4, 2, 1, 0), (132205, _RMS, _NONE, 4, 1, 4, 0), (132206, _RMS, _NONE, 2, 1, 4, 0),
        (132268, _RMS, _NONE, 2, 1, 2, 0), (132269, _RMS, _NONE, 2, 1, 1, 0), (132278, _RMS, _NONE, 1, 2, 1, 0),
        (132280, _RMS, _NONE, 1, 1, 4, 0), (132281, _RMS, _NONE, 1, 1, 2, 0), (132282, _RMS, _NONE, 1, 1, 1, 0),
        (132319, _EAGER, _FULL, 4, 1, 1, 0), (132320, _EAGER, _FULL, 4, 4, 1, 0), (132321, _EAGER, _FULL, 4, 2, 2, 0),
        (132322, _EAGER, _FULL, 4, 4, 2, 0), (132323, _EAGER, _FULL, 4, 1, 2, 0), (132326, _EAGER, _FULL, 4, 4, 4, 0),
        (132329, _EAGER, _FULL, 2, 2, 1, 0), (132330, _EAGER, _FULL, 4, 2, 1, 0), (132332, _EAGER, _FULL, 4, 1, 4, 0),
        (132334, _EAGER, _FULL, 4, 2, 4, 0), (132413, _EAGER, _FULL, 2, 1, 1, 0), (132429, _EAGER, _NONE, 4, 4, 4, 0),
        (132431, _EAGER, _NONE, 4, 4, 2, 0), (132432, _EAGER, _NONE, 4, 4, 1, 0), (132433, _EAGER, _NONE, 4, 2, 4, 0),
        (132435, _EAGER, _NONE, 4, 2, 2, 0), (132438, _EAGER, _NONE, 4, 2, 1, 0), (132439, _EAGER, _NONE, 4, 1, 4, 0),
        (132442, _EAGER, _NONE, 4, 1, 2, 0), (132443, _EAGER, _NONE, 4, 1, 1, 0), (132445, _EAGER, _NONE, 2, 4, 4, 0),
        (132446, _EAGER, _NONE, 2, 4, 2, 0), (132450, _EAGER, _NONE, 2, 4, 1, 0), (132453, _EAGER, _NONE, 2, 2, 4, 0),
        (132455, _EAGER, _NONE, 2, 2, 2, 0), (132456, _EAGER, _NONE, 2, 2, 1, 0), (132457, _EAGER, _NONE, 2, 1, 4, 0),
        (132459, _EAGER, _NONE, 2, 1, 2, 0), (132461, _EAGER, _NONE, 2, 1, 1, 0), (132466, _EAGER, _NONE, 1, 4, 1, 0),
        (132469, _EAGER, _NONE, 1, 2, 2, 0), (132471, _EAGER, _NONE, 1, 2, 1, 0), (132472, _EAGER, _NONE, 1, 1, 4, 0),
        (132473, _EAGER, _NONE, 1, 1, 2, 0), (132474, _EAGER, _NONE, 1, 1, 1, 0),
        (103653, _V1, _FULL, 4, 4, 4, 0), (103654, _V1, _FULL, 4, 4, 1, 0), (103656, _V1, _FULL, 4, 2, 2, 0),
        (103657, _V1, _FULL, 4, 1, 4, 0), (103658, _V1, _FULL, 2, 2, 1, 0), (103659, _V1, _FULL, 4, 1, 1, 0),
        (103660, _V1, _FULL, 4, 2, 1, 0), (103665, _V1, _FULL, 4, 4, 2, 0), (103667, _V1, _FULL, 4, 1, 2, 0),
        (103668, _V1, _FULL, 4, 2, 4, 0), (103670, _V1, _FULL, 2, 1, 1, 0), (103681, _V1, _FULL, 1, 1, 1, 0),
        (103817, _V1, _NONE, 4, 4, 4, 0), (103818, _V1, _NONE, 4, 4, 2, 0), (103819, _V1, _NONE, 4, 4, 1, 0),
        (103820, _V1, _NONE, 4, 2, 4, 0), (103821, _V1, _NONE, 4, 2, 2, 0), (103822, _V1, _NONE, 4, 2, 1, 0),
        (103823, _V1, _NONE, 4, 1, 4, 0), (103824, _V1, _NONE, 4, 1, 2, 0), (103825, _V1, _NONE, 4, 1, 1, 0),
        (103826, _V1, _NONE, 2, 4, 4, 0), (103827, _V1, _NONE, 2, 4, 2, 0), (103828, _V1, _NONE, 2, 4, 1, 0),
        (103829, _V1, _NONE, 2, 2, 4, 0), (103830, _V1, _NONE, 2, 2, 2, 0), (103831, _V1, _NONE, 2, 2, 1, 0),
        (103832, _V1, _NONE, 2, 1, 4, 0), (103833, _V1, _NONE, 2, 1, 2, 0), (103834, _V1, _NONE, 2, 1, 1, 0),
        (103837, _V1, _NONE, 1, 4, 1, 0), (103839, _V1, _NONE, 1, 2, 2, 0), (103840, _V1, _NONE, 1, 2, 1, 0),
        (103841, _V1, _NONE, 1, 1, 4, 0), (103842, _V1, _NONE, 1, 1, 2, 0), (103843, _V1, _NONE, 1, 1, 1, 0),
    )),
    _Sheet("llama_30B_8k_seq_length_bfloat16_128_GPUs_all_runs.xlsx", "aa-llama-30b", 8192, 128, (
        (133008, _RMS, _NONE, 1, 4, 4, 0, 49.435),
        (132240, _RMS, _NONE, 1, 4, 8, 0, 50.233),
        (132244, _RMS, _NONE, 1, 4, 16, 0, 54.785),
        (132481, _EAGER, _FULL, 1, 2, 4, 0, 62.838),
        (132482, _EAGER, _FULL, 1, 2, 2, 0, 62.99),
        (132480, _EAGER, _FULL, 1, 2, 8, 0, 63.989),
        (132479, _EAGER, _FULL, 1, 2, 16, 0, 66.69),
        (132366, _EAGER, _FULL, 2, 2, 4, 0, 66.707),
        (132360, _EAGER, _FULL, 2, 2, 8, 0, 68.992),
        (132365, _EAGER, _FULL, 2, 2, 16, 0, 71.81),
        (132478, _EAGER, _FULL, 1, 4, 2, 0, 72.416),
        (132369, _EAGER, _FULL, 2, 4, 2, 0, 73.33),
        (132477, _EAGER, _FULL, 1, 4, 4, 0, 75.527),
        (132368, _EAGER, _FULL, 2, 4, 4, 0, 76.528),
        (132476, _EAGER, _FULL, 1, 4, 8, 0, 77.862),
        (132361, _EAGER, _FULL, 2, 4, 8, 0, 79.744),
        (132475, _EAGER, _FULL, 1, 4, 16, 0, 82.62),
        (132356, _EAGER, _FULL, 2, 4, 16, 0, 85.335),
        (105109, _V1, _FULL, 1, 2, 2, 0, 69.4535),
        (105108, _V1, _FULL, 1, 2, 4, 0, 70.0085),
        (105107, _V1, _FULL, 1, 2, 8, 0, 71.8737),
        (105079, _V1, _FULL, 2, 2, 4, 0, 75.023),
        (105059, _V1, _FULL, 2, 2, 8, 0, 77.4169),
        (105106, _V1, _FULL, 1, 4, 2, 0, 79.7063),
        (105070, _V1, _FULL, 2, 4, 2, 0, 80.2501),
        (105105, _V1, _FULL, 1, 4, 4, 0, 82.1614),
        (105065, _V1, _FULL, 2, 4, 4, 0, 84.0133),
        (105089, _V1, _FULL, 1, 4, 8, 0, 85.5276),
        (105062, _V1, _FULL, 2, 4, 8, 0, 87.1753),
    ), out_of_memory=(
        (132236, _RMS, _NONE, 4, 2, 8, 0), (132237, _RMS, _NONE, 4, 4, 16, 0), (132238, _RMS, _NONE, 2, 2, 8, 0),
        (132239, _RMS, _NONE, 2, 4, 8, 0), (132241, _RMS, _NONE, 2, 2, 16, 0), (132242, _RMS, _NONE, 1, 2, 16, 0),
        (132243, _RMS, _NONE, 4, 2, 16, 0), (132245, _RMS, _NONE, 2, 4, 16, 0), (132246, _RMS, _NONE, 4, 4, 8, 0),
        (132247, _RMS, _NONE, 1, 2, 8, 0), (132355, _EAGER, _FULL, 4, 4, 16, 0), (132357, _EAGER, _FULL, 4, 2, 2, 0),
        (132358, _EAGER, _FULL, 4, 2, 4, 0), (132359, _EAGER, _FULL, 4, 2, 16, 0),
        (132362, _EAGER, _FULL, 4, 4, 2, 0), (132363, _EAGER, _FULL, 4, 2, 8, 0), (132364, _EAGER, _FULL, 4, 4, 4, 0),
        (132367, _EAGER, _FULL, 2, 2, 2, 0), (132370, _EAGER, _FULL, 4, 4, 8, 0),
        (132483, _EAGER, _NONE, 4, 4, 16, 0), (132484, _EAGER, _NONE, 4, 4, 8, 0),
        (132485, _EAGER, _NONE, 4, 4, 4, 0), (132486, _EAGER, _NONE, 4, 4, 2, 0),
        (132487, _EAGER, _NONE, 4, 2, 16, 0), (132488, _EAGER, _NONE, 4, 2, 8, 0),
        (132489, _EAGER, _NONE, 4, 2, 4, 0), (132490, _EAGER, _NONE, 4, 2, 2, 0),
        (132491, _EAGER, _NONE, 2, 4, 16, 0), (132492, _EAGER, _NONE, 2, 4, 8, 0),
        (132493, _EAGER, _NONE, 2, 4, 4, 0), (132494, _EAGER, _NONE, 2, 4, 2, 0),
        (132495, _EAGER, _NONE, 2, 2, 16, 0), (132496, _EAGER, _NONE, 2, 2, 8, 0),
        (132497, _EAGER, _NONE, 2, 2, 4, 0), (132498, _EAGER, _NONE, 2, 2, 2, 0),
        (132499, _EAGER, _NONE, 1, 4, 16, 0), (132500, _EAGER, _NONE, 1, 4, 8, 0),
        (132501, _EAGER, _NONE, 1, 4, 4, 0), (132502, _EAGER, _NONE, 1, 4, 2, 0),
        (132503, _EAGER, _NONE, 1, 2, 16, 0), (132504, _EAGER, _NONE, 1, 2, 8, 0),
        (132505, _EAGER, _NONE, 1, 2, 4, 0), (132506, _EAGER, _NONE, 1, 2, 2, 0), (132999, _RMS, _NONE, 4, 4, 4, 0),
        (133000, _RMS, _NONE, 4, 2, 2, 0), (133001, _RMS, _NONE, 2, 4, 4, 0), (133002, _RMS, _NONE, 4, 4, 2, 0),
        (133003, _RMS, _NONE, 4, 2, 4, 0), (133004, _RMS, _NONE, 2, 2, 4, 0), (133005, _RMS, _NONE, 2, 4, 2, 0),
        (133006, _RMS, _NONE, 1, 2, 2, 0), (133007, _RMS, _NONE, 1, 2, 4, 0), (133009, _RMS, _NONE, 1, 4, 2, 0),
        (133010, _RMS, _NONE, 2, 2, 2, 0),
        (105114, _V1, _NONE, 4, 4, 4, 0), (105116, _V1, _NONE, 4, 2, 8, 0), (105060, _V1, _FULL, 4, 2, 4, 0),
        (105064, _V1, _FULL, 4, 2, 2, 0), (105066, _V1, _FULL, 4, 4, 2, 0), (105068, _V1, _FULL, 4, 4, 4, 0),
        (105069, _V1, _FULL, 4, 4, 8, 0), (105073, _V1, _FULL, 4, 2, 8, 0), (105081, _V1, _FULL, 2, 2, 2, 0),
        (105113, _V1, _NONE, 4, 4, 8, 0), (105115, _V1, _NONE, 4, 4, 2, 0), (105117, _V1, _NONE, 4, 2, 4, 0),
        (105118, _V1, _NONE, 4, 2, 2, 0), (105122, _V1, _NONE, 2, 4, 8, 0), (105124, _V1, _NONE, 2, 4, 4, 0),
        (105125, _V1, _NONE, 2, 4, 2, 0), (105126, _V1, _NONE, 2, 2, 8, 0), (105127, _V1, _NONE, 2, 2, 4, 0),
        (105128, _V1, _NONE, 2, 2, 2, 0), (105133, _V1, _NONE, 1, 4, 8, 0), (105134, _V1, _NONE, 1, 4, 4, 0),
        (105135, _V1, _NONE, 1, 4, 2, 0), (105137, _V1, _NONE, 1, 2, 8, 0), (105138, _V1, _NONE, 1, 2, 4, 0),
        (105139, _V1, _NONE, 1, 2, 2, 0),
    )),
    _Sheet("llama_30B_bfloat16_256_GPUs_all_runs.xlsx", "aa-llama-30b", 2048, 256, (
        (132266, _RMS, _NONE, 1, 2, 4, 0, 22.667),
        (132275, _RMS, _NONE, 1, 1, 4, 0, 23.995),
        (132167, _RMS, _NONE, 2, 2, 4, 0, 24.258),
        (132458, _EAGER, _NONE, 1, 2, 4, 0, 24.701),
        (132157, _RMS, _NONE, 4, 4, 4, 0, 25.05),
        (132163, _RMS, _NONE, 2, 4, 4, 0, 25.323),
        (132172, _RMS, _NONE, 2, 4, 2, 0, 26.26),
        (132207, _RMS, _NONE, 1, 4, 4, 0, 26.279),
        (132248, _RMS, _NONE, 1, 4, 2, 0, 26.935),
        (132267, _RMS, _NONE, 1, 2, 2, 0, 28.336),
        (132407, _EAGER, _FULL, 1, 1, 4, 0, 29.078),
        (132460, _EAGER, _NONE, 1, 2, 2, 0, 29.132),
        (132434, _EAGER, _NONE, 2, 4, 4, 0, 29.455),
        (132346, _EAGER, _FULL, 2, 1, 4, 0, 29.761),
        (132451, _EAGER, _NONE, 1, 4, 4, 0, 30.081),
        (132341, _EAGER, _FULL, 2, 2, 4, 0, 31.129),
        (132452, _EAGER, _NONE, 1, 4, 2, 0, 31.465),
        (132436, _EAGER, _NONE, 2, 4, 2, 0, 31.661),
        (132265, _RMS, _NONE, 1, 4, 1, 0, 31.77),
        (132398, _EAGER, _FULL, 1, 2, 4, 0, 31.805),
        (132400, _EAGER, _FULL, 1, 2, 2, 0, 31.938),
        (132350, _EAGER, _FULL, 2, 2, 2, 0, 32.273),
        (132339, _EAGER, _FULL, 4, 2, 4, 0, 33.695),
        (132347, _EAGER, _FULL, 4, 1, 4, 0, 34.216),
        (132340, _EAGER, _FULL, 4, 2, 2, 0, 34.446),
        (132408, _EAGER, _FULL, 1, 1, 2, 0, 35.07),
        (132159, _RMS, _NONE, 2, 4, 1, 0, 35.319),
        (132348, _EAGER, _FULL, 4, 4, 2, 0, 37.119),
        (132387, _EAGER, _FULL, 2, 1, 2, 0, 37.765),
        (132338, _EAGER, _FULL, 4, 4, 4, 0, 38.276),
        (132353, _EAGER, _FULL, 2, 4, 4, 0, 38.51),
        (132344, _EAGER, _FULL, 2, 4, 2, 0, 39.572),
        (132406, _EAGER, _FULL, 1, 2, 1, 0, 39.702),
        (132454, _EAGER, _NONE, 1, 4, 1, 0, 39.808),
        (132391, _EAGER, _FULL, 1, 4, 2, 0, 40.071),
        (132389, _EAGER, _FULL, 1, 4, 4, 0, 41.014),
        (132345, _EAGER, _FULL, 2, 4, 1, 0, 42.134),
        (132349, _EAGER, _FULL, 4, 4, 1, 0, 43.921),
        (132395, _EAGER, _FULL, 1, 4, 1, 0, 44.094),
        (96883, _V1, _NONE, 1, 2, 4, 0, 26.0641),
        (96800, _V1, _FULL, 1, 1, 4, 0, 29.1586),
        (96870, _V1, _NONE, 2, 4, 4, 0, 29.5492),
        (96884, _V1, _NONE, 1, 2, 2, 0, 29.6378),
        (105046, _V1, _FULL, 2, 1, 4, 0, 29.9609),
        (96880, _V1, _NONE, 1, 4, 4, 0, 31.3841),
        (96782, _V1, _FULL, 2, 2, 4, 0, 32.167),
        (96881, _V1, _NONE, 1, 4, 2, 0, 32.4172),
        (105052, _V1, _FULL, 1, 2, 2, 0, 32.8436),
        (96797, _V1, _FULL, 1, 2, 4, 0, 33.2865),
        (96781, _V1, _FULL, 4, 2, 2, 0, 33.4747),
        (96776, _V1, _FULL, 4, 1, 4, 0, 33.7505),
        (96769, _V1, _FULL, 4, 2, 4, 0, 33.7927),
        (96871, _V1, _NONE, 2, 4, 2, 0, 33.965),
        (96777, _V1, _FULL, 2, 2, 2, 0, 35.2282),
        (96801, _V1, _FULL, 1, 1, 2, 0, 36.4176),
        (96778, _V1, _FULL, 4, 4, 2, 0, 37.8125),
        (96783, _V1, _FULL, 2, 1, 2, 0, 38.0672),
        (96780, _V1, _FULL, 4, 4, 4, 0, 38.6043),
        (96779, _V1, _FULL, 2, 4, 4, 0, 39.6475),
        (96770, _V1, _FULL, 2, 4, 2, 0, 40.2935),
        (105047, _V1, _FULL, 1, 2, 1, 0, 41.8028),
        (96771, _V1, _FULL, 4, 4, 1, 0, 41.84),
        (96786, _V1, _FULL, 1, 4, 4, 0, 41.9377),
        (96795, _V1, _FULL, 1, 4, 2, 0, 42.4146),
        (96882, _V1, _NONE, 1, 4, 1, 0, 43.2445),
        (105056, _V1, _FULL, 2, 4, 1, 0, 43.5121),
        (96796, _V1, _FULL, 1, 4, 1, 0, 45.556),
    ), out_of_memory=(
        (132158, _RMS, _NONE, 4, 2, 1, 0), (132160, _RMS, _NONE, 4, 2, 4, 0), (132161, _RMS, _NONE, 4, 4, 1, 0),
        (132162, _RMS, _NONE, 2, 2, 1, 0), (132164, _RMS, _NONE, 4, 1, 2, 0), (132165, _RMS, _NONE, 4, 1, 1, 0),
        (132166, _RMS, _NONE, 4, 4, 2, 0), (132168, _RMS, _NONE, 2, 2, 2, 0), (132169, _RMS, _NONE, 4, 2, 2, 0),
        (132170, _RMS, _NONE, 2, 1, 4, 0), (132171, _RMS, _NONE, 4, 1, 4, 0), (132189, _RMS, _NONE, 2, 1, 2, 0),
        (132190, _RMS, _NONE, 2, 1, 1, 0), (132272, _RMS, _NONE, 1, 2, 1, 0), (132277, _RMS, _NONE, 1, 1, 2, 0),
        (132279, _RMS, _NONE, 1, 1, 1, 0), (132342, _EAGER, _FULL, 2, 2, 1, 0), (132343, _EAGER, _FULL, 4, 2, 1, 0),
        (132351, _EAGER, _FULL, 4, 1, 2, 0), (132352, _EAGER, _FULL, 4, 1, 1, 0), (132388, _EAGER, _FULL, 2, 1, 1, 0),
        (132409, _EAGER, _FULL, 1, 1, 1, 0), (132410, _EAGER, _NONE, 4, 4, 4, 0), (132412, _EAGER, _NONE, 4, 4, 2, 0),
        (132414, _EAGER, _NONE, 4, 4, 1, 0), (132417, _EAGER, _NONE, 4, 2, 4, 0), (132421, _EAGER, _NONE, 4, 2, 2, 0),
        (132423, _EAGER, _NONE, 4, 2, 1, 0), (132424, _EAGER, _NONE, 4, 1, 4, 0), (132427, _EAGER, _NONE, 4, 1, 2, 0),
        (132430, _EAGER, _NONE, 4, 1, 1, 0), (132437, _EAGER, _NONE, 2, 4, 1, 0), (132440, _EAGER, _NONE, 2, 2, 4, 0),
        (132441, _EAGER, _NONE, 2, 2, 2, 0), (132444, _EAGER, _NONE, 2, 2, 1, 0), (132447, _EAGER, _NONE, 2, 1, 4, 0),
        (132448, _EAGER, _NONE, 2, 1, 2, 0), (132449, _EAGER, _NONE, 2, 1, 1, 0), (132462, _EAGER, _NONE, 1, 2, 1, 0),
        (132463, _EAGER, _NONE, 1, 1, 4, 0), (132467, _EAGER, _NONE, 1, 1, 2, 0), (132470, _EAGER, _NONE, 1, 1, 1, 0),
        (96773, _V1, _FULL, 4, 2, 1, 0), (105054, _V1, _FULL, 4, 1, 2, 0), (105055, _V1, _FULL, 4, 1, 1, 0),
        (96861, _V1, _NONE, 4, 4, 4, 0), (96862, _V1, _NONE, 4, 4, 2, 0), (96863, _V1, _NONE, 4, 4, 1, 0),
        (96864, _V1, _NONE, 4, 2, 4, 0), (96865, _V1, _NONE, 4, 2, 2, 0), (96866, _V1, _NONE, 4, 2, 1, 0),
        (96867, _V1, _NONE, 4, 1, 4, 0), (96868, _V1, _NONE, 4, 1, 2, 0), (96869, _V1, _NONE, 4, 1, 1, 0),
        (105051, _V1, _NONE, 2, 4, 1, 0), (105050, _V1, _NONE, 2, 2, 4, 0), (96874, _V1, _NONE, 2, 2, 2, 0),
        (96876, _V1, _NONE, 2, 2, 1, 0), (96877, _V1, _NONE, 2, 1, 4, 0), (105049, _V1, _NONE, 2, 1, 2, 0),
        (96879, _V1, _NONE, 2, 1, 1, 0), (96885, _V1, _NONE, 1, 2, 1, 0), (105045, _V1, _NONE, 1, 1, 4, 0),
        (96887, _V1, _NONE, 1, 1, 2, 0), (96888, _V1, _NONE, 1, 1, 1, 0),
    )),
    _Sheet("llama_65B_bfloat16_128_GPUs_all_runs.xlsx", "aa-llama-65b", 2048, 128, (
        (132301, _RMS, _NONE, 1, 2, 4, 0, 79.307),
        (132300, _RMS, _NONE, 1, 2, 8, 0, 79.54),
        (132285, _RMS, _NONE, 2, 4, 4, 0, 82.882),
        (132284, _RMS, _NONE, 2, 4, 8, 0, 86.554),
        (132297, _RMS, _NONE, 1, 4, 4, 0, 86.615),
        (132298, _RMS, _NONE, 1, 4, 2, 0, 87.144),
        (132574, _EAGER, _NONE, 1, 2, 8, 0, 88.16),
        (132296, _RMS, _NONE, 1, 4, 8, 0, 92.614),
        (132258, _RMS, _NONE, 2, 8, 2, 0, 101.28),
        (132571, _EAGER, _NONE, 1, 4, 4, 0, 101.966),
        (132262, _RMS, _NONE, 2, 8, 4, 0, 103.17),
        (132513, _EAGER, _FULL, 2, 2, 4, 0, 107.389),
        (132294, _RMS, _NONE, 1, 8, 2, 0, 107.851),
        (132570, _EAGER, _NONE, 1, 4, 8, 0, 107.974),
        (132379, _EAGER, _FULL, 4, 2, 4, 0, 109.042),
        (132528, _EAGER, _FULL, 1, 2, 4, 0, 111.348),
        (132293, _RMS, _NONE, 1, 8, 4, 0, 111.831),
        (132512, _EAGER, _FULL, 2, 2, 8, 0, 112.767),
        (132382, _EAGER, _FULL, 4, 2, 8, 0, 114.423),
        (132259, _RMS, _NONE, 2, 8, 8, 0, 115.581),
        (132527, _EAGER, _FULL, 1, 2, 8, 0, 118.392),
        (132535, _EAGER, _FULL, 1, 2, 2, 0, 118.679),
        (132292, _RMS, _NONE, 1, 8, 8, 0, 121.932),
        (132386, _EAGER, _FULL, 4, 4, 4, 0, 125.11),
        (132383, _EAGER, _FULL, 4, 4, 2, 0, 126.612),
        (132509, _EAGER, _FULL, 2, 4, 4, 0, 129.68),
        (132376, _EAGER, _FULL, 4, 4, 8, 0, 133.559),
        (132522, _EAGER, _FULL, 1, 4, 2, 0, 136.432),
        (132568, _EAGER, _NONE, 1, 8, 2, 0, 139.673),
        (132521, _EAGER, _FULL, 1, 4, 4, 0, 140.951),
        (132508, _EAGER, _FULL, 2, 4, 8, 0, 141.873),
        (132567, _EAGER, _NONE, 1, 8, 4, 0, 142.769),
        (132566, _EAGER, _NONE, 1, 8, 8, 0, 151.951),
        (132520, _EAGER, _FULL, 1, 4, 8, 0, 156.544),
        (132372, _EAGER, _FULL, 4, 8, 2, 0, 164.213),
        (132373, _EAGER, _FULL, 4, 8, 4, 0, 168.966),
        (132378, _EAGER, _FULL, 2, 8, 2, 0, 174.432),
        (132385, _EAGER, _FULL, 2, 8, 4, 0, 180.927),
        (132374, _EAGER, _FULL, 4, 8, 8, 0, 184.979),
        (132518, _EAGER, _FULL, 1, 8, 2, 0, 192.686),
        (132375, _EAGER, _FULL, 2, 8, 8, 0, 203.075),
        (132517, _EAGER, _FULL, 1, 8, 4, 0, 209.244),
        (132516, _EAGER, _FULL, 1, 8, 8, 0, 237.992),
        (105918, _V1, _NONE, 1, 4, 4, 0, 106.592),
        (105917, _V1, _NONE, 1, 4, 8, 0, 108.588),
        (105288, _V1, _FULL, 2, 2, 4, 0, 110.87),
        (105190, _V1, _FULL, 4, 2, 4, 0, 111.827),
        (105300, _V1, _FULL, 1, 2, 4, 0, 115.046),
        (105191, _V1, _FULL, 4, 2, 8, 0, 116.248),
        (105287, _V1, _FULL, 2, 2, 8, 0, 116.27),
        (105299, _V1, _FULL, 1, 2, 8, 0, 121.699),
        (105189, _V1, _FULL, 4, 4, 2, 0, 128.056),
        (105182, _V1, _FULL, 4, 4, 4, 0, 129.921),
        (105253, _V1, _FULL, 2, 4, 2, 0, 132.343),
        (105244, _V1, _FULL, 2, 4, 4, 0, 133.071),
        (105185, _V1, _FULL, 4, 4, 8, 0, 137.728),
        (105297, _V1, _FULL, 1, 4, 2, 0, 140.117),
        (105862, _V1, _NONE, 1, 8, 2, 0, 140.149),
        (105296, _V1, _FULL, 1, 4, 4, 0, 144.589),
        (105218, _V1, _FULL, 2, 4, 8, 0, 144.831),
        (105859, _V1, _NONE, 1, 8, 8, 0, 153.613),
        (105295, _V1, _FULL, 1, 4, 8, 0, 159.57),
        (105188, _V1, _FULL, 4, 8, 2, 0, 168.635),
        (105179, _V1, _FULL, 4, 8, 4, 0, 173.164),
        (105181, _V1, _FULL, 2, 8, 2, 0, 178.665),
        (105183, _V1, _FULL, 2, 8, 4, 0, 187.807),
        (105186, _V1, _FULL, 4, 8, 8, 0, 192.529),
        (105293, _V1, _FULL, 1, 8, 2, 0, 200.117),
        (105184, _V1, _FULL, 2, 8, 8, 0, 210.893),
        (105292, _V1, _FULL, 1, 8, 4, 0, 215.117),
        (105291, _V1, _FULL, 1, 8, 8, 0, 247.968),
    ), out_of_memory=(
        (132251, _RMS, _NONE, 4, 4, 8, 0), (132252, _RMS, _NONE, 4, 8, 8, 0), (132253, _RMS, _NONE, 4, 2, 8, 0),
        (132255, _RMS, _NONE, 4, 8, 4, 0), (132256, _RMS, _NONE, 4, 4, 2, 0), (132257, _RMS, _NONE, 4, 2, 4, 0),
        (132260, _RMS, _NONE, 4, 8, 2, 0), (132261, _RMS, _NONE, 4, 2, 2, 0), (132263, _RMS, _NONE, 4, 4, 4, 0),
        (132286, _RMS, _NONE, 2, 4, 2, 0), (132288, _RMS, _NONE, 2, 2, 8, 0), (132289, _RMS, _NONE, 2, 2, 4, 0),
        (132290, _RMS, _NONE, 2, 2, 2, 0), (132302, _RMS, _NONE, 1, 2, 2, 0), (132377, _EAGER, _FULL, 4, 2, 2, 0),
        (132514, _EAGER, _FULL, 2, 2, 2, 0), (132539, _EAGER, _NONE, 4, 8, 8, 0), (132541, _EAGER, _NONE, 4, 8, 4, 0),
        (132542, _EAGER, _NONE, 4, 8, 2, 0), (132544, _EAGER, _NONE, 4, 4, 8, 0), (132545, _EAGER, _NONE, 4, 4, 4, 0),
        (132546, _EAGER, _NONE, 4, 4, 2, 0), (132548, _EAGER, _NONE, 4, 2, 8, 0), (132551, _EAGER, _NONE, 4, 2, 4, 0),
        (132552, _EAGER, _NONE, 4, 2, 2, 0), (132554, _EAGER, _NONE, 2, 8, 8, 0), (132555, _EAGER, _NONE, 2, 8, 4, 0),
        (132556, _EAGER, _NONE, 2, 8, 2, 0), (132558, _EAGER, _NONE, 2, 4, 8, 0), (132559, _EAGER, _NONE, 2, 4, 4, 0),
        (132560, _EAGER, _NONE, 2, 4, 2, 0), (132562, _EAGER, _NONE, 2, 2, 8, 0), (132563, _EAGER, _NONE, 2, 2, 4, 0),
        (132564, _EAGER, _NONE, 2, 2, 2, 0), (132572, _EAGER, _NONE, 1, 4, 2, 0), (132575, _EAGER, _NONE, 1, 2, 4, 0),
        (132576, _EAGER, _NONE, 1, 2, 2, 0),
        (105928, _V1, _NONE, 1, 2, 8, 0), (105929, _V1, _NONE, 1, 2, 4, 0), (105930, _V1, _NONE, 1, 2, 2, 0),
        (105187, _V1, _FULL, 4, 2, 2, 0), (105289, _V1, _FULL, 2, 2, 2, 0), (105838, _V1, _NONE, 4, 8, 8, 0),
        (105839, _V1, _NONE, 4, 4, 8, 0), (105840, _V1, _NONE, 4, 2, 4, 0), (105841, _V1, _NONE, 4, 4, 4, 0),
        (105842, _V1, _NONE, 2, 8, 4, 0), (105843, _V1, _NONE, 2, 8, 8, 0), (105844, _V1, _NONE, 4, 2, 2, 0),
        (105845, _V1, _NONE, 2, 4, 4, 0), (105846, _V1, _NONE, 2, 8, 2, 0), (105847, _V1, _NONE, 2, 4, 2, 0),
        (105848, _V1, _NONE, 4, 8, 4, 0), (105849, _V1, _NONE, 2, 2, 8, 0), (105850, _V1, _NONE, 4, 4, 2, 0),
        (105851, _V1, _NONE, 4, 8, 2, 0), (105852, _V1, _NONE, 4, 2, 8, 0), (105853, _V1, _NONE, 2, 4, 8, 0),
        (105854, _V1, _NONE, 2, 2, 4, 0), (105858, _V1, _NONE, 2, 2, 2, 0), (105919, _V1, _NONE, 1, 4, 2, 0),
    )),
    _Sheet("seqpara/llama_13B_bfloat16_32_GPUs_sequence_parallelism.xlsx", "aa-llama-13b", 2048, 32, (
        (131873, _RMS, _NONE, 1, 1, 1, 0, 53.806),
        (131868, _RMS, _NONE, 1, 1, 1, 0, 53.989),
        (131875, _RMS, _NONE, 2, 2, 1, 0, 57.606),
        (131694, _RMS, _NONE, 1, 1, 2, 0, 58.006),
        (131871, _RMS, _NONE, 1, 1, 2, 0, 58.621),
        (131690, _RMS, _NONE, 2, 1, 2, 0, 59.553),
        (131866, _RMS, _NONE, 2, 2, 1, 1, 61.122),
        (131874, _RMS, _NONE, 2, 1, 2, 0, 60.229),
        (131867, _RMS, _NONE, 1, 2, 1, 1, 60.963),
        (131876, _RMS, _NONE, 1, 2, 1, 0, 62.09),
        (131689, _RMS, _NONE, 2, 2, 2, 1, 65.044),
        (131870, _RMS, _NONE, 2, 2, 2, 0, 66.126),
        (131695, _RMS, _NONE, 1, 2, 2, 1, 66.257),
        (132853, _RMS, _NONE, 4, 2, 2, 1, 67.472),
        (131872, _RMS, _NONE, 1, 2, 2, 0, 67.937),
        (132862, _RMS, _NONE, 4, 2, 2, 0, 68.485),
    ), out_of_memory=(
        (132852, _RMS, _NONE, 8, 1, 1, 0), (132854, _RMS, _NONE, 4, 1, 2, 0), (132855, _RMS, _NONE, 8, 2, 2, 1),
        (132856, _RMS, _NONE, 4, 1, 1, 0), (132857, _RMS, _NONE, 8, 1, 2, 0), (132858, _RMS, _NONE, 8, 2, 1, 1),
        (132859, _RMS, _NONE, 4, 2, 1, 1), (131869, _RMS, _NONE, 2, 1, 1, 0), (131877, _RMS, _NONE, 2, 1, 1, 0),
        (132860, _RMS, _NONE, 8, 2, 2, 0), (132861, _RMS, _NONE, 8, 2, 1, 0), (132863, _RMS, _NONE, 8, 1, 1, 0),
        (132864, _RMS, _NONE, 4, 2, 1, 0), (132865, _RMS, _NONE, 4, 1, 2, 0), (132866, _RMS, _NONE, 8, 1, 2, 0),
        (132867, _RMS, _NONE, 4, 1, 1, 0),
    )),
    _Sheet("seqpara/llama_13B_bfloat16_8k_seq_length_64_GPUs_sequence_parallelism.xlsx", "aa-llama-13b", 8192, 64, (
        (131701, _RMS, _NONE, 1, 2, 2, 1, 34.84),
        (131878, _RMS, _NONE, 1, 2, 2, 0, 34.85),
        (131684, _RMS, _NONE, 1, 2, 4, 1, 35.797),
        (131865, _RMS, _NONE, 1, 2, 4, 0, 36.602),
        (131686, _RMS, _NONE, 1, 4, 1, 1, 36.99),
        (131685, _RMS, _NONE, 1, 4, 2, 1, 38.847),
        (131860, _RMS, _NONE, 1, 4, 1, 0, 38.897),
        (131851, _RMS, _NONE, 1, 4, 2, 0, 40.702),
        (131688, _RMS, _NONE, 1, 4, 4, 1, 40.824),
        (131676, _RMS, _NONE, 2, 4, 4, 1, 41.063),
        (131863, _RMS, _NONE, 1, 4, 4, 0, 43.493),
        (131855, _RMS, _NONE, 2, 4, 4, 0, 44.026),
        (131679, _RMS, _NONE, 1, 8, 1, 1, 46.371),
        (131675, _RMS, _NONE, 2, 8, 2, 1, 46.89),
        (131687, _RMS, _NONE, 1, 8, 2, 1, 49.956),
        (131864, _RMS, _NONE, 1, 8, 1, 0, 51.033),
        (131673, _RMS, _NONE, 2, 8, 4, 1, 51.914),
        (131683, _RMS, _NONE, 1, 8, 4, 1, 54.781),
        (131862, _RMS, _NONE, 1, 8, 2, 0, 56.229),
        (131850, _RMS, _NONE, 2, 8, 4, 0, 59.615),
        (131853, _RMS, _NONE, 1, 8, 4, 0, 62.043),
    ), out_of_memory=(
        (132875, _RMS, _NONE, 4, 2, 2, 1), (132876, _RMS, _NONE, 4, 1, 1, 0), (132877, _RMS, _NONE, 4, 8, 2, 1),
        (132878, _RMS, _NONE, 4, 8, 4, 1), (132879, _RMS, _NONE, 4, 4, 1, 1), (132880, _RMS, _NONE, 4, 8, 1, 1),
        (132881, _RMS, _NONE, 4, 4, 4, 1), (132882, _RMS, _NONE, 4, 4, 2, 1), (132883, _RMS, _NONE, 4, 2, 4, 1),
        (132884, _RMS, _NONE, 4, 1, 2, 0), (132885, _RMS, _NONE, 4, 2, 1, 1), (132886, _RMS, _NONE, 4, 1, 4, 0),
        (132887, _RMS, _NONE, 4, 8, 2, 0), (132888, _RMS, _NONE, 4, 4, 4, 0), (132889, _RMS, _NONE, 4, 4, 1, 0),
        (132890, _RMS, _NONE, 4, 2, 4, 0), (132891, _RMS, _NONE, 4, 2, 2, 0), (132892, _RMS, _NONE, 4, 1, 2, 0),
        (132893, _RMS, _NONE, 4, 2, 1, 0), (132894, _RMS, _NONE, 4, 8, 4, 0), (132895, _RMS, _NONE, 4, 8, 1, 0),
        (132896, _RMS, _NONE, 4, 4, 2, 0), (132897, _RMS, _NONE, 4, 1, 4, 0), (132898, _RMS, _NONE, 4, 1, 1, 0),
        (131674, _RMS, _NONE, 2, 8, 1, 1), (131677, _RMS, _NONE, 2, 2, 1, 1), (131678, _RMS, _NONE, 2, 2, 4, 1),
        (131680, _RMS, _NONE, 2, 4, 2, 1), (131681, _RMS, _NONE, 2, 2, 2, 1), (131682, _RMS, _NONE, 2, 4, 1, 1),
        (131702, _RMS, _NONE, 1, 2, 1, 1), (131852, _RMS, _NONE, 2, 2, 1, 0), (131854, _RMS, _NONE, 2, 2, 4, 0),
        (131856, _RMS, _NONE, 2, 8, 2, 0), (131857, _RMS, _NONE, 2, 8, 1, 0), (131858, _RMS, _NONE, 2, 4, 1, 0),
        (131859, _RMS, _NONE, 2, 2, 2, 0), (131861, _RMS, _NONE, 2, 4, 2, 0), (131879, _RMS, _NONE, 1, 2, 1, 0),
    )),
    _Sheet("seqpara/llama_30B_8k_seq_length_bfloat16_64_GPUs_sequence_parallelism.xlsx", "aa-llama-30b", 8192, 64, (
        (132948, _RMS, _NONE, 1, 4, 2, 1, 84.367),
        (132947, _RMS, _NONE, 1, 4, 4, 1, 85.686),
        (131645, _RMS, _NONE, 1, 4, 16, 1, 86.155),
        (132590, _RMS, _NONE, 1, 4, 8, 1, 86.167),
        (132970, _RMS, _NONE, 1, 4, 4, 0, 93.837),
        (132600, _RMS, _NONE, 1, 4, 8, 0, 96.699),
        (131807, _RMS, _NONE, 1, 4, 16, 0, 98.368),
    ), out_of_memory=(
        (132946, _RMS, _NONE, 2, 4, 4, 1), (132949, _RMS, _NONE, 1, 2, 2, 1), (132950, _RMS, _NONE, 2, 2, 4, 1),
        (132951, _RMS, _NONE, 1, 2, 4, 1), (132952, _RMS, _NONE, 4, 2, 4, 1), (132953, _RMS, _NONE, 4, 2, 2, 1),
        (132954, _RMS, _NONE, 2, 2, 2, 1), (132955, _RMS, _NONE, 4, 4, 4, 1), (132956, _RMS, _NONE, 4, 4, 2, 1),
        (132957, _RMS, _NONE, 2, 4, 2, 1), (132962, _RMS, _NONE, 4, 4, 8, 0), (132963, _RMS, _NONE, 4, 2, 16, 0),
        (132964, _RMS, _NONE, 4, 2, 8, 0), (132965, _RMS, _NONE, 4, 4, 16, 0), (132966, _RMS, _NONE, 4, 4, 4, 0),
        (132967, _RMS, _NONE, 4, 4, 2, 0), (132968, _RMS, _NONE, 2, 2, 4, 0), (132969, _RMS, _NONE, 2, 4, 2, 0),
        (132971, _RMS, _NONE, 1, 2, 2, 0), (132972, _RMS, _NONE, 4, 2, 2, 0), (132973, _RMS, _NONE, 2, 2, 2, 0),
        (132974, _RMS, _NONE, 1, 2, 4, 0), (132975, _RMS, _NONE, 2, 4, 4, 0), (132976, _RMS, _NONE, 4, 2, 4, 0),
        (132977, _RMS, _NONE, 1, 4, 2, 0), (132958, _RMS, _NONE, 4, 4, 16, 0), (132959, _RMS, _NONE, 4, 2, 16, 0),
        (132960, _RMS, _NONE, 4, 2, 8, 0), (132961, _RMS, _NONE, 4, 4, 8, 0),
    )),
    _Sheet("seqpara/llama_30B_bfloat16_64_GPUs_sequence_parallelism.xlsx", "aa-llama-30b", 2048, 64, (
        (131848, _RMS, _NONE, 1, 1, 4, 0, 71.995),
        (131665, _RMS, _NONE, 1, 1, 4, 0, 72.598),
        (131667, _RMS, _NONE, 2, 2, 4, 1, 72.658),
        (131842, _RMS, _NONE, 2, 2, 4, 0, 74.855),
        (131664, _RMS, _NONE, 1, 2, 4, 1, 76.584),
        (131668, _RMS, _NONE, 1, 2, 2, 1, 76.843),
        (132924, _RMS, _NONE, 4, 4, 4, 1, 77.586),
        (131844, _RMS, _NONE, 1, 2, 4, 0, 78.434),
        (131843, _RMS, _NONE, 1, 2, 2, 0, 80.174),
        (132920, _RMS, _NONE, 2, 4, 2, 1, 81.061),
        (132918, _RMS, _NONE, 2, 4, 4, 1, 82.219),
        (132913, _RMS, _NONE, 4, 4, 2, 1, 83.105),
        (132917, _RMS, _NONE, 4, 4, 2, 1, 83.76),
        (132928, _RMS, _NONE, 2, 4, 2, 0, 84.884),
        (132923, _RMS, _NONE, 2, 4, 1, 1, 85.212),
        (132919, _RMS, _NONE, 1, 4, 2, 1, 85.47),
        (132935, _RMS, _NONE, 4, 4, 4, 0, 86.437),
        (132927, _RMS, _NONE, 4, 4, 4, 0, 86.667),
        (132922, _RMS, _NONE, 1, 4, 4, 1, 87.684),
        (132925, _RMS, _NONE, 1, 4, 1, 1, 89.333),
        (132926, _RMS, _NONE, 2, 4, 4, 0, 89.762),
        (132932, _RMS, _NONE, 1, 4, 2, 0, 89.864),
        (132933, _RMS, _NONE, 1, 4, 1, 0, 94.115),
        (132931, _RMS, _NONE, 1, 4, 4, 0, 95.517),
    ), out_of_memory=(
        (132906, _RMS, _NONE, 4, 4, 1, 1), (132907, _RMS, _NONE, 4, 1, 1, 0), (132908, _RMS, _NONE, 4, 1, 4, 0),
        (132909, _RMS, _NONE, 4, 2, 2, 1), (132910, _RMS, _NONE, 4, 1, 2, 0), (132911, _RMS, _NONE, 4, 2, 1, 1),
        (132912, _RMS, _NONE, 4, 2, 4, 1), (132921, _RMS, _NONE, 4, 4, 1, 1), (132929, _RMS, _NONE, 2, 4, 1, 0),
        (132930, _RMS, _NONE, 4, 4, 2, 0), (132934, _RMS, _NONE, 4, 4, 1, 0), (132936, _RMS, _NONE, 4, 4, 2, 0),
        (132937, _RMS, _NONE, 4, 2, 2, 0), (132938, _RMS, _NONE, 4, 4, 1, 0), (132939, _RMS, _NONE, 4, 1, 4, 0),
        (132940, _RMS, _NONE, 4, 2, 1, 0), (132941, _RMS, _NONE, 4, 1, 2, 0), (132942, _RMS, _NONE, 4, 1, 1, 0),
        (132943, _RMS, _NONE, 4, 2, 4, 0), (131666, _RMS, _NONE, 2, 1, 2, 0), (131669, _RMS, _NONE, 2, 1, 4, 0),
        (131670, _RMS, _NONE, 2, 2, 2, 1), (131671, _RMS, _NONE, 1, 1, 2, 0), (131845, _RMS, _NONE, 2, 1, 2, 0),
        (131846, _RMS, _NONE, 2, 1, 4, 0), (131847, _RMS, _NONE, 2, 2, 2, 0), (131849, _RMS, _NONE, 1, 1, 2, 0),
    )),
    _Sheet("seqpara/llama_65B_bfloat16_64_GPUs_sequence_parallelism.xlsx", "aa-llama-65b", 2048, 64, (
        (131697, _RMS, _NONE, 1, 2, 4, 1, 147.02),
        (131649, _RMS, _NONE, 2, 4, 4, 1, 149.921),
        (131654, _RMS, _NONE, 1, 2, 8, 1, 149.967),
        (131820, _RMS, _NONE, 1, 2, 8, 0, 152.65),
        (131663, _RMS, _NONE, 2, 4, 8, 1, 156.401),
        (131811, _RMS, _NONE, 2, 4, 4, 0, 158.736),
        (131660, _RMS, _NONE, 1, 4, 4, 1, 159.567),
        (131656, _RMS, _NONE, 1, 4, 2, 1, 162.316),
        (131653, _RMS, _NONE, 1, 4, 8, 1, 166.359),
        (132985, _RMS, _NONE, 4, 8, 4, 0, 166.494),
        (132978, _RMS, _NONE, 4, 8, 8, 0, 167.704),
        (131809, _RMS, _NONE, 2, 4, 8, 0, 168.704),
        (131823, _RMS, _NONE, 1, 4, 2, 0, 169.388),
        (131816, _RMS, _NONE, 1, 4, 4, 0, 172.114),
        (131658, _RMS, _NONE, 2, 8, 2, 1, 178.639),
        (131822, _RMS, _NONE, 1, 4, 8, 0, 179.778),
        (131650, _RMS, _NONE, 2, 8, 4, 1, 179.871),
        (131661, _RMS, _NONE, 2, 8, 8, 1, 186.537),
        (131655, _RMS, _NONE, 1, 8, 2, 1, 192.451),
        (131812, _RMS, _NONE, 2, 8, 2, 0, 193.688),
        (131648, _RMS, _NONE, 1, 8, 4, 1, 198.113),
        (131657, _RMS, _NONE, 1, 8, 8, 1, 201.435),
        (131821, _RMS, _NONE, 2, 8, 4, 0, 202.203),
        (131815, _RMS, _NONE, 1, 8, 2, 0, 207.262),
        (131817, _RMS, _NONE, 1, 8, 4, 0, 220.273),
        (131808, _RMS, _NONE, 2, 8, 8, 0, 223.09),
        (131813, _RMS, _NONE, 1, 8, 8, 0, 232.997),
    ), out_of_memory=(
        (132966, _RMS, _NONE, 4, 4, 4, 1), (132967, _RMS, _NONE, 4, 4, 2, 1), (132972, _RMS, _NONE, 4, 2, 2, 1),
        (132976, _RMS, _NONE, 4, 2, 4, 1), (131651, _RMS, _NONE, 2, 4, 2, 1), (131652, _RMS, _NONE, 2, 2, 8, 1),
        (131659, _RMS, _NONE, 2, 2, 4, 1), (131662, _RMS, _NONE, 2, 2, 2, 1), (131698, _RMS, _NONE, 1, 2, 2, 1),
        (131810, _RMS, _NONE, 2, 2, 2, 0), (131814, _RMS, _NONE, 2, 4, 2, 0), (131818, _RMS, _NONE, 2, 2, 4, 0),
        (131819, _RMS, _NONE, 2, 2, 8, 0), (131840, _RMS, _NONE, 1, 2, 4, 0), (131841, _RMS, _NONE, 1, 2, 2, 0),
        (132979, _RMS, _NONE, 4, 8, 2, 0), (132980, _RMS, _NONE, 4, 4, 2, 0), (132981, _RMS, _NONE, 4, 4, 8, 0),
        (132982, _RMS, _NONE, 4, 2, 8, 0), (132983, _RMS, _NONE, 4, 4, 4, 0), (132984, _RMS, _NONE, 4, 2, 2, 0),
        (132986, _RMS, _NONE, 4, 2, 4, 0),
    )),
)


def _run(sheet: _Sheet, trial_ids: str, kernels: _Kernels, recompute: Recompute, micro_batch: int, tp: int,
         pp: int, sp: int, step_s: float) -> PublishedRun:
    layers = MODEL_PRESETS[sheet.model].layers
    return PublishedRun(
        SOURCE, sheet.model, "a100-80gb", sheet.gpus, TOKENS_PER_STEP // sheet.seq_len, tp=tp, pp=pp,
        micro_batch=micro_batch, seq_len=sheet.seq_len, recompute=recompute, sequence_parallel=bool(sp),
        attention=kernels.attention, elementwise=kernels.elementwise, loss=LossKernel.GATHERED,
        zero=ZeroStage.OPTIMIZER, zero_collectives=ZeroCollectives.ALL_REDUCE_FP32, p2p_calls=P2pCalls.SEQUENTIAL,
        mlp_up=MlpUp.SPLIT, overlap_tp_dgrad=False,
        column_input=ColumnInput.SAVED if sp else ColumnInput.REGATHER,
        grad_accumulation=GradAccumulation.AUTOGRAD, fp16_grads=True,
        stage_layers=uniform_item_split(layers, pp) if pp > 1 else None, step_s=step_s,
        note=f"trials {trial_ids}, data/{sheet.path}")


def _measured(sheet: _Sheet) -> list[PublishedRun]:
    """One row per layout: a layout tried more than once in a sheet (repeated trials; at tp 1 the sheets'
    ``sequence_parallel`` flag changes nothing) is the mean of its trials' step times."""
    repeats: dict[tuple, list[tuple]] = {}
    for trial in sheet.trials:
        repeats.setdefault(trial[1:-1], []).append(trial)
    rows = []
    for layout, trials in repeats.items():
        ids = "+".join(str(t[0]) for t in trials)
        rows.append(_run(sheet, ids, *layout, step_s=sum(t[-1] for t in trials) / len(trials)))
    return rows


ROWS = [row for sheet in _SHEETS for row in _measured(sheet)]


def out_of_memory_runs() -> list[PublishedRun]:
    """The trials that stopped with "OOM Error", as runs to predict the memory of (``tests/test_published_runs.py``:
    does pipesim put them over the device?). They have no step time; each carries its sheet's first trial's, as a
    run must carry a measurement, and is not in the step-time table."""
    runs = []
    for sheet in _SHEETS:
        measured_step = sheet.trials[0][-1]
        runs += [_run(sheet, str(trial_id), *layout, step_s=measured_step)
                 for trial_id, *layout in sheet.out_of_memory]
    return runs
