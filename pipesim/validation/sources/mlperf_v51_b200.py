"""MLCommons MLPerf Training v5.1 (November 2025), closed division: Llama 3.1 405B and Llama 3.1 8B pre-training on
the University of Florida's HiPerGator, DGX B200 nodes (8 B200-SXM-180GB, InfiniBand), NeMo 25.09 with Transformer
Engine in FP8. Repository ``mlcommons/training_results_v5.1``: the measurement is each run's log
(``University-of-Florida/results/hpg.dgxb200x8.n{32,56}/llama31_405b/result_{0,1,2}.txt`` and
``hpg.dgxb200x8.n{1,2,4,8,16,32}/llama31_8b/result_{0..9}.txt``), the settings the submission's code
(``University-of-Florida/benchmarks/llama31_405b/implementations/{hpg.dgxb200x8,b200_nemo}/``: NVIDIA's reference
code and configs), the system its descriptions (``systems/hpg.dgxb200x8.n*.json``: 183,359 MiB a GPU, NVLink 5;
the ``b200`` preset).

Stated in the logs: ``global_batch_size``, ``gradient_accumulation_steps`` (``LOGGED_MICROBATCHES``: each row's
layout reproduces them), ``max_sequence_length`` 8192, and the ``train_step_time`` that the reference's
``custom_callbacks.py`` logs (after every step for 405B; every 32nd step for 8B, ``LOG_EVERY_N_STEPS=32``): the row
is the median over a system's logs of each log's median (the logs agree within 0.3 % for 405B and 1.1 % for 8B;
``mlperf_common``'s own ``train_step_time``, which averages in the steps around evaluations, is not used). The
logs print no ``max_memory_usage``: no memory row.

Stated in the code, 405B: ``hpg.dgxb200x8/config_DGXB200_{32,56}x8x144xtp4pp8cp2_cg.sh``: tensor parallelism 4,
pipeline parallelism 8 with ``INTERLEAVED_PIPELINE=8``, ``CONTEXT_PARALLEL=2``, micro-batch 1, ``ASYM_PP_EMBED``
and ``ASYM_PP_LOSS`` (one layer on the first and the last stage: ``first_last=1``), and no ``TP_COMM_OVERLAP``,
whose default in ``conf/custom.yaml`` (``ub_tp_comm_overlap``) is False: unlike NVIDIA's own DGX B200 config, every
TP collective waits (``async_tp`` off). 8B: ``b200_nemo/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh`` (one node; the
two-node run the same with ``DGXNNODES=2``, as its logged batch says: tp 1, cp 1, micro-batch 2) and
``config_DGXB200_8x8x1xtp1pp1cp2_8b.sh`` (4–32 nodes: tp 1, ``CONTEXT_PARALLEL=2``, micro-batch 1, one
sequence per data-parallel pair). Both: ``config_common.sh``: ``FP8=True`` with ``FP8_RECIPE="tensorwise"``
(per-tensor current scaling), ``FP8_PARAM_GATHER=True`` (FP8 parameters; Blackwell's keep no transpose),
``USE_DIST_OPTIMIZER``, ``OVERLAP_GRAD_REDUCE``, ``OVERLAP_PARAM_GATHER``, ``TP_PP_DP_MAPPING=True`` (Megatron-Core's
``use_tp_pp_dp_mapping``: ``--tp-pp-dp-mapping``), ``pretrain.py``: ``grad_reduce_in_fp32=False``
(``fp16_grads``); ``conf/custom.yaml``: sequence parallelism with tp > 1, overlapped P2P, no recomputation, the
fused cross-entropy. Models: NeMo's ``Llama31Config405B`` and ``Llama31Config8B`` (the presets).

Other systems, the same code: three other submitters ran the University's 8B configs (NVIDIA's reference, the
same ``config_common.sh`` settings: FP8 tensorwise, FP8 parameter gather, the distributed optimizer overlapped)
on their own DGX B200-class clusters: Oracle (``Oracle/results/8xBM.GPU.B200.8``, 64 GPUs at cp 2) and Verda
(``Verda/results/b200_8x8_ngc25.09``, 64 GPUs at cp 2), 0.190 and 0.191 s a step against the University's 0.189,
and Dell's two-node runs on two host platforms (``Dell/results/2xXE9680Lx8B200-SXM-180GB`` and
``2xXE9685Lx8B200-SXM-180GB``, 16 GPUs at cp 1), 0.581 and 0.575 s against its 0.575: rows of their own (their
own systems: their own ranking groups), one source with the University's when one is left out (the same code and
software build, as ``mlperf_v31_gpt3`` takes Azure's run with Eos's), so the cp 2 miss below is not one
cluster's. The one-node 8B runs of Dell, Lenovo, Nebius and Oracle (0.44–0.46 s, 1.2×
faster than the University's 0.544) are not rows here: their code ships the NVFP4 variant
(``config_DGXB200_1x8x2xtp1pp1cp1_8b_fp4.sh``; Nebius names it in its results), and they are
``mlperf_v51_nvfp4``'s rows; the University's has no FP4 config for DGX B200.

Modelled since it was stated here: per-tensor current scaling's amax pass before each cast
(``fp8_recipe=TENSORWISE``, ``--fp8-recipe tensorwise``: +1 to +2 % on these rows). Not modelled, stated:
whole-iteration CUDA graphs (``FULL_CUDA_GRAPH=1``), ``NCCL_MIN_CTAS=16``/``NCCL_MAX_CTAS=32`` (SMs a collective
takes), the deferred embedding weight gradient. Uncertain: the fabric (the descriptions say InfiniBand, not its
rate: the preset's 400 Gb/s a GPU).

Out-of-sample: gathered for issue #24 after every constant but the Blackwell sustained clock was fixed (fitted on
the Blackwell sources, this one among them; validation by source left out refits it without this one). One
source: one software build, two models, the University's system and, for 8B, three other submitters' (left out
together).
Uncertain for the others: their fabrics (Oracle's description says RoCE v2, Verda's "100GbE InfiniBand", Dell's
none; all taken as the preset's 400 Gb/s a GPU, which Verda's, if its rate is per node, would far exceed).

Not applied, though stated: the configs' ``conf/nccl/custom_communicator_cta.yaml`` gives the cp group's NCCL
communicator ``max_ctas: 1`` (v5.0's rows take it: ``--cp-comm-ctas 1``), but ``config_common.sh`` also exports
``NCCL_MIN_CTAS=16`` and ``NCCL_MAX_CTAS=32``, and NCCL applies those over every communicator's own config
(``src/init.cc``, ``envConfigOverride``, NCCL 2.27 and 2.28 alike), so the cp group's sends ran on 16-32 channels.

The loss, stated: ``conf/custom.yaml``'s ``cross_entropy_loss_fusion`` (default True); the 8B configs source
``config_common_8b.sh``, ``CE_FUSION_IMPL=te`` (Transformer Engine's, ``--loss te``; Oracle's, Verda's and Dell's
logs print ``cross_entropy_fusion_impl: te``), the 405B configs keep the yaml's ``native`` (``--loss
megatron-fused``).
"""

