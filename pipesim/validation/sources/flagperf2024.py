"""BAAI's FlagPerf benchmark (FlagOpen/FlagPerf, ``training/nvidia/<case>/README.md``, 2023–2024): tokens per
second per GPU of LLM pre-training with Megatron-Core, a Megatron-LM fork and DeepSpeed on NVIDIA A800, H100 and
H800 nodes, each case with its launch script and config in the same repository. Read at FlagPerf commit 1b5a0303
(November 2025); the tables date from November 2023 (Llama 2 7B), January (Llama 2 70B) and May 2024 (Llama 3 8B
and 70B).

Four cases, every row of their NVIDIA tables but the FP32 one:

- *Llama 3 8B, Megatron-Core* (``llama3_8B-megatron``; rows of May 2024, commits 8b14694b, e203e1a4, 93730d18):
  on one DGX A800 node, the baseline (pp 2 × dp 4) and six of the README's ablation ("消融实验") layouts, tp 1–8 ×
  pp 1–8 × dp 1–4 (the seventh, pp 1 × dp 8, ran out of memory: a test checks pipesim predicts it over 80 GB);
  on H100 nodes, tp 2 × dp 4 and dp 8 in BF16 and in FP8 (Transformer Engine's hybrid recipe), and tp 2 × dp 220
  on 440 GPUs at global batch 1,760 ("for performance reference only": not loss-aligned).
- *Llama 3 70B, Megatron-Core* (``llama3_70B-megatron``, May 2024): 64 H100, tp 8 × pp 4 × dp 2.
- *Llama 2 70B, FlagScale* (``llama2_70B-megatron``, January 2024; FlagScale 26cd664, a fork of Megatron-LM's
  ``megatron/model`` code): 32 H800 at tp 8 × pp 4 and tp 4 × pp 8, 44 microbatches, and tp 4 × pp 8 at global
  batch 1,024.
- *Llama 2 7B, DeepSpeed ZeRO-3* (``llama2_7b-deepspeed``, November–December 2023; DeepSpeed 0.11.1, Hugging
  Face transformers 4.34.1's ``LlamaForCausalLM`` with ``_flash_attn_2_enabled``): 8 GPUs of one A800 node at
  4,096 tokens × micro-batch 1 and at 2,048 × 3 (one microbatch per step, and 64), and of one H800 node at
  4,096 × 1.

Stated (the READMEs, ``training/benchmarks/<model>/megatron/pretrain_llama*.sh``/``megatron_main.sh``, the
configs): the model's shape (the Llama 3 and Llama 2 presets), sequence 8,192 (Llama 3) and 4,096 (Llama 2),
micro-batch 1, global batch 512 (Llama 3; 1,760 on 440 GPUs) and mbs × accumulation × dp (Llama 2: 44 and
1,024), tp, pp, dp, ``--sequence-parallel`` (inert at tp 1), ``--use-distributed-optimizer`` (ZeRO-1), BF16,
``--use-flash-attn``, ``--transformer-impl transformer_engine`` (Megatron-Core, tag core_v0.6.0) for Llama 3;
``--fp8-format hybrid`` for the FP8 rows; no virtual pipeline; no ``--overlap-grad-reduce``,
``--overlap-param-gather`` or ``--tp-comm-overlap`` (Megatron's defaults: off); the NVIDIA adapter scripts add
nothing ("nvidia adaption is NULL"). Tokens per second per GPU is the README's column, computed by the case's
``run_pretraining.py`` from the last logged iteration time. The chips: DGX A800 80GB with 200 Gb/s InfiniBand
(``a800-80gb``: the A100's die with NVLink cut to 400 GB/s), H100 SXM 80GB with 400 Gb/s (``h100-sxm``), H800
80GB (``h800``; the README states 200 Gb/s InfiniBand, the preset takes 400 Gb/s per GPU: its rows' only
inter-node traffic is pipeline sends of a few MB, under 0.1% of their step either way).

Stated for the DeepSpeed case (``training/benchmarks/llama2_7b/deepspeed``: ``ds_config.json``, the configs,
``run_pretraining.py``): ZeRO stage 3 over the 8 GPUs with ``overlap_comm``, a 1e7-parameter prefetch bucket
(under one layer: the gathers are taken as exposed, pipesim's ZeRO-3 default), BF16, FlashAttention-2, micro-batch
and accumulation per row; tokens per second per GPU from DeepSpeed's samples per second. Inferred there: no
recomputation (the script never enables the model's gradient checkpointing; ``activation_checkpointing`` in the
DeepSpeed config acts only on ``deepspeed.checkpointing`` calls, which the model has none of), Hugging Face's
eager modules (``--elementwise eager``: FP32 RMSNorm, RoPE as ``rotate_half``, ``act(gate) * up`` of two linears,
``--mlp-up split``; their FA2
path has no transposed output copy, which eager counts: a few tenths of a percent), its loss on FP32 logits
(``--loss pytorch``) after ``logits.float()`` and the shifted copy ``logits[..., :-1, :].contiguous()``
(``--loss-input-copy``: ``LlamaForCausalLM.forward`` of that release; +0.15 points on each row), autograd's
gradient accumulation.

Inferred: no recomputation. The Llama 3 READMEs list "recompute-activations" among the optimisations, but
neither the launch script nor the adapter passes ``--recompute-activations`` (Megatron's selective
recomputation, which under FlashAttention only re-runs the attention kernel): the script is taken. With it the
Llama 3 H100 rows would be about 4 points slower in pipesim. FlagScale's Llama 2 rows say ``recompute = False``.
The element-wise work: Megatron-Core with Transformer Engine is fused (the default); FlagScale's legacy model
code runs SwiGLU as PyTorch ops, RoPE as PyTorch ops and copies FlashAttention's output back to ``[s, b, h]``, while
its RMSNorm is apex's fused kernel: ``--elementwise eager-fused-norm`` (eager ops around a fused norm; taken as
``--elementwise eager`` until the FP32 norm's backward was counted op by op, which made that over-count 2 points).

Not used: the ``mem`` column (device memory as the monitor reads it, context, NCCL buffers and the caching
allocator's reserve included; not what pipesim counts); the FP32 row (pipesim models BF16 and FP8 training).
Uncertain: which rows share a software image; whether the last logged iteration is typical (one step of 300).

Gathered for issue #24 after every constant was fixed, and not fitted to by hand. The Hopper training GEMM
ratio's fit on every source reads its Hopper BF16 rows, as it reads every Hopper BF16 row, and with them it moved
from 0.94 to 0.90; the preset is that fit (:mod:`pipesim.validation.constants`). Validation by source left out
refits the ratio without this source, so its left-out error stays held out. The ``a800-80gb`` preset was added
for these rows from the part's datasheet figures (nothing fitted).
"""

