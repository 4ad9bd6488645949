"""MLCommons MLPerf Training v4.1 (November 2024), closed division, preview category: GPT-3 175B on NVIDIA's Nyx,
8 DGX B200 (64 B200 GPUs), NeMo 24.09 with Transformer Engine in FP8 — the first published training step on a
Blackwell GPU. Repository ``mlcommons/training_results_v4.1``: the measurement is the run's three logs
(``NVIDIA/results/b200_n8_preview_nemo/gpt3/result_{0,1,2}.txt``), the settings the submission's code
(``NVIDIA/benchmarks/gpt3/implementations/b200_n8_preview_nemo/``), the system its description
(``NVIDIA/systems/b200_n8_preview_nemo.json``: 8 × 8 B200-SXM-180GB, 183,359 MiB each: the ``b200`` preset).

The measure is v4.x's (:mod:`pipesim.validation.sources.mlperf_v4_gpt3`): these logs carry no per-step timing, so
the row is the median, pooled over the three logs, of each training block's duration (``block_start`` to
``block_stop``) over its steps (12 steps of 2,048 sequences of 2,048 tokens: each block's ``epoch_count`` is
50,331,648 tokens). The 72 blocks agree within 0.7 %: 36.06 s a step in the first log, 36.26 and 36.29 in the
others. Stated in the logs: ``global_batch_size`` 2,048, ``gradient_accumulation_steps`` 512
(``LOGGED_MICROBATCHES``, which the row's layout reproduces: 2,048 / (2 data-parallel ranks × micro-batch 2)).

Stated in the code: ``config_DGXB200_8x8x1024x4x8_mbs2_cg.sh``: tensor parallelism 4, pipeline parallelism 8
with ``INTERLEAVED_PIPELINE=6``, micro-batch 2, ``TP_COMM_OVERLAP=True`` (``async_tp``), layer CUDA graphs,
``NVTE_FUSED_ATTN=1`` (cuDNN's fused attention); ``config_common.sh``: ``USE_DIST_OPTIMIZER=True`` (Apex's
``distributed_fused_adam``: ``overlap_grad_sync``, ``overlap_param_sync``, ``grad_sync_dtype: bf16``),
``FP8_PARAMS=True``; ``config_fp8.sh``: FP8, hybrid format, delayed scaling with a 1,024-step amax history. The
model, sequence parallelism, overlapped P2P and no recomputation as v4.x's Eos rows (the same code line).

Not modelled, stated: CUDA graphs, NVLink SHARP and multicast for the TP overlap (``MC_TP_OVERLAP_*``), the FP8
reduce-scatter of the TP overlap (``NVTE_UB_FP8_RS``). Uncertain: the FP8 parameters' bytes (memory only, none
published: ``Fp8Params.BOTH`` as the later rows, which on Blackwell is the data alone); the clock of a
preview-category system a year before the v5.x Blackwell rows.

Out-of-sample: gathered for issue #24 after every constant but the Blackwell sustained clock was fixed
(:mod:`pipesim.validation.constants`: fitted on the three Blackwell sources, so validation by source left out
refits it without this one).
"""

from pipesim.analytic.layout import Fp8Params
from pipesim.validation.sources.mlperf_v31_gpt3 import mlperf_gpt3_row

SOURCE = "MLPerf Training v4.1 GPT-3 175B on DGX B200 (NVIDIA Nyx preview; NeMo 24.09 FP8)"

# (platform, GPUs, global batch, accumulation steps as logged, pp, v, micro-batch, median block step s)
LOGGED = [("nyx b200_n8", 64, 2048, 512, 8, 6, 2, 36.256)]
LOGGED_MICROBATCHES = [steps for _, _, _, steps, *_ in LOGGED]

ROWS = [mlperf_gpt3_row(SOURCE, gpus, batch, seconds, platform, pp=pp, chunks=v, micro_batch=b,
                        fp8_params=Fp8Params.BOTH, chip="b200")
        for platform, gpus, batch, _, pp, v, b, seconds in LOGGED]
