"""``pipesim.sensitivity``: how far the settings a published run leaves unstated move its prediction.

A paper or a performance table states a run's model, GPUs and layout, and leaves out how it ran: whether the
data-parallel sync overlapped the passes, whether TP communication overlapped the GEMMs, which attention kernel,
in which precision the gradients were kept, whether the optimizer state was sharded, whether grouped-query
attention's keys and values reached the kernel repeated to every query head. Issue #24's held-out runs
showed those settings moving a prediction by as much as the model's error (Megatron-LM's TP-8 runs: 16 % of the
step is a data-parallel sync that the overlap flags hide). So the answer to "can I trust this number?" includes
"which of its settings did you guess, and what does each guess cost": each such setting flipped alone from the
run as given, the step and the peak it then predicts, and the range they span.

Only the settings that act on the layout are flipped (a TP overlap needs tp > 1, the sends' overlap a pipeline,
the parameter gather a sharded optimizer); a flip the layout refuses is listed with the refusal's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pipesim.analytic.frameworks import knobs, runs_megatron_core
from pipesim.analytic.layout import AttentionKernel, Fp8Linears, Fp8Params, Layout, Precision, Recompute, ZeroStage
from pipesim.analytic.memory_gib import GIB
from pipesim.analytic.model_spec import ModelSpec
from pipesim.api.results import SimResult
from pipesim.errors import PipesimError

__all__ = ["Sensitivity", "SettingFlip", "sensitivity"]


@dataclass(frozen=True)
class SettingFlip:
    """One unstated setting flipped alone: ``flag`` as ``simulate`` spells the change, ``options`` the API's, and
    what the run then predicts."""

    flag: str
    what: str  # the setting, in words
    options: dict
    step_time: float  # seconds
    peak_gib: float  # the allocated peak, GiB
    # whether that peak fits the chip's memory: a run that ran did, so a flip that does not is no guess
    fits: bool = True


@dataclass(frozen=True)
class Sensitivity:
    """The run as given (``step_time``, ``peak_gib``) and each of its unstated settings flipped alone."""

    step_time: float
    peak_gib: float
    flips: tuple[SettingFlip, ...]
    refused: tuple[tuple[str, str], ...] = ()  # (flag, the one-line reason) for a flip the layout refuses

    def step_change(self, flip: SettingFlip) -> float:
        return flip.step_time / self.step_time - 1

    def memory_change(self, flip: SettingFlip) -> float:
        return flip.peak_gib / self.peak_gib - 1

    @property
    def step_range(self) -> tuple[float, float]:
        """The fastest and slowest step over the run as given and each flip that fits the chip's memory."""
        steps = [self.step_time, *(f.step_time for f in self.flips if f.fits)]
        return min(steps), max(steps)

    def ranked(self) -> list[SettingFlip]:
        """The flips, the one that moves the step most first."""
        return sorted(self.flips, key=lambda f: -abs(self.step_change(f)))

    def text(self) -> str:
        low, high = self.step_range
        lines = [f"unstated settings, each flipped alone (the run as given: {self.step_time:.4g} s a step, "
                 f"{self.peak_gib:.2f} GiB peak):",
                 f"  {'flip':<26} {'step s':>8} {'change':>8} {'peak GiB':>9} {'change':>8}  setting"]
        for f in self.ranked():
            lines.append(f"  {f.flag:<26} {f.step_time:>8.4g} {self.step_change(f):>+8.1%} {f.peak_gib:>9.2f} "
                         f"{self.memory_change(f):>+8.1%}  {f.what}{'' if f.fits else ' (does not fit)'}")
        lines += [f"  {flag:<26} refused: {reason}" for flag, reason in self.refused]
        movers = [f for f in self.ranked() if f.fits][:2]
        most = ", most from " + " and ".join(f"{f.flag} ({self.step_change(f):+.1%})" for f in movers) if movers else ""
        lines.append(f"the step over those that fit: {low:.4g}–{high:.4g} s ({low / self.step_time - 1:+.1%} … "
                     f"{high / self.step_time - 1:+.1%}){most}; a published run's unstated settings move its "
                     "prediction this far before the model's own error (its band) is counted")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict:
        low, high = self.step_range
        return {"step_time_s": self.step_time, "peak_gib": self.peak_gib,
                "step_range_s": [low, high],
                "flips": [{"flag": f.flag, "setting": f.what, "options": f.options, "step_time_s": f.step_time,
                           "step_change": self.step_change(f), "peak_gib": f.peak_gib,
                           "peak_change": self.memory_change(f), "fits": f.fits} for f in self.ranked()],
                "refused": [{"flag": flag, "reason": reason} for flag, reason in self.refused]}


def _toggle(on: bool, flag: str, no_flag: str, option: str, what: str) -> tuple[str, str, dict]:
    """A switch's flip: off where the layout has it on (``no_flag``), on where off (``flag``)."""
    return (no_flag if on else flag), what, {option: not on}


