"""MLCommons MLPerf Training v5.1 (November 2025), closed division: Llama 3.1 8B and Llama 3.1 405B pre-training in
NVFP4 (Transformer Engine's ``NVFP4BlockScaling``) on DGX/HGX B200 and GB200 NVL72, NeMo 25.09 with Transformer
Engine ``release_v2.8``. Repository ``mlcommons/training_results_v5.1``: the measurement is each run's log
(``<submitter>/results/<system>/llama31_{8b,405b}/result_*.txt``), the settings the submissions' code (NVIDIA's
reference: ``NVIDIA/benchmarks/llama31_8b/implementations/nemo`` and ``.../llama31_405b/implementations/
<system>_ngc25.09_nemo``, whose ``pretrain.py``, ``conf/custom.yaml`` and ``run_and_time.sh`` every submitter here
ships unchanged), the systems their descriptions (``systems/*.json``: B200-SXM-180GB, the ``b200`` preset; GB200,
the ``gb200`` preset).

Stated in the logs: ``global_batch_size``, ``gradient_accumulation_steps`` (``LOGGED_MICROBATCHES``: each row's
layout reproduces them), ``max_sequence_length`` 8192 and the ``train_step_time`` the reference's
``custom_callbacks.py`` logs (every 32nd step for 8B, every step for 405B): the row is the median over a system's
logs of each log's median (10 logs a system for 8B, within 1 % of each other but Tyche's 5 %; 3 for 405B, within
0.7 %). Where a log prints its resolved configuration (Nebius, Oracle, Supermicro: ``fp4: true``, ``fp4_recipe:
nvfp4``, ``fp8: false``) it agrees with the scripts below; Dell's and Lenovo's one-node logs print none, and their
configs source ``config_common_fp4.sh`` (their steps are the others' within 1.5 %).

Stated in the code: ``config_common_fp4.sh``: ``FP4=True``, ``FP8=False``, ``FP4_RECIPE=nvfp4``,
``FP8_PARAM_GATHER=False`` and ``TP_COMM_OVERLAP=False`` ("TP overlap not supported yet": ``async_tp`` off for the
405B rows' tp 4, whose FP8 configs set it); ``config_common.sh``: the distributed optimizer, ``OVERLAP_GRAD_REDUCE``,
``OVERLAP_PARAM_GATHER``, ``TP_PP_DP_MAPPING=True``; ``pretrain.py``: ``grad_reduce_in_fp32=False``
(``fp16_grads``); only Transformer Engine's four linears of each layer run in NVFP4 (the logs' module tree: the
output layer is Megatron-Core's own ``ColumnParallelLinear`` and the embedding its ``VocabParallelEmbedding``,
both BF16), and no layer is kept in BF16 (``first_last_layers_bf16: false``, ``num_layers_at_start_in_bf16: 0``).
8B: one node (8 GPUs) at tp 1, micro-batch 2, two sequences a GPU (``config_*_1x8x2xtp1pp1cp1_8b_fp4.sh``), and
Nebius at 16 GPUs (micro-batch 1, two microbatches) and 32 (one); 405B: tp 4 × pp 8 × cp 2 × v 8, micro-batch 1,
``ASYM_PP_EMBED``/``ASYM_PP_LOSS`` (one layer on the first and the last stage: ``first_last=1``), on 512, 2,560 and
5,120 GB200.

Stated, not modelled: the 8B rows run the attention in FP8 (``config_common_fp8attn.sh``: ``FP8_DPA=True``, current
scaling), which pipesim runs in BF16, so it errs slow there; the 405B rows' attention is BF16. The 8B configs turn
stochastic rounding and 2D (16×16) weight scaling on (``config_common_8b.sh``, sourced after the FP4 file), the
405B configs off; the random Hadamard transform is off everywhere. CUDA graphs per layer (8B one node) or of the
whole iteration (405B, Nebius 16/32). Uncertain: Nebius's 16- and 32-GPU runs log settings (CUDA-graph scope,
bucket size) that their submitted scripts do not give, so the exact script is not in the repository.

Not rows here: the B300 and GB300 runs (Lenovo, Nebius, NVIDIA's Theia), ``mlperf_v51_blackwell_ultra``'s since
those presets were written, and the FP8 runs of the same round, which are ``mlperf_v51_b200``'s. The same layout
in FP8 on a DGX B200 (the University of Florida's one-node run, 0.544 s) against these 0.444–0.456 s: NVFP4 made
the step 1.2× faster.

Out-of-sample: gathered for issue #24 after NVFP4 was modelled from a kernel measurement alone (the B200's FP4
share: ``chip_presets``), never fitted to; the Blackwell sustained clock, fitted on the Blackwell rows, reads these
too, and validation by source left out refits it without them.

Not applied, though stated: the configs' ``conf/nccl/custom_communicator_cta.yaml`` gives the cp group's NCCL
communicator ``max_ctas: 1`` (v5.0's rows take it: ``--cp-comm-ctas 1``), but ``config_common.sh`` also exports
``NCCL_MIN_CTAS=16`` and ``NCCL_MAX_CTAS=32``, and NCCL applies those over every communicator's own config
(``src/init.cc``, ``envConfigOverride``, NCCL 2.27 and 2.28 alike), so the cp group's sends ran on 16-32 channels.

The loss, stated: ``conf/custom.yaml``'s ``cross_entropy_loss_fusion`` (default True); the 8B configs source
``config_common_8b.sh``, ``CE_FUSION_IMPL=te`` (``--loss te``), the 405B configs keep the yaml's ``native``
(``--loss megatron-fused``).
"""

