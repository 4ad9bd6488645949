"""Closed loop on this machine: ``pipesim profile`` measures it, ``pipesim simulate --hardware`` predicts the
executor's step time from that file, and ``torchrun -m executors.run`` (real compute) measures it.

For each (schedule, pp, tp): the executor's GPT is written as a model file (``executors.run
--print-model-file``); the machine is profiled right before each configuration's runs, as the executor will
run — the same number of processes measuring at once, the same ``--threads`` per process (the cores shared
out, at least 1), the model's exact GEMM and attention shapes at that tp; the executor runs ``--repeats`` times and its
steady-state step time is the median of each run's steps after the first. Reported: the prediction's error
against the median run, and the run-to-run spread ((max − min) / median) — the noise the error sits in.

Run from the repository root: ``python experiments/closed_loop.py [--fast] [--update-docs]``.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from executors.launch import run_torchrun

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_STEP = re.compile(r"^step \d+ .* time\s+([\d.]+) ms", re.MULTILINE)


@dataclass(frozen=True)
class Config:
    schedule: str
    pp: int
    tp: int

    @property
    def processes(self) -> int:
        return self.pp * self.tp

    @property
    def label(self) -> str:
        return f"{self.schedule} pp{self.pp} tp{self.tp}"


@dataclass(frozen=True)
class Model:
    hidden: int
    heads: int
    layers: int
    seq_len: int
    vocab: int
    micro_batch: int = 1

    def flags(self) -> list[str]:
        return ["--hidden", str(self.hidden), "--heads", str(self.heads), "--layers", str(self.layers),
                "--seq-len", str(self.seq_len), "--vocab", str(self.vocab), "--micro-batch-size",
                str(self.micro_batch)]


@dataclass(frozen=True)
class Outcome:
    config: Config
    predicted: float  # s per step
    runs: tuple[float, ...]  # measured s per step, one per executor run

    @property
    def measured(self) -> float:
        """The median run: one run slowed by a neighbour's job on a shared machine does not move it."""
        return statistics.median(self.runs)

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured

    @property
    def spread(self) -> float:
        return (max(self.runs) - min(self.runs)) / self.measured


FAST = (Model(256, 4, 4, 128, 1024), [Config("1f1b", 2, 1)], 1, 3, 4)
FULL = (Model(512, 8, 8, 256, 2048),
        [Config(s, pp, tp) for pp, tp in ((2, 1), (2, 2), (4, 1)) for s in ("1f1b", "interleaved", "zb-v")], 3, 4,
        8)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                OMP_NUM_THREADS="1")


def _checked(result: subprocess.CompletedProcess, what: list[str]) -> str:
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{' '.join(what[:6])} ... failed (rc {result.returncode}): {tail}")
    return result.stdout


def _run(cmd: list[str], timeout: float = 900) -> str:
    return _checked(subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout), cmd)


def _run_world(processes: int, args: list[str], timeout: float = 900) -> str:
    """A torchrun world of ``processes`` on this machine (a fresh port if the first was taken)."""
    launched = ["--nproc-per-node", str(processes), *args]
    return _checked(run_torchrun(launched, cwd=ROOT, env=_env(), timeout=timeout), ["torchrun", *launched])


