"""Where issue #24's held-out patterns stand now: the issue's own summary of the runs we do not see, carried to
today's predictions.

Issue #24 summarises, for groups of published runs kept from us, how far pipesim's predictions were off (its
table "What the held-out runs show"): a range of signed errors per group, predicted / published − 1, measured
against pipesim as it was when the issue was filed. The rows stay unseen, and nothing here is fitted to them.
But the summary is enough to track each group: a prediction that has moved by a factor ``r`` since then moves
a row's error from ``e`` to ``(1 + e)·r − 1`` (:func:`carried_error`). So each group gets representative runs,
taken from what the issue states of the group's layouts and, where it is silent, set by us (each such setting
said in the run's ``inferred``); both releases predict them, and the ratio of the two carries the issue's range
to today's.

The release the issue measured: the one whose README quoted "112 rows" matched to "3.1 %" (the issue's opening
figure), commits 570e706 … af8190a^ (2026-12-01); their predictions agree, and 570e706 is the baseline
(:data:`BASELINE_COMMIT`; its predictions are recorded in ``data/held_out_baseline.json``, re-derived by
``python experiments/held_out_patterns.py --baseline-tree DIR`` from a checkout of it).

What it cannot say, stated: a row's own layout is not its group's representative, so a group's carried range is
only as good as the ratio is alike across layouts (each group's spread of ratios is reported; where it is wide,
the carried range is loose); the issue gives some groups as a median alone (the single-node runs: "median 42 %")
and one by the two ends of its range alone (Megatron-LM's own H100 weak-scaling runs, 1.7B–462B: the small
models, −26 %, and TP 8 at pp 1, +24 %), represented as two groups with sizes of our choosing.
"""

from __future__ import annotations

import enum
import json
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipesim.analytic.allocator import MemoryMeasure
from pipesim.analytic.frameworks import Framework
from pipesim.analytic.held_out_kinds import HeldOutKind
from pipesim.analytic.memory_gib import GIB

if TYPE_CHECKING:  # the API sits above validation: its result class only for the annotation
    from pipesim.api.sensitivity import Sensitivity

BASELINE_COMMIT = "570e706"
BASELINE_FILE = Path(__file__).parent / "data" / "held_out_baseline.json"


class Measure(enum.Enum):
    """What a group's published error is of."""

    STEP = "step time"
    MEMORY = "peak memory"


@dataclass(frozen=True)
class PatternGroup:
    """One row of issue #24's held-out table: its runs' signed errors against the baseline release.

    ``framework`` and ``reported``: the framework the runs trained with and the peak it prints, where the issue
    names them or their features point to one (``basis`` says which). ``settings``: options the runs are said or
    inferred to have set beyond the layout the issue states (``basis`` says why): flags the baseline's CLI did not
    have, or settings of the runs' era that the issue does not name; the baseline ran the representatives without
    them, as an evaluator given the stated layout alone would have. The baseline release had no ``--framework``,
    no reserved peak and not all those flags: its error was of its one figure, so the carried error "as run"
    compares today's prediction of the run as it trained, and of what its framework prints."""

    name: str
    measure: Measure
    low: float  # the range of signed errors, predicted / published − 1 (negative: pipesim too fast/low)
    high: float
    stated: str  # what the issue says of the group's layouts, as it says it
    framework: Framework | None = None
    reported: MemoryMeasure = MemoryMeasure.ALLOCATED
    basis: str = ""
    settings: Mapping[str, object] = field(default_factory=dict)
    # the kind of run a prediction of which is told the group's carried range (None: a group within its band, or
    # a variant of another group's runs)
    kind: HeldOutKind | None = None
    median_only: bool = False  # the issue gives the group's median alone (low = high = the median)

    @property
    def as_run_flags(self) -> str:
        """How the group runs "as run", as ``simulate`` flags: its framework, its settings and the peak read."""
        flags = [f"--framework {self.framework.value}"] if self.framework is not None else []
        flags += [" ".join(cli_flags({name: value})) for name, value in self.settings.items()]
        if self.measure is Measure.MEMORY and self.reported is MemoryMeasure.RESERVED:
            flags.append(f"the {self.reported.value} peak")
        return ", ".join(flags)