from pipesim.analytic.layout import Precision, RankOrder, ZeroStage
from pipesim.validation.runs import PublishedRun
from pipesim.validation.sources.mlperf_v51_b200 import NEMO_LLAMA31_LOSS

SOURCE = "MLPerf Training v5.1 Llama 3.1 8B and 405B in NVFP4 on B200 and GB200 (NeMo 25.09)"
# each submitter's system is its own ranking group; one source when left out (one code base and software build)
SYSTEMS = {
    "nebius": "MLPerf Training v5.1 NVFP4 on Nebius B200",
    "oracle": "MLPerf Training v5.1 NVFP4 on Oracle OCI BM.GPU.B200.8",
    "dell": "MLPerf Training v5.1 NVFP4 on Dell PowerEdge XE9680L B200",
    "lenovo-680": "MLPerf Training v5.1 NVFP4 on Lenovo SR680a V3 B200",
    "lenovo-780": "MLPerf Training v5.1 NVFP4 on Lenovo SR780a V3 B200",
    "supermicro-4126": "MLPerf Training v5.1 NVFP4 on Supermicro AS-4126GS-NBR-LCC B200",
    "supermicro-422": "MLPerf Training v5.1 NVFP4 on Supermicro SYS-422GS-NBRT-LCC B200",
    "tyche": "MLPerf Training v5.1 NVFP4 on NVIDIA Tyche GB200 NVL72",
}

# (system, results directory, chip, model, GPUs, tp, pp, cp, v, micro-batch, global batch, accumulation steps as
#  logged, median step s)
LOGGED = [
    ("nebius", "Nebius/results/nebius_b200_n1", "b200", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1, 0.4557),
    ("nebius", "Nebius/results/nebius_b200_n2", "b200", "llama3.1-8b", 16, 1, 1, 1, 1, 1, 32, 2, 0.4956),
    ("nebius", "Nebius/results/nebius_b200_n4", "b200", "llama3.1-8b", 32, 1, 1, 1, 1, 1, 32, 1, 0.2678),
    ("oracle", "Oracle/results/1xBM.GPU.B200.8", "b200", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1, 0.4531),
    ("dell", "Dell/results/1xXE9680Lx8B200-SXM-180GB", "b200", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1, 0.4504),
    ("lenovo-680", "Lenovo/results/SR680aV3-8xB200_SXM_180GB", "b200", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1,
     0.4437),
    ("lenovo-780", "Lenovo/results/SR780aV3-8xB200_SXM_180GB", "b200", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1,
     0.4511),
    ("supermicro-4126", "Supermicro/results/AS-4126GS-NBR-LCC", "b200", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1,
     0.4495),
    ("supermicro-422", "Supermicro/results/SYS-422GS-NBRT-LCC", "b200", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1,
     0.4507),
    ("tyche", "NVIDIA/results/tyche_ngpu8_ngc25.09_nemo", "gb200", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1, 0.4055),
    ("tyche", "NVIDIA/results/tyche_ngpu512_ngc25.09_nemo", "gb200", "llama3.1-405b", 512, 4, 8, 2, 8, 1, 1152, 144,
     17.26),
    ("tyche", "NVIDIA/results/hsg_ngpu2560_ngc25.09_nemo", "gb200", "llama3.1-405b", 2560, 4, 8, 2, 8, 1, 960, 24,
     3.190),
    ("tyche", "NVIDIA/results/hsg_ngpu5120_ngc25.09_nemo", "gb200", "llama3.1-405b", 5120, 4, 8, 2, 8, 1, 1280, 16,
     2.227),
]
LOGGED_MICROBATCHES = [row[11] for row in LOGGED]


ROWS = [
    PublishedRun(SYSTEMS[system], model, chip, gpus, batch, tp=tp, pp=pp, cp=cp, chunks=v, micro_batch=b,
                 seq_len=8192, schedule="interleaved" if v > 1 else "1f1b", sequence_parallel=tp > 1,
                 zero=ZeroStage.OPTIMIZER, precision=Precision.FP4, overlap_p2p=pp > 1, fp16_grads=True,
                 overlap_grad_reduce=True, overlap_param_gather=True, first_last=1 if pp > 1 else None,
                 rank_order=RankOrder.TP_CP_PP_DP, loss=NEMO_LLAMA31_LOSS[model], step_s=seconds,
                 note=f"{path} {model}")
    for system, path, chip, model, gpus, tp, pp, cp, v, b, batch, _, seconds in LOGGED
]
