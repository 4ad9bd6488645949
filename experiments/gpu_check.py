"""GPU check: what this CUDA machine allows, in one command — not part of CI.

- no CUDA: says so and exits 0 (nothing to check);
- one GPU: the CUDA-event clock against the host clock on a timed matmul loop, the device's memory
  statistics, and a world of 1 on NCCL (``torchrun --nproc-per-node 1 -m executors.run``);
- two or more GPUs: every built-in schedule on NCCL over all GPUs (pp = GPU count, up to ``--max-pp``), with
  activations far above NCCL's eager buffer (``--message-mib``, default 64 MiB per transfer) so that a
  Program that is not grouped-safe really hangs, each run under a hang timeout; ``--also-eager`` adds
  lower()'s own Programs forced through with ``--allow-unsafe-p2p`` (expected to hang for interleaved,
  zb-h2, zb-v, dualpipe-v and looped-bfs: the hazard :mod:`pipesim.program.grouped` removes).

Prints one table: schedule, p2p lowering, status (ok / hang / failed), median step time and peak CUDA
memory. Run from the repository root: ``python experiments/gpu_check.py`` (``--help`` for the knobs).

First, on CUDA, ``pipesim profile --quick`` (under torchrun over all GPUs, so collectives are measured too)
writes the measured chip file into the repository, ``pipesim/analytic/measured_chips/<device>.yaml``
(``--hardware <device>`` loads it, ``pipesim chips`` lists it as measured), and prints how far each constant
of the matching preset (GEMM, attention and memory efficiencies, the sustained clock of a 15 s GEMM burn,
link bandwidths) sits from the measurement
(``--no-profile`` skips this). Without CUDA nothing is profiled either: the script says so and exits 0 — there
is nothing to check, which is not a failure (a CPU chip file comes from ``pipesim profile`` itself).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_STEP = re.compile(r"^step \d+ .* time\s+([\d.]+) ms", re.MULTILINE)
_PEAK = re.compile(r"cuda max allocated: ([\d.]+) MiB")
_FP32 = 4


@dataclass(frozen=True)
class Outcome:
    schedule: str
    p2p: str
    status: str  # ok, hang, failed (rc N)
    step_ms: float | None
    peak_mib: float | None
    seconds: float
    detail: str = ""


def parser() -> argparse.ArgumentParser:
    from pipesim.plots.figures import experiment_parser

    p = experiment_parser(__doc__, figures=False, fast_help="pp 2 at most, 1 step, no profile: the quickest check")
    p.prog = "gpu_check"
    p.add_argument("--schedules", default=None,
                   help="comma-separated schedules (default: every built-in one)")
    p.add_argument("--max-pp", type=int, default=8, help="at most this many pipeline ranks (default 8)")
    p.add_argument("--message-mib", type=float, default=64.0,
                   help="bytes of one activation transfer, in MiB (default 64: far above NCCL's eager buffer)")
    # Narrow and long: 64 MiB messages at 1024 × 16384 tokens, while every process's full weight copy (the
    # executor slices its stages from it) stays small: 2·pp blocks of 12·h² parameters.
    p.add_argument("--hidden", type=int, default=1024,
                   help="hidden size (default 1024); the sequence length follows from --message-mib")
    p.add_argument("--heads", type=int, default=8, help="attention heads (default 8)")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps per run (default 3)")
    p.add_argument("--hang-timeout", type=float, default=300.0,
                   help="seconds before a run counts as hung and is killed (default 300)")
    p.add_argument("--no-profile", action="store_true",
                   help="skip pipesim profile --quick and the preset comparison (default: run them first)")
    p.add_argument("--also-eager", action="store_true",
                   help="also force lower()'s Programs through with --allow-unsafe-p2p (slow: hangs wait out "
                   "the timeout)")
    return p


def main(argv: list[str] | None = None) -> int:
    from pipesim.plots.figures import parse_experiment_args, record_output

    args = parse_experiment_args(parser(), argv, create=False)
    if args.fast:
        args.max_pp, args.steps, args.no_profile = 2, 1, True
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine; nothing to check and nothing profiled (run it where "
              "torch sees a GPU; on a CPU, pipesim profile -o cpu.yaml measures this machine)")
        return 0
    record_output(args.out, "gpu_check.txt")  # only once there is something to record
    gpus = torch.cuda.device_count()
    print(f"gpu_check: {gpus} × {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
    if not args.no_profile:
        profile_and_compare(gpus)
    if gpus == 1:
        single_gpu(args)
        return 0
    outcomes = pipeline_runs(args, min(gpus, args.max_pp))
    print(table(outcomes))
    bad = [o for o in outcomes if o.p2p == "grouped" and o.status != "ok"]
    return 1 if bad else 0


def measured_chip_path(device_name: str) -> Path:
    """Where the device's measured chip file is committed: pipesim/analytic/measured_chips/<slug>.yaml."""
    slug = "-".join("".join(c.lower() if c.isalnum() else "-" for c in device_name).split("-"))
    slug = "-".join(p for p in slug.split("-") if p) or "cuda-device"
    return ROOT / "pipesim" / "analytic" / "measured_chips" / f"{slug}.yaml"


