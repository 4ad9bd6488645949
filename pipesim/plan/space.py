"""The search space: every meaningful parallel configuration of a GPU count and a global batch, or why none.

A configuration (:class:`Candidate`) fixes tp × pp × dp = GPUs, the micro-batch size ``b`` (so the
microbatches per pipeline ``m = global batch / (dp · b)``), the schedule and its chunks per rank ``v``,
recomputation, sequence parallelism and the distributed optimizer. What is *meaningful*:

- tp stays within a node (it divides ``gpus_per_node``; Narayanan et al. 2021, §3.3 takeaway #1) and divides
  the model's heads, KV heads and FFN width; pp·v divides the layers (stages are even);
- pp = 1 has no pipeline schedule, so it is one candidate (simulated as 1F1B on one rank, which is
  plain gradient accumulation), not one per schedule;
- sequence parallelism needs tp > 1, the distributed optimizer dp > 1 (at degree 1 they are off);
- schedules with a fixed chunk count (1 for 1F1B-like, 2 for the V schedules) get that; those with a free
  one (interleaved, looped BFS) get every ``v ≥ 2`` up to ``max_chunks`` that splits the layers evenly.
  Constraints of a schedule's own (interleaved needs m to be a multiple of pp) are left to the schedule:
  the search builds it and counts the refusal.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.layout import AttentionKernel, Layout, OptimizerBytes, Recompute
from pipesim.analytic.model_spec import ModelSpec
from pipesim.errors import PipesimError
from pipesim.program.loader import builtin_names, load_schedule

MEGATRON_PARAM_BYTES = OptimizerBytes()  # 18 B/param: BF16 weights, FP32 grads, FP32 master + Adam m, v
NO_PIPELINE_SCHEDULE = "1f1b"  # what pp = 1 is simulated as: m forward/backward pairs, no bubble


@dataclass(frozen=True)
class PlanRequest:
    """What the user asks: this model on this many chips at this global batch (sequences per step)."""

    model: ModelSpec
    chip: ChipSpec
    gpus: int
    global_batch: int
    gpus_per_node: int = 8
    memory_cap_gib: float | None = None  # default: the chip's HBM
    schedules: tuple[str, ...] = field(default_factory=lambda: tuple(builtin_names()))
    recompute: tuple[Recompute, ...] = tuple(Recompute)
    micro_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    sequence_parallel: tuple[bool, ...] = (False, True)
    distributed_optimizer: tuple[bool, ...] = (False, True)
    max_chunks: int = 4
    param_bytes: OptimizerBytes = MEGATRON_PARAM_BYTES
    attention: AttentionKernel = AttentionKernel.FUSED  # the kernel the training code uses (not searched)

    def __post_init__(self) -> None:
        for name in ("gpus", "global_batch", "gpus_per_node", "max_chunks"):
            if getattr(self, name) < 1:
                raise PipesimError(f"--{name.replace('_', '-')} {getattr(self, name)} must be ≥ 1")
        if self.memory_cap_gib is not None and not self.memory_cap_gib > 0:
            raise PipesimError(f"--memory-cap {self.memory_cap_gib} must be > 0 GiB")
        for name in ("schedules", "recompute", "micro_batch_sizes", "sequence_parallel", "distributed_optimizer"):
            if not getattr(self, name):
                raise PipesimError(f"--{name.replace('_', '-')} is empty; give at least one value")

    @property
    def cap_gib(self) -> float:
        return self.chip.memory_gib if self.memory_cap_gib is None else self.memory_cap_gib

    def layout_of(self, candidate: Candidate) -> Layout:
        """The candidate's Layout with this request's fixed choices (bytes per parameter, attention kernel)."""
        return candidate.layout(self.param_bytes, self.attention)

    def model_of(self, candidate: Candidate) -> ModelSpec:
        return candidate.shaped(self.model)


@dataclass(frozen=True)
class Candidate:
    """One configuration to evaluate; :meth:`key` orders them so every listing is deterministic."""

    tp: int
    pp: int
    dp: int
    micro_batch_size: int
    microbatches: int  # per pipeline per step
    schedule: str
    chunks: int
    recompute: Recompute
    sequence_parallel: bool
    distributed_optimizer: bool

    def key(self) -> tuple:
        return (self.tp, self.pp, self.dp, self.micro_batch_size, self.schedule, self.chunks,
                list(Recompute).index(self.recompute), self.sequence_parallel, self.distributed_optimizer)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def layout(self, param_bytes: OptimizerBytes = MEGATRON_PARAM_BYTES,
               attention: AttentionKernel = AttentionKernel.FUSED) -> Layout:
        return Layout(tp=self.tp, dp=self.dp, pp=self.pp, chunks=self.chunks, microbatches=self.microbatches,
                      recompute=self.recompute, sequence_parallel=self.sequence_parallel,
                      distributed_optimizer=self.distributed_optimizer, attention=attention,
                      param_bytes=param_bytes)

    def shaped(self, model: ModelSpec) -> ModelSpec:
        """The model at this configuration's micro-batch size (the ModelSpec carries b, the Layout does not)."""
        return model.with_shape(micro_batch=self.micro_batch_size)

    def label(self) -> str:
        """A short name for tables and figure labels, e.g. ``tp8 pp4 dp32 b1 interleaved v2 sel sp zero1``."""
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}", f"b{self.micro_batch_size}",
                 self.schedule if self.pp > 1 else "no-pipeline"]
        if self.chunks > 1:
            parts.append(f"v{self.chunks}")
        parts.append({Recompute.NONE: "norc", Recompute.SELECTIVE: "sel", Recompute.FULL: "full"}[self.recompute])
        if self.sequence_parallel:
            parts.append("sp")
        if self.distributed_optimizer:
            parts.append("zero1")
        return " ".join(parts)

    def to_dict(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "micro_batch_size": self.micro_batch_size,
                "microbatches": self.microbatches, "schedule": self.schedule, "chunks": self.chunks,
                "recompute": self.recompute.value, "sequence_parallel": self.sequence_parallel,
                "distributed_optimizer": self.distributed_optimizer}


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def tensor_parallel_degrees(model: ModelSpec, gpus: int, gpus_per_node: int) -> list[int]:
    """tp within one node that divides the GPUs, the heads, the KV heads and the FFN width."""
    return [t for t in divisors(min(gpus_per_node, gpus))
            if gpus % t == 0 and model.heads % t == 0 and model.kv_heads % t == 0 and model.ffn_hidden % t == 0]


