"""MLCommons MLPerf Training v5.0 (June 2025), closed division, Llama 3.1 405B pre-training: NVIDIA's submissions on
its Eos cluster (HGX H100) at 512–8,192 GPUs and Nebius's on H200 at 512 and 1,024, NeMo 25.01 with Transformer
Engine in FP8. Repository ``mlcommons/training_results_v5.0``: the measurement is each run's log
(``NVIDIA/results/eos-dfw_n{64,256,304,320,1024}_ngc25.01_nemo/llama31_405b/result_*.txt``,
``Nebius/results/nebius_soperator_8xH200_n{64,128}_ngc25.01_nemo/llama31_405b/...``), the settings the
submission's code (``<submitter>/benchmarks/llama31_405b/implementations/<system>/``).

Stated in the logs (MLLOG lines): ``global_batch_size``, ``gradient_accumulation_steps`` (the microbatches per
pipeline, which each row's layout reproduces: ``LOGGED_MICROBATCHES``), ``max_sequence_length`` 8192, and the
``train_step_time`` the submission's callback logs after every step: the row is its median over a system's logs
(three each, 217–287 steps; the medians agree within 1.3 %).

Stated in the code: the model (``pretrain.py`` builds NeMo's ``Llama31Config405B``: the ``llama3.1-405b`` preset);
per system ``config_DGXH100_<nodes>x8x<MINIBS>xtp8pp8cp2.sh`` (Nebius: ``config_DGXH200_...tp4pp8cp2``): tensor
parallelism 8 (Nebius 4), pipeline parallelism 8 with ``INTERLEAVED_PIPELINE=8`` virtual stages,
``CONTEXT_PARALLEL=2``, micro-batch 1, ``TP_COMM_OVERLAP=True`` (``async_tp``), ``ASYM_PP_EMBED`` and
``ASYM_PP_LOSS`` (Megatron-Core's ``account_for_embedding/loss_in_pipeline_split``: the 126 layers and the embedding
and loss as one layer each over 64 virtual stages, so one layer on the first and on the last stage, two elsewhere:
``first_last=1``); ``config_common.sh``: ``FP8=True`` (delayed scaling), ``FP8_PARAMS=True``,
``USE_DIST_OPTIMIZER=True``, ``OVERLAP_GRAD_REDUCE=True``, ``OVERLAP_PARAM_GATHER=True``; ``pretrain.py``:
``grad_reduce_in_fp32=False`` (gradients reduced in 16 bits: ``fp16_grads``); ``conf/custom.yaml``:
``sequence_parallel`` true, ``overlap_p2p_comm`` true, activation checkpointing ``null`` (none), the fused
cross-entropy; ``NCCL_CFG_PATH`` names ``conf/nccl/custom_communicator_cta.yaml``, Megatron-Core's per-communicator
NCCL options: the cp group ``max_ctas: 1`` (``cp_comm_ctas=1``, ``--cp-comm-ctas 1``: each ring hop on one NCCL
channel), and no ``NCCL_MAX_CTAS`` in the environment to override it (v5.1's configs export one). The systems'
descriptions (``systems/*.json``): 8 H100-SXM5-80GB (Nebius: H200-SXM5-141GB) per node with NVSwitch and 8
ConnectX-7 NDR 400 Gb/s (the ``h100-sxm`` and ``h200`` presets).

Memory: each log's ``max_memory_usage`` after every training block, the same value in all three logs of a
system (58.817 GiB at 512 Eos GPUs down to 50.901 at 8,192; Nebius 109.067 and 104.846). What it is, from
``mlperf_common`` (NVIDIA's logging package, ``mlperf_common/callbacks/logging.py``, commit 53f892f of
2025-02-27, "Display max memory usage in GB"): ``round(torch.cuda.max_memory_allocated() / (1024*1024*1024), 3)``
logged by global rank 0 alone (``MLLoggerWrapper``'s unique log rank): GiB allocated on the first pipeline
stage (``memory_rank=0``). ``FP8_PARAMS=True`` keeps the linears' weights in FP8 alone; the image is
``nvcr.io/nvidia/pytorch:25.01-py3`` with its own Transformer Engine (``TE_REVISION=SKIP``), which predates TE
2.0 (tagged 2025-02-12): TE 1.x, whose FP8 parameters keep a transpose cache (2 bytes) when they were created
with gradients enabled and none (1 byte) otherwise. Which this build did is not stated. Read from these rows, not
the code: before the FP8 linears' inputs were counted at the 1 byte Transformer Engine saves them in
(:func:`pipesim.analytic.activations.linear_input_element_bytes`), ``Fp8Params.ROWWISE`` gave −1.1…−1.8 % and
``BOTH`` +8.3…+9.1 %, and the rows took ROWWISE; with them counted, ``BOTH`` gives +0.8…+1.1 % and ROWWISE
−8…−10 %, and the rows take BOTH, the path TE 2.x always takes (``mlperf_v51_llama8b``, from the code). So the
rows still choose the path and are no evidence for it.

Modelled since they were gathered: the parameters gathered in FP8 (half the all-gather's bytes, overlapped with
the forward; ``Layout.gathered_weight_bytes``) and the sequence-parallel gathers of the FP8 linears' inputs and
gradients (``comm.tp_gather_bytes``): together +10.3 → +7.9 % on average. Not modelled, stated: the embedding's
weight gradient deferred to the pipeline flush
(``DEFER_EMBEDDING_WGRAD_COMPUTE``), NVLink SHARP and multicast for the TP overlap (``MC_TP_OVERLAP_AG/RS``).
Uncertain: how much of this software's speed (NeMo 25.01, a year and a half after MLPerf v3.1's) pipesim's
kernel rates, chosen on 2023–2024 runs, miss. The GB200 submissions of the same round are left out: no GB200
preset (an NVLink domain of 72) exists to simulate them on.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to; the memory column was read
a release later, with the FP8-parameter mechanism (its byte counts come from Transformer Engine's code; which of
TE 1.x's two paths these runs took is chosen by these rows, as above; before it pipesim was +18…+20 % here).

The loss, stated: ``conf/custom.yaml``'s ``cross_entropy_loss_fusion`` (``CROSS_ENTROPY_LOSS_FUSION``, default
True), Megatron-Core's native implementation (``--loss megatron-fused``; its share of a 405B step is a few
thousandths).
"""

