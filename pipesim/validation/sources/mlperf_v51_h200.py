"""MLCommons MLPerf Training v5.1 (November 2025), closed division, on NVIDIA H200: HPE's Llama 3.1 8B pre-training on
8 Cray XD670 nodes (64 H200-SXM5-141GB, InfiniBand), NVIDIA's NeMo reference code in FP8 (the PyTorch 25.08
container with Transformer Engine, NeMo and Megatron-Core pinned to pre-25.09 commits). Repository
``mlcommons/training_results_v5.1``: the measurement is each run's log
(``HPE/results/HPE-Cray-XD670-H200-SXM5-141GB_n8_25.09/llama31_8b/result_{1..10}.txt``), the settings the
configuration script the submission ran, traced through the scripts it sources
(``HPE/benchmarks/llama3_8b/implementations/nemo-x86_64/``), the system its description
(``HPE/systems/HPE-Cray-XD670-H200-SXM5-141GB_n8_25.09.json``).

Stated in the logs: ``global_batch_size`` 32, ``gradient_accumulation_steps`` 1 (``LOGGED_MICROBATCHES``: the
row's layout reproduces them, global batch = dp × micro-batch × accumulation = 32 × 1 × 1), ``max_sequence_length``
8192, and the ``train_step_time`` NVIDIA's ``custom_callbacks.py`` logs every 32nd step (``LOG_EVERY_N_STEPS=32``:
each value one step's wall time, the 32nd of its window, so never the step after an evaluation, which come every
256 steps): the row is the median over the ten logs (184-200 values each) of each log's median, the ten within
0.1 % of each other. ``mlperf_common``'s own ``train_step_time``, an average over each 256-step block, is not used.
The logs print their resolved configuration (the experiment YAML, Megatron-Core's ``TransformerConfig`` and the
``DistributedDataParallelConfig``): tp 1, pp 1, no virtual stages, ``context_parallel_size`` 2, micro-batch 1,
``use_tp_pp_dp_mapping`` true (the log's groups: context-parallel [0, 1], data-parallel [0, 2, 4, ...]),
``sequence_parallel`` false, ``fp8='hybrid'``, ``fp8_recipe='tensorwise'``, ``fp8_param=True``,
``recompute_granularity=None``, ``cuda_graph_scope='full_iteration'``, ``grad_reduce_in_fp32=False``,
``overlap_grad_reduce`` and ``overlap_param_gather`` true, ``use_distributed_optimizer`` true,
``fp8_param_gather`` true. They print no ``max_memory_usage``: no memory column.

Stated in the code: ``config_XD670_8x8x1xtp1pp1cp2_8b.sh`` (NVIDIA's ``config_DGXB200_8x8x1xtp1pp1cp2_8b.sh``, as
the University of Florida and Verda ship it, line for line but for sourcing ``config_common_fp8attn.sh``, the
evaluation interval, the learning-rate decay and the wall time; ``config_common.sh``, ``conf/custom.yaml``,
``pretrain.py`` and ``custom_callbacks.py`` are the University's files byte for byte): tp 1
(``SEQ_PARALLEL=False``, ``TP_COMM_OVERLAP=False``), pp 1 (``INTERLEAVED_PIPELINE=null``), ``CONTEXT_PARALLEL=2``,
``MICRO_BATCH_SIZE=1``, ``MINIBS=1`` (one sequence per data-parallel pair of GPUs). It sources
``config_common.sh``: ``FP8=True`` with ``FP8_RECIPE="tensorwise"`` (per-tensor current scaling:
``--fp8-recipe tensorwise``), ``FP8_PARAM_GATHER=True`` (FP8 parameters; Transformer Engine at the Dockerfile's
commit ``c47f329``, a 2.x since it has current scaling, keeps each FP8 weight's data and its transpose on
Hopper: ``Fp8Params.BOTH``, as ``mlperf_v51_llama8b``), ``USE_DIST_OPTIMIZER``, ``OVERLAP_GRAD_REDUCE``,
``OVERLAP_PARAM_GATHER``, ``TP_PP_DP_MAPPING=True`` (``--tp-pp-dp-mapping``: the cp pair on adjacent GPUs of one
node); ``config_common_8b.sh``: ``FP8_HYBRID=True`` (E4M3 forward, E5M2 gradients), ``USE_TE_OPS=True``
(Transformer Engine's op fuser), ``CE_FUSION_IMPL=te``; ``config_common_cg.sh``: ``FULL_CUDA_GRAPH=1``,
``MCORE_CUDA_GRAPH=1`` (the whole iteration in one CUDA graph); ``config_common_fp8attn.sh``: ``FP8_DPA=True``.
``pretrain.py``: ``grad_reduce_in_fp32=False`` (``fp16_grads``); ``conf/custom.yaml``: activation checkpointing
``null`` (none), the fused cross-entropy. The model: NeMo's ``Llama31Config8B`` (the ``llama3.1-8b`` preset).

The logs against the code, one setting: FP8 attention. The script sources ``FP8_DPA=True`` and the published
``conf/custom.yaml`` maps it to ``fp8_dot_product_attention``, but the resolved configuration every log prints has
no such key (nor the published YAML's ``fp4`` and ``fused_single_qkv_rope``: the container, an image dated
20250908 by its name in the log's ``DLPAL`` line, carried an earlier ``custom.yaml``), and the
``TransformerConfig`` all ten logs print has
``fp8_dot_product_attention=False``: attention ran in BF16, as pipesim runs it. Taken from the logs.

The system: HPE's description gives 8 H200-SXM5-141GB a node ("141 GB"; the logs' ``SYSJSON`` 143,771 MiB),
4th-generation NVLink at 900 GB/s, 8× ConnectX-7 InfiniBand NDR 400 Gb/s (MCX75310AAS-NEAT) a node beside 8× HPE
Slingshot 200 Gb Ethernet NICs, air cooling, and no power limit: the ``h200`` preset. NCCL 2.28.3 built into the
image (the description's ``2.27.7-fix-v2.28.3-1``).

Not modelled, stated: the whole-iteration CUDA graph, Transformer Engine's op fuser, the parameter all-gather in
FP8, the gradient buckets (128 MiB, the logged ``bucket_size=134217728``), ``NCCL_NVLS_ENABLE=0``,
``NCCL_MIN_CTAS=16``/``NCCL_MAX_CTAS=32`` (SMs a collective takes). Uncertain: the environment the container ran
with. Its YAML was not the published one (above); the logs print no environment, so ``NCCL_MAX_CTAS=32`` below is
the published ``config_common.sh``'s word alone (were it absent there, the cp group ran on one CTA; pipesim
predicts the same step either way, the cp ring hidden behind attention at this layout).

Not applied, though stated: the configs' ``conf/nccl/custom_communicator_cta.yaml`` (``NCCL_CFG_PATH``) gives the cp
group's NCCL communicator ``max_ctas: 1``, but ``config_common.sh`` also exports ``NCCL_MIN_CTAS=16`` and
``NCCL_MAX_CTAS=32``, and NCCL applies those over every communicator's own config (``src/init.cc``,
``envConfigOverride``, v2.28.3-1), so the row leaves ``cp_comm_ctas`` unset, as ``mlperf_v51_b200`` does.

The same layout on DGX B200 is ``mlperf_v51_b200``'s 64-GPU 8B rows (the University of Florida's, Oracle's and
Verda's, 0.189-0.191 s against HPE's 0.353 on H200).

Left out: Nebius's v5.1 H200 entries (``Nebius/results/nebius_h200_n{64,128}/llama31_405b``, 512 and 1,024 GPUs)
are its v5.0 runs republished: the six logs are the same Git blobs as v5.0's
``nebius_soperator_8xH200_n{64,128}_ngc25.01_nemo`` logs (their ``time_ms`` from 30 April 2025), the 31 files of each
implementation directory are byte for byte v5.0's (NeMo 25.01, ``FP8=True`` delayed scaling, ``FP8_PARAMS``, tp 4 ×
pp 8 × cp 2 × v 8, no ``NCCL_MAX_CTAS``), and the system descriptions differ in the name and a note ("H200 TGP
700W") alone. They are ``mlperf_v50_llama405b``'s two Nebius rows (50.01 and 25.36 s, the medians these logs give
again); a second copy would count one measurement twice.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to. One row on one system: too
few for a ranking group (as ``mlperf_v51_llama8b``).

The loss, stated: ``conf/custom.yaml``'s ``cross_entropy_loss_fusion`` (default True) with ``CE_FUSION_IMPL=te``
(``config_common_8b.sh``): Transformer Engine's cross-entropy, ``--loss te``.
"""

