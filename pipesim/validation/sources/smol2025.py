"""Hugging Face's SmolLM3 pre-training and its ablation baseline, both on nanotron: "The Smol Training Playbook: The
Secrets to Building World-Class LLMs" (Allal, Tunstall, Tazi, Bakouch et al., Hugging Face, 30 October 2025,
``huggingfacetb-smol-training-playbook.hf.space``) with the nanotron configurations it links. Hugging Face's
cluster: AWS p5 instances (8 H100 SXM 80GB a node, NVLink 4, 32 × 100 Gb/s EFA NICs a node: four per GPU, 400
Gb/s), the playbook's "Infrastructure" chapter.

**SmolLM3-3B, stage 1, on 384 H100** (48 nodes). Measured, stated ("Staying the course"): "For SmolLM3, we expected
stable throughput between 13,500–14,000 tokens/sec across the run, and any sustained deviation was a red flag",
tokens per second per GPU (the chapter "Optimizing Training Throughput": configurations were benchmarked by
"tokens per second per GPU, which is ultimately the metric we care about"; and "we optimized our configuration for
around 30% MFU on 384 GPUs"). The row takes the middle, 13,750 (±1.8 %). It agrees with the run's length: 11.2T
tokens (the released checkpoints' card: 4,720,000 steps of 2,359,296 tokens) at 13,750 a GPU on 384 GPUs is 24.5
days, the "24 days" of the SmolLM3 blog post, and the playbook's 276,480 GPU hours of the main run (30 days,
"accounting for occasional downtimes") average about 11,200. Settings, stated: the configuration the chapter names
(``stage1_8T.yaml``, ``pipesim/validation/data/smollm3_stage1.yaml`` holds its layout, kernel and batch fields as
published): dp 192 × tp 2 × pp 1, ``micro_batch_size`` 3 × ``sequence_length`` 4096,
``batch_accumulation_per_replica`` 1 (the chapter: "192 × 3 × 1 × 4,096 ≈ 2.3M"), ``zero_stage`` 0 (the chapter:
"we opted for ZeRO-0"), ``tp_mode: REDUCE_SCATTER`` (sequence parallelism), ``tp_linear_async_communication``
and ``tp_recompute_allgather`` true (``--overlap-tp-local-shard``, the input-gradient collective beside the weight
gradient, the gathered input gathered again beside the input-gradient GEMM: what ``simulate --config`` sets for
them), ``recompute_layer`` false, ``accumulate_grad_in_fp32`` true (nanotron's FP32 gradient buffers, reduced in
FP32 by its DDP hook), ``ddp_bucket_cap_mb`` 50, fused AdamW; the model (``smollm3-3b``): 36 layers × 2048, 16
heads, 4 KV heads, MLP 11008, 128,256-token vocabulary tied, no biases, flash-attention 2 (``flash_attn_varlen_
kvpacked_func``), Triton RMSNorm, flash-attn's rotary kernel. Under nanotron's defaults (``--framework
nanotron``'s): SwiGLU as two eager ops, nanotron's cross-entropy, each bucket of gradients all-reduced by DDP's
hook during the backward.

**The ablation baseline, a 1B Llama 3.2 shape on one node.** Measured, stated ("Setting up our ablation
framework"): "a 1B transformer following Llama3.2 1B architecture trained on 45B tokens, which takes about 1.5
days on 8xH100 using this nanotron config (42k tokens per second per GPU)" (45B tokens in 1.5 days on 8 GPUs is
43.4k). The row takes 42,000. Settings, stated in the config excerpt the playbook prints: dp 8, tp 1, pp 1,
``micro_batch_size`` 3, ``batch_accumulation_per_replica`` 16, ``sequence_length`` 4096 (a step of 384 sequences,
"1.5M tokens"), the model Llama 3.2 1B's shape (16 layers × 2048, 32 heads, 8 KV heads, MLP 8192, tied
embeddings: ``llama3.2-1b``; the tokenizer SmolLM3's, 128,256 tokens, as Llama 3's).

Inferred: for the 1B, what the printed excerpt leaves out ("...(truncated)"): ZeRO-0, no recomputation and FP32
gradient accumulation, as SmolLM3's own config sets them, and nanotron's kernels as for SmolLM3 (pipesim's
``--framework nanotron``). The chip: the ``h100-sxm`` preset (p5's H100 SXM at 700 W; its network at the
preset's 400 Gb/s a GPU). One node for the 1B: only NVLink carries its traffic.

Uncertain, stated by the playbook, not modelled: (1) document masking (``_use_doc_masking``): the varlen
attention stops at document boundaries, so attention does less than the causal 4,096-token square pipesim counts
(at most that: attention is 15 % of pipesim's step for the 3B, 20 % for the 1B), which would make the run faster
than pipesim's, not slower. (2) The network: the playbook measured its cluster's NCCL all-reduce at 480 GB/s bus
bandwidth in one node, 479 on two, 320–350 on 3–16 nodes, and point-to-point 42–43 GB/s on 2–4 nodes, 21 on 5 or
more (``nccl-tests``, the "GPU-to-GPU Internode" section), where pipesim's ring over a node's eight NICs reaches
400; the row's data-parallel all-reduce (6.2 GB of FP32 gradients a GPU over 192 ranks, four a node: 63 ms) runs
beside the backward in pipesim, and at 80 % of the preset's rate the step grows 0.8 %. (3) SmolLM3's Qwen2 modules
in nanotron feed flash-attn packed q and kv views without nanotron's Llama transposing copies (``--elementwise
eager-activation`` counts them: 3 ms of the 3B's step, which without them would be 1 % faster still).
(4) Which figure 13,500–14,000 is (a logged per-step rate, as nanotron logs ``tokens_per_sec_per_gpu`` each
iteration) and which software versions ran is not stated.

What pipesim says, and the lead: both runs are predicted too fast, the 3B on 384 GPUs by 22 %, the 1B on 8 by
12 %, where pipesim's compute is 88 and 99.6 % of the step: nanotron's step costs more than its kernels as pipesim
counts them, most where the run is spread widest. The same pattern as issue #24's held-out 8×H100 nanotron-style
runs; the mechanism is not found here.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to. Two rows on two systems of
one cluster: too few for a ranking group.
"""

