"""MLCommons MLPerf Training v5.1 (November 2025), closed division: Llama 3.1 8B and 405B pre-training on Blackwell
Ultra, HGX B300 and GB300 NVL72, NeMo 25.09 with Transformer Engine, in FP8 and NVFP4; and the two FP8 8B runs of
NVIDIA's Tyche (GB200 NVL72) at the same layouts, their counterparts on the previous chip. Repository
``mlcommons/training_results_v5.1``: the measurement is each run's log (``<submitter>/results/<system>/llama31_{8b,
405b}/result_*.txt``), the settings the configuration script each submission ran (traced through the scripts it
sources), the systems their descriptions (``systems/*.json``).

Stated in the logs: ``global_batch_size`` and ``gradient_accumulation_steps`` (``LOGGED_MICROBATCHES``: each row's
layout reproduces them, global batch = dp × micro-batch × accumulation), ``max_sequence_length`` 8192 and the
``train_step_time`` NVIDIA's ``custom_callbacks.py`` logs: the row is the median over a system's logs (10 for 8B, 3
for 405B, each within 0.5 % of the others) of each log's median. Dell's, Nebius's and Lambda's logs print their
resolved configuration and agree with the scripts below; Lenovo's and NVIDIA's print none.

Stated in the code, per row (the script; ``config_common.sh`` everywhere: the distributed optimizer,
``OVERLAP_GRAD_REDUCE``, ``OVERLAP_PARAM_GATHER``, ``TP_PP_DP_MAPPING``, ``FP8_RECIPE="tensorwise"`` (per-tensor
current scaling: ``--fp8-recipe tensorwise``); ``pretrain.py``: ``grad_reduce_in_fp32`` False, ``fp16_grads``; FP8
runs ``FP8_PARAM_GATHER`` on, FP4 runs off):

- Dell XE9780 (8 B300): ``config_XE9780x8B300-SXM-270GB_1x8x2xtp1pp1cp1_8b.sh``, tp 1, micro-batch 2, FP8 (the log:
  ``fp8: true``, tensorwise), FP8 attention off, whole-iteration CUDA graph.
- Lenovo SR680a V4 (8 B300): ``config_SR780aV3_SR680aV3_SR680aV4.sh`` (one file for its two B200 systems too),
  the same layout in NVFP4 with FP8 attention (``FP8_DPA``), stochastic rounding and 2D weight scaling. Its logs
  carry a B200 system's platform string; their times differ from Lenovo's B200 runs (0.444/0.451 s): taken as the
  B300 runs with a stale label.
- Nebius (8 B300): ``configs/nebius_b300_n1/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh``, the same layout in NVFP4 (the
  log: ``fp4: true``), FP8 attention on, stochastic rounding, 2D scaling and the Hadamard transform off.
- NVIDIA Theia (GB300 NVL72), 8B: 8 GPUs ``config_GB300_2x4x2xtp1pp1cp1_8b_fp4.sh`` (NVFP4, FP8 attention, per-layer
  CUDA graphs); 72 GPUs ``config_GB300_18x4x1xtp1pp1cp2_8b.sh`` (FP8, cp 2, one sequence per data-parallel pair);
  512 GPUs ``config_GB300_128x4x1xtp2pp1cp4_8b.sh`` (FP8, tp 2 with sequence parallelism and ``TP_COMM_OVERLAP``,
  cp 4). 405B, 512 GPUs: ``config_GB300_128x4x72xtp2pp8cp2_cg_fp4.sh`` (NVFP4: the submission's README names the
  FP4 script; its FP8 sibling logs the same values), tp 2 × pp 8 × cp 2 × v 8, micro-batch 1, ``ASYM_PP_EMBED``
  and ``ASYM_PP_LOSS`` (``first_last=1``), TP overlap off, whole-iteration CUDA graph.
- Lambda (GB300 NVL72, 72 GPUs): ``gb300_0922/config_GB300_18x4x1xtp1pp1cp2_8b.sh``, Theia's 72-GPU layout in FP8
  but E4M3 only (``fp8_hybrid: false``), on a pre-release NeMo 25.09 container (the log; the directory says 25.04).
- NVIDIA Tyche (GB200 NVL72; ``systems/tyche_ngpu72_ngc25.09_nemo.json``: 189,471 MiB, 4× ConnectX-7 400 Gb/s a
  tray, the ``gb200`` preset), 8B in FP8: 72 GPUs ``config_GB200_18x4x1xtp1pp1cp2_8b.sh`` and 512
  ``config_GB200_128x4x1xtp2pp1cp4_8b.sh``, the GB300 scripts' twins line for line (cp 2; tp 2 × cp 4 with TP
  overlap). At 72 GPUs the GB300 step is 0.866 of the GB200's (0.148 against 0.171 s) where pipesim, whose two
  presets have the same FP8 and BF16 peaks, predicts the same step: Blackwell Ultra's doubled softmax-exponent
  rate (its "2x attention") is the difference the datasheets name, and pipesim does not model it.

The systems (``b300`` and ``gb300`` presets): B300-SXM-270GB, 275,040 MiB, 8× ConnectX-8 800 Gb/s (Nebius; Dell's
and Lenovo's descriptions give the memory alone); GB300, 284,208 MiB, 4 GPUs and 4× ConnectX-8 800 Gb/s a tray
(Theia; Lambda's the same). Not modelled, stated: the 8B NVFP4 rows' FP8 attention (pipesim runs it in BF16, so it
errs slow there), CUDA graphs, each configuration's gradient bucket. Uncertain: whether the B300 runs kept the
1,100 W of Nebius's description (the others state none); Lenovo's script, which nothing in its logs confirms.

Out-of-sample: gathered for issue #24 after the ``b300`` and ``gb300`` presets were written from datasheets and the
B200's kernel constants, never fitted to. Their rows inform the Blackwell sustained clock (one constant for every
Blackwell preset) as every Blackwell row does; validation by source left out refits it without them.

Not applied, though stated: the configs' ``conf/nccl/custom_communicator_cta.yaml`` gives the cp group's NCCL
communicator ``max_ctas: 1`` (v5.0's rows take it: ``--cp-comm-ctas 1``), but ``config_common.sh`` also exports
``NCCL_MIN_CTAS=16`` and ``NCCL_MAX_CTAS=32``, and NCCL applies those over every communicator's own config
(``src/init.cc``, ``envConfigOverride``, NCCL 2.27 and 2.28 alike), so the cp group's sends ran on 16-32 channels.

The loss, stated: ``conf/custom.yaml``'s ``cross_entropy_loss_fusion`` (default True); the 8B configs source
``config_common_8b.sh``, ``CE_FUSION_IMPL=te`` (``--loss te``), the 405B config keeps the yaml's ``native``
(``--loss megatron-fused``).
"""