@dataclass(frozen=True)
class Representative:
    """A run standing for its group: ``pipesim.simulate``'s arguments (the baseline release's CLI takes the same
    as flags, :func:`cli_flags`) and the settings the issue does not state, chosen by us."""

    group: PatternGroup
    label: str
    options: Mapping[str, object]
    inferred: str = ""

    @property
    def key(self) -> str:
        """The recorded baseline's key: group and label."""
        return f"{self.group.name} | {self.label}"


def carried_error(error: float, ratio: float) -> float:
    """A published row's signed error ``error`` (predicted / published − 1) once the prediction has grown by
    ``ratio``: ``(1 + error)·ratio − 1``."""
    return (1 + error) * ratio - 1


def cli_flags(options: Mapping[str, object]) -> list[str]:
    """``options`` as ``pipesim simulate`` flags: ``name_with_underscores`` → ``--name-with-underscores``, a
    ``True`` alone, anything else followed by its value (``schedule`` too: the CLI takes it as a flag)."""
    flags: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not False and value is not None:
            flags += [flag, str(value)]
    return flags


def measured_value(rep: Representative, step_time: float, peak_bytes: float) -> float:
    """The number a group's error is of: the step in seconds or a peak in GiB."""
    return step_time if rep.group.measure is Measure.STEP else peak_bytes / GIB


def simulate_arguments(rep: Representative, as_run: bool = False) -> tuple[str | None, dict]:
    """``rep``'s schedule and :func:`pipesim.simulate` options: its own, or ``as_run`` with its group's settings
    and framework."""
    options = dict(rep.options)
    schedule = options.pop("schedule", None)
    if as_run:
        options.update(rep.group.settings)
        if rep.group.framework is not None:
            options["framework"] = rep.group.framework.value
    return schedule, options


def unstated_settings(rep: Representative) -> Sensitivity:
    """How far the settings the issue leaves unstated move ``rep`` as run (:func:`pipesim.sensitivity`): how much
    of its group's error could be a guess rather than the model."""
    from pipesim.api.sensitivity import sensitivity  # the API sits above validation: imported where it is used

    schedule, options = simulate_arguments(rep, as_run=True)
    return sensitivity(schedule, **options)


def predict_now(rep: Representative, as_run: bool = False) -> float:
    """This release's prediction of ``rep``'s measure (through :func:`pipesim.simulate`): with the run's options
    alone, as the baseline took them, or ``as_run``: with its group's framework and settings, and the peak that
    framework prints (:class:`PatternGroup`)."""
    from pipesim.api.simulation import simulate  # the API sits above validation: imported where it is used

    schedule, options = simulate_arguments(rep, as_run)
    report = simulate(schedule, **options).model_report
    peak = report.memory.peak
    reserved = as_run and rep.group.reported is MemoryMeasure.RESERVED
    return measured_value(rep, report.step_time, report.memory.reserved(peak) if reserved else peak.total)


def load_baseline(path: Path = BASELINE_FILE) -> dict[str, float]:
    """The baseline release's recorded predictions, by :attr:`Representative.key`."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return {key: float(value) for key, value in data["predictions"].items()}


def save_baseline(predictions: Mapping[str, float], commit: str, path: Path = BASELINE_FILE) -> None:
    """Record the baseline release's predictions with the commit they came from."""
    data = {"commit": commit, "note": "pipesim's predictions at the release issue #24 measured; "
            "python experiments/held_out_patterns.py --baseline-tree DIR re-derives them",
            "predictions": dict(sorted(predictions.items()))}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class GroupStanding:
    """One group's ratios (now / baseline) over its representatives, with the options alone and, where the group
    names a framework or a reserved peak, as run (:class:`PatternGroup`), and the issue's range carried by their
    median."""

    group: PatternGroup
    ratios: tuple[float, ...]
    ratios_as_run: tuple[float, ...] = ()
    unfit: int = 0  # representatives left out: as run they would not fit their GPU, so no row is like them

    @property
    def median_ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def carried(self) -> tuple[float, float]:
        """The issue's range carried to today's predictions by the median ratio."""
        return _carried_range(self.group, self.ratios)

    @property
    def carried_as_run(self) -> tuple[float, float] | None:
        """The same with the group's framework and reported peak; None where the group names neither."""
        return _carried_range(self.group, self.ratios_as_run) if self.ratios_as_run else None


