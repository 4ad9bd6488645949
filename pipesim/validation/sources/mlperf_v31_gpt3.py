"""MLCommons MLPerf Training v3.1 (November 2023), closed division, GPT-3 175B: NVIDIA's submissions on its Eos
cluster (DGX H100) at 512–10,752 GPUs and Microsoft Azure's on ND H100 v5 at 10,752, with NeMo and Transformer
Engine in FP8. Repository ``mlcommons/training_results_v3.1``: the measurement is each run's log
(``NVIDIA/results/eos*_ngc23.09_nemo/gpt3/result_{0,1,2}.txt``, ``Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch/
gpt3/...``), the settings the submission's code (``NVIDIA/benchmarks/gpt3/implementations/pytorch/``).

Stated in the logs (MLLOG lines): ``global_batch_size`` and ``gradient_accumulation_steps`` (the microbatches
per pipeline, which every row's layout reproduces: ``LOGGED_MICROBATCHES``), ``max_sequence_length`` 2048, the
platform (``64xNVIDIA DGX H100`` …), and NeMo's ``train_step_timing`` after every step: the row is its median
over the three logs of a platform (200–290 steps each; the three medians agree within 1 %, the first steps and
the steps next to an evaluation run up to 2.5× longer and are not the steady state pipesim predicts).

Stated in the code: the model (``conf/custom.yaml``: 96 layers, hidden 12288, 96 heads, FFN 4·hidden,
sequence 2048, no dropout; the ``gpt3-175b`` preset); per platform
``config_DGXH100_<nodes>x8x<MINIBS>x4x8_mbs1.sh``: tensor parallelism 4, pipeline parallelism 8, micro-batch 1,
``TP_COMM_OVERLAP=True`` (Transformer Engine's userbuffer overlap of every TP collective with its GEMM:
``async_tp``); ``config_fp8.sh``: FP8 (hybrid format, Transformer Engine); ``config_common.sh``:
``USE_DIST_OPTIMIZER=True``, which ``run_and_time.sh`` turns into Apex's ``distributed_fused_adam``, whose
``conf/optim`` file sets ``overlap_grad_sync`` and ``overlap_param_sync`` (``--overlap-grad-reduce
--overlap-param-gather``) and ``grad_sync_dtype: bf16`` (gradients reduced in 16 bits: ``fp16_grads``, 16
bytes per parameter); ``custom.yaml``: interleaved pipelining with ``virtual_pipeline_model_parallel_size``
12 (``INTERLEAVED_PIPELINE`` is not set by any config: one layer per virtual stage), ``overlap_p2p_comm: True``,
``sequence_parallel: True``, no activation checkpointing (granularity ``null``).

Inferred: the vocabulary (the C4 SentencePiece model's, padded by NeMo; the preset's 51,200 moves the step by
well under 0.1 %); fused attention and element-wise kernels (Transformer Engine); the ``h100-sxm`` preset for
Eos and for ND H100 v5 (both 8 H100 SXM5 with NVSwitch and 8 × 400 Gb/s InfiniBand per node). The 64-node
config file sets ``MINIBS=192`` (a global batch of 3,072), but its logs state 2,048 and 128 accumulation steps:
the row follows the logs. Uncertain: clocks (``run.sub`` sets them only for the power runs, not these) and how
much of the step the submission's own tuning (NCCL channel and CTA limits, SM margins) moved.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to. A strong-scaling table of
one model, layout and software on one cluster: 128 microbatches per pipeline at 512 and 768 GPUs, 16 at
4,096–8,192, 8 at 10,240–10,752, so the pipeline bubble and the data-parallel sync at 16–336 replicas grow
from a few percent of the step to a large share of it. No memory is published.
"""

from pipesim.analytic.layout import Fp8Params, Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "MLPerf Training v3.1 GPT-3 175B, NVIDIA Eos (DGX H100, NeMo FP8)"
# Azure's run is the same code on another cluster: its own system, so not in Eos's ranking group
# (pipesim.validation.ranking.group_key), but the same source when one is left out.
AZURE = "MLPerf Training v3.1 GPT-3 175B on Azure ND H100 v5, NeMo FP8"

# (platform, GPUs, global batch in sequences, gradient accumulation steps as logged, median train_step_timing in s)
LOGGED = [
    ("eos_n64", 512, 2048, 128, 11.05), ("eos_n96", 768, 3072, 128, 11.075),
    ("eos-dfw_n512", 4096, 2048, 16, 1.608), ("eos-dfw_n768", 6144, 3072, 16, 1.615),
    ("eos-dfw_n1024", 8192, 4096, 16, 1.619), ("eos-dfw_n1280", 10240, 2560, 8, 0.926),
    ("eos-dfw_n1344", 10752, 2688, 8, 0.930), ("ND_H100_v5_n1344", 10752, 2688, 8, 0.945),
]
LOGGED_MICROBATCHES = [steps for _, _, _, steps, _ in LOGGED]


def mlperf_gpt3_row(source: str, gpus: int, batch: int, seconds: float, platform: str, *, pp: int = 8,
                    chunks: int = 12, micro_batch: int = 1, fp8_params: Fp8Params = Fp8Params.OFF,
                    chip: str = "h100-sxm") -> PublishedRun:
    """One of NVIDIA's MLPerf GPT-3 175B layouts (v3.0 to v4.1): tp 4, interleaved pp × v (v3.x: 8 × 12,
    micro-batch 1), sequence parallelism, FP8, TP overlap, the distributed optimizer syncing BF16 gradients,
    overlapped; ``fp8_params`` where the configs keep the weights in FP8 (v4.x's ``FP8_PARAMS``)."""
    return PublishedRun(source, "gpt3-175b", chip, gpus, batch, tp=4, pp=pp, chunks=chunks,
                        micro_batch=micro_batch, schedule="interleaved", sequence_parallel=True,
                        zero=ZeroStage.OPTIMIZER, precision=Precision.FP8, fp8_params=fp8_params, overlap_p2p=True,
                        async_tp=True, fp16_grads=True, overlap_grad_reduce=True, overlap_param_gather=True,
                        step_s=seconds, note=platform)


ROWS = [mlperf_gpt3_row(AZURE if platform.startswith("ND_") else SOURCE, gpus, batch, seconds, platform)
        for platform, gpus, batch, _, seconds in LOGGED]