from pipesim.analytic.layout import Fp8Params, Fp8Recipe, Precision, RankOrder, ZeroStage
from pipesim.validation.runs import PublishedRun
from pipesim.validation.sources.mlperf_v51_b200 import NEMO_LLAMA31_LOSS

SOURCE = ("MLPerf Training v5.1 Llama 3.1 8B and 405B on Blackwell Ultra, HGX B300 and GB300 NVL72, and GB200 "
          "counterparts (NeMo 25.09)")
# each submitter's system is its own ranking group; one source when left out (one code base and software build)
SYSTEMS = {
    "dell": "MLPerf Training v5.1 on Dell PowerEdge XE9780 B300",
    "lenovo": "MLPerf Training v5.1 on Lenovo SR680a V4 B300",
    "nebius": "MLPerf Training v5.1 on Nebius B300",
    "theia": "MLPerf Training v5.1 on NVIDIA Theia GB300 NVL72",
    "lambda": "MLPerf Training v5.1 on Lambda GB300 NVL72",
    "tyche": "MLPerf Training v5.1 on NVIDIA Tyche GB200 NVL72 in FP8 at the GB300 runs' layouts",
}

# (system, results directory, chip, model, precision, GPUs, tp, pp, cp, v, micro-batch, global batch,
#  accumulation steps as logged, median step s)
_FP8, _FP4 = Precision.FP8, Precision.FP4
LOGGED = [
    ("dell", "Dell/results/1xXE9780x8B300-SXM-270GB", "b300", "llama3.1-8b", _FP8, 8, 1, 1, 1, 1, 2, 16, 1, 0.5480),
    ("lenovo", "Lenovo/results/SR680aV4-8xB300_SXM", "b300", "llama3.1-8b", _FP4, 8, 1, 1, 1, 1, 2, 16, 1, 0.4059),
    ("nebius", "Nebius/results/nebius_b300_n1", "b300", "llama3.1-8b", _FP4, 8, 1, 1, 1, 1, 2, 16, 1, 0.3942),
    ("theia", "NVIDIA/results/theia_ngpu8_ngc25.09_nemo", "gb300", "llama3.1-8b", _FP4, 8, 1, 1, 1, 1, 2, 16, 1,
     0.3466),
    ("theia", "NVIDIA/results/theia_ngpu72_ngc25.09_nemo", "gb300", "llama3.1-8b", _FP8, 72, 1, 1, 2, 1, 1, 36, 1,
     0.1480),
    ("theia", "NVIDIA/results/theia_ngpu512_ngc25.09_nemo", "gb300", "llama3.1-8b", _FP8, 512, 2, 1, 4, 1, 1, 64, 1,
     0.0854),
    ("theia", "NVIDIA/results/theia_ngpu512_ngc25.09_nemo", "gb300", "llama3.1-405b", _FP4, 512, 2, 8, 2, 8, 1, 1152,
     72, 13.1447),
    ("lambda", "Lambda/results/gb300_n18_ngc25.04_nemo", "gb300", "llama3.1-8b", _FP8, 72, 1, 1, 2, 1, 1, 36, 1,
     0.1612),
    ("tyche", "NVIDIA/results/tyche_ngpu72_ngc25.09_nemo", "gb200", "llama3.1-8b", _FP8, 72, 1, 1, 2, 1, 1, 36, 1,
     0.1709),
    ("tyche", "NVIDIA/results/tyche_ngpu512_ngc25.09_nemo", "gb200", "llama3.1-8b", _FP8, 512, 2, 1, 4, 1, 1, 64, 1,
     0.0889),
]
LOGGED_MICROBATCHES = [row[12] for row in LOGGED]


ROWS = [
    PublishedRun(SYSTEMS[system], model, chip, gpus, batch, tp=tp, pp=pp, cp=cp, chunks=v, micro_batch=b,
                 seq_len=8192, schedule="interleaved" if v > 1 else "1f1b", sequence_parallel=tp > 1,
                 zero=ZeroStage.OPTIMIZER, precision=precision,
                 fp8_params=Fp8Params.BOTH if precision is _FP8 else Fp8Params.OFF,
                 fp8_recipe=Fp8Recipe.TENSORWISE if precision is _FP8 else Fp8Recipe.DELAYED, overlap_p2p=pp > 1,
                 async_tp=tp > 1 and model == "llama3.1-8b", fp16_grads=True, overlap_grad_reduce=True,
                 overlap_param_gather=True, first_last=1 if pp > 1 else None, rank_order=RankOrder.TP_CP_PP_DP,
                 loss=NEMO_LLAMA31_LOSS[model], step_s=seconds, note=f"{path} {model}")
    for system, path, chip, model, precision, gpus, tp, pp, cp, v, b, batch, _, seconds in LOGGED
]
