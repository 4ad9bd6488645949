"""Predicted vs published throughput: Narayanan et al. 2021 (Megatron-LM on A100s), Table 1 and §5.1.

Run: ``python experiments/narayanan2021_throughput.py [--fast]`` (``--fast``: the five smallest rows only).
Published "achieved teraFLOP/s per GPU" count the recomputed forward (full activation recomputation), so
they are compared with pipesim's HFU-based figure.
Assumptions: micro-batch size 1, sequence 2048, vocabulary 51200, unfused attention (2021 kernels), FP32
gradient all-reduce without overlap, A100 achievable fraction 0.6 (the preset default, not fitted).
"""

from __future__ import annotations

import argparse

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.layout import AttentionKernel, Layout, Recompute
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.step_report import step_report
from pipesim.analytic.to_costs import build_cost_model
from pipesim.program.build import build_program
from pipesim.sim.simulator import simulate

# (preset, tp, pp, GPUs, global batch, published TFLOP/s per GPU)
TABLE1 = [
    ("gpt-1.7b", 1, 1, 32, 512, 137), ("gpt-3.6b", 2, 1, 64, 512, 138), ("gpt-7.5b", 4, 1, 128, 512, 142),
    ("gpt-18.4b", 8, 1, 256, 1024, 135), ("gpt-39.1b", 8, 2, 512, 1536, 138), ("gpt-76.1b", 8, 4, 1024, 1792, 140),
    ("gpt-145.6b", 8, 8, 1536, 2304, 148), ("gpt-310.1b", 8, 16, 1920, 2160, 155),
    ("gpt-529.6b", 8, 35, 2520, 2520, 163), ("gpt-1008b", 8, 64, 3072, 3072, 163),
    ("gpt3-175b", 8, 8, 1024, 1536, 140),  # §5.1: GPT-3 175B on 1024 A100s, 140 TFLOP/s per GPU
]


def predict(name: str, tp: int, pp: int, gpus: int, batch: int, schedule: str = "1f1b", chunks: int = 1):
    model = MODEL_PRESETS[name]
    dp = gpus // (tp * pp)
    microbatches = batch // (dp * model.micro_batch)
    built = build_program(schedule, pp, microbatches, chunks if schedule == "interleaved" else None)
    shape = built.program.shape
    layout = Layout(tp=tp, dp=dp, pp=pp, chunks=shape.chunks, microbatches=microbatches,
                    recompute=Recompute.FULL, attention=AttentionKernel.UNFUSED)
    chip = CHIP_PRESETS["a100-80gb"]
    result = simulate(built.program, build_cost_model(model, chip, layout, shape), check=False)
    return step_report(model, chip, layout, result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="the five smallest rows (a smoke run in seconds)")
    rows = TABLE1[:5] if parser.parse_args().fast else TABLE1
    print(f"{'model':<11} {'schedule':<14} {'step s':>7} {'pred TF/s':>9} {'published':>9} {'error':>7} "
          f"{'peak GiB':>8}")
    for name, tp, pp, gpus, batch, published in rows:
        variants = [("1f1b", 1)]
        if pp > 1 and MODEL_PRESETS[name].layers % (2 * pp) == 0 and (batch // (gpus // (tp * pp))) % pp == 0:
            variants.append(("interleaved", 2))
        for schedule, chunks in variants:
            r = predict(name, tp, pp, gpus, batch, schedule, chunks)
            label = schedule + (f" v={chunks}" if chunks > 1 else "")
            print(f"{name:<11} {label:<14} {r.step_time:>7.2f} {r.tflops_per_chip:>9.1f} {published:>9} "
                  f"{r.tflops_per_chip / published - 1:>+7.1%} {r.memory.peak.total / 2**30:>8.1f}")


if __name__ == "__main__":
    main()
