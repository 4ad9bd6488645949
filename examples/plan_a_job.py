"""Plan a training job from Python: the fastest layout of a model on some GPUs that fits in memory, the table of
every candidate as a DataFrame, and the Pareto front of step time against memory.

``python examples/plan_a_job.py --out figs``; ``pipesim plan`` prints the same ranking.
"""

import argparse
import tempfile
from pathlib import Path

import pipesim

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", type=Path, default=None, help="folder for the figure (default: a temporary one)")
out = parser.parse_args().out or Path(tempfile.mkdtemp(prefix="pipesim-plan-"))
out.mkdir(parents=True, exist_ok=True)

# A small search so the example runs in seconds: two schedules, BF16, no context parallelism.
result = pipesim.plan("gpt3-2.7b", gpus=8, global_batch=32, schedules=["1f1b", "interleaved"], precision=["bf16"],
                      cp=[1], zero=[0, 1], recompute=["none", "selective"], micro_batch_sizes=[1, 2], top=3)
print(result)  # the ranking with executor and Megatron-LM launch lines

best = result.best
print(f"best: {best.candidate.label()} at {best.evaluation.step_time:.3f} s per step, "
      f"{best.evaluation.peak_gib:.1f} GiB on its fullest GPU")

candidates = result.candidates  # every candidate, simulated or pruned, with why
print(candidates["status"].value_counts().to_string())
print(result.pareto[["label", "step_time_s", "peak_gib"]].to_string(index=False))
result.plot(out / "pareto.png")
print(f"figure in {out}")