def unstated_flips(layout: Layout, framework: str | None, model: ModelSpec) -> list[tuple[str, str, dict]]:
    """The flips that act on ``layout`` of ``model``: (flag, the setting in words, the API options that flip it)."""
    lay = layout
    flips = []
    if lay.reduces_gradients:
        flips.append(_toggle(lay.overlap_grad_reduce, "--overlap-grad-reduce", "--no-overlap-grad-reduce",
                             "overlap_grad_reduce", "the data-parallel gradient reduce beside the last backward"))
        offered = knobs(framework).zero_stages  # a framework without ZeRO-1 (torchtitan's) is not flipped to it
        if lay.sharding is ZeroStage.NONE and ZeroStage.OPTIMIZER in offered:
            flips.append(("--zero 1", "the optimizer state sharded over the replicas (the distributed optimizer)",
                          {"distributed_optimizer": None, "zero": 1}))
        elif lay.sharding is ZeroStage.OPTIMIZER:
            flips.append(("--zero 0", "the optimizer state whole on every replica",
                          {"distributed_optimizer": None, "zero": 0}))
    if lay.sharding.gathers_after_step and lay.reduces_gradients:
        flips.append(_toggle(lay.overlap_param_gather, "--overlap-param-gather", "--no-overlap-param-gather",
                             "overlap_param_gather", "the sharded parameters gathered beside the first forward"))
    if lay.tp > 1:
        flips.append(_toggle(lay.async_tp, "--async-tp", "without --async-tp", "async_tp",
                             "TP communication overlapped with the GEMMs"))
    if lay.pp > 1:
        flips.append(_toggle(lay.overlap_p2p, "--overlap-p2p", "--no-overlap-p2p", "overlap_p2p",
                             "the pipeline sends overlapped with compute"))
    grads = 2 if lay.param_bytes.grads == 4 else 4  # bytes a parameter's gradient takes, the other way
    other = replace(lay.param_bytes, grads=grads).text
    flips.append((f"--param-bytes {other}", f"the gradients kept and reduced in {8 * grads} bits",
                  {"param_bytes": other}))
    if lay.attention is not AttentionKernel.TRITON:
        other = AttentionKernel.UNFUSED if lay.attention is AttentionKernel.FUSED else AttentionKernel.FUSED
        flips.append((f"--attention {other.value}", "the attention kernel (fused: FlashAttention or cuDNN; "
                      "unfused: Megatron's softmax between two batched GEMMs)", {"attention": other.value}))
    if lay.attention is not AttentionKernel.UNFUSED and model.query_heads_per_kv_head > 1:
        flips.append(_toggle(lay.kv_repeated, "--repeat-kv", "without --repeat-kv", "repeat_kv",
                             "grouped-query K and V copied to every query head before the attention"))
    if runs_megatron_core(framework) and lay.recompute in (Recompute.NONE, Recompute.SELECTIVE):
        other = Recompute.SELECTIVE if lay.recompute is Recompute.NONE else Recompute.NONE
        flips.append((f"--recompute {other.value}", "Megatron's selective recomputation of the attention core",
                      {"recompute": other.value}))
    if (lay.precision is Precision.FP8 and lay.fp8_linears is Fp8Linears.TRANSFORMER_ENGINE
            and lay.sharding.gathers_after_step):
        other = Fp8Params.OFF if lay.fp8_params is not Fp8Params.OFF else Fp8Params.BOTH
        flips.append((f"--fp8-params {other.value}", "the FP8 linears' weights in FP8 alone (no BF16 copy)",
                      {"fp8_params": other.value}))
    return flips


def sensitivity(schedule: str | None = None, pp: int | None = None, mb: int | None = None,
                chunks: int | None = None, *, base: SimResult | None = None,
                run: Callable[..., SimResult] | None = None, **simulate_options: object) -> Sensitivity:
    """Each setting a published run often leaves unstated, flipped alone from the run ``simulate(schedule, pp,
    mb, chunks, **simulate_options)`` describes (a model on a chip), with the step and peak it then predicts.

    ``base``: that run's result, when the caller has it already (the command line), so it is not simulated
    twice. ``run``: the simulation to call (default :func:`pipesim.simulate`). ``print(result)`` gives the table
    ``simulate --sensitivity`` prints; ``result.to_dict()`` its JSON.

    Example:
        >>> import pipesim
        >>> s = pipesim.sensitivity(model="gpt-18.4b", tp=8, dp=32, pp=1, mb=8, seq_len=4096,
        ...                         distributed_optimizer=True, sequence_parallel=True)
        >>> [f.flag for f in s.ranked()][:2]
        ['--attention unfused', '--async-tp']
    """
    if run is None:
        from pipesim.api.simulation import simulate as run
    given = dict(simulate_options)
    if base is None:
        base = run(schedule, pp, mb, chunks, **given)
    report = base.model_report
    if report is None:
        raise PipesimError("--sensitivity flips the settings of a model on a chip: give --model (and --hardware)")
    flips, refused = [], []
    for flag, what, options in unstated_flips(report.layout, report.framework, report.model):
        try:
            flipped = run(schedule, pp, mb, chunks, **{**given, **options}).model_report
        except PipesimError as error:
            refused.append((flag, str(error)))
            continue
        peak = flipped.memory.peak.total / GIB
        flips.append(SettingFlip(flag, what, options, flipped.step_time, peak, peak <= report.chip.memory_gib))
    return Sensitivity(report.step_time, report.memory.peak.total / GIB, tuple(flips), tuple(refused))
