"""The stage model: a small GPT split into pipeline stages with TP-sharded blocks, plus its reference.

GPT-2-style pre-norm transformer (Radford et al. 2019): token + position embedding on the first stage,
``layers`` blocks (causal self-attention and a 4h GELU MLP, each a Megatron column→row pair, Shoeybi et
al. 2019) spread evenly over the ``pp·v`` stages, final LayerNorm + LM head + cross-entropy on the last.
Activations are sequence-first ``[s, b, h]`` (Megatron's layout) so sequence parallelism (Korthikanti et
al. 2023) splits dim 0. The QKV weight is head-major (``[heads, 3, head_dim]`` rows), so a contiguous
column split hands each TP rank whole heads.

Every rank draws the *full* weights from the seed and keeps its shards: costly for a big model, exact for
ours, and it makes the single-process :class:`ReferenceGPT` bit-identical at start by construction.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from executors import collectives as C
from executors.config import ModelConfig, TPMode
from executors.cp_attention import ContextParallel
from executors.moe import MoELayer, init_moe_weights, reference_moe
from executors.tp_layers import ColumnParallelLinear, RowParallelLinear, ShardSpec, set_shard_spec
from executors.weight_grad import WeightGradStore, linear
from pipesim.analytic.stage_split import pipeline_split
from pipesim.errors import PipesimError
from pipesim.topology import Dim


def init_full_weights(cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """The full model's weights, drawn from ``cfg.seed`` in a fixed order (GPT-2 init, std 0.02)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    h, std = cfg.hidden, 0.02

    def normal(*shape, scale=std):
        return torch.randn(*shape, generator=gen) * scale

    def norm_pair(prefix):
        # Not exactly ones/zeros, so a wrong LayerNorm gradient cannot hide behind a symmetric init.
        return {f"{prefix}.weight": 1.0 + normal(h, scale=0.1), f"{prefix}.bias": normal(h, scale=0.1)}

    weights = {"embed.weight": normal(cfg.vocab, h), "pos.weight": normal(cfg.seq_len, h)}
    for layer in range(cfg.layers):
        p = f"blocks.{layer}"
        weights.update(norm_pair(f"{p}.ln1"))
        weights[f"{p}.attn.qkv.weight"] = normal(3 * h, h)
        weights[f"{p}.attn.proj.weight"] = normal(h, h, scale=std / math.sqrt(2 * cfg.layers))
        weights.update(norm_pair(f"{p}.ln2"))
        if _is_moe(cfg, layer):
            weights.update(init_moe_weights(f"{p}.mlp", cfg.moe, h, cfg.layers, normal))
            continue
        weights[f"{p}.mlp.fc1.weight"] = normal(4 * h, h)
        weights[f"{p}.mlp.fc2.weight"] = normal(h, 4 * h, scale=std / math.sqrt(2 * cfg.layers))
    weights.update(norm_pair("ln_f"))
    weights["head.weight"] = normal(cfg.vocab, h)
    return weights


def _is_moe(cfg: ModelConfig, layer: int) -> bool:
    return cfg.moe is not None and cfg.moe.is_moe_layer(layer)


