"""The executor line ``pipesim plan`` prints really runs: a scaled-down GPT planned on 4 GPUs. The winner's line
is launched with gloo under torchrun exactly as printed (only ``torchrun`` spelled ``python -m
torch.distributed.run``); the best candidate with tp and pp, whose line has the same torchrun part, runs its
``executors.run`` arguments in a world of as many processes given torchrun's environment (executors.harness), as
torchrun would start them — the launcher itself is the winner's case, and four more interpreters importing torch
would add nothing to it."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import subprocess
from pathlib import Path

import pytest

from executors.harness import spawn
from executors.launch import run_torchrun
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.model_spec import ModelSpec
from pipesim.plan.launch import executor_argv
from pipesim.plan.search import run_plan
from pipesim.plan.space import PlanRequest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.distributed

# The executor's block: multi-head attention, a 4h GELU MLP, LayerNorm, tied embeddings, learned positions.
MINI_GPT = ModelSpec(
    "mini-gpt",
    layers=4,
    hidden=32,
    heads=4,
    ffn_hidden=128,
    vocab=64,
    seq_len=16,
    tied_embeddings=True,
    learned_positions=True,
)


@functools.cache  # one search for both cases (a tuple: nothing can change it between them)
def _plan():
    request = PlanRequest(
        MINI_GPT, CHIP_PRESETS["h100-sxm"], gpus=4, global_batch=8, gpus_per_node=4, micro_batch_sizes=(1, 2)
    )
    return tuple(run_plan(request, top=3).fitting())


def _launch(argv: list[str]) -> subprocess.CompletedProcess:
    assert argv[0] == "torchrun"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return run_torchrun(argv[1:], cwd=ROOT, env=env, timeout=240)


# What every printed line starts with on one node of 4 GPUs; the executor's own arguments follow.
TORCHRUN_PART = ["torchrun", "--nproc-per-node", "4", "-m", "executors.run"]


def _executor_main(rank: int, world_size: int, argv: list[str]) -> tuple[int, str]:
    """One rank of a launched line: ``executors.run``'s main on its arguments, what it printed."""
    from executors.run import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(argv)
    return code, printed.getvalue()


def _launch_in_world(argv: list[str]) -> subprocess.CompletedProcess:
    code, out = spawn(_executor_main, 4, argv[len(TORCHRUN_PART) :], process_group=False)[0]  # rank 0 prints
    return subprocess.CompletedProcess(argv, code, out, "")


@pytest.mark.parametrize("pick", ["winner", "best with tp and pp"])
def test_printed_executor_command_runs(pick):
    ranked = _plan()
    if pick == "winner":
        chosen = ranked[0].candidate
    else:
        chosen = next(o.candidate for o in ranked if o.candidate.tp > 1 and o.candidate.pp > 1)
    argv = executor_argv(chosen, MINI_GPT, gpus_per_node=4, steps=2)
    assert argv[: len(TORCHRUN_PART)] == TORCHRUN_PART, argv
    proc = _launch(argv) if pick == "winner" else _launch_in_world(argv)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    c = chosen
    assert f"{c.schedule}: tp {c.tp} cp 1 dp {c.dp} pp {c.pp}, {c.microbatches} microbatches, {c.chunks} chunk" in out
    losses = [float(x) for x in re.findall(r"loss[ =:]+([0-9.]+)", out)]
    assert len(losses) >= 2 and all(0 < x < 20 for x in losses), out


def test_a_plan_with_lighter_end_stages_launches_that_split():
    """Six layers do not split over pp 4 evenly; the plan splits them 1, 2, 2, 1 (Megatron's accounting of the
    embedding and the loss as a layer each), and the executor line it prints runs that very split."""
    six = ModelSpec("mini-gpt-6", layers=6, hidden=32, heads=4, ffn_hidden=128, vocab=64, seq_len=16,
                    tied_embeddings=True, learned_positions=True)
    request = PlanRequest(six, CHIP_PRESETS["h100-sxm"], gpus=4, global_batch=8, gpus_per_node=4,
                          micro_batch_sizes=(1,), schedules=("1f1b",))
    chosen = next(o.candidate for o in run_plan(request, top=10_000).fitting() if o.candidate.pp == 4)
    assert chosen.stage_layers == (1, 2, 2, 1) and "ends1" in chosen.label()
    assert request.layout_of(chosen).stage_layers == (1, 2, 2, 1)
    argv = executor_argv(chosen, six, gpus_per_node=4, steps=2)
    assert argv[argv.index("--stage-layers") + 1] == "1,2,2,1"
    proc = _launch_in_world(argv)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    losses = [float(x) for x in re.findall(r"loss[ =:]+([0-9.]+)", out)]
    assert len(losses) >= 2 and all(0 < x < 20 for x in losses), out


def test_a_plan_with_ulysses_launches_it():
    """A plan asked for Ulysses' context parallelism (--cp-comm-type a2a) prints an executor line that runs it:
    the best cp 2 candidate's line carries the flag and trains in a world of 4."""
    from pipesim.analytic.layout import CpComm

    request = PlanRequest(MINI_GPT, CHIP_PRESETS["h100-sxm"], gpus=4, global_batch=8, gpus_per_node=4,
                          micro_batch_sizes=(1,), schedules=("1f1b",), context_parallel=(2,), min_cp_tokens=4,
                          cp_comm=CpComm.A2A)
    chosen = run_plan(request, top=1).fitting()[0].candidate
    argv = executor_argv(chosen, MINI_GPT, gpus_per_node=4, steps=2, cp_comm=request.cp_comm)
    assert chosen.cp == 2 and argv[argv.index("--cp-comm-type") + 1] == "a2a"
    proc = _launch_in_world(argv)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    losses = [float(x) for x in re.findall(r"loss[ =:]+([0-9.]+)", out)]
    assert len(losses) >= 2 and all(0 < x < 20 for x in losses), out
