"""AllenAI OLMo-core, the README's throughput table of its official training scripts (allenai/OLMo-core, README.md,
September 2024 to March 2025): tokens per second per device ("TPS") of OLMo 1B, 7B and 13B and a Llama 3 8B shape,
BF16 and FP8, context 4096, "measured on a cluster with NVIDIA H100 GPUs", each row naming the script it ran
(``src/scripts/train/OLMo-{1B,7B,13B}.py``, ``Llama-8B.py``) and its only command-line override
(``--model.float8_config.enabled=true`` for the FP8 rows). Read from the repository's history; each script and
the modules it imports were read at the commit that published its number.

The models (presets ``olmo-core-1b``, ``olmo-core-7b``, ``olmo-core-13b``, ``olmo-core-llama3-8b`` in
:mod:`pipesim.analytic.model_presets`): every shape is OLMo-core's ``TransformerConfig.llama_like()`` (SwiGLU
``w2(silu(w1 x) · w3 x)``, ``w1`` and ``w3`` two linears: ``--mlp-up split``; RMSNorm without bias, no linear
biases, dropout 0, RoPE, a separate ``w_out``: untied) with the vocabulary of ``TokenizerConfig.dolma2()`` (100278)
padded by ``padded_vocab_size()`` to a multiple of 128 (100352), the MLP width ``256 · ceil(int(8h/3) / 256)``,
sequence 4096 (the scripts' dataset): 1B 18 layers × 2048 (16 heads, MLP 5632), 7B 32 × 4096 (32 heads, 11008), 13B
40 × 5120 (40 heads, 13824) — the ``llama2_*`` factories of the MFU table's rows (``model.py`` at 80b143929,
c2be557a1: pre-norm, no QK-norm, RoPE theta 10,000) and the ``olmo_*`` factories of the later rows (``model.py`` at
8c03ca8a2, ``config.py`` at 310866e45: the same shapes with QK-norm over all of q and k, the norms on each block's
attention and MLP outputs ("reordered_norm"), RoPE theta 500,000: the OLMo-2-1124 architecture; QK-norm is no
``ModelSpec`` field, so one preset serves both) — and ``llama3_8B`` (``config.py`` at 41400c46f: 8 KV heads, MLP
int(1.3 · 10922) = 14198 rounded up to a multiple of 1024 = 14336, pre-norm, no QK-norm, RoPE theta 500,000, the
dolma2 vocabulary, not Llama 3's 128256).

Their parameter counts (1,335,961,600; 7,298,355,200; 13,715,788,800; 7,801,671,680) are OLMo-core's
``TransformerConfig.num_params`` less the QK-norm weights (QK-norm adds L·(h + kv width): 262,144 at 7B).

The table's versions (README.md; one row per distinct measurement, the scripts read at that commit):

- 80b143929 (2024-09-03), "measured on a cluster of H100 GPUs", with MFU: 1B 45–46K TPS (39–40 %), 7B 9.7–10K
  (47–48 %); c2be557a1 (2024-09-04) adds 13B 4.4–4.6K (41–42 %) and "Context Length 4K"; 603952b64 (2024-09-06),
  the commit that gives the scripts' AdamW ``fused=True``, widens 1B to 45–47K (39–41 %). Rows: 1B at 603952b64,
  7B at 80b143929, 13B at c2be557a1, each the middle of its range (46,000, 9,850, 4,500). The scripts then built
  ``llama2_1B/7B/13B``.
- 8c03ca8a2 (2024-09-26, "Add support for float8 training via torchao"): a new table without MFU, the scripts
  now building ``olmo_1B/7B/13B``: 1B 44,000 BF16 and 51,000 FP8, 7B 10,000 and 13,000, 13B 4,600 BF16.
  f7f370930 (same day) adds a 1B row at variable sequence length 256–8192 (49,000, ``--dataset.name=vsl``): left
  out, pipesim runs one sequence length. 310866e45 (2024-10-23) adds 13B FP8 5,500 and drops the VSL row.
- 41400c46f (2024-11-01): Llama 8B 9,500 BF16 and 12,500 FP8 (``Llama-8B.py``).
- e27ba7455 (2024-11-05, "Update throughput numbers"): 1B 55,000 and 65,000; the same commit raises
  ``OLMo-1B.py``'s ``rank_microbatch_size`` from 4 × 4096 to 8 × 4096 tokens. The other rows stand unchanged
  through the renames (8e716b57f, 2024-11-27: ``OLMo2-*.py``, ``Llama3-8B.py``; ecb7b672a, 2024-12-10: the override
  becomes ``--train_module.float8_config.enabled=true``) until 41f8ddc9f (2025-03-12) removes the table. No
  26B or 32B number was ever published there.

Stated (the scripts and what they import, at each row's commit): the model factory (above); ``compile=True``
(``TransformerConfig.build`` compiles each block, ``torch.compile(block, fullgraph=False)``: element-wise work
fused, pipesim's default; embedding, final norm and loss outside it); FSDP2 (``DataParallelType.fsdp``:
``fully_shard`` on each block and the root, ``reshard_after_forward`` true but for the last block) with
``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`` (BF16 compute, FP32 gradient reduction:
pipesim's default gradient bytes), no tensor, context or pipeline parallelism; no ``ac_config`` (no activation
checkpointing); sequence length 4096 (FSL dataset); micro-batch per rank 4, 2, 1 sequences (1B, 7B, 13B:
``microbatch_size`` in instances until v1.1.0, then ``rank_microbatch_size`` in tokens / 4096), 2 for the Llama 8B,
8 for the 1B from e27ba7455; global batch 1024 sequences (``global_batch_size=1024``, later ``1024 * 4096``
tokens), 2048 for the 13B from 7e3ddd4cb (2024-09-25); the trainer runs ``loss.backward()`` per microbatch and
never disables FSDP's gradient sync, so each microbatch's gradients are reduce-scattered and added into the
sharded gradients by autograd (``--grad-accumulation autograd``). With ``compile=True``, ``llama_like()`` sets
``use_flash=False``: attention is ``F.scaled_dot_product_attention`` (its FlashAttention-2 backend on H100:
``--attention fused``). FP8: torchao ``convert_to_float8_training`` on every ``nn.Linear`` but ``w_out``
(``modules_to_ignore={"w_out"}``: the head stays BF16, as pipesim keeps it), ``Float8LinearConfig`` with dynamic
scaling of input, weight and output gradient (per-tensor scale from the tensor's own amax: ``--fp8-recipe
tensorwise``), ``enable_fsdp_float8_all_gather=True`` (``float8.py``, unchanged 8c03ca8a2–e27ba7455).

The loss, by row (the trainer's ``_model_forward``/``compute_losses`` and the scripts, read at each commit). Every
script sets ``z_loss_multiplier=1e-5`` (``--z-loss``), and the trainer copies the shifted logits before the loss
(``logits[..., :-1, :].contiguous()``, ``--loss-input-copy``). The 1B rows of 8c03ca8a2 and every row of the MFU
table set no ``fused_loss``: ``F.cross_entropy`` on the logits the model casts to FP32 (``self.w_out(h).float()``)
and the z-loss by ``logits.logsumexp(-1)``, each eager (``--loss pytorch``). The 7B and 13B rows (8c03ca8a2,
310866e45) and the Llama 8B rows (41400c46f) set ``fused_loss=True``: OLMo-core's Triton cross-entropy
(``olmo_core/triton/cross_entropy_loss.py``, flash-attn's, the z-loss in the same kernel) on the FP32 logits
(``--loss fused``). e27ba7455's 1B sets ``compile_loss=True``: ``torch.compile`` of the PyTorch loss with the
FP32 cast moved into it (00d34f693, 2024-11-01: "allowing the casting of logits to FP32 to be fused into the loss
function"; the model's ``.float()`` is gone), so the copy is of the BF16 logits (``--loss compiled``).

Inferred: 8 GPUs, one node. The README states no GPU count; its rows name the script and a float8 override only,
so each ran the script's launch defaults: ``BeakerLaunchConfig(num_nodes=1, num_gpus=8)`` (in the scripts at
80b143929 and c2be557a1, in ``olmo_core/internal/experiment.py`` from 603952b64 through e27ba7455), under which
``train()`` passes ``dp_mesh=None`` (``get_num_nodes() == 1``): plain FSDP over the 8 GPUs, ZeRO-3 at dp 8. On more
nodes the scripts would run HSDP (``init_hybrid_shard_mesh``: sharded within a node, replicated across), which
pipesim cannot express. So 32, 64 and 128 microbatches a step for the MFU table's 1B, 7B and 13B, 32, 64 and 256
for 8c03ca8a2's, 64 for the Llama 8B, 16 for e27ba7455's 1B. The chip: the H100 SXM (``h100-sxm``). The MFU
column confirms it and the shapes: OLMo-core's speed monitor takes 989 TFLOP/s for a device named "H100" without
"NVL" or "PCIe" and counts ``6 · N_non-embedding + 12 · L · h · s`` per token (``w_out`` counted in N); with the
presets above that gives 39.1–40.8 %, 46.8–48.3 % and 39.7–41.5 % at the published TPS ranges against the README's
39–41 %, 47–48 % and 41–42 %. AI2's Beaker clusters (the usage example names ``ai2/pluto-cirrascale``) are not
described; on one node only NVLink carries traffic.

Uncertain: the GPU count (above). The MFU table gives ranges: the rows take their middle (±1.1 %, ±1.5 %, ±2.2 %).
8c03ca8a2's 7B and 13B BF16 numbers equal the upper ends of the earlier ranges; the README ties them to the
rewritten scripts (now the OLMo-1124 architecture, and the 1B number changed), so they are kept as their own
measurement, but they may have been carried over. Which of the speed monitor's figures the README quotes
(``throughput/device/TPS``, one step's local tokens over its wall time, or the running average) and at which
step is not stated; the numbers are rounded to two or three figures. The software: the ``nightly`` Beaker image
(PyTorch nightly of the time), versions not recorded.

The FP8 rows run as their code states (``--fp8-linears torchao --fp8-all-gather``, since the release that
modelled torchao's FSDP float8 all-gather): torchao's linears saving BF16 inputs, the weights gathered in FP8 (half
the gather's bytes), each rank casting its FP32 shard before a gather and no GEMM casting a weight. Until then
they ran as Transformer Engine's linears with BF16 gathers: the 7B and Llama 8B FP8 rows +6.4 % and +7.9 %. And
every row runs FSDP2's copy-out of each per-layer gather on the compute stream (``--fsdp2``: ``fully_shard``'s
``foreach_all_gather_copy_out``), since the release that modelled it: 1–4 points slower with the presets.

Not modelled, stated: QK-norm (two more RMSNorms per layer, fused into the compiled block; L·(h + kv width)
parameters); the Llama 8B's K and V expanded to 32 heads by ``repeat_interleave`` before SDPA (SDPA then lacked
GQA); the once-a-step precomputation of the float8 scales (``precompute_float8_dynamic_scale_for_fsdp``: an amax
over each shard); the fused AdamW step (pipesim's optimizer step is its own). No memory is published.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to.
"""

