"""Team PyTorch at IBM and at Meta, two PyTorch blog posts on Llama 2 7B, 13B, 34B and 70B pre-trained with IBM's
fms-fsdp: "Maximizing training throughput using PyTorch FSDP" (13 March 2024; pytorch/pytorch.github.io
``_posts/2024-03-13-maximizing-training.md``), Table 1, tokens/s per GPU on two clusters; and "Maximizing Training
Throughput Using PyTorch FSDP and Torch.compile" (21 May 2024, ``_posts/2024-05-21-maximizing-training-throughput.md``),
Tables 1 and 2, MFU with and without ``torch.compile`` on the same A100 cluster and on a third, H100 one.

Stated: "an A100 cluster with 128 GPUs and 400Gbps inter-node interconnect, and an H100 cluster with 96 GPUs and
800Gbps inter-node interconnect" (A100 80GB, H100 80GB); batch size 2 per GPU for every model ("intentionally kept
at 2 per GPU ... of 4k sequence length"); activation checkpointing per model: none for 7B, "Selective" for 13B,
full for 34B and 70B; SDPA FlashAttention-2; mixed precision BF16; AdamW; PyTorch nightlies after 2.2 (FSDP, not
``torch.compile``: the blog lists compile among the levers not yet used); throughput A100 3700, 1800, 700, 370 and
H100 7500, 3800, 1550, 800. The 7B run is the one trained to 2T tokens ("almost full overlap in computation and
communication"); on H100 "a 10% gap due to network 'peeking' out" and MFU "relatively low".

The second post, stated: "128 A100 GPUs with 400 Gbps inter-node connectivity" and "464 H100 GPUs with 3.2 Tbps
inter-node connectivity"; batch size 2 for every model; the selective activation checkpointing of the first post "in
addition to compile"; MFU no-compile and compile, A100 0.57, 0.51, 0.47, 0.50 and 0.68, 0.60, 0.54, 0.55, H100 0.37,
0.35, 0.32, 0.32 and 0.45, 0.43, 0.38, 0.38; PyTorch 2.3's FSDP with graph breaks at the FSDP units. The A100
no-compile MFUs are the first post's, the same runs: only the compiled ones are rows here. The H100 no-compile MFUs
equal the first post's on 96 GPUs at a quarter of the network (0.37 and 0.35 for 7B and 13B; 0.32 against 0.32 and
0.34 for 34B and 70B): the same model, code and batch on four times the bandwidth a node ran no faster.

Inferred, each stated here:

- *The network*: 400 and 800 Gb/s as each node's total (a GPU's NIC is 200 Gb/s at most on A100 systems and
  400 on H100 ones, so neither can be per GPU): ``--inter-node-gbps`` 50 and 100 (each GPU's share of eight).
- *Sharding*: fms-fsdp's README table of the same months (``fmsfsdp2024``) runs 7B and 13B as HSDP (FSDP's
  HYBRID_SHARD: sharded within a node, replicated across nodes) and 34B and 70B as FSDP (FULL_SHARD): the same
  here (``--zero 3``, ``--shard-group 8`` for HSDP). The blog does not say which each row used.
- *"Selective"*: fms-fsdp's ``selective_checkpointing`` fraction p (``fms_fsdp/policies/ac_handler.py``: every
  1/p-th block wrapped), read from the table's own HFU/MFU ratio: 0.59/0.51 on A100 and 0.40/0.35 on H100, 1.14–1.18
  within the two-digit rounding, where full checkpointing gives 4/3 (the 34B and 70B rows: 1.34–1.38) and p = 1/2
  gives 1.17 (p = 1/3 and 2/3 fall outside both ranges): 20 of the 13B's 40 layers (``--recompute full
  --recompute-layers 20``).
- *Gradients reduced in BF16*: fms-fsdp's mixed-precision policy (``bfSixteen``: ``param_dtype`` and
  ``reduce_dtype`` BF16; ``--param-bytes 16``).
- *Eager element-wise work*: fms's Llama runs RMSNorm, RoPE and SwiGLU as separate PyTorch ops, uncompiled
  (``--elementwise eager``), as ``fmsfsdp2024``.
- *One microbatch a step* (the per-GPU batch is the step's local batch), the model's 4096-token context.
- *Llama 2 34B's shape*: fms-fsdp's ``llama2_34b`` (the ``llama2-34b`` preset).
- *The second post's MFU as tokens/s*: by the first post's own pairs of tokens/s and MFU for the same model, which fix
  the FLOPs a token the team counts (A100 and H100 agreeing within their two-digit rounding: 48.4, 89.8, 206.9 and
  421.0 GFLOP for 7B, 13B, 34B and 70B, a few percent above 6·N plus the attention's 12·L·h·s): tokens/s = MFU ×
  peak / that; ±1 % from the MFU's rounding.
- *Compiled*: the element-wise work fused into the compiled blocks (``--elementwise fused``), the rest as above; the
  checkpointing the first post's for each model.
- *The H100 cluster of the second post*: 3.2 Tb/s a node, 400 Gb/s a GPU, the ``h100-sxm`` preset's network.

Uncertain: whether the per-node reading of the network is right; which sharding each row used; the nightly's FSDP
(its rate limiter, prefetch) and the dataloader; the H100 nodes' NVLink (taken as the preset's). The A100 rows ran on
the cluster of ``fmsfsdp2024``'s README rows, the H100 rows with the same software on another: validation leaves
this source out together with that one (:data:`pipesim.validation.sources.PLATFORM_OF`).

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to when added. At the presets
then (a quarter of ZeRO-3's per-layer collectives beside compute, the rest of each collective exposed) every A100
row was too slow, +20…+47 %, and pipesim put the 96-GPU H100 steps 11–20 % longer than the 464-GPU ones that ran at
the same MFU. The two H100 clusters are why pipesim now serialises a share of the collectives' kernel work, the
collective's time at the intra-node link's bandwidth, and runs what the network takes beyond it beside the layers
(pipesim.analytic.comm.prefetched_overlap; ``python experiments/network_pairs.py``): the A100 rows are then
+5…+22 %, the H100 ones −8…+5 %.
"""