def _carried_range(group: PatternGroup, ratios: Iterable[float]) -> tuple[float, float]:
    median = statistics.median(ratios)
    return carried_error(group.low, median), carried_error(group.high, median)


def runs_as_named(group: PatternGroup) -> bool:
    """Whether the group names something the options alone do not take: a framework, settings the baseline had
    no flag for, or a reserved peak."""
    return group.framework is not None or bool(group.settings) or (group.measure is Measure.MEMORY
                                                                   and group.reported is MemoryMeasure.RESERVED)


def fits_as_run(rep: Representative) -> bool:
    """Whether ``rep``, as run, fits its GPU's memory (the allocated peak): a layout that did not fit was never
    measured, so it stands for no row of its group."""
    from pipesim.api.simulation import simulate  # the API sits above validation: imported where it is used

    schedule, options = simulate_arguments(rep, as_run=True)
    report = simulate(schedule, **options).model_report
    return report.memory.peak.total <= report.chip.memory_gib * GIB


def standings(reps: Iterable[Representative], baseline: Mapping[str, float],
              now: Callable[..., float] = predict_now,
              fits: Callable[[Representative], bool] = fits_as_run) -> list[GroupStanding]:
    """Each group's :class:`GroupStanding`, in the order its first representative comes; ``now(rep, as_run=…)``
    predicts today's value. A representative that would not fit its GPU as run (``fits``) is left out of its
    group's ratios, unless none of the group's fits. A representative the baseline has no prediction for is
    refused (its key names it)."""
    by_group: dict[str, list[Representative]] = {}
    for rep in reps:
        if rep.key not in baseline:
            raise KeyError(f"no baseline prediction for {rep.key!r}: re-derive them with --baseline-tree")
        by_group.setdefault(rep.group.name, []).append(rep)
    result = []
    for members in by_group.values():
        group = members[0].group
        kept = [rep for rep in members if fits(rep)] or members
        ratios = tuple(now(rep) / baseline[rep.key] for rep in kept)
        as_run = (tuple(now(rep, as_run=True) / baseline[rep.key] for rep in kept) if runs_as_named(group)
                  else ())
        result.append(GroupStanding(group, ratios, as_run, len(members) - len(kept)))
    return result


# The groups, as its table gives them.
_NEMO_STATED = dict(
    framework=Framework.NEMO,
    basis="stated: NeMo/Megatron recipes; NeMo's pre-training recipes overlap the distributed optimizer's gradient "
          "reduce and parameter gather (DistributedDataParallelConfig(overlap_grad_reduce=True, "
          "overlap_param_gather=True) in nemo/collections/llm/recipes) and fuse the cross-entropy (GPTConfig)")
H100_BF16 = PatternGroup(
    "H100 BF16 70B-405B, NeMo/Megatron recipes", Measure.STEP, -0.25, -0.13,
    "TP 4-8, PP 4-9, interleaved v 5-12, CP 1-2, SP, distributed optimizer, TP comm overlap, overlapped P2P",
    **_NEMO_STATED)
H100_FP8 = PatternGroup("the same recipes in FP8", Measure.STEP, -0.16, +0.06,
                        "1-16% too fast, a few 4-6% too slow", **_NEMO_STATED)
# The same two groups simulated without the flags for the overlaps the issue lists (TP comm overlap: --async-tp;
# overlapped P2P: --overlap-p2p), as a run whose evaluator left them out would have been: how much the carried
# range depends on them (the baseline hid all of async TP's collectives and overlapped no P2P by default)
H100_BF16_PLAIN = PatternGroup("H100 BF16 recipes, without the overlap flags", Measure.STEP, H100_BF16.low,
                               H100_BF16.high, H100_BF16.stated)