from pipesim.analytic.layout import Fp8Linears, Fp8Recipe, GradAccumulation, LossKernel, MlpUp, Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

# one software version a row: the README at one commit (the ranking compares layouts of one job on one
# system and software: pipesim.validation.ranking groups by the source up to its first comma)
SOURCE = "AllenAI OLMo-core README throughput table (official training scripts on H100)"
_GPUS, _SEQ = 8, 4096
_BF16, _FP8 = Precision.BF16, Precision.FP8
# F.cross_entropy on FP32 logits; the Triton kernel; the compiled loss (each with the z-loss and the input copy)
_TORCH, _FUSED, _COMPILED = LossKernel.PYTORCH, LossKernel.FUSED, LossKernel.COMPILED


def _row(commit, model, micro_batch, global_batch, precision, loss, tps):
    fp8 = precision is _FP8
    return PublishedRun(f"{SOURCE}: README at {commit}", model, "h100-sxm", _GPUS, global_batch,
                        micro_batch=micro_batch, seq_len=_SEQ, zero=ZeroStage.PARAMETERS, precision=precision,
                        fp8_recipe=Fp8Recipe.TENSORWISE if fp8 else Fp8Recipe.DELAYED, loss=loss,
                        # torchao's Float8Linear with enable_fsdp_float8_all_gather=True (float8.py)
                        fp8_linears=Fp8Linears.TORCHAO if fp8 else Fp8Linears.TRANSFORMER_ENGINE, fp8_all_gather=fp8,
                        fsdp2=True,  # OLMo-core's FSDP is fully_shard: each gather copied out (--fsdp2)
                        z_loss=True, loss_input_copy=True,
                        grad_accumulation=GradAccumulation.AUTOGRAD, mlp_up=MlpUp.SPLIT, tokens_per_gpu=tps,
                        note=commit)