from pipesim.analytic.layout import ElementwiseKernels, Recompute, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "PyTorch blog 2024 (IBM and Meta), Maximizing training throughput using PyTorch FSDP, Table 1"
# its own prefix before the first comma: the within-model ranking compares one system's layouts
# (pipesim.validation.ranking.group_key), and these ran on other clusters or software than the first post's
COMPILE_SOURCE = ("PyTorch blog 2024 (IBM and Meta) on torch.compile, Maximizing Training Throughput Using PyTorch "
                  "FSDP and Torch.compile, Tables 1 and 2")

_BATCH, _SEQ = 2, 4096
_CLUSTERS = {"a100-80gb": (128, 50), "h100-sxm": (96, 100)}  # GPUs, each GPU's share of its node's Gb/s
_COMPILE_CLUSTERS = {"a100-80gb": (128, 50), "h100-sxm": (464, None)}  # the H100 one at the preset's 400 Gb/s a GPU
_SELECTIVE_LAYERS = {"llama2-13b": 20}  # fms-fsdp's p = 1/2 of the 13B's 40 blocks (see above)
_HSDP = {"llama2-7b", "llama2-13b"}  # sharded within a node, as fms-fsdp's README runs them
_MODELS = (("llama2-7b", Recompute.NONE), ("llama2-13b", Recompute.FULL), ("llama2-34b", Recompute.FULL),
           ("llama2-70b", Recompute.FULL))
# GFLOP a token as the team counts them: the first post's MFU × peak / tokens/s, A100's and H100's averaged
_TEAM_GFLOP_PER_TOKEN = {"llama2-7b": 48.4, "llama2-13b": 89.8, "llama2-34b": 206.9, "llama2-70b": 421.0}
_PEAK_TFLOPS = {"a100-80gb": 312.0, "h100-sxm": 989.0}  # the BF16 peaks the posts' MFU divides by


def _row(source: str, chip: str, gpus: int, gbps: float | None, model: str, recompute: Recompute, tokens: float,
         compiled: bool = False) -> PublishedRun:
    return PublishedRun(source, model, chip, gpus, gpus * _BATCH, micro_batch=_BATCH, seq_len=_SEQ,
                        recompute=recompute, recompute_layers=_SELECTIVE_LAYERS.get(model),
                        zero=ZeroStage.PARAMETERS, shard_group=8 if model in _HSDP else None,
                        elementwise=ElementwiseKernels.FUSED if compiled else ElementwiseKernels.EAGER,
                        fp16_grads=True, inter_node_gbps=gbps, tokens_per_gpu=tokens)


def _tokens(chip: str, model: str, mfu: float) -> float:
    return mfu * _PEAK_TFLOPS[chip] * 1e3 / _TEAM_GFLOP_PER_TOKEN[model]


ROWS = [
    _row(SOURCE, chip, *_CLUSTERS[chip], model, recompute, tokens)
    for chip, throughputs in (("a100-80gb", (3700, 1800, 700, 370)), ("h100-sxm", (7500, 3800, 1550, 800)))
    for (model, recompute), tokens in zip(_MODELS, throughputs, strict=True)
]
ROWS += [
    _row(COMPILE_SOURCE, chip, *_COMPILE_CLUSTERS[chip], model, recompute, _tokens(chip, model, mfu), compiled)
    for chip, compiled, mfus in (("a100-80gb", True, (0.68, 0.60, 0.54, 0.55)),
                                 ("h100-sxm", False, (0.37, 0.35, 0.32, 0.32)),
                                 ("h100-sxm", True, (0.45, 0.43, 0.38, 0.38)))
    for (model, recompute), mfu in zip(_MODELS, mfus, strict=True)
]