H100_FP8_PLAIN = PatternGroup("FP8 recipes, without the overlap flags", Measure.STEP, H100_FP8.low, H100_FP8.high,
                              H100_FP8.stated)
# torchtitan's Llama of the runs' time (2024) copied K and V out to every query head before SDPA
_TORCHTITAN_KV = ("its Llama then repeated K and V to every query head before the attention (repeat_kv, until "
                  "pytorch/torchtitan #2259, January 2026)")
_TORCHTITAN_INFERRED = dict(
    framework=Framework.TORCHTITAN, reported=MemoryMeasure.RESERVED, settings={"repeat_kv": True},
    basis="inferred: FSDP beside TP (with async TP and FP8 linears, in the long-context runs) is torchtitan's "
          f"stack; torchtitan logs max_reserved (torchtitan/components/metrics.py); {_TORCHTITAN_KV}")
# The long-context runs state async TP, which torchtitan runs only compiled ("Async TP requires
# --training.compile", parallelize_llama.py): each TransformerBlock compiled, its element-wise work fused, and
# the loss compiled with it (since 2024-10-22, the day its context parallelism landed)
# and, pipelined in 2024, PyTorch's schedules kept the last stage's outputs for step() to return (torchtitan passes
# return_outputs=False since October 2025)
_TORCHTITAN_OUTPUTS = ("PyTorch's pipeline schedules then kept the last stage's outputs until the step's end "
                       "(torchtitan passes return_outputs=False since October 2025)")
_TORCHTITAN_PIPELINED = {"repeat_kv": True, "pipeline_outputs_kept": True}
_TORCHTITAN_COMPILED = dict(
    _TORCHTITAN_INFERRED, settings={**_TORCHTITAN_PIPELINED, "elementwise": "fused", "loss": "compiled"},
    basis=f"{_TORCHTITAN_INFERRED['basis']}; {_TORCHTITAN_OUTPUTS}; async TP, stated, runs only under "
          "torch.compile in torchtitan (parallelize_llama.py: 'Async TP requires --training.compile'), which "
          "compiles each TransformerBlock (element-wise work fused) and the loss")
LONG_CONTEXT = PatternGroup(
    "H100 405B long context", Measure.STEP, -0.51, -0.34,
    "seq 32k-131k, TP8 PP8, CP 1-4, ZeRO-3/FSDP, full recompute, FP8 linears, async TP", **_TORCHTITAN_COMPILED,
    kind=HeldOutKind.LONG_CONTEXT)
LONG_CONTEXT_MEMORY = PatternGroup("H100 405B long context, peak memory", Measure.MEMORY, -0.16, -0.14,
                                   LONG_CONTEXT.stated, **_TORCHTITAN_COMPILED)
FSDP_TP = PatternGroup("H100 70B FSDP + TP", Measure.STEP, -0.34, -0.21,
                       "ZeRO-3 over 32, TP 8, micro-batch 16, full recompute", **_TORCHTITAN_INFERRED)
FSDP_TP_MEMORY = PatternGroup("H100 70B FSDP + TP, peak memory", Measure.MEMORY, -0.52, -0.49,
                              "against the framework's reported peak", **_TORCHTITAN_INFERRED,
                              kind=HeldOutKind.ZERO3_TP_MEMORY)
A100_RECOMPUTE = PatternGroup(
    "A100 at scale, full recomputation", Measure.STEP, -0.33, -0.25, "175B-530B, TP 4-8, PP 12-35, 1F1B",
    framework=Framework.MEGATRON_DEEPSPEED, settings={"attention": "unfused"},
    kind=HeldOutKind.A100_FULL_RECOMPUTE_AT_SCALE,
    basis="inferred: 1F1B pipelines of 12-35 stages with every layer recomputed, at 175B-530B on A100, are the "
          "2021-2022 runs of DeepSpeed's pipeline engine (Megatron-DeepSpeed), as GLM-130B's and GPT-NeoX-20B's in "
          "sample, and ran Megatron's unfused attention (FlashAttention came to Megatron in 2023), as every row of "
          "that era in sample does")