from pipesim.analytic.layout import Fp8Params, Fp8Recipe, LossKernel, Precision, RankOrder, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "MLPerf Training v5.1 Llama 3.1 405B and 8B on DGX B200 (University of Florida HiPerGator; NeMo 25.09 FP8)"
# the same code on other submitters' systems: each its own ranking group, the same source when one is left out
OTHERS = {"oracle": "MLPerf Training v5.1 Llama 3.1 8B on Oracle OCI BM.GPU.B200.8 (NeMo 25.09 FP8)",
          "verda": "MLPerf Training v5.1 Llama 3.1 8B on Verda B200 (NeMo 25.09 FP8)",
          "dell-9680": "MLPerf Training v5.1 Llama 3.1 8B on Dell PowerEdge XE9680L B200 (NeMo 25.09 FP8)",
          "dell-9685": "MLPerf Training v5.1 Llama 3.1 8B on Dell PowerEdge XE9685L B200 (NeMo 25.09 FP8)"}

# (system, model, GPUs, tp, pp, cp, v, micro-batch, global batch, accumulation steps as logged, median step s)
LOGGED = [
    ("n32", "llama3.1-405b", 256, 4, 8, 2, 8, 1, 576, 144, 27.646),
    ("n56", "llama3.1-405b", 448, 4, 8, 2, 8, 1, 1008, 144, 27.978),
    ("n1", "llama3.1-8b", 8, 1, 1, 1, 1, 2, 16, 1, 0.5439),
    ("n2", "llama3.1-8b", 16, 1, 1, 1, 1, 2, 32, 1, 0.5748),
    ("n4", "llama3.1-8b", 32, 1, 1, 2, 1, 1, 16, 1, 0.1883),
    ("n8", "llama3.1-8b", 64, 1, 1, 2, 1, 1, 32, 1, 0.1892),
    ("n16", "llama3.1-8b", 128, 1, 1, 2, 1, 1, 64, 1, 0.1927),
    ("n32", "llama3.1-8b", 256, 1, 1, 2, 1, 1, 128, 1, 0.2209),
    ("oracle 8xBM.GPU.B200.8", "llama3.1-8b", 64, 1, 1, 2, 1, 1, 32, 1, 0.1900),
    ("verda b200_8x8_ngc25.09", "llama3.1-8b", 64, 1, 1, 2, 1, 1, 32, 1, 0.1907),
    ("dell-9680 2xXE9680Lx8B200-SXM-180GB", "llama3.1-8b", 16, 1, 1, 1, 1, 2, 32, 1, 0.5813),
    ("dell-9685 2xXE9685Lx8B200-SXM-180GB", "llama3.1-8b", 16, 1, 1, 1, 1, 2, 32, 1, 0.5749),
]
LOGGED_MICROBATCHES = [row[9] for row in LOGGED]

# v5.1's NeMo Llama 3.1 code, every submitter's: the fused cross-entropy (conf/custom.yaml), Transformer Engine's
# for 8B (config_common_8b.sh: CE_FUSION_IMPL=te, as Oracle's, Verda's and Dell's logs print), Megatron's native
# for 405B (the yaml's default)
NEMO_LLAMA31_LOSS = {"llama3.1-8b": LossKernel.TE, "llama3.1-405b": LossKernel.MEGATRON_FUSED}

ROWS = [
    PublishedRun(OTHERS.get(system.split(" ")[0], SOURCE), model, "b200", gpus, batch, tp=tp, pp=pp, cp=cp,
                 chunks=v, micro_batch=b, seq_len=8192,
                 schedule="interleaved" if v > 1 else "1f1b", sequence_parallel=tp > 1, zero=ZeroStage.OPTIMIZER,
                 precision=Precision.FP8, fp8_params=Fp8Params.BOTH, fp8_recipe=Fp8Recipe.TENSORWISE,
                 overlap_p2p=pp > 1, fp16_grads=True,
                 overlap_grad_reduce=True, overlap_param_gather=True, first_last=1 if pp > 1 else None,
                 rank_order=RankOrder.TP_CP_PP_DP, loss=NEMO_LLAMA31_LOSS[model], step_s=seconds,
                 note=system if " " in system else f"hpg.dgxb200x8.{system} {model}")
    for system, model, gpus, tp, pp, cp, v, b, batch, _, seconds in LOGGED
]