def grid_layouts(request: PlanRequest) -> list[tuple[int, int, int]]:
    """Every (tp, pp, dp) of the GPUs the model can be split into (pp divides the layers)."""
    model, gpus = request.model, request.gpus
    return [(t, p, gpus // (t * p)) for t in tensor_parallel_degrees(model, gpus, request.gpus_per_node)
            for p in divisors(gpus // t) if model.layers % p == 0]


def _chunk_options(request: PlanRequest, schedule: str, pp: int) -> list[int]:
    fixed = load_schedule(schedule).default_chunks
    options = range(2, request.max_chunks + 1) if schedule in _FREE_CHUNKS else [fixed]
    return [v for v in options if request.model.layers % (pp * v) == 0]


# Schedules whose chunks per rank are a free parameter (Megatron's virtual pipeline size, the looped BFS of
# Lamy-Poirier 2023); every other built-in fixes them (1, or 2 for the V placement).
_FREE_CHUNKS = frozenset({"interleaved", "looped-bfs"})


def check_request(request: PlanRequest) -> list[tuple[int, int, int]]:
    """The (tp, pp, dp) splits, or a PipesimError saying why the GPUs or the batch leave none."""
    gpus, node = request.gpus, request.gpus_per_node
    if gpus > node and gpus % node:
        lower, upper = gpus // node * node, (gpus // node + 1) * node
        raise PipesimError(f"--gpus {gpus} is not a whole number of nodes of --gpus-per-node {node}; tensor "
                           f"parallelism stays within a node and a partial node cannot hold a tp group evenly: "
                           f"use --gpus {lower} or {upper}")
    layouts = grid_layouts(request)  # never empty: tp = pp = 1, dp = GPUs always qualifies
    batch = request.global_batch
    sizes = request.micro_batch_sizes
    if not any(batch % (dp * b) == 0 for _, _, dp in layouts for b in sizes):
        dps = sorted({dp for _, _, dp in layouts})
        step = min(dps) * min(sizes)
        near = sorted({max(step, batch // step * step), (batch // step + 1) * step})
        raise PipesimError(f"--global-batch {batch} is not divisible by dp × micro-batch size for any split of "
                           f"{gpus} GPUs (dp ∈ {dps}, micro-batch sizes {list(sizes)}): use --global-batch "
                           + " or ".join(map(str, near)))
    for name in request.schedules:
        load_schedule(name)  # an unknown schedule is an error up front
    return layouts


def enumerate_candidates(request: PlanRequest) -> Iterator[Candidate]:
    """Every meaningful configuration, in a fixed order (see the module docstring for the rules)."""
    model = request.model
    for tp, pp, dp in check_request(request):
        for b in request.micro_batch_sizes:
            if request.global_batch % (dp * b):
                continue
            m = request.global_batch // (dp * b)
            if pp == 1:
                shapes = [(NO_PIPELINE_SCHEDULE, 1)]
            else:
                shapes = [(s, v) for s in request.schedules for v in _chunk_options(request, s, pp)]
            for schedule, chunks in shapes:
                if model.layers % (pp * chunks):
                    continue
                for recompute in request.recompute:
                    # Sequence parallelism shards along tp and ZeRO-1 along dp: with a degree of 1 both are off.
                    for sp in sorted({sp and tp > 1 for sp in request.sequence_parallel}):
                        for zero in sorted({zero and dp > 1 for zero in request.distributed_optimizer}):
                            yield Candidate(tp, pp, dp, b, m, schedule, chunks, recompute, sp, zero)