SINGLE_NODE = PatternGroup(
    "8xH100 single node, 1B-8B", Measure.STEP, -0.42, -0.42,
    "every dp x tp x pp and micro-batch; the issue gives the median alone", framework=Framework.NANOTRON,
    basis="inferred: sweeps of every dp x tp x pp and micro-batch of 1B-8B Llama shapes on one 8xH100 node are "
          "Hugging Face's nanotron ablations", kind=HeldOutKind.SMALL_MODEL_ONE_NODE, median_only=True)
# Megatron-LM's own H100 weak-scaling runs (1.7B-462B): the issue gives the two ends of its range alone, the small
# models (-26 %) and TP 8 at pp 1 (+24 %, too slow), so each end is a group of its own
# As run: with the data-parallel sync overlapped, as Megatron-LM's own H100 example sets it (the baseline had no flag
# for either, and ran both after the passes)
_MEGATRON_LM_INFERRED = dict(
    settings={"overlap_grad_reduce": True, "overlap_param_gather": True},
    basis="inferred: Megatron-LM's own H100 example (examples/llama/train_llama3_8b_h100_fp8.sh) overlaps the "
          "distributed optimizer's gradient reduce and parameter gather (--overlap-grad-reduce "
          "--overlap-param-gather), flags the baseline release did not have")
MEGATRON_SMALL = PatternGroup("Megatron-LM H100 weak scaling, small models", Measure.STEP, -0.26, -0.26,
                              "1.7B-462B; the small models' end of the range", **_MEGATRON_LM_INFERRED)
MEGATRON_TP8 = PatternGroup("Megatron-LM H100 weak scaling, TP 8 pp 1", Measure.STEP, +0.24, +0.24,
                            "1.7B-462B; the TP 8, pp 1 end of the range", **_MEGATRON_LM_INFERRED,
                            kind=HeldOutKind.TP8_WITHOUT_PIPELINE)
# the same end had its runs been simulated with TP comm overlap (--async-tp, which the baseline took as hiding every
# TP collective), as Megatron-LM's tuned runs turn it on: how much the carried value depends on that flag
MEGATRON_TP8_ASYNC = PatternGroup("the same TP 8 end, with --async-tp", Measure.STEP, +0.24,
                                  +0.24, MEGATRON_TP8.stated, **_MEGATRON_LM_INFERRED)
DISTRIBUTED_OPTIMIZER_MEMORY = PatternGroup("memory, Megatron distributed optimizer, 7B", Measure.MEMORY,
                                            +0.17, +0.27, "tp/pp/dp variants",
                                            kind=HeldOutKind.DISTRIBUTED_OPTIMIZER_MEMORY)
# the same runs had their gradient buffer been BF16: Megatron-LM's default under --bf16 is an FP32 one
# (arguments.py sets accumulate_allreduce_grads_in_fp32), but its own H100 example reduces in BF16; the baseline
# had only --param-bytes 16 for it, which nothing says its evaluators gave
DISTRIBUTED_OPTIMIZER_MEMORY_BF16 = PatternGroup(
    "the same, gradients in BF16", Measure.MEMORY, +0.17, +0.27, DISTRIBUTED_OPTIMIZER_MEMORY.stated,
    settings={"param_bytes": 16},
    basis="inferred: Megatron-LM's own H100 example (examples/llama/train_llama3_8b_h100_fp8.sh) keeps and "
          "reduces its gradients in BF16 (--grad-reduce-in-bf16: --param-bytes 16); its default is FP32")
TORCHTITAN_3D_MEMORY = PatternGroup(
    "memory, torchtitan 405B 3D", Measure.MEMORY, -0.29, -0.20, "TP 8, PP 8, FSDP, 1F1B and interleaved",
    framework=Framework.TORCHTITAN, reported=MemoryMeasure.RESERVED, settings=_TORCHTITAN_PIPELINED,
    basis=f"stated: torchtitan, which logs max_reserved (torchtitan/components/metrics.py); inferred: "
          f"{_TORCHTITAN_KV}; {_TORCHTITAN_OUTPUTS}", kind=HeldOutKind.ZERO3_TP_MEMORY)