from pipesim.analytic.layout import ElementwiseKernels, GradAccumulation, LossKernel, MlpUp, Precision, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "FlagPerf (BAAI) LLM training cases, 2024"
_LLAMA3 = f"{SOURCE}: llama3_8B/70B-megatron (Megatron-Core 0.6)"
_FLAGSCALE = f"{SOURCE}: llama2_70B-megatron (FlagScale 26cd664)"
_DEEPSPEED = f"{SOURCE}: llama2_7b-deepspeed (DeepSpeed 0.11.1 ZeRO-3)"
_BF16, _FP8 = Precision.BF16, Precision.FP8


def _llama3(model, chip, gpus, batch, tp, pp, tokens, precision=_BF16):
    return PublishedRun(_LLAMA3, model, chip, gpus, batch, tp=tp, pp=pp, seq_len=8192, sequence_parallel=tp > 1,
                        zero=ZeroStage.OPTIMIZER, precision=precision, tokens_per_gpu=tokens)


def _deepspeed(chip, seq, micro_batch, accumulation, tokens):
    return PublishedRun(_DEEPSPEED, "llama2-7b", chip, 8, 8 * micro_batch * accumulation, micro_batch=micro_batch,
                        seq_len=seq, zero=ZeroStage.PARAMETERS, elementwise=ElementwiseKernels.EAGER,
                        loss=LossKernel.PYTORCH, loss_input_copy=True, grad_accumulation=GradAccumulation.AUTOGRAD,
                        mlp_up=MlpUp.SPLIT, tokens_per_gpu=tokens)


def _flagscale(tp, pp, batch, tokens):
    return PublishedRun(_FLAGSCALE, "llama2-70b", "h800", 32, batch, tp=tp, pp=pp, seq_len=4096,
                        sequence_parallel=True, zero=ZeroStage.OPTIMIZER,
                        elementwise=ElementwiseKernels.EAGER_FUSED_NORM, tokens_per_gpu=tokens)


# (pp, dp, tp, tokens/s per GPU) on one DGX A800 node: the baseline and the ablation table
A800_LAYOUTS = [(2, 4, 1, 3698.7), (4, 2, 1, 3306.5), (2, 2, 2, 3409.2), (2, 1, 4, 3006.1), (8, 1, 1, 2690.3),
                (1, 1, 8, 2451.2), (4, 1, 2, 3042.7)]
A800_OUT_OF_MEMORY = (1, 8, 1)  # pp, dp, tp: the ablation row the README marks OOM

ROWS = [
    *[_llama3("llama3.1-8b", "a800-80gb", 8, 512, tp, pp, tokens) for pp, _, tp, tokens in A800_LAYOUTS],
    _llama3("llama3.1-8b", "h100-sxm", 8, 512, 2, 1, 8103),
    _llama3("llama3.1-8b", "h100-sxm", 8, 512, 2, 1, 10486, _FP8),
    _llama3("llama3.1-8b", "h100-sxm", 16, 512, 2, 1, 7914),
    _llama3("llama3.1-8b", "h100-sxm", 16, 512, 2, 1, 10280, _FP8),
    _llama3("llama3.1-8b", "h100-sxm", 440, 1760, 2, 1, 7047),
    _llama3("llama3.1-70b", "h100-sxm", 64, 512, 8, 4, 851),
    _flagscale(8, 4, 44, 641.93),
    _flagscale(4, 8, 44, 791.37),
    _flagscale(4, 8, 1024, 908.29),
    _deepspeed("a800-80gb", 4096, 1, 1, 3564),
    _deepspeed("a800-80gb", 2048, 3, 1, 3917),
    _deepspeed("a800-80gb", 2048, 3, 64, 4062),
    _deepspeed("h800", 4096, 1, 1, 7151),
]