def synthetic_batch(cfg: ModelConfig, step: int, global_batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic token ids ``[global_batch, seq]`` and next-token targets for optimizer step ``step``."""
    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    tokens = torch.randint(cfg.vocab, (global_batch, cfg.seq_len + 1), generator=gen)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def layers_of_stage(cfg: ModelConfig, stage: int, num_stages: int) -> range:
    """Contiguous blocks of stage ``stage``: ``cfg.stage_layers`` when given (the same split the simulator
    uses); else the simulator's default, even or with the lighter first and last stage
    (:func:`~pipesim.analytic.stage_split.pipeline_split`); else, where neither exists (the simulator refuses
    those), the first ``layers % stages`` stages take one more."""
    if cfg.stage_layers is not None:
        counts = cfg.stage_layers
        if len(counts) != num_stages or sum(counts) != cfg.layers or min(counts) < 0:
            raise PipesimError(f"stage layers {list(counts)} must be {num_stages} counts ≥ 0 summing to "
                               f"--layers {cfg.layers}")
        start = sum(counts[:stage])
        return range(start, start + counts[stage])
    balanced = pipeline_split(cfg.layers, num_stages)  # even, or the simulator's default lighter ends
    if balanced is not None:
        start = sum(balanced[:stage])
        return range(start, start + balanced[stage])
    base, extra = divmod(cfg.layers, num_stages)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (1 if stage < extra else 0))


def _layer_norm(prefix: str, full: dict[str, torch.Tensor], mode: TPMode) -> nn.LayerNorm:
    norm = nn.LayerNorm(full[f"{prefix}.weight"].shape[0])
    with torch.no_grad():
        norm.weight.copy_(full[f"{prefix}.weight"])
        norm.bias.copy_(full[f"{prefix}.bias"])
    # Under sequence parallelism each TP rank normalises only its slice of the sequence: its gradient of
    # these replicated weights is partial and must be summed over the TP group (Korthikanti et al. §4.2.2).
    partial = Dim.TP if mode is TPMode.REDUCE_SCATTER else None
    for param in (norm.weight, norm.bias):
        set_shard_spec(param, ShardSpec(partial_grad_over=partial))
    return norm


class Attention(nn.Module):
    def __init__(self, prefix, cfg, full, group, mode, cp: ContextParallel | None = None):
        super().__init__()
        self.head_dim = cfg.hidden // cfg.heads
        self.local_heads = cfg.heads // dist.get_world_size(group)
        self.qkv = ColumnParallelLinear(full[f"{prefix}.qkv.weight"], group, mode)
        self.proj = RowParallelLinear(full[f"{prefix}.proj.weight"], group, mode)
        self.cp = cp  # context parallelism: this rank's tokens attend the others' over the cp group

    def forward(self, x):
        qkv = self.qkv(x)  # [s, b, local_heads·3·head_dim]; s: this cp rank's tokens, all TP ranks' heads split
        s, b, _ = qkv.shape
        q, k, v = qkv.view(s, b, self.local_heads, 3, self.head_dim).permute(3, 1, 2, 0, 4).unbind(0)
        if self.cp is not None:
            out = self.cp.attend(q, k, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [b, heads, s, hd]
        return self.proj(out.permute(2, 0, 1, 3).reshape(s, b, self.local_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, prefix, full, group, mode):
        super().__init__()
        self.fc1 = ColumnParallelLinear(full[f"{prefix}.fc1.weight"], group, mode)
        self.fc2 = RowParallelLinear(full[f"{prefix}.fc2.weight"], group, mode)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, layer, cfg, full, group, mode, cp=None, ep_group=None):
        super().__init__()
        p = f"blocks.{layer}"
        self.ln1 = _layer_norm(f"{p}.ln1", full, mode)
        self.attn = Attention(f"{p}.attn", cfg, full, group, mode, cp)
        self.ln2 = _layer_norm(f"{p}.ln2", full, mode)
        moe = _is_moe(cfg, layer)
        if moe:
            sequence_parallel = mode is TPMode.REDUCE_SCATTER
            self.mlp = MoELayer(f"{p}.mlp", cfg.moe, full, ep_group, sequence_parallel=sequence_parallel)
        else:
            self.mlp = MLP(f"{p}.mlp", full, group, mode)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def _replicated(tensor: torch.Tensor) -> nn.Parameter:
    param = nn.Parameter(tensor.clone())
    set_shard_spec(param, ShardSpec())
    return param


class GPTStage(nn.Module):
    """Stage ``stage`` of ``num_stages``: first takes token ids, last returns the mean loss, others map
    ``[s_local, b, h] → [s_local, b, h]`` (``s_local = s/cp``, and ``/tp`` under sequence parallelism).

    Context parallelism (``cp`` given): the stage sees only its cp rank's load-balanced tokens, at the
    global positions ``positions``; attention runs over the cp group as ``cp`` exchanges keys and values (a ring,
    an all-gather or Ulysses' all-to-alls: :mod:`executors.cp_attention`), and the loss is the mean over
    these tokens (every cp rank holds equally many, so the mean over cp ranks is the full-sequence mean).

    Mixture of experts (``cfg.moe``): the MoE blocks' routed experts are this rank's share of the ``ep_group``
    (:class:`~executors.moe.MoELayer`); ``ep_group`` None holds them all.

    Parameter names equal the full model's state-dict keys, and each carries a :class:`ShardSpec`.
    """

    def __init__(
        self,
        cfg: ModelConfig,
        stage: int,
        num_stages: int,
        chunk: int,
        full: dict[str, torch.Tensor],
        tp_group: dist.ProcessGroup,
        mode: TPMode,
        cp: ContextParallel | None = None,
        positions: torch.Tensor | None = None,
        ep_group: dist.ProcessGroup | None = None,
    ):
        super().__init__()
        self.cfg, self.stage, self.mode, self.tp_group = cfg, stage, mode, tp_group
        self.positions = positions  # None: all seq_len tokens, in order
        self.weight_grad_store: WeightGradStore | None = None  # see use_weight_grad_store
        self.is_first, self.is_last = stage == 0, stage == num_stages - 1
        if self.is_first:
            self.embed = nn.Module()
            self.embed.weight = _replicated(full["embed.weight"])
            self.pos = nn.Module()
            self.pos.weight = _replicated(full["pos.weight"])
        self.blocks = nn.ModuleDict(
            {
                str(layer): Block(layer, cfg, full, tp_group, mode, cp, ep_group)
                for layer in layers_of_stage(cfg, stage, num_stages)
            }
        )
        if self.is_last:
            self.ln_f = _layer_norm("ln_f", full, mode)
            self.head = nn.Module()
            self.head.weight = _replicated(full["head.weight"])
        for name, param in self.named_parameters():
            spec = getattr(param, "pipesim_shard", ShardSpec())
            set_shard_spec(
                param, ShardSpec(name, spec.dim, spec.shard_dim, stage, chunk, spec.partial_grad_over)
            )

    def use_weight_grad_store(self, store: WeightGradStore | None) -> None:
        """Route every weight GEMM of this stage through ``store`` (split backward defers them to W)."""
        for module in self.modules():
            if hasattr(module, "weight_grad_store"):
                module.weight_grad_store = store

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        sequence_parallel = self.mode is TPMode.REDUCE_SCATTER
        if self.is_first:
            pos = self.pos.weight if self.positions is None else self.pos.weight[self.positions]
            x = F.embedding(x.t(), self.embed.weight) + pos[:, None, :]  # [s, b, h]
            if sequence_parallel:
                x = C.scatter_seq(x, self.tp_group)
        for block in self.blocks.values():
            x = block(x)
        if not self.is_last:
            return x
        x = self.ln_f(x)
        if sequence_parallel:
            x = C.gather_seq_replicated(x, self.tp_group)
        logits = linear(x, self.head.weight, self.weight_grad_store)  # [s, b, vocab], replicated over TP
        if targets is None:  # an external runtime computes the loss itself (torch.distributed.pipelining)
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.t().reshape(-1))


class ReferenceGPT(nn.Module):
    """The same GPT in one process, written independently of the TP layers, holding the full weights."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.params = nn.ParameterDict(
            {k.replace(".", "/"): nn.Parameter(v) for k, v in init_full_weights(cfg).items()}
        )

    def full_state(self, grads: bool = False) -> dict[str, torch.Tensor]:
        return {
            k.replace("/", "."): (p.grad if grads else p).detach().clone() for k, p in self.params.items()
        }

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        cfg, w = self.cfg, {k.replace("/", "."): v for k, v in self.params.items()}
        h, hd = cfg.hidden, cfg.hidden // cfg.heads

        def norm(x, p):
            return F.layer_norm(x, (h,), w[f"{p}.weight"], w[f"{p}.bias"])

        x = w["embed.weight"][tokens] + w["pos.weight"]  # [B, s, h]
        batch, s, _ = x.shape
        for layer in range(cfg.layers):
            p = f"blocks.{layer}"
            qkv = norm(x, f"{p}.ln1") @ w[f"{p}.attn.qkv.weight"].t()
            q, k, v = qkv.view(batch, s, cfg.heads, 3, hd).permute(3, 0, 2, 1, 4).unbind(0)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(batch, s, h)
            x = x + att @ w[f"{p}.attn.proj.weight"].t()
            if _is_moe(cfg, layer):
                x = x + reference_moe(norm(x, f"{p}.ln2"), w, f"{p}.mlp", cfg.moe)
                continue
            x = x + F.gelu(norm(x, f"{p}.ln2") @ w[f"{p}.mlp.fc1.weight"].t()) @ w[f"{p}.mlp.fc2.weight"].t()
        logits = norm(x, "ln_f") @ w["head.weight"].t()
        return F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1))