_NEMO_NO_OVERLAP_FLAGS = dict(sequence_parallel=True, distributed_optimizer=True)
_NEMO = dict(_NEMO_NO_OVERLAP_FLAGS, overlap_p2p=True, async_tp=True)
_H100 = dict(hardware="h100-sxm")


def _nemo_runs(group: PatternGroup, fp8: bool, overlaps: bool = True) -> list[Representative]:
    extra = dict(_NEMO if overlaps else _NEMO_NO_OVERLAP_FLAGS, **_H100)
    if fp8:
        extra["fp8"] = True
    overlap = ("TP comm overlap (--async-tp) and overlapped P2P as the issue states" if overlaps
               else "no flag for the overlaps the issue states (each release's default)")
    why = "global batch, sequence and GPU count ours; {0}; SP and distributed optimizer as the issue states; " + overlap
    return [
        Representative(group, "llama3.1-70b tp4 pp4 cp2 v5, 64 GPUs", dict(
            schedule="interleaved", model="llama3.1-70b", pp=4, chunks=5, tp=4, cp=2, dp=2, mb=64, seq_len=8192,
            **extra), why.format("128 sequences of 8192")),
        Representative(group, "llama3.1-70b tp8 pp4 v5, 128 GPUs", dict(
            schedule="interleaved", model="llama3.1-70b", pp=4, chunks=5, tp=8, dp=4, mb=32, seq_len=8192,
            **extra), why.format("128 sequences of 8192")),
        Representative(group, "llama3.1-405b tp8 pp9 cp2 v7, 576 GPUs", dict(
            schedule="interleaved", model="llama3.1-405b", pp=9, chunks=7, tp=8, cp=2, dp=4, mb=63, seq_len=8192,
            **extra), why.format("252 sequences of 8192")),
        Representative(group, "gpt3-175b tp4 pp8 v6, 128 GPUs", dict(
            schedule="interleaved", model="gpt3-175b", pp=8, chunks=6, tp=4, dp=4, mb=64, seq_len=2048,
            **extra), why.format("256 sequences of 2048")),
    ]


def _long_context_runs(group: PatternGroup) -> list[Representative]:
    runs = []
    for seq, cp in ((32768, 1), (65536, 2), (131072, 4)):
        dp = 512 // (64 * cp)
        runs.append(Representative(group, f"405b seq {seq} tp8 pp8 cp{cp} fsdp{dp}", dict(
            model="llama3.1-405b", pp=8, tp=8, cp=cp, dp=dp, mb=8, seq_len=seq, first_stage_layers=15,
            last_stage_layers=15, zero=3, recompute="full", fp8=True, async_tp=True, sequence_parallel=True,
            **_H100), "512 GPUs, 8 microbatches of one sequence, 1F1B, 15 layers on the end stages, sequence "
                      "parallelism (torchtitan's TP shards the sequence at the norms)"))
    return runs


def _fsdp_tp_runs(group: PatternGroup) -> list[Representative]:
    return [Representative(group, "70b tp8 fsdp32 mbs16 full recompute", dict(
        model="llama3.1-70b", pp=1, mb=1, tp=8, dp=32, zero=3, micro_batch_size=16, recompute="full",
        sequence_parallel=True, seq_len=8192, **_H100), "sequence 8192, one microbatch, sequence parallelism")]


def _a100_runs(group: PatternGroup) -> list[Representative]:
    why = "the ends of the issue's ranges; dp 8, sequence 2048 and about 2k sequences a step ours"
    return [
        Representative(group, "175b tp4 pp12 dp8 mbs2", dict(
            model="gpt3-175b", hardware="a100-80gb", pp=12, tp=4, dp=8, mb=128, micro_batch_size=2,
            recompute="full", seq_len=2048), why),
        Representative(group, "530b tp8 pp35 dp8", dict(
            model="gpt-530b", hardware="a100-80gb", pp=35, tp=8, dp=8, mb=240, recompute="full", seq_len=2048), why),
    ]


