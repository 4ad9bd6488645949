"""pipesim against published training runs: step time (or throughput) and memory, each row with its source.

Run: ``python experiments/published_runs.py`` (prints the README's table; ``--markdown`` for Markdown).
Nothing here is fitted per row: the chip constants are the presets' (pipesim/analytic/chip_presets.py, each
cited there), the rest is each paper's stated configuration. Step time is compared in seconds: a published
throughput (TFLOP/s per GPU, tokens/s per GPU, MFU) is turned into seconds per step with the paper's own
batch, and a published TFLOP/s with pipesim's FLOP count of the same step (both count the full s² attention).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.layout import AttentionKernel, Layout, Precision, Recompute, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.stage_split import StageSplitRequest, resolve_stage_layers
from pipesim.analytic.steady_state import StepBoundary, steady_state_step_time, sync_latency
from pipesim.analytic.step_report import StepReport, step_report
from pipesim.analytic.to_costs import build_cost_model
from pipesim.program.build import build_program
from pipesim.sim.simulator import simulate

NARAYANAN = "Narayanan et al. 2021, Megatron-LM on A100, Table 1"
KORTHIKANTI = "Korthikanti et al. 2023, Table 5"
LLAMA3 = "Llama Team 2024, The Llama 3 Herd of Models, Table 4"
NEMO = "NVIDIA NeMo 24.07 performance summary (DGX-H100 FP8)"


@dataclass(frozen=True)
class PublishedRun:
    """One published measurement and the configuration it was taken at."""

    source: str
    model: str
    chip: str
    gpus: int
    global_batch: int  # sequences per step
    tp: int = 1
    pp: int = 1
    cp: int = 1
    chunks: int = 1
    micro_batch: int = 1
    seq_len: int | None = None
    schedule: str = "1f1b"
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False
    attention: AttentionKernel = AttentionKernel.FUSED
    zero: ZeroStage = ZeroStage.NONE
    precision: Precision = Precision.BF16
    first_last: int | None = None  # layers on the first and on the last stage, when lighter
    # exactly one of these is the published throughput
    hfu_tflops: float | None = None  # hardware TFLOP/s per GPU (recompute counted)
    mfu_tflops: float | None = None  # model TFLOP/s per GPU
    tokens_per_gpu: float | None = None
    step_s: float | None = None
    memory_gib: float | None = None
    note: str = field(default="", compare=False)

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def microbatches(self) -> int:
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def label(self) -> str:
        extra = f" cp{self.cp}" if self.cp > 1 else ""
        extra += f" v{self.chunks}" if self.chunks > 1 else ""
        return f"{self.model} tp{self.tp} pp{self.pp}{extra} {self.gpus}×{self.chip.split('-')[0]}"


def _rows() -> list[PublishedRun]:
    full, unfused = Recompute.FULL, AttentionKernel.UNFUSED
    rows = [
        PublishedRun(NARAYANAN, name, "a100-80gb", gpus, batch, tp=tp, pp=pp, recompute=full, attention=unfused,
                     hfu_tflops=tf)
        for name, tp, pp, gpus, batch, tf in [
            ("gpt-1.7b", 1, 1, 32, 512, 137), ("gpt-3.6b", 2, 1, 64, 512, 138), ("gpt-7.5b", 4, 1, 128, 512, 142),
            ("gpt-18.4b", 8, 1, 256, 1024, 135), ("gpt-39.1b", 8, 2, 512, 1536, 138),
            ("gpt-76.1b", 8, 4, 1024, 1792, 140), ("gpt-145.6b", 8, 8, 1536, 2304, 148),
            ("gpt-310.1b", 8, 16, 1920, 2160, 155), ("gpt-529.6b", 8, 35, 2520, 2520, 163),
            ("gpt-1008b", 8, 64, 3072, 3072, 163)]
    ]
    # Korthikanti et al. 2023, Table 3 (configurations) and Table 5 (seconds per iteration): full recompute
    # against selective recompute + sequence parallelism ("present work").
    for name, pp, gpus, batch, t_full, t_sel in [
        ("gpt-22b", 1, 8, 4, 1.42, 1.10), ("gpt3-175b", 8, 64, 64, 18.13, 13.75),
        ("gpt-530b", 35, 280, 280, 49.05, 37.83), ("gpt-1t", 64, 512, 512, 94.42, 71.49),
    ]:
        rows.append(PublishedRun(KORTHIKANTI, name, "a100-80gb", gpus, batch, tp=8, pp=pp, recompute=full,
                                 attention=unfused, step_s=t_full))
        rows.append(PublishedRun(KORTHIKANTI, name, "a100-80gb", gpus, batch, tp=8, pp=pp,
                                 recompute=Recompute.SELECTIVE, sequence_parallel=True, attention=unfused,
                                 step_s=t_sel))
    # Llama 3 405B pre-training on H100 (BF16): 126 layers, pp 16, interleaved (§3.3.2) — taken as v = 2,
    # 32 stages of 4 layers with one layer fewer on the first and last (3), tp 8, 16M tokens per step;
    # TFLOP/s per GPU as published.
    for gpus, batch, tf in [(8192, 2048, 430), (16384, 2048, 400)]:
        rows.append(PublishedRun(LLAMA3, "llama3.1-405b", "h100-sxm", gpus, batch, tp=8, pp=16, chunks=2,
                                 schedule="interleaved", sequence_parallel=True, zero=ZeroStage.OPTIMIZER,
                                 first_last=3, mfu_tflops=tf))
    # NeMo 24.07, DGX-H100, FP8 (Transformer Engine), distributed optimizer, SP when tp > 1.
    for name, gpus, batch, mbs, tp, pp, cp, vp, tokens in [
        ("gpt3-175b", 128, 256, 1, 4, 8, 1, 6, 726), ("gpt3-175b", 512, 2048, 2, 4, 8, 1, 6, 782),
        ("llama2-7b", 8, 128, 1, 1, 1, 1, 1, 16847), ("llama2-13b", 16, 128, 1, 1, 4, 1, 10, 8646),
        ("llama2-70b", 64, 128, 1, 4, 4, 1, 20, 1707), ("llama3.1-8b", 8, 128, 1, 1, 1, 2, 1, 12036),
        ("llama3.1-70b", 64, 128, 1, 4, 4, 2, 5, 1533),
    ]:
        rows.append(PublishedRun(NEMO, name, "h100-sxm", gpus, batch, tp=tp, pp=pp, cp=cp, chunks=vp,
                                 micro_batch=mbs, schedule="interleaved" if vp > 1 else "1f1b",
                                 sequence_parallel=tp > 1, zero=ZeroStage.OPTIMIZER, precision=Precision.FP8,
                                 tokens_per_gpu=tokens))
    return rows


PUBLISHED_RUNS: list[PublishedRun] = _rows()


@dataclass(frozen=True)
class Comparison:
    run: PublishedRun
    report: StepReport
    published_step_s: float

    @property
    def step_error(self) -> float:
        return self.report.step_time / self.published_step_s - 1

    @property
    def memory_error(self) -> float | None:
        if self.run.memory_gib is None:
            return None
        return self.report.memory.peak.total / 2**30 / self.run.memory_gib - 1


def predict(run: PublishedRun, boundary: StepBoundary = StepBoundary.SYNC) -> Comparison:
    model = MODEL_PRESETS[run.model].with_shape(run.seq_len, run.micro_batch)
    chip = CHIP_PRESETS[run.chip]
    built = build_program(run.schedule, run.pp, run.microbatches, run.chunks if run.chunks > 1 else None)
    shape = built.program.shape
    split = None
    if run.first_last is not None:
        split = resolve_stage_layers(model.layers, shape.num_stages,
                                     StageSplitRequest(run.first_last, run.first_last))
    layout = Layout(tp=run.tp, dp=run.dp, pp=run.pp, chunks=shape.chunks, microbatches=run.microbatches,
                    recompute=run.recompute, sequence_parallel=run.sequence_parallel, attention=run.attention,
                    zero=run.zero, cp=run.cp, precision=run.precision, stage_layers=split)
    result = simulate(built.program, build_cost_model(model, chip, layout, shape), check=False)
    step = steady_state_step_time(result, boundary, sync_latency(layout, chip))
    report = step_report(model, chip, layout, result, step, boundary)
    return Comparison(run, report, _published_step(run, report))


def _published_step(run: PublishedRun, report: StepReport) -> float:
    if run.step_s is not None:
        return run.step_s
    if run.tokens_per_gpu is not None:
        return report.tokens_per_step / (run.tokens_per_gpu * run.gpus)
    if run.hfu_tflops is not None:
        return report.hardware_flops / (run.hfu_tflops * 1e12 * run.gpus)
    return report.model_flops / (run.mfu_tflops * 1e12 * run.gpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    comparisons = [predict(run) for run in PUBLISHED_RUNS]
    header = ["source", "configuration", "published s/step", "pipesim s/step", "error"]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    for c in comparisons:
        cells = [c.run.source.split(",")[0], c.run.label + f" {c.run.recompute.value}"
                 + (" +sp" if c.run.sequence_parallel else ""), f"{c.published_step_s:.3g}",
                 f"{c.report.step_time:.3g}", f"{c.step_error:+.1%}"]
        print("| " + " | ".join(cells) + " |" if args.markdown else "  ".join(f"{x:<14}" for x in cells))
    errors = [abs(c.step_error) for c in comparisons]
    print(f"\nstep time: {len(errors)} rows, mean |error| {sum(errors) / len(errors):.1%}, max {max(errors):.1%}")


if __name__ == "__main__":
    main()