def threads_for(processes: int) -> int:
    return max(1, (os.cpu_count() or 1) // processes)


def profile(out: Path, model_file: Path, processes: int, tps: list[int], quick: bool = True) -> Path:
    """``pipesim profile`` with the executor's processes and threads; the full repeats (the median of 10 or more
    calls per kernel, not 3) unless ``quick``: the profile's own run-to-run spread was the largest noise left."""
    chip = out / f"closed_loop_cpu_{processes}proc.yaml"
    _run_world(processes, ["-m", "pipesim.profile", "-o", str(chip), *(["--quick"] if quick else []),
                           "--no-progress", "--threads", str(threads_for(processes)), "--model", str(model_file),
                           "--tp", ",".join(map(str, tps))])
    return chip


# How the executor's GPT runs, stated as simulate's flags: plain PyTorch modules (one kernel per op, the attention
# output copied back from its transpose), F.cross_entropy on FP32 logits, and autograd summing every
# microbatch's weight gradients into .grad. Its column-parallel linears overlap the input gradient's collective
# with the weight gradient, as the default --overlap-tp-dgrad takes it (executors/tp_layers.py).
EXECUTOR_KERNELS = ["--elementwise", "eager", "--loss", "pytorch", "--grad-accumulation", "autograd"]


def predict(config: Config, model_file: Path, chip: Path, microbatches: int) -> float:
    text = _run([sys.executable, "-m", "pipesim.cli.main", "simulate", "-s", config.schedule, "--pp",
                 str(config.pp), "--tp", str(config.tp), "--mb", str(microbatches), "--model", str(model_file),
                 "--hardware", str(chip), *EXECUTOR_KERNELS, "--json"])
    return json.loads(text)["model_report"]["step_time_s"]


def measure(config: Config, model: Model, microbatches: int, steps: int) -> float:
    text = _run_world(config.processes, ["-m", "executors.run", "-s", config.schedule, "--pp", str(config.pp),
                                         "--tp", str(config.tp), "--mb", str(microbatches), "--steps", str(steps),
                                         "--threads", str(threads_for(config.processes)), *model.flags()])
    times = [float(t) / 1e3 for t in _STEP.findall(text)]
    if len(times) < 2:
        raise RuntimeError(f"{config.label}: the executor printed {len(times)} step times")
    return statistics.median(times[1:])  # step 0 warms up allocators and threads


def closed_loop(out: Path, fast: bool, log=print) -> list[Outcome]:
    model, configs, repeats, steps, microbatches = FAST if fast else FULL
    model_file = out / "closed_loop_gpt.yaml"
    _run([sys.executable, "-m", "executors.run", "--print-model-file", str(model_file), *model.flags()])
    outcomes = []
    for config in configs:
        # Profiled again right before each configuration's runs: on a shared machine the load changes within
        # minutes, and a profile taken under other load than the runs' is the largest error there is.
        chip = profile(out, model_file, config.processes, [config.tp], quick=fast)
        log(f"profiled with {config.processes} processes × {threads_for(config.processes)} thread(s): {chip}")
        predicted = predict(config, model_file, chip, microbatches)
        runs = tuple(measure(config, model, microbatches, steps) for _ in range(repeats))
        outcome = Outcome(config, predicted, runs)
        log(f"{config.label:<22} predicted {predicted:7.3f} s  measured {outcome.measured:7.3f} s "
            f"(runs {', '.join(f'{r:.3f}' for r in runs)}; spread {outcome.spread:.1%})  error {outcome.error:+.1%}")
        outcomes.append(outcome)
    return outcomes


def fits_cores(config: Config, cores: int | None = None) -> bool:
    """Whether each process has a core of its own: the model's one device per rank. With more processes than
    cores the CPU time-slices the ranks, and a TP collective waits for its peers' turns on a core."""
    return config.processes <= (cores or os.cpu_count() or 1)


def table(outcomes: list[Outcome], cores: int | None = None) -> str:
    rows = ["| schedule | pp | tp | processes / cores | predicted s | measured s (median run) | runs | "
            "run-to-run spread | error |", "|---|---|---|---|---|---|---|---|---|"]
    cores = cores or os.cpu_count() or 1
    for o in outcomes:
        c = o.config
        rows.append(f"| {c.schedule} | {c.pp} | {c.tp} | {c.processes} / {cores} | {o.predicted:.3f} | "
                    f"{o.measured:.3f} | {len(o.runs)} | {o.spread:.1%} | {o.error:+.1%} |")
    fit = [abs(o.error) for o in outcomes if fits_cores(o.config, cores)]
    over = [abs(o.error) for o in outcomes if not fits_cores(o.config, cores)]
    summary = [f"{len(fit)} configurations with a core per process: mean |error| {statistics.fmean(fit):.1%}, "
               f"max {max(fit):.1%}" if fit else "no configuration has a core per process on this machine"]
    if over:
        summary.append(f"{len(over)} with more processes than cores: mean |error| {statistics.fmean(over):.1%}, "
                       f"max {max(over):.1%}")
    summary.append(f"median run-to-run spread {statistics.median(o.spread for o in outcomes):.1%}")
    return "\n".join(rows) + "\n\n" + "; ".join(summary)


def plot(outcomes: list[Outcome], out: Path, cores: int | None = None) -> None:
    import matplotlib.pyplot as plt

    from pipesim.plots.figures import save_pdf_png

    cores = cores or os.cpu_count() or 1
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(outcomes) + 2), 3.4))
    x = range(len(outcomes))
    measured = [o.measured for o in outcomes]
    low = [o.measured - min(o.runs) for o in outcomes]
    high = [max(o.runs) - o.measured for o in outcomes]
    ax.bar([i - 0.2 for i in x], measured, 0.4, yerr=[low, high], capsize=3, label="measured (executor, runs' range)")
    predicted = ax.bar([i + 0.2 for i in x], [o.predicted for o in outcomes], 0.4,
                       label="predicted (profile → simulate)")
    for bar, o in zip(predicted, outcomes, strict=True):
        if not fits_cores(o.config, cores):
            bar.set_hatch("//")
    for i, o in enumerate(outcomes):
        ax.text(i, max(o.predicted, max(o.runs)) * 1.02, f"{o.error:+.0%}", ha="center", fontsize=7)
    labels = [o.config.label.replace(" ", "\n", 1) + f"\n{o.config.processes} proc / {cores} cores"
              for o in outcomes]
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_ylabel("step time (s)")
    ax.set_title("closed loop on this CPU: pipesim profile + simulate vs executors.run (hatched: more processes "
                 "than cores)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    save_pdf_png(fig, out, "closed_loop")


def main(argv: list[str] | None = None) -> int:
    from pipesim.plots.figures import experiment_args

    args = experiment_args(__doc__.splitlines()[0], argv)
    outcomes = closed_loop(args.out.resolve(), args.fast)
    text = table(outcomes)
    print(text)
    (args.out / "closed_loop.md").write_text(text + "\n")
    plot(outcomes, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