def profile_and_compare(gpus: int) -> Path:
    """pipesim profile --quick over every GPU, into the repository; then the preset's constants against it."""
    import torch

    from pipesim.analytic.chip_load import load_chip
    from pipesim.profile.compare import comparison_lines

    name = torch.cuda.get_device_name(0)
    path = measured_chip_path(name)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(gpus), "--master-port",
           str(_free_port()), "-m", "pipesim.profile", "-o", str(path), "--quick", "--no-progress", "--name",
           path.stem]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    began = time.monotonic()
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    print(result.stdout.strip())
    if result.returncode != 0:
        print(f"gpu_check: pipesim profile failed (rc {result.returncode}): {result.stderr.strip()[-400:]}")
        return path
    print(f"profile --quick over {gpus} GPU(s): {time.monotonic() - began:.1f} s; wrote {path.relative_to(ROOT)} "
          f"(pipesim chips lists it; --hardware {path.stem})")
    print("\n".join(comparison_lines(load_chip(str(path)), "auto")))  # pipesim chips FILE --compare auto
    return path


def single_gpu(args: argparse.Namespace) -> None:
    """CUDA clock against the host clock, memory statistics, and a world of 1 on NCCL."""
    import torch

    n = 4096
    a = torch.randn(n, n, device="cuda")
    for _ in range(3):
        a @ a  # warm-up: cuBLAS handles and clocks
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    host = time.perf_counter()
    start.record()
    for _ in range(20):
        a @ a
    end.record()
    torch.cuda.synchronize()
    host_ms = (time.perf_counter() - host) * 1e3
    cuda_ms = start.elapsed_time(end)
    tflops = 20 * 2 * n**3 / (cuda_ms / 1e3) / 1e12
    print(f"CUDA clock: 20 fp32 matmuls {n}² took {cuda_ms:.2f} ms by CUDA events, {host_ms:.2f} ms by the host "
          f"(ratio {host_ms / cuda_ms:.3f}; ≥ 1 by launch overhead), {tflops:.1f} TFLOP/s")
    free, total = torch.cuda.mem_get_info()
    stats = torch.cuda.memory_stats()
    print(f"memory: {total / 2**30:.1f} GiB total, {free / 2**30:.1f} GiB free; this process: allocated peak "
          f"{stats['allocated_bytes.all.peak'] / 2**20:.1f} MiB, reserved peak "
          f"{stats['reserved_bytes.all.peak'] / 2**20:.1f} MiB, {stats['num_alloc_retries']} allocation retries")
    del a
    torch.cuda.empty_cache()
    outcome = run_one("1f1b", "grouped", pp=1, args=args, microbatches=4)
    print(table([outcome]))


def pipeline_runs(args: argparse.Namespace, pp: int) -> list[Outcome]:
    from pipesim.program.loader import builtin_names

    names = [s.strip() for s in args.schedules.split(",")] if args.schedules else builtin_names()
    modes = ("grouped", "eager") if args.also_eager else ("grouped",)
    outcomes = []
    for name in names:
        for mode in modes:
            outcome = run_one(name, mode, pp=pp, args=args, microbatches=2 * pp)
            print(f"  {name:<12} {mode:<8} {outcome.status}", flush=True)
            outcomes.append(outcome)
    return outcomes


def run_one(schedule: str, p2p: str, *, pp: int, args: argparse.Namespace, microbatches: int) -> Outcome:
    """One torchrun of executors.run, killed (whole process group) after the hang timeout."""
    seq_len = max(1, round(args.message_mib * 2**20 / (args.hidden * _FP32)))  # activation: [seq, 1, hidden]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(pp), "--master-port",
           str(_free_port()), "-m", "executors.run", schedule, "--pp", str(pp), "--mb", str(microbatches),
           "--steps", str(args.steps), "--hidden", str(args.hidden), "--heads", str(args.heads),
           "--seq-len", str(seq_len), "--micro-batch-size", "1", "--vocab", "256",
           "--layers", str(2 * pp),  # a block for every stage, up to 2 chunks per rank
           "--p2p", p2p]
    if p2p == "eager":
        cmd.append("--allow-unsafe-p2p")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    began = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=args.hang_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Outcome(schedule, p2p, "hang", None, None, time.monotonic() - began,
                       f"no exit within {args.hang_timeout:.0f} s")
    seconds = time.monotonic() - began
    steps = [float(t) for t in _STEP.findall(out)]
    peak = _PEAK.search(out)
    if proc.returncode == 0:
        step_ms = statistics.median(steps[1:] or steps) if steps else None
        return Outcome(schedule, p2p, "ok", step_ms, float(peak.group(1)) if peak else None, seconds)
    lines = [line for line in err.splitlines() if "failed" in line or "error:" in line]  # ours, not torchrun's
    timed_out = "timeout" in err.lower() or "watchdog" in err.lower()
    return Outcome(schedule, p2p, "hang" if timed_out else f"failed (rc {proc.returncode})", None, None, seconds,
                   lines[0][:160] if lines else "")


def table(outcomes: list[Outcome]) -> str:
    rows = [f"{'schedule':<12} {'p2p':<8} {'status':<14} {'step ms':>9} {'peak MiB':>9} {'wall s':>7}  detail"]
    for o in outcomes:
        step = f"{o.step_ms:9.1f}" if o.step_ms is not None else f"{'-':>9}"
        peak = f"{o.peak_mib:9.0f}" if o.peak_mib is not None else f"{'-':>9}"
        rows.append(f"{o.schedule:<12} {o.p2p:<8} {o.status:<14} {step} {peak} {o.seconds:7.1f}  {o.detail}")
    return "\n".join(rows)


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
