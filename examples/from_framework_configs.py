"""A run as its framework describes it: a nanotron config file, Megatron-LM's options and a Hugging Face model name,
each simulated as the same run given by pipesim's own options. Run it as a script
(``python examples/from_framework_configs.py``) or paste its cells.
"""

import tempfile
from pathlib import Path

import yaml

import pipesim

folder = Path(tempfile.mkdtemp(prefix="pipesim-configs-"))

# %% 1. A nanotron run config (the sections run_train.py reads): Llama 3.2 1B's shape, tp 2 with sequence
# parallelism and asynchronous TP, dp 4, eight microbatches of two 4,096-token sequences.
config = folder / "llama_1b.yaml"
config.write_text(yaml.safe_dump({
    "model": {"make_vocab_size_divisible_by": 1, "model_config": {
        "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": True, "hidden_act": "silu"}},
    "optimizer": {"zero_stage": 1, "accumulate_grad_in_fp32": True},
    "parallelism": {"dp": 4, "tp": 2, "pp": 1, "tp_mode": "REDUCE_SCATTER", "tp_linear_async_communication": True},
    "tokens": {"micro_batch_size": 2, "batch_accumulation_per_replica": 8, "sequence_length": 4096},
}))
from_file = pipesim.simulate(config=config, hardware="h100-sxm")
print(f"nanotron config: {from_file.step_time:.4f} s a step")

# %% 2. The same run from options: nanotron's framework defaults, and what its config's switches mean.
by_options = pipesim.simulate(
    pp=1, mb=8, model="meta-llama/Llama-3.2-1B",  # a Hugging Face name is its preset
    hardware="h100-sxm", framework="nanotron", tp=2, dp=4, zero=1, micro_batch_size=2, seq_len=4096,
    sequence_parallel=True, overlap_tp_dgrad=True, column_input="regather", overlap_tp_local_shard=True)
print(f"the same by options: {by_options.step_time:.4f} s a step")

# %% 3. Megatron-LM's parallel flags as options: Llama 3.1 405B on 512 GPUs, tp 8 × pp 8 with the embedding and the
# loss counted as a layer each and two layers a virtual stage (as a launch script states it).
megatron = pipesim.simulate(
    model="llama3.1-405b", hardware="h100-sxm", gpus=512, pp=8, tp=8, global_batch=64,
    num_layers_per_virtual_pipeline_stage=2, account_for_embedding_in_pipeline_split=True,
    account_for_loss_in_pipeline_split=True, sequence_parallel=True, distributed_optimizer=True, fp8=True)
layout = megatron.model_report.layout
print(f"Megatron-LM's layout: dp {layout.dp}, {layout.chunks} chunks a rank, first and last stages "
      f"{layout.stage_layers[0]} and {layout.stage_layers[-1]} layers, the others {layout.stage_layers[1]}; "
      f"{megatron.step_time:.2f} s a step")
