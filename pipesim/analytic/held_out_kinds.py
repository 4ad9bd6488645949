"""Kinds of run where issue #24's held-out published runs showed pipesim off by more than its band, and what a
prediction of such a run should say about it.

The bands (:mod:`pipesim.analytic.error_band`) are measured on the published rows pipesim holds. Issue #24 also
measured pipesim on runs it keeps from us, and said, group by group, how far off it was then; the experiment
``python experiments/held_out_patterns.py`` carries each group's range to this release by how far representative
runs' predictions have moved since (:mod:`pipesim.validation.held_out_patterns` says how, and what it cannot say).
Where a group is further off than its band, a run of its kind is told so beside the band, as a run of a step
group is (:class:`pipesim.analytic.error_band.StepGroup`): the prediction does not move, its reader learns where
the band is known not to hold. The ranges are generated (``held_out_records.py``, by ``held_out_patterns.py
--update-records``), never typed; nothing here is fitted to them.

Each kind is a predicate on what a run states (:class:`RunTraits`), drawn from what the issue says of its group:
a run of another kind that shares those traits is told too, which is the point (a long-context run on Hopper is
one whatever its model), and is why the thresholds are the groups' own ends, not tighter ones.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pipesim.analytic.layout import Recompute, ZeroStage

LONG_CONTEXT_TOKENS = 32_768  # the long-context group's shortest sequence (32k–131k)
ONE_NODE_GPUS = 8  # the single-node group: one 8-GPU node
SMALL_MODEL_PARAMS = 10e9  # the single-node group's models, 1B–8B (Llama 3.1 8B: 8.03B)
DEEP_PIPELINE = 12  # the A100 group's pipelines, 12–35 stages


class HeldOutKind(enum.Enum):
    """One kind of run issue #24's held-out groups are of (its table's rows, merged where two rows are one kind)."""

    LONG_CONTEXT = "long-context"
    SMALL_MODEL_ONE_NODE = "small-model-one-node"
    A100_FULL_RECOMPUTE_AT_SCALE = "a100-full-recompute-at-scale"
    TP8_WITHOUT_PIPELINE = "tp8-without-pipeline"
    DISTRIBUTED_OPTIMIZER_MEMORY = "distributed-optimizer-memory"
    ZERO3_TP_MEMORY = "zero3-tp-memory"

    @property
    def of_memory(self) -> bool:
        """Whether the groups' error was of the peak memory (else of the step time)."""
        return self in (HeldOutKind.DISTRIBUTED_OPTIMIZER_MEMORY, HeldOutKind.ZERO3_TP_MEMORY)

    @property
    def description(self) -> str:
        return {
            HeldOutKind.LONG_CONTEXT: f"H100 runs of {LONG_CONTEXT_TOKENS // 1024}k tokens or more",
            HeldOutKind.SMALL_MODEL_ONE_NODE: "H100 runs of 1B–8B models on one node",
            HeldOutKind.A100_FULL_RECOMPUTE_AT_SCALE: (f"A100 runs recomputing every layer over {DEEP_PIPELINE} "
                                                       "pipeline stages or more"),
            HeldOutKind.TP8_WITHOUT_PIPELINE: "H100 runs at tp 8 without pipelining over several nodes",
            HeldOutKind.DISTRIBUTED_OPTIMIZER_MEMORY: ("H100 runs of Megatron's distributed optimizer with FP32 "
                                                       "gradient buffers"),
            HeldOutKind.ZERO3_TP_MEMORY: "H100 runs of ZeRO-3 (FSDP) with tensor parallelism",
        }[self]

    @property
    def hint(self) -> str:
        """What a run of the kind can state to leave it, where one setting spans the groups' error."""
        if self is HeldOutKind.DISTRIBUTED_OPTIMIZER_MEMORY:
            return ("; a run that keeps BF16 gradients says so with --param-bytes 16 (Megatron-LM's default "
                    "under --bf16 is an FP32 buffer, and the groups' error is about its size)")
        return ""

    @property
    def mark(self) -> str:
        """How ``plan`` marks a candidate of the kind (with a footnote quoting its record)."""
        return {HeldOutKind.LONG_CONTEXT: "lc", HeldOutKind.SMALL_MODEL_ONE_NODE: "1node",
                HeldOutKind.A100_FULL_RECOMPUTE_AT_SCALE: "a100rc", HeldOutKind.TP8_WITHOUT_PIPELINE: "tp8",
                HeldOutKind.DISTRIBUTED_OPTIMIZER_MEMORY: "do-mem", HeldOutKind.ZERO3_TP_MEMORY: "z3tp-mem"}[self]


