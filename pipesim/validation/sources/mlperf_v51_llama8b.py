"""MLCommons MLPerf Training v5.1 (November 2025), closed division, Llama 3.1 8B pre-training: Cisco's submissions on
8 and 16 nodes of 8 H100 SXM (air-cooled, a RoCE Ethernet fabric of 8 × 400 Gb/s BlueField-3 NICs per node),
running NVIDIA's NeMo reference code in FP8. Repository ``mlcommons/training_results_v5.1``: the measurement is
each run's log (``Cisco/results/hpf_n{8,16}/llama31_8b/result_{0..9}.txt``), the settings the submission's code
(``Cisco/benchmarks/llama31_8b/implementations/nemo/``); the system descriptions ``Cisco/systems/hpf_n*.json``.

Stated in the logs: ``global_batch_size`` 64, ``gradient_accumulation_steps`` 1 (``LOGGED_MICROBATCHES``: one
microbatch per step), ``max_sequence_length`` 8192, and the ``train_step_time`` the reference's callback
(``custom_callbacks.py``) logs after every step: the row is its median over the ten logs (about 3,500 steps each).
The logs' other ``train_step_time``, every 192 steps from ``mlperf_common``'s callback, averages in the slow steps
around evaluations and is not used.

Stated in the code: ``config_DGXH100_8x8x1xtp1pp1cp1.sh`` (64 GPUs: tp 1, pp 1, cp 1, micro-batch 1, ``MINIBS=1``:
one sequence per data-parallel rank) and ``config_DGXH100_16x8x1xtp2pp1cp1.sh`` (128 GPUs: tp 2,
``TP_COMM_OVERLAP=True``); ``config_common.sh``: ``FP8=True``, ``FP8_PARAMS=True``, ``USE_DIST_OPTIMIZER=True``,
``OVERLAP_GRAD_REDUCE=True``, ``OVERLAP_PARAM_GATHER=True``; ``pretrain.py``: ``grad_reduce_in_fp32=False``
(``fp16_grads``); ``conf/custom.yaml``: ``sequence_parallel`` true (with tp 2), activation checkpointing
``null``. The model is NeMo's ``Llama31Config8B`` (the ``llama3.1-8b`` preset).

Memory: each log's ``max_memory_usage`` (71.229 GiB at tp 1, 35.706 at tp 2, every log alike): global rank 0's
``torch.cuda.max_memory_allocated()`` in GiB, as ``mlperf_common``'s callback logs it (see
``mlperf_v50_llama405b``; the logs name ``mlperf_common/callbacks/logging.py``). ``FP8_PARAMS=True`` with
Transformer Engine v2.5 (the Dockerfile's ``TE_REVISION=v2.5``), which keeps each FP8 weight's data and its
transpose (``Fp8Params.BOTH``). pipesim was +10.6 % and +10.3 % with a BF16 weight and its FP8 copy, and the
previous release noted that one byte less per parameter would match; the byte count now comes from TE's code.

Not modelled, stated: ``CUBLAS_WORKSPACE_CONFIG=:16:8`` (a small cuBLAS workspace, which can keep cuBLAS from its
fastest split-K kernels), NVLink SHARP and multicast for the TP overlap. (The parameter all-gather in FP8 and
the FP8 sequence-parallel gathers are modelled since issue #24's FP8-gathers release.)

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to. One model on one system at
two layouts: too few rows for a ranking group.

The loss, stated: ``conf/custom.yaml`` sets ``cross_entropy_loss_fusion`` (``CROSS_ENTROPY_LOSS_FUSION``, default
True) and names no implementation, so Megatron-Core's default ``native`` runs: ``--loss megatron-fused``.
"""

from pipesim.analytic.layout import Fp8Params, LossKernel, Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "MLPerf Training v5.1 Llama 3.1 8B, Cisco H100 (NeMo FP8, RoCE)"

# (system, tp, GPUs, global batch in sequences, gradient accumulation steps as logged, median train_step_time in s,
#  max_memory_usage in GiB as logged by global rank 0)
LOGGED = [("hpf_n8", 1, 64, 64, 1, 0.7205, 71.229), ("hpf_n16", 2, 128, 64, 1, 0.4849, 35.706)]
LOGGED_MICROBATCHES = [row[4] for row in LOGGED]

ROWS = [
    PublishedRun(SOURCE, "llama3.1-8b", "h100-sxm", gpus, batch, tp=tp, micro_batch=1, seq_len=8192,
                 sequence_parallel=tp > 1, zero=ZeroStage.OPTIMIZER, precision=Precision.FP8,
                 fp8_params=Fp8Params.BOTH, async_tp=tp > 1, fp16_grads=True, overlap_grad_reduce=True,
                 overlap_param_gather=True, loss=LossKernel.MEGATRON_FUSED, step_s=seconds, memory_gib=memory,
                 memory_rank=0, note=system)
    for system, tp, gpus, batch, _, seconds, memory in LOGGED
]