from pipesim.analytic.frameworks import Framework
from pipesim.analytic.layout import ColumnInput, ElementwiseKernels, GradAccumulation, LossKernel
from pipesim.validation.runs import PublishedRun

SOURCE = "Hugging Face 2025, The Smol Training Playbook (nanotron on AWS p5 H100)"
_SEQ = 4096
# nanotron's kernels and its DDP hook (pipesim's --framework nanotron, spelled out: a row names its settings)
_NANOTRON = dict(framework=Framework.NANOTRON, elementwise=ElementwiseKernels.EAGER_ACTIVATION,
                 loss=LossKernel.NANOTRON, grad_accumulation=GradAccumulation.AUTOGRAD, overlap_grad_reduce=True)

ROWS = [
    # stage1_8T.yaml: dp 192 × tp 2, micro-batch 3, one microbatch a step; 13,500-14,000 tokens/s/GPU stated
    PublishedRun(f"{SOURCE}: SmolLM3 stage 1", "smollm3-3b", "h100-sxm", 384, 192 * 3, tp=2, micro_batch=3,
                 seq_len=_SEQ, sequence_parallel=True, overlap_tp_dgrad=True, column_input=ColumnInput.REGATHER,
                 overlap_tp_local_shard=True, tokens_per_gpu=13_750, note="stage1_8T.yaml", **_NANOTRON),
    # baseline_config.yaml: dp 8, micro-batch 3 × 16 accumulation steps; "42k tokens per second per GPU"
    PublishedRun(f"{SOURCE}: ablation baseline", "llama3.2-1b", "h100-sxm", 8, 8 * 3 * 16, micro_batch=3,
                 seq_len=_SEQ, tokens_per_gpu=42_000, note="baseline_config.yaml", **_NANOTRON),
]
