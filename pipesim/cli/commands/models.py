"""``pipesim models``: the model presets ``simulate --model`` accepts, with the fields a model file takes."""

from __future__ import annotations

import argparse

NAME = "models"


def register(sub) -> None:
    models = sub.add_parser(NAME, help="list model presets", description="List model presets (--model). --model also "
                            "takes a pipesim model file or a Hugging Face config.json (with --seq-len).")
    models.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.analytic.model_presets import MODEL_PRESETS
    from pipesim.analytic.params import active_params, total_params

    print(f"{'name':<16} {'params':>8} {'layers':>6} {'hidden':>6} {'heads':>5} {'kv':>3} {'ffn':>6} "
          f"{'vocab':>6} {'seq':>5}  mlp")
    for m in MODEL_PRESETS.values():
        moe = ""
        if m.is_moe:
            shared = f" + {m.shared_experts} shared" if m.shared_experts else ""
            moe = (f", MoE {m.experts} experts of {m.expert_ffn_hidden} top-{m.experts_per_token}{shared} "
                   f"on {m.moe_layers} layers, {active_params(m) / 1e9:.1f}B active")
        if m.mla:
            moe += f", MLA (kv_lora {m.kv_lora_rank}, q_lora {m.q_lora_rank or '-'})"
        if m.attention_head_dim:
            moe += f", heads of {m.attention_head_dim}"
        if m.qk_norm:
            moe += ", QK-norm"
        if m.local_attention_span:
            every = f" (full attention 1 layer in {m.global_attention_every})" if m.global_attention_every else ""
            moe += f", {m.local_attention_text}{every}"
        print(f"{m.name:<16} {total_params(m) / 1e9:>7.1f}B {m.layers:>6} {m.hidden:>6} {m.heads:>5} "
              f"{m.kv_heads:>3} {m.ffn_hidden:>6} {m.vocab:>6} {m.seq_len:>5}  {'swiglu' if m.gated else 'gelu'}{moe}")
    return 0
