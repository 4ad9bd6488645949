"""MLCommons MLPerf Training v5.0 (June 2025), closed division, Llama 3.1 405B pre-training on GB200 NVL72: NVIDIA's
Tyche (256 and 512 GPUs) and IBM, CoreWeave and NVIDIA's Carina (512–2,496 GPUs), NeMo 25.04 with Transformer
Engine in FP8. Repository ``mlcommons/training_results_v5.0``: the measurement is each run's log
(``NVIDIA/results/tyche_ngpu{256,512}_ngc25.04_nemo/llama31_405b/result_*.txt``,
``IBM+CoreWeave+NVIDIA/results/carina_ngpu{512,1024,1536,2048,2496}_ngc25.04_nemo/llama31_405b/...``), the settings
the submission's code (``<submitter>/benchmarks/llama31_405b/implementations/<system>/``), the chip the systems'
descriptions (``systems/*.json``: 4 GB200 GPUs per compute tray, 189,471 MiB each, NVLink 5 and NVSwitch across
each NVL72 rack, 4× ConnectX-7 400 Gb/s per tray: the ``gb200`` preset).

Stated in the logs (MLLOG lines): ``global_batch_size``, ``gradient_accumulation_steps`` (the microbatches per
pipeline, which each row's layout reproduces: ``LOGGED_MICROBATCHES``), ``max_sequence_length`` 8192, the
``train_step_time`` after every step (the row: the median over a system's three logs, 246–618 steps each; the
three medians agree within 1 %), and, in Carina's logs, ``max_memory_usage``: global rank 0's
``torch.cuda.max_memory_allocated()`` in GiB (``mlperf_common``; see ``mlperf_v50_llama405b``).

Stated in the code: ``config_GB200_<nodes>x4x<MINIBS>xtp4pp8cp2*.sh``: tensor parallelism 4, pipeline parallelism 8
with ``INTERLEAVED_PIPELINE=8``, ``CONTEXT_PARALLEL=2``, micro-batch 1, ``TP_COMM_OVERLAP=True`` (``async_tp``),
``ASYM_PP_EMBED``/``ASYM_PP_LOSS`` (one layer on the first and the last stage: ``first_last=1``);
``config_common.sh``: ``FP8=True``, ``FP8_PARAM_GATHER=True`` (FP8 parameters; the Dockerfile builds Transformer
Engine v2.2.1, which keeps each FP8 weight's data and its transpose: ``Fp8Params.BOTH``), ``USE_DIST_OPTIMIZER``,
``OVERLAP_GRAD_REDUCE``, ``OVERLAP_PARAM_GATHER``; ``pretrain.py``: ``grad_reduce_in_fp32=False`` (``fp16_grads``);
``conf/custom.yaml``: sequence parallelism, overlapped P2P, no recomputation, the fused cross-entropy;
``NCCL_CFG_PATH`` names ``conf/nccl/custom_communicator_cta.yaml``, Megatron-Core's per-communicator NCCL options:
the cp group ``max_ctas: 1`` (``cp_comm_ctas=1``, ``--cp-comm-ctas 1``: each ring hop on one NCCL channel), and no
``NCCL_MAX_CTAS`` in the environment to override it (v5.1's configs export one). The model: NeMo's
``Llama31Config405B`` (the ``llama3.1-405b`` preset).

Tyche 512's and Carina's configs set ``TP_PP_DP_MAPPING=True`` (Megatron-Core's ``use_tp_pp_dp_mapping``,
``--tp-pp-dp-mapping``: pipeline neighbours tp·cp = 8 ranks apart, so a model replica's 64 GPUs share one NVL72
rack and only data parallelism crosses racks); Tyche 256's does not (Megatron's default order).

Not modelled, stated: whole-step CUDA graphs (``config_common_cg.sh``: ``FULL_CUDA_GRAPH=True``, every system
here), which remove the host's launch gaps and so make the real step *faster* than a model without them; the
embedding's deferred weight gradient, NVLink SHARP and multicast for the TP overlap, the parameter all-gather in
FP8.

Gathered for issue #24 after every constant was fixed and held out of everything for one release: the first
published rows on a Blackwell chip, 16–19 % too fast at every scale with the Blackwell presets' constants of the
time (the B200's cuBLAS BF16 share, Hopper's fitted FP8 share, no sustained-clock ratio), so mostly the per-GPU
compute rate, not the NVLink domain or the data-parallel fabric. Since the next release they are in the table
(:data:`pipesim.validation.sources.BLACKWELL_MODULES`) with two later Blackwell sources: the B200's FP8 share is
Transformer Engine's measured one (0.60) and one constant is fitted on the Blackwell sources, the Blackwell
sustained clock, which validation by source left out refits without this one (left out, −0.2 % since the
data-parallel sync runs asynchronously, +0.6 % before, since the NVFP4 source joined that fit; −10 % on the three
FP8 sources alone). Uncertain: the chip's
sustained clock at 1,200 W; how much the CUDA graphs are worth.

The loss, stated: ``conf/custom.yaml``'s ``cross_entropy_loss_fusion`` (default True), Megatron-Core's native
implementation (``--loss megatron-fused``).
"""

from pipesim.analytic.layout import Fp8Params, LossKernel, Precision, RankOrder, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "MLPerf Training v5.0 Llama 3.1 405B on GB200 NVL72 (NeMo 25.04 FP8)"
# Tyche is NVIDIA's own system, Carina IBM, CoreWeave and NVIDIA's: two systems (two ranking groups, and rows that
# a key must tell apart at 512 GPUs), one source when one is left out (the same code and software build)
TYCHE = "MLPerf Training v5.0 Llama 3.1 405B on GB200 NVL72, NVIDIA Tyche (NeMo 25.04 FP8)"

# (system, GPUs, global batch in sequences, gradient accumulation steps as logged, median step in s,
#  max_memory_usage in GiB as logged by global rank 0, or None where the log has none)
LOGGED = [
    ("tyche_ngpu256", 256, 448, 112, 19.168, None),
    ("tyche_ngpu512", 512, 896, 112, 19.432, None),
    ("carina_ngpu512", 512, 896, 112, 19.278, 93.521),
    ("carina_ngpu1024", 1024, 768, 48, 8.448, 92.1),
    ("carina_ngpu1536", 1536, 1152, 48, 8.5, 91.631),
    ("carina_ngpu2048", 2048, 1280, 40, 7.158, 92.802),
    ("carina_ngpu2496", 2496, 1248, 32, 5.823, 92.422),
]
LOGGED_MICROBATCHES = [row[3] for row in LOGGED]

ROWS = [
    PublishedRun(TYCHE if system.startswith("tyche") else SOURCE, "llama3.1-405b", "gb200", gpus, batch, tp=4, pp=8,
                 cp=2, cp_comm_ctas=1, chunks=8, micro_batch=1,
                 seq_len=8192, schedule="interleaved", sequence_parallel=True, zero=ZeroStage.OPTIMIZER,
                 precision=Precision.FP8, fp8_params=Fp8Params.BOTH, overlap_p2p=True, async_tp=True,
                 fp16_grads=True, overlap_grad_reduce=True, overlap_param_gather=True, first_last=1,
                 loss=LossKernel.MEGATRON_FUSED,
                 step_s=seconds, memory_gib=memory, memory_rank=0 if memory is not None else None, note=system,
                 rank_order=RankOrder.TP_CP_DP_PP if system == "tyche_ngpu256" else RankOrder.TP_CP_PP_DP)
    for system, gpus, batch, _, seconds, memory in LOGGED
]
