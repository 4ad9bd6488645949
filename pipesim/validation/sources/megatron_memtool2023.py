"""Megatron-LM's ``tools/get_training_info`` README (NVIDIA/Megatron-LM pull request #482, September 2023, "Analysis
Tool"): the peak memory of four parallel layouts of one 7B-class model, measured with
``torch.cuda.max_memory_allocated()`` (Megatron's ``report_memory``) after a few iterations on one machine of
eight H800 80GB. A memory-only source: the README publishes no speed.

Stated (the README's table and its "Limitations"; the pull request's comment that the runs were one H800 machine
with eight cards): Megatron-LM's ``GPTModel`` with ``--bf16 --use-flash-attn --use-distributed-optimizer
--swiglu``; per row the micro-batch size, global batch, dp, pp and tp; the measured peak ("Peak_Memory_Actual").
Sequence parallelism, interleaving and recomputation are listed as not supported by the tool, so off. The
README's printout of the model is the ``gpt-swiglu-6.6b`` preset: 32 layers, hidden 4096, 32 heads, SwiGLU of
10880, biases, LayerNorm, learned positions, tied embeddings, 6.64B parameters.

Inferred:

- *The model.* The table calls it "Llama2 7B", but the tool handles Megatron's GPT only (no RMSNorm, RoPE or
  untied output layer among its supported flags) and its own printout is the GPT above; Llama 2's own shape at
  its 4,096-token context would not fit the first row in 80 GB (pipesim: 81 GiB), the GPT at 2,048 tokens does.
  So the rows take the printout's model at the example script's ``--seq-length 2048``.
- *Units.* "GB" is 2^30 bytes: the same README prints 12.4 GB for the 6.64B BF16 parameters (13.3e9 bytes).
- *The vocabulary* is padded to a multiple of 128·tp (50304 at tp 1, 51200 at tp 8); the preset keeps the
  printout's 50432 (tp 2): under 0.1% of any row.
- *The element-wise work is eager* (``--elementwise eager``). Megatron-LM's ``megatron/model`` code of the time
  runs ``--swiglu`` as PyTorch ops (``F.silu(x[0]) * x[1]`` after the bias add), which keeps ``silu(gate)`` for
  the product's backward, and its FlashAttention path copies the kernel's output back to ``[s, b, h]``
  (``rearrange(...).contiguous()``) beside the output the kernel keeps: the memory of
  :func:`pipesim.analytic.activations._eager_kept` for a LayerNorm model with learned positions. Its LayerNorm
  and bias-dropout-add are fused, which changes only time (not published here).

Not fitted to. The eager memory mechanism was modelled after reading these rows (they were 4–8% above pipesim,
the README's own per-layer breakdown 7.3 bytes per token and h above pipesim's fused count): the amounts are
read from Megatron-LM's and PyTorch's code, and these rows are evidence of their size, not an independent test
of them.
"""

from pipesim.analytic.layout import ElementwiseKernels, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "Megatron-LM tools/get_training_info README (PR #482, 2023), peak memory on 8× H800"

ROWS = [
    PublishedRun(SOURCE, "gpt-swiglu-6.6b", "h800", 8, global_batch, tp=tp, pp=pp, micro_batch=micro_batch,
                 zero=ZeroStage.OPTIMIZER, elementwise=ElementwiseKernels.EAGER, memory_gib=gib)
    for micro_batch, global_batch, tp, pp, gib in [
        (2, 2048, 1, 1, 69.1),  # dp 8
        (4, 512, 2, 1, 55.7),  # dp 4
        (2, 2048, 1, 2, 49.8),  # dp 4
        (4, 128, 8, 1, 28.8),  # dp 1
    ]
]