from pipesim.analytic.layout import Fp8Params, Fp8Recipe, LossKernel, Precision, RankOrder, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "MLPerf Training v5.1 Llama 3.1 8B on HPE Cray XD670 H200 (NeMo FP8, PyTorch 25.08 container)"

# (system, results directory, model, GPUs, tp, pp, cp, v, micro-batch, global batch, accumulation steps as logged,
#  median train_step_time s)
LOGGED = [
    ("hpe", "HPE/results/HPE-Cray-XD670-H200-SXM5-141GB_n8_25.09", "llama3.1-8b", 64, 1, 1, 2, 1, 1, 32, 1, 0.3530),
]
LOGGED_MICROBATCHES = [row[10] for row in LOGGED]

ROWS = [
    PublishedRun(SOURCE, model, "h200", gpus, batch, tp=tp, pp=pp, cp=cp, chunks=v, micro_batch=b, seq_len=8192,
                 schedule="interleaved" if v > 1 else "1f1b", sequence_parallel=tp > 1, zero=ZeroStage.OPTIMIZER,
                 precision=Precision.FP8, fp8_params=Fp8Params.BOTH, fp8_recipe=Fp8Recipe.TENSORWISE,
                 overlap_p2p=pp > 1, async_tp=False, fp16_grads=True, overlap_grad_reduce=True,
                 overlap_param_gather=True, rank_order=RankOrder.TP_CP_PP_DP, loss=LossKernel.TE, step_s=seconds,
                 note=f"{path} {model}")
    for _, path, model, gpus, tp, pp, cp, v, b, batch, _, seconds in LOGGED
]