@dataclass(frozen=True)
class RunTraits:
    """What the kinds' predicates read of a run: the chip's family (``hopper``, ``a100``: :func:`pipesim.analytic.
    error_band.chip_family`), the sequence, the model's parameters, the GPUs, tp, pp, whether every layer is
    recomputed, the ZeRO stage the run shards at (none where one data-parallel rank holds everything) and the
    gradient bytes kept per parameter."""

    family: str | None
    seq_len: int
    params: float
    gpus: int
    tp: int
    pp: int
    recompute: Recompute
    sharding: ZeroStage
    grad_bytes: float

    def kinds(self, of_memory: bool) -> frozenset[HeldOutKind]:
        """The kinds this run is of, among those of step time (``of_memory`` False) or of peak memory."""
        hopper, a100 = self.family == "hopper", self.family == "a100"
        found = {
            HeldOutKind.LONG_CONTEXT: hopper and self.seq_len >= LONG_CONTEXT_TOKENS,
            HeldOutKind.SMALL_MODEL_ONE_NODE: hopper and self.gpus <= ONE_NODE_GPUS
            and self.params <= SMALL_MODEL_PARAMS,
            HeldOutKind.A100_FULL_RECOMPUTE_AT_SCALE: a100 and self.recompute is Recompute.FULL
            and self.pp >= DEEP_PIPELINE,
            HeldOutKind.TP8_WITHOUT_PIPELINE: hopper and self.tp >= 8 and self.pp == 1 and self.gpus > ONE_NODE_GPUS,
            HeldOutKind.DISTRIBUTED_OPTIMIZER_MEMORY: hopper and self.sharding is ZeroStage.OPTIMIZER
            and self.grad_bytes == 4,
            HeldOutKind.ZERO3_TP_MEMORY: hopper and self.sharding is ZeroStage.PARAMETERS and self.tp > 1,
        }
        return frozenset(k for k, yes in found.items() if yes and k.of_memory == of_memory)


@dataclass(frozen=True)
class HeldOutRecord:
    """What issue #24 measured on its held-out runs of one kind when it was filed (``filed_low``…``filed_high``,
    signed: predicted / published − 1) and where those runs stand now, carried to this release
    (``now_low``…``now_high``; as run, with the framework and settings the group names, where it names any), over
    ``runs`` representative runs; ``median_only`` where the issue gives its group's median alone."""

    kind: HeldOutKind
    filed_low: float
    filed_high: float
    now_low: float
    now_high: float
    runs: int
    median_only: bool = False

    def text(self) -> str:
        measure = "peak memory" if self.kind.of_memory else "step"
        return (f"issue #24's held-out {self.kind.description} came out with their {measure} "
                f"{_said(self, filed=True)} when it was filed; carried to this release, {_said(self, filed=False)} "
                f"(not measured: python experiments/held_out_patterns.py){self.kind.hint}")

    def to_dict(self) -> dict:
        return {"kind": self.kind.value, "description": self.kind.description, "measure":
                "peak memory" if self.kind.of_memory else "step time", "filed": [self.filed_low, self.filed_high],
                "now": [self.now_low, self.now_high], "runs": self.runs, "median_only": self.median_only}


def _said(record: HeldOutRecord, filed: bool) -> str:
    """``17–39% too fast``, ``−6…+9% off``, ``24% too fast at the median`` of one end of a record."""
    low, high = (record.filed_low, record.filed_high) if filed else (record.now_low, record.now_high)
    memory = record.kind.of_memory
    if record.median_only:
        span, at = f"{abs(low):.0%}", " at the median"
    elif low < 0 < high:
        return f"{low:+.0%}…{high:+.0%} off"
    else:
        small, large = sorted((abs(low), abs(high)))
        same = f"{small:.0%}" == f"{large:.0%}"  # one figure where the two ends read alike
        span, at = (f"{large:.0%}" if same else f"{small * 100:.0f}–{large:.0%}"), ""
    if high < 0 or (record.median_only and low < 0):
        way = "too low" if memory else "too fast"
    else:
        way = "too high" if memory else "too slow"
    return f"{span} {way}{at}"


def held_out_records(kinds: frozenset[HeldOutKind] | None) -> tuple[HeldOutRecord, ...]:
    """The record of each of ``kinds`` that the experiment has carried, in :class:`HeldOutKind` order."""
    from pipesim.analytic.held_out_records import HELD_OUT

    return tuple(HeldOutRecord(k, *HELD_OUT[k.value]) for k in HeldOutKind
                 if kinds and k in kinds and k.value in HELD_OUT)
