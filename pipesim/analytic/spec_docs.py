"""docs/model-and-chip-files.md, generated from the schemas so the two cannot drift:
``python -m pipesim.analytic.spec_docs > docs/model-and-chip-files.md`` (a test compares them)."""

from __future__ import annotations

from pipesim.analytic import chip_spec, hf_config, model_spec
from pipesim.analytic.spec_fields import fields_markdown


def model_and_chip_doc() -> str:
    families = ", ".join(f"`{name}`" for name in hf_config.FAMILIES)
    return f"""# Model and chip files

`pipesim simulate --model FILE --hardware FILE` take YAML (`.yaml`, `.yml`) or JSON (`.json`) files as well
as preset names (`pipesim models`, `pipesim chips`; a model preset also by its Hugging Face name,
`meta-llama/Llama-3.1-8B-Instruct` or `Llama-2-7b-hf`, and Llama 3 8B and 70B by their own names, the 3.1
presets' architecture). Every key is checked where the file enters: an unknown
key is named with the known ones, a wrong type, a value out of range, `.inf`/`.nan` or a boolean where a
number belongs each give one line naming the file and the key, exit 2. Numbers may be written as YAML 1.1
reads them or as strings Python reads as numbers (`989.4e12`, which YAML 1.1 leaves a string, is accepted).
This page is generated: `python -m pipesim.analytic.spec_docs > docs/model-and-chip-files.md`.

## Model file

Units: counts unless stated. The column names that `pipesim models` prints (`ffn`, `seq`, `kv`, `mlp`,
`params`) are accepted beside the full names.

```yaml
name: my-llama
layers: 32
hidden: 4096
heads: 32
kv: 8            # or kv_heads
ffn: 14336       # or ffn_hidden
vocab: 128256
seq: 8192        # or seq_len
mlp: swiglu      # or gated: true
dropout: false
bias: false
rms_norm: true
```

{fields_markdown(model_spec.FIELDS, model_spec.ALIASES)}

## A Hugging Face config.json

`--model path/to/config.json` reads a checkpoint's own configuration (a file with `model_type` and `hidden_size`)
as `transformers` builds the model, for the families whose modeling code pipesim models: {families}; a
`model_type` of its own on one of their classes (remote code around a transformers class: Kimi K2's `kimi_k2` on
`DeepseekV3ForCausalLM`) reads as the class its `architectures` names. A config does not say the sequence length
a run trains at, so `--seq-len` is required with one; the model is named after the checkpoint's folder. Sliding
windows are read where every layer has one (Mistral) or every n-th layer attends to everything (gpt-oss's
`layer_types`), and Llama 4's chunked attention likewise (its chunks on all but every fourth layer); Qwen's
`use_sliding_window`, other layer patterns and MoE layers in any pattern other than "the first k dense, then one in
every n" (which reads DeepSeek's dense first layers and Llama 4 Maverick's and Qwen2-MoE's interleaved ones) are
refused, not approximated. The keys read, and what is left out, are in `pipesim/analytic/hf_config.py`.

```
pipesim simulate --model ~/models/Qwen3-30B-A3B/config.json --seq-len 4096 --pp 2 --ep 8 --dp 8
```

## Chip file

Bandwidths are per chip and one direction (halve a datasheet's bidirectional NVLink figure). The kernel
efficiencies feed `pipesim/analytic/kernels.py`; the presets' values and their sources are in
`pipesim/analytic/chip_presets.py`.

```yaml
name: my-h100
peak_flops: 989.4e12
fp8_peak_flops: 1979e12
memory_gib: 79.6
hbm_bandwidth: 3.35e12
intra_node_bandwidth: 450e9
inter_node_bandwidth: 50e9
```

{fields_markdown(chip_spec.FIELDS)}
"""


if __name__ == "__main__":
    print(model_and_chip_doc(), end="")
