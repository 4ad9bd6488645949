"""Korthikanti et al. 2023, "Reducing Activation Recomputation in Large Transformer Models": Table 3
(configurations) and Table 5 (seconds per iteration) on A100 80 GB, full recomputation against selective
recomputation with sequence parallelism ("present work").

Stated: model shapes, tp 8, pp, GPUs, global batch, micro-batch 1, sequence 2048. Inferred: unfused
attention (the paper's activation accounting materialises the scores), blocking pipeline sends, 1F1B, and the
column-parallel linears' backward collective beside their weight-gradient GEMM (the default
``overlap_tp_dgrad``: Megatron-LM of 2022 issues it asynchronously, an all-reduce without sequence parallelism,
a reduce-scatter with it, in ``LinearWithGradAccumulationAndAsyncCommunication``), and the scatter/gather of
pipeline boundary tensors without sequence parallelism (``--scatter-gather-tensors-in-pipeline``, on by default in
Megatron-LM's ``p2p_communication.py`` of 2022: ``--p2p-tensor split``).
"""

from pipesim.analytic.layout import AttentionKernel, BoundaryTensor, Recompute
from pipesim.validation.runs import PublishedRun

SOURCE = "Korthikanti et al. 2023, Table 5"

ROWS = []
for _name, _pp, _gpus, _batch, _t_full, _t_sel in [
    ("gpt-22b", 1, 8, 4, 1.42, 1.10), ("gpt3-175b", 8, 64, 64, 18.13, 13.75),
    ("gpt-530b", 35, 280, 280, 49.05, 37.83), ("gpt-1t", 64, 512, 512, 94.42, 71.49),
]:
    ROWS.append(PublishedRun(SOURCE, _name, "a100-80gb", _gpus, _batch, tp=8, pp=_pp, recompute=Recompute.FULL,
                             attention=AttentionKernel.UNFUSED, p2p_tensor=BoundaryTensor.SPLIT, step_s=_t_full))
    ROWS.append(PublishedRun(SOURCE, _name, "a100-80gb", _gpus, _batch, tp=8, pp=_pp,
                             recompute=Recompute.SELECTIVE, sequence_parallel=True,
                             attention=AttentionKernel.UNFUSED, step_s=_t_sel))
