"""MLCommons MLPerf Training v3.0 (June 2023), closed division, GPT-3 175B: NVIDIA's submissions on DGX H100 at
512 and 768 GPUs and NVIDIA + CoreWeave's on HGX H100 at 768–3,584, NeMo Megatron 23.04 with Transformer Engine
in FP8. Repository ``mlcommons/training_results_v3.0``: the measurement is each run's log
(``NVIDIA/results/dgxh100_n{64,96}_nemo/gpt3/result_*.txt``,
``NVIDIA_CoreWeave/results/coreweave_hgxh100_n{96,192,448}_ngc23.04_pytorch/gpt3/result_*.txt``), the settings
the submission's code (``NVIDIA/benchmarks/gpt3/implementations/pytorch/``; CoreWeave's copy is the same).

The same layout as v3.1 (:mod:`pipesim.validation.sources.mlperf_v31_gpt3`, whose row constructor this module
uses), half a year older in software. Stated in the logs: ``global_batch_size``, ``gradient_accumulation_steps``
(``LOGGED_MICROBATCHES``), the platform, NeMo's ``train_step_timing`` per step (the row: the median over a
platform's logs, whose medians agree within 0.3 %). Stated in the code: ``config_common.sh`` (96 layers, hidden
12288, FFN 49152, 96 heads; ``INTERLEAVED_PIPELINE=12``; ``USE_DIST_OPTIMIZER=True``; activation checkpointing
``null``), ``config_DGXH100_<nodes>x8x<MINIBS>x4x8_mbs1.sh`` (tp 4, pp 8, micro-batch 1, the global batch
``MINIBS`` × data-parallel size, which the logs confirm), ``config_tp_h100.sh`` (``TP_COMM_OVERLAP=True``),
``config_fp8.sh`` (FP8, hybrid format), ``conf/megatron_gpt_config.yaml`` (``sequence_parallel: True``,
``overlap_p2p_comm: True``; ``distributed_fused_adam`` with ``overlap_grad_sync``, ``overlap_param_sync`` and
``grad_sync_dtype: bf16``). The systems' descriptions (``systems/*.json``): 8 H100-SXM5-80GB with NVSwitch and 8
ConnectX-7 NDR 400 Gb/s per node on both (the ``h100-sxm`` preset).

Inferred: the vocabulary (as v3.1); fused kernels (Transformer Engine). Uncertain: what the half year of
software between v3.0 and v3.1 changed — the same layout ran 9 % slower per step here at 512 GPUs (12.08 s
against 11.05 s), which pipesim, modelling one software, cannot tell apart.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to. No memory is published.
"""

from pipesim.validation.sources.mlperf_v31_gpt3 import mlperf_gpt3_row

SOURCE = "MLPerf Training v3.0 GPT-3 175B, NVIDIA DGX H100 (NeMo 23.04 FP8)"
# CoreWeave's cluster is another system: its own ranking group (pipesim.validation.ranking.group_key), the same
# source when one is left out (one software release, one team's scripts).
COREWEAVE = "MLPerf Training v3.0 GPT-3 175B on CoreWeave HGX H100, NeMo 23.04 FP8"

# (platform, GPUs, global batch in sequences, gradient accumulation steps as logged, median train_step_timing in s)
LOGGED = [
    ("dgxh100_n64", 512, 2048, 128, 12.074), ("dgxh100_n96", 768, 3072, 128, 12.127),
    ("coreweave_n96", 768, 3072, 128, 12.305), ("coreweave_n192", 1536, 3072, 64, 6.34),
    ("coreweave_n448", 3584, 2688, 24, 2.60),
]
LOGGED_MICROBATCHES = [steps for _, _, _, steps, _ in LOGGED]

ROWS = [mlperf_gpt3_row(COREWEAVE if platform.startswith("coreweave") else SOURCE, gpus, batch, seconds, platform)
        for platform, gpus, batch, _, seconds in LOGGED]