ROWS = [
    # the MFU table (llama2_* shapes, PyTorch loss); the middle of each published TPS range
    _row("603952b64 (2024-09-06)", "olmo-core-1b", 4, 1024, _BF16, _TORCH, 46_000),  # 45-47K, 39-41 % MFU
    _row("80b143929 (2024-09-03)", "olmo-core-7b", 2, 1024, _BF16, _TORCH, 9_850),  # 9.7-10K, 47-48 %
    _row("c2be557a1 (2024-09-04)", "olmo-core-13b", 1, 1024, _BF16, _TORCH, 4_500),  # 4.4-4.6K, 41-42 %
    # OLMo-1124 architecture, torchao float8 on the FP8 rows
    _row("8c03ca8a2 (2024-09-26)", "olmo-core-1b", 4, 1024, _BF16, _TORCH, 44_000),
    _row("8c03ca8a2 (2024-09-26)", "olmo-core-1b", 4, 1024, _FP8, _TORCH, 51_000),
    _row("8c03ca8a2 (2024-09-26)", "olmo-core-7b", 2, 1024, _BF16, _FUSED, 10_000),
    _row("8c03ca8a2 (2024-09-26)", "olmo-core-7b", 2, 1024, _FP8, _FUSED, 13_000),
    _row("8c03ca8a2 (2024-09-26)", "olmo-core-13b", 1, 2048, _BF16, _FUSED, 4_600),
    _row("310866e45 (2024-10-23)", "olmo-core-13b", 1, 2048, _FP8, _FUSED, 5_500),
    _row("41400c46f (2024-11-01)", "olmo-core-llama3-8b", 2, 1024, _BF16, _FUSED, 9_500),
    _row("41400c46f (2024-11-01)", "olmo-core-llama3-8b", 2, 1024, _FP8, _FUSED, 12_500),
    _row("e27ba7455 (2024-11-05)", "olmo-core-1b", 8, 1024, _BF16, _COMPILED, 55_000),
    _row("e27ba7455 (2024-11-05)", "olmo-core-1b", 8, 1024, _FP8, _COMPILED, 65_000),
]
