"""What an executor run is configured with, importable without torch: the TP mode, the failure mode of
``--fail-at``, the optimizer, and the model's (and its MoE layers') sizes with their checks.

``executors.run`` builds its parser and checks its flags from these alone, so ``--help`` and a bad flag answer
before torch is imported (about a CPU-second and a half, most of a refusal's cost). The torch modules that use
them (:mod:`executors.tp_layers`, :mod:`executors.interpreter`, :mod:`executors.runtime`, :mod:`executors.moe`,
:mod:`executors.model`) import them from here and still export them under their old names.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pipesim.analytic.layout import CpComm
from pipesim.errors import PipesimError
from pipesim.topology import Topology


class TPMode(enum.Enum):
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"  # sequence parallel


class FailMode(enum.Enum):
    """How ``--fail-at`` breaks a rank: raise at the instruction, or die at once as if killed (SIGKILL)."""

    RAISE = "raise"
    KILL = "kill"


class OptimizerKind(enum.Enum):
    SGD = "sgd"  # momentum SGD: linear in the gradients, so parallel and reference agree tightly
    ADAMW = "adamw"


@dataclass(frozen=True)
class MoEConfig:
    """The MoE layers of the executor's GPT (``executors.run --moe-experts E --moe-top-k K ...``)."""

    experts: int  # routed experts per MoE layer, E
    top_k: int = 2  # routed experts per token, k
    ffn_hidden: int = 64  # one expert's inner width f
    shared_experts: int = 0  # experts every token goes through, each of width f
    first_dense_layers: int = 0  # the first blocks keep the dense 4h MLP

    def is_moe_layer(self, layer: int) -> bool:
        return layer >= self.first_dense_layers

    def check(self, layers: int, topology: Topology) -> None:
        """One-line errors for what the executor's MoE layers cannot run (no process group needed)."""
        if not 1 <= self.top_k <= self.experts:
            raise PipesimError(f"--moe-top-k {self.top_k} must be between 1 and --moe-experts {self.experts}")
        if self.first_dense_layers >= layers:
            raise PipesimError(
                f"--moe-first-dense {self.first_dense_layers} leaves no MoE layer among --layers "
                f"{layers}; lower it below {layers}"
            )
        if self.experts % topology.ep:
            raise PipesimError(
                f"--moe-experts {self.experts} is not divisible by --ep {topology.ep}: each EP rank "
                f"holds E/ep whole experts; use a multiple of {topology.ep} experts"
            )

    def model_file_keys(self) -> dict:
        """The pipesim model-file keys (docs/moe.md) describing these layers."""
        return {
            "experts": self.experts,
            "experts_per_token": self.top_k,
            "expert_ffn_hidden": self.ffn_hidden,
            "shared_experts": self.shared_experts,
            "first_dense_layers": self.first_dense_layers,
        }


@dataclass(frozen=True)
class ModelConfig:
    """Model and data sizes; defaults keep a CPU step far below a second."""

    layers: int = 4
    hidden: int = 32
    heads: int = 4
    seq_len: int = 16
    micro_batch_size: int = 2
    vocab: int = 64
    seed: int = 0
    # Layers per stage, stage 0 first (pipesim simulate's --stage-layers); None: the even split below.
    stage_layers: tuple[int, ...] | None = None
    moe: MoEConfig | None = None  # mixture-of-experts MLPs (executors.moe); None: every block dense

    def check(self, tp: int, mode: TPMode, cp: int = 1, cp_comm: CpComm = CpComm.P2P) -> None:
        """One-line errors for sizes the TP and CP layouts cannot split."""
        if self.hidden % self.heads:
            raise PipesimError(f"--hidden {self.hidden} is not divisible by --heads {self.heads}")
        if self.heads % tp:
            raise PipesimError(f"--heads {self.heads} is not divisible by --tp {tp}; each TP rank needs whole heads")
        if cp > 1 and self.seq_len % (2 * cp):
            raise PipesimError(
                f"--seq-len {self.seq_len} is not divisible by 2·cp = {2 * cp}; context parallelism cuts it into "
                f"2·cp chunks (two per cp rank, for causal load balance)"
            )
        if cp > 1 and cp_comm is CpComm.A2A_P2P:
            raise PipesimError("--cp-comm-type a2a+p2p is not executed (the executor runs p2p, allgather and a2a); "
                               "choose one of those")
        if cp > 1 and cp_comm is CpComm.A2A and (self.heads // tp) % cp:
            raise PipesimError(
                f"--cp-comm-type a2a splits each TP rank's heads over the cp ranks, but --heads {self.heads} over "
                f"--tp {tp} are {self.heads // tp}, which --cp {cp} does not divide; use p2p or allgather, or more "
                "heads"
            )
        if mode is TPMode.REDUCE_SCATTER and (self.seq_len // cp) % tp:
            share = f"--seq-len {self.seq_len}" + (f" / --cp {cp}" if cp > 1 else "")
            raise PipesimError(
                f"{share} is not divisible by --tp {tp}; sequence parallelism splits each cp rank's tokens"
            )


def model_file_dict(cfg: ModelConfig, name: str = "executor-gpt") -> dict:
    """This GPT as a pipesim model file (``pipesim simulate --model FILE``): GPT-2 shape with a 4h GELU MLP,
    learned positions, no biases, no dropout, untied embeddings, FP32 (what the executor computes in on CPU;
    on CUDA too: nothing is cast). Attention is SDPA, causal: the fused kernel of the cost model."""
    return {
        "name": name,
        "layers": cfg.layers,
        "hidden": cfg.hidden,
        "heads": cfg.heads,
        "ffn_hidden": 4 * cfg.hidden,
        "vocab": cfg.vocab,
        "seq_len": cfg.seq_len,
        "micro_batch": cfg.micro_batch_size,
        "dtype_bytes": 4,
        "gated": False,
        "dropout": False,
        "bias": False,
        "rms_norm": False,
        "learned_positions": True,
        "tied_embeddings": False,
        **(cfg.moe.model_file_keys() if cfg.moe else {}),
    }