# Llama 3.2 1B and 3B as model files the baseline release reads (it has no such preset): the presets' fields, which
# are all its ModelSpec has (tests/test_held_out_patterns.py holds them equal)
SMALL_MODEL_FILES = {name: BASELINE_FILE.parent / f"held_out_model_{name}.json"
                     for name in ("llama3.2-1b", "llama3.2-3b")}
_SINGLE_NODE_LAYOUTS = ((1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (8, 1), (1, 4))  # (tp, pp); dp fills the node


def _single_node_runs(group: PatternGroup) -> list[Representative]:
    why = "sequence 4096, max(8, 2·pp) microbatches"
    models = [("llama3.1-8b", "8b", (1, 2, 4), "Llama 3.1 8B")]
    for name, path in SMALL_MODEL_FILES.items():
        size = name.split("-")[1]  # "1b", "3b"
        models.append((str(path), size, (1, 4), f"Llama 3.2 {size.upper()}, as a model file of the preset's fields "
                                               "(the baseline release has no such preset)"))
    runs = []
    for model, label, sizes, said in models:
        for mbs in sizes:
            for tp, pp in _SINGLE_NODE_LAYOUTS:
                dp = 8 // (tp * pp)
                runs.append(Representative(group, f"{label} dp{dp} tp{tp} pp{pp} mbs{mbs}", dict(
                    model=model, pp=pp, tp=tp, dp=dp, micro_batch_size=mbs, mb=max(8, 2 * pp), seq_len=4096,
                    **_H100), f"{said}, {why}"))
    return runs


def _megatron_weak_scaling_runs(small: PatternGroup, tp8: PatternGroup,
                                tp8_async: PatternGroup) -> list[Representative]:
    why = ("Narayanan et al.'s GPT shape of that size (the table's own shapes are not at hand), sequence 4096, 8 "
           "microbatches of one per replica and the replica count ours; the distributed optimizer, and sequence "
           "parallelism with tp, Megatron-LM's recommended flags; {0}")
    common = dict(seq_len=4096, mb=8, distributed_optimizer=True, **_H100)
    runs = [
        Representative(small, f"{model} tp1 pp1 dp64", dict(model=model, tp=1, pp=1, dp=64, **common),
                       why.format("no overlap flag (none stated)"))
        for model in ("gpt-1.7b", "gpt-3.6b")]
    for group, flags, said in ((tp8, {}, "no overlap flag (none stated)"),
                               (tp8_async, {"async_tp": True}, "TP comm overlap (--async-tp)")):
        runs += [
            Representative(group, "gpt-18.4b tp8 pp1 dp32", dict(model="gpt-18.4b", tp=8, pp=1, dp=32,
                                                                sequence_parallel=True, **flags, **common),
                           why.format(said)),
            Representative(group, "gpt-39.1b tp8 pp1 dp32", dict(model="gpt-39.1b", tp=8, pp=1, dp=32,
                                                                sequence_parallel=True, recompute="selective",
                                                                **flags, **common),
                           why.format(said) + "; selective recomputation (39B's activations at tp 8)"),
        ]
    return runs


def _distributed_optimizer_runs(group: PatternGroup) -> list[Representative]:
    return [Representative(group, f"llama2-7b tp{tp} pp{pp} dp{dp}", dict(
        model="llama2-7b", pp=pp, tp=tp, dp=dp, mb=8, distributed_optimizer=True, seq_len=4096, **_H100),
        "Llama 2 7B on 8 GPUs, sequence 4096, 8 microbatches")
        for tp, pp, dp in ((1, 1, 8), (2, 1, 4), (1, 2, 4), (4, 1, 2), (2, 2, 2))]


def _torchtitan_3d_runs(group: PatternGroup) -> list[Representative]:
    common = dict(model="llama3.1-405b", pp=8, tp=8, dp=8, mb=16, zero=3, recompute="full", sequence_parallel=True,
                  seq_len=8192, **_H100)
    why = "512 GPUs, sequence 8192, 16 microbatches, full recomputation, sequence parallelism"
    return [
        Representative(group, "405b tp8 pp8 fsdp8 1f1b", dict(
            **common, first_stage_layers=15, last_stage_layers=15), why + "; 15 layers on the end stages"),
        Representative(group, "405b tp8 pp8 fsdp8 interleaved v2", dict(
            **common, schedule="interleaved", chunks=2, first_stage_layers=7, last_stage_layers=7),
            why + "; 7 layers on the end stages"),
    ]


def representatives() -> list[Representative]:
    """Every group's representative runs, in the issue's order."""
    return [
        *_nemo_runs(H100_BF16, fp8=False), *_nemo_runs(H100_FP8, fp8=True),
        *_nemo_runs(H100_BF16_PLAIN, fp8=False, overlaps=False), *_nemo_runs(H100_FP8_PLAIN, fp8=True, overlaps=False),
        *_long_context_runs(LONG_CONTEXT), *_long_context_runs(LONG_CONTEXT_MEMORY),
        *_fsdp_tp_runs(FSDP_TP), *_fsdp_tp_runs(FSDP_TP_MEMORY),
        *_a100_runs(A100_RECOMPUTE), *_megatron_weak_scaling_runs(MEGATRON_SMALL, MEGATRON_TP8, MEGATRON_TP8_ASYNC),
        *_single_node_runs(SINGLE_NODE),
        *_distributed_optimizer_runs(DISTRIBUTED_OPTIMIZER_MEMORY),
        *_distributed_optimizer_runs(DISTRIBUTED_OPTIMIZER_MEMORY_BF16), *_torchtitan_3d_runs(TORCHTITAN_3D_MEMORY),
    ]


RECORDS_FILE = Path(__file__).resolve().parents[1] / "analytic" / "held_out_records.py"
KindRecord = tuple[float, float, float, float, int, bool]


def kind_records(standing: Iterable[GroupStanding]) -> dict[str, KindRecord]:
    """Per :class:`~pipesim.analytic.held_out_kinds.HeldOutKind` (its value) the groups of that kind have, what
    :class:`~pipesim.analytic.held_out_kinds.HeldOutRecord` reads: the issue's range, the range carried to now (as
    run where the group runs as named, else carried), the representatives counted and whether the issue gives a
    median alone; the groups of one kind merged (the widest of their ranges, their runs summed), each figure
    rounded to 0.01 %, as the file keeps it (fine enough that a whole percent reads as the experiment prints it)."""
    merged: dict[str, KindRecord] = {}
    for st in standing:
        group = st.group
        if group.kind is None:
            continue
        now_low, now_high = st.carried_as_run or st.carried
        record = (group.low, group.high, now_low, now_high, len(st.ratios), group.median_only)
        if (before := merged.get(group.kind.value)) is not None:
            record = (min(before[0], record[0]), max(before[1], record[1]), min(before[2], record[2]),
                      max(before[3], record[3]), before[4] + record[4], before[5] and record[5])
        merged[group.kind.value] = record
    return {kind: (*(round(v, 4) for v in r[:4]), r[4], r[5]) for kind, r in sorted(merged.items())}


def records_module(records: Mapping[str, KindRecord]) -> str:
    """The text of ``pipesim/analytic/held_out_records.py`` holding ``records``."""
    return (
        '"""Issue #24\'s held-out groups, carried to this release, by kind of run (written by ``python\n'
        "experiments/held_out_patterns.py --update-records``; see :mod:`pipesim.analytic.held_out_kinds`).\n\n"
        "kind: (the issue's lowest and highest signed error when it was filed, the range carried to this release,\n"
        'the representative runs counted, whether the issue gives the median alone)."""\n\n'
        "HELD_OUT: dict[str, tuple[float, float, float, float, int, bool]] = {\n"
        + "".join(f"    {kind!r}: {value!r},\n" for kind, value in records.items()) + "}\n"
    )

