"""Peng et al. 2023, "FP8-LM: Training FP8 Large Language Models" (Microsoft Azure and Microsoft Research,
arXiv:2310.18313), its system-performance table: GPT-7B, 13B and 175B trained with Megatron-LM on H100 80GB, in
BF16, in FP8 through Transformer Engine, and in MS-AMP's FP8. Read from the table as the same team publishes it in
Azure/MS-AMP (``docs/introduction.md``, "System performance", the image ``docs/assets/gpt-performance.png`` added
on 20 October 2023 with the project's website).

Stated (the table): each row's tp, pp and dp (GPUs = tp·pp·dp: 32, 32 and 128), micro-batch (2, 2 and 1), the
precision, "GPU Mem. (GB)", the throughput in samples per second, TFLOPS and MFU per GPU, and the share of the step
and the volume of the "weight-related communication" ("the all-gather operator on weights and the reduce-scatter
operator on weight gradients"). Rows used: BF16 and FP8 (TE) of each model, the throughput as published:

=========  ==========  ============  =========
model      layout      BF16 (s/s)    TE (s/s)
=========  ==========  ============  =========
GPT-7B     1 × 1 × 32  159.2         224.5
GPT-13B    2 × 1 × 16  79.3          111.7
GPT-175B   8 × 4 × 4   22.4          28.7
=========  ==========  ============  =========

Stated by the team's scripts for these models (Azure/MS-AMP-Examples, ``gpt3/pretrain_6b7_megatron.sh`` and
``pretrain_13b_megatron.sh``, whose ``bf16`` and ``te`` arguments are the table's two precisions), taken as the
rows' settings: Megatron-LM at 0609f27 (5 August 2023, the repository's submodule) with the team's patch (which
logs ``samples per second`` as the global batch over each logged iteration's time); sequence 2048;
``--sequence-parallel``, ``--use-flash-attn``, ``--use-distributed-optimizer``, ``--bf16``,
``--no-gradient-accumulation-fusion`` (each microbatch's weight gradients added into the FP32 main gradients by a
pass of their own: ``--grad-accumulation autograd``), dropout 0; the ``te`` runs add ``--fp8-hybrid
--transformer-impl transformer_engine`` (E4M3 forward, E5M2 backward, delayed scaling, Transformer Engine v1.1 in
MS-AMP's image). The models: presets ``fp8lm-gpt-7b``, ``fp8lm-gpt-13b``, ``fp8lm-gpt-175b``
(:mod:`pipesim.analytic.model_presets`). Megatron-LM's distributed optimizer of that commit reduce-scatters the
whole FP32 gradient buffer after the last microbatch's backward and all-gathers the BF16 parameters after the step,
neither overlapped (the overlap flags came to Megatron-LM that autumn). The table confirms the buffer: the 7B's
volume, 37.2 GB, is 6.66 billion parameters at 4 + 2 bytes in GiB.

Inferred:

- The global batch, which the table does not state: the scripts' 2048 sequences (6.7B) and 1280 (13B), so 32 and
  40 microbatches a step. The table's micro-batch of 2 is not the scripts' 1, so its runs are not the scripts
  verbatim. Fewer sequences a step would leave the non-overlapped gradient sync a larger share: at 256, the 7B's
  BF16 row would be predicted 4 points slower, the 13B's 4.
- The 175B, which has no script: the 13B's flags, and GPT-3's batch (Brown et al. 2020: 3.2M tokens, 1536
  sequences of 2048), 384 microbatches through 1F1B (no virtual stages in the scripts). Uncertain: any batch of
  512 or more moves its rows by under 3 points; at 128 its BF16 row would be predicted 16 points slower.
- No recomputation. The team's patch counts four passes a layer under ``--recompute-granularity``, three without:
  the 13B's and 175B's TFLOPS are their samples per second by three passes, within 1.3 % (the 7B's TFLOPS, 445, is
  5.2 % above what its 159.2 samples per second give by the same count, and so for its other two precisions; the
  samples per second, the measurement the TFLOPS are derived from, are used).
- FlashAttention-2 (``--attention fused``): Megatron-LM of that commit calls ``flash_attn_varlen_func`` where
  flash-attn 2 is installed, as MS-AMP's image (NGC PyTorch 23.10 with Transformer Engine v1.1) has it.
- The cluster: Azure's ND H100 v5 (eight H100 SXM with NVLink and eight 400 Gb/s InfiniBand links a VM, what the
  examples' README sets NCCL up for when training on several nodes): the ``h100-sxm`` preset.

Not used: the "FP8 (Ours)" rows (MS-AMP's FP8 weight gradients, its FP8 all-gather and reduce-scatter and its
FP8/FP16 optimizer states, which pipesim does not model); the memory column, whose measure the table does not
state (allocated, reserved or the device's whole use; GB or GiB): read as 10⁹ bytes, pipesim's allocated peaks are
9–19 % under it and its reserved estimates 4–15 % under it, more for the FP8 rows; and the communication share,
which no one batch makes consistent across precisions (the 175B's 23.4 GB took 8.8 % of the BF16 step and 3.9 % of
the shorter FP8 one).

Out of sample: gathered after every constant was fixed, and predicted before anything was changed: BF16 −13.6 %,
−10.5 %, −0.7 % and FP8 −11.2 %, −9.6 %, −8.7 % (7B, 13B, 175B; pipesim too fast but at the 175B in BF16), the
lean of other teams' Megatron-LM runs (Alibaba's Megatron-LLaMA, −8 %), where NVIDIA's own lean the other way.
"""

from pipesim.analytic.layout import AttentionKernel, GradAccumulation, Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "Peng et al. 2023, FP8-LM, system performance on H100 with Megatron-LM"
_SEQ = 2048
_NAMED = {Precision.BF16: "BF16", Precision.FP8: "Transformer Engine FP8"}


def _row(model: str, tp: int, pp: int, dp: int, micro_batch: int, global_batch: int, samples_per_s: float,
         precision: Precision) -> PublishedRun:
    gpus = tp * pp * dp
    return PublishedRun(f"{SOURCE}: {_NAMED[precision]}", model, "h100-sxm", gpus, global_batch, tp=tp, pp=pp,
                        micro_batch=micro_batch, seq_len=_SEQ, sequence_parallel=tp > 1,
                        attention=AttentionKernel.FUSED, grad_accumulation=GradAccumulation.AUTOGRAD,
                        zero=ZeroStage.OPTIMIZER, precision=precision,
                        tokens_per_gpu=samples_per_s * _SEQ / gpus)


_SHAPES = (("fp8lm-gpt-7b", 1, 1, 32, 2, 2048, 159.2, 224.5), ("fp8lm-gpt-13b", 2, 1, 16, 2, 1280, 79.3, 111.7),
           ("fp8lm-gpt-175b", 8, 4, 4, 1, 1536, 22.4, 28.7))
ROWS = [_row(model, tp, pp, dp, micro, batch, samples, precision)
        for model, tp, pp, dp, micro, batch, bf16, te in _SHAPES
        for precision, samples in ((Precision.BF16, bf16), (Precision.FP8, te))]