from pipesim.analytic.layout import Fp8Params, LossKernel, Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "MLPerf Training v5.0 Llama 3.1 405B, NVIDIA Eos (HGX H100, NeMo 25.01 FP8)"
# Nebius's H200 cluster is another system (and chip): its own ranking group, the same source when left out.
NEBIUS = "MLPerf Training v5.0 Llama 3.1 405B on Nebius H200, NeMo 25.01 FP8"

# (system, chip, tp, GPUs, global batch in sequences, gradient accumulation steps as logged, median step in s,
#  max_memory_usage in GiB as logged by global rank 0)
LOGGED = [
    ("eos-dfw_n64", "h100-sxm", 8, 512, 1152, 288, 55.14, 58.817),
    ("eos-dfw_n256", "h100-sxm", 8, 2048, 1152, 72, 14.22, 52.484),
    ("eos-dfw_n304", "h100-sxm", 8, 2432, 1216, 64, 12.71, 52.151),
    ("eos-dfw_n320", "h100-sxm", 8, 2560, 1120, 56, 11.17, 52.062),
    ("eos-dfw_n1024", "h100-sxm", 8, 8192, 1536, 24, 5.18, 50.901),
    ("nebius_n64", "h200", 4, 512, 1152, 144, 50.02, 109.067),
    ("nebius_n128", "h200", 4, 1024, 1152, 72, 25.36, 104.846),
]
LOGGED_MICROBATCHES = [row[5] for row in LOGGED]

ROWS = [
    PublishedRun(NEBIUS if chip == "h200" else SOURCE, "llama3.1-405b", chip, gpus, batch, tp=tp, pp=8, cp=2,
                 cp_comm_ctas=1, chunks=8, micro_batch=1, seq_len=8192, schedule="interleaved", sequence_parallel=True,
                 zero=ZeroStage.OPTIMIZER, precision=Precision.FP8, fp8_params=Fp8Params.BOTH, overlap_p2p=True,
                 async_tp=True, fp16_grads=True, overlap_grad_reduce=True, overlap_param_gather=True, first_last=1,
                 loss=LossKernel.MEGATRON_FUSED, step_s=seconds, memory_gib=memory, memory_rank=0, note=system)
    for system, chip, tp, gpus, batch, _, seconds, memory in LOGGED
]
