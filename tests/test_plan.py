"""``pipesim plan``: a search small enough to list by hand, pruning that never changes the answer, lower bounds
that are lower, a Pareto front that is non-dominated, refusals that say what to change, and launch lines."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.frameworks import Framework
from pipesim.analytic.layout import (
    Fp8Linears,
    Layout,
    OptimizerBytes,
    P2pCalls,
    PipelineBuffers,
    Precision,
    Recompute,
    ZeroStage,
)
from pipesim.analytic.memory_gib import GIB
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import ModelSpec
from pipesim.analytic.params import total_params
from pipesim.analytic.to_costs import build_cost_model, stage_pass_floors, stage_time_parts
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.plan.bounds import Bounds, bounds_keys, held_microbatches, memory_bound, time_bound, time_floor
from pipesim.plan.evaluate import evaluate
from pipesim.plan.launch import executor_argv, megatron_argv
from pipesim.plan.pareto import pareto_mask
from pipesim.plan.search import Status, _Frontier, run_plan
from pipesim.plan.space import Candidate, PlanRequest, enumerate_candidates

NONE = Recompute.NONE
# Untied: a tied table's two copies (on the first and last stage) sum their gradients each step, NCCL latency
# that would outweigh this model's microseconds of compute and decide the searches below by itself
TINY = ModelSpec("tiny", layers=4, hidden=64, heads=4, ffn_hidden=256, vocab=128, seq_len=32, tied_embeddings=False,
                 learned_positions=True)
# One GPU per node (so tp = 1), fast links with no latency, no P2P synchronisation gap and a host that issues
# kernels for free (no host floor): step time is compute plus a little communication.
TOY_CHIP = ChipSpec("toy", peak_flops=1e12, memory_gib=1.0, hbm_bandwidth=1e12, intra_node_bandwidth=1e12,
                    inter_node_bandwidth=1e12, node_size=1, achievable_fraction=1.0, link_latency=0.0,
                    p2p_sync_overhead=0.0, host_kernel_overhead=0.0)


def _hand_request() -> PlanRequest:
    # The cap is 3/4 of the whole model's 18 B/param: one GPU holding every layer (pp = 1) cannot fit, half of
    # them (pp = 2) can, with room for the tiny model's activations.
    cap = 0.75 * total_params(TINY) * 18 / GIB
    return PlanRequest(TINY, TOY_CHIP, gpus=2, global_batch=4, gpus_per_node=1, memory_cap_gib=cap,
                       schedules=("gpipe", "1f1b"), recompute=(NONE,), micro_batch_sizes=(1, 2),
                       zero=(ZeroStage.NONE,), context_parallel=(1,))




def _step_times(result) -> dict:
    """Each simulated candidate's step time."""
    return {o.candidate: o.evaluation.step_time for o in result.search.outcomes if o.evaluation is not None}


# A small search (1F1B, no recomputation, ZeRO-1, BF16, no CP, micro-batch 1): tp, dp, sequence parallelism vary
_SMALL_SPACE = dict(hardware="h100-sxm", schedules=("1f1b",), recompute=("none",), zero=(1,), precision=("bf16",),
                    cp=(1,), micro_batch_sizes=(1,))
_LLAMA2_13B_ON_16 = ["plan", "--model", "llama2-13b", "--gpus", "16", "--global-batch", "64", "--schedules", "1f1b",
                     "--recompute", "none", "--zero", "1", "--precision", "bf16", "--cp", "1", "--micro-batch-sizes",
                     "1"]

def test_small_search_by_hand():
    request = _hand_request()
    # 2 GPUs, tp = 1: pp = 1 (dp = 2) or pp = 2 (dp = 1). m = 4 / (dp · b). pp = 1 is one candidate per b;
    # pp = 2 one per schedule and b.
    expected = {
        Candidate(1, 1, 2, 1, 2, "1f1b", 1, NONE, False),
        Candidate(1, 1, 2, 2, 1, "1f1b", 1, NONE, False),
        Candidate(1, 2, 1, 1, 4, "gpipe", 1, NONE, False),
        Candidate(1, 2, 1, 1, 4, "1f1b", 1, NONE, False),
        Candidate(1, 2, 1, 2, 2, "gpipe", 1, NONE, False),
        Candidate(1, 2, 1, 2, 2, "1f1b", 1, NONE, False),
    }
    assert set(enumerate_candidates(request)) == expected
    result = run_plan(request, top=10)
    status = {o.candidate.pp: o.status for o in result.outcomes if o.candidate.pp == 1}
    assert status == {1: Status.PRUNED_MEMORY}  # the whole model's weights and Adam state exceed the cap
    ranked = [o.candidate for o in result.fitting()]
    # b = 1 has m = 4: (m + p − 1) = 5 slots of one-sequence work; b = 2 has m = 2: 3 slots of two-sequence
    # work = 6. GPipe and 1F1B take the same time on two stages, and 1F1B holds 2 microbatches on rank 0
    # instead of GPipe's 4: the tie goes to the leaner one. Winner: 1F1B, b = 1.
    assert ranked == [Candidate(1, 2, 1, 1, 4, "1f1b", 1, NONE, False),
                      Candidate(1, 2, 1, 1, 4, "gpipe", 1, NONE, False),
                      Candidate(1, 2, 1, 2, 2, "1f1b", 1, NONE, False),
                      Candidate(1, 2, 1, 2, 2, "gpipe", 1, NONE, False)]
    times = [o.evaluation.step_time for o in result.fitting()]
    assert times[0] / times[2] == pytest.approx(5 / 6, rel=0.03)  # LM head and optimizer step: not exact
    peaks = {o.candidate: o.evaluation.peak_gib for o in result.fitting()}
    assert peaks[ranked[0]] < peaks[ranked[1]]


def _brute_force(request: PlanRequest):
    rows = []
    for c in enumerate_candidates(request):
        try:
            e = evaluate(request.model_of(c), request.chip, request.layout_of(c), c.schedule)
        except PipesimError:
            continue
        if e.peak_gib <= request.cap_gib:
            rows.append((e.step_time, e.peak_gib, c))
    return sorted(rows, key=lambda r: (r[0], r[1], r[2].key()))


def test_pruning_keeps_the_top_and_the_front():
    model = MODEL_PRESETS["gpt3-2.7b"]
    # 8 GPUs: both prunings still happen (about 390 by time, 50 by memory) against a brute force of 530 fits.
    request = PlanRequest(model, CHIP_PRESETS["a100-80gb"], gpus=8, global_batch=32, memory_cap_gib=20.0,
                          schedules=("1f1b", "interleaved", "zb-h1", "zb-v"), micro_batch_sizes=(1, 2))
    top = 3
    result = run_plan(request, top=top)
    assert result.count(Status.PRUNED_TIME) > 0 and result.count(Status.PRUNED_MEMORY) > 0
    # some dropped by memory fit with one microbatch's activations but not with the microbatches their schedule
    # holds at once (bounds.held_microbatches): no time bound was made for them
    tightened = [o for o in result.outcomes if o.status is Status.PRUNED_MEMORY
                 and memory_bound(request, o.candidate) <= request.cap_gib]
    assert tightened and all(o.bounds.memory_gib > request.cap_gib for o in tightened)
    # some of those dropped by time were ruled out at the floor under their bound, no cost model built; -o says so
    frame = result.frame()
    assert not frame.loc[frame["status"] == "simulated", "bound_step_time_is_floor"].any()
    assert frame.loc[frame["status"] == "pruned: cannot win", "bound_step_time_is_floor"].any()
    everything = _brute_force(request)
    assert [o.candidate for o in result.fitting()[:top]] == [r[2] for r in everything[:top]]
    full_front = pareto_mask(np.array([r[0] for r in everything]), np.array([r[1] for r in everything]))
    expected_front = {r[2] for r, keep in zip(everything, full_front, strict=True) if keep}
    assert {o.candidate for o in result.pareto()} == expected_front


def test_synthesised_schedules_go_last_and_keep_the_top_and_the_front():
    # zb-auto is synthesised per shape (seconds where a fixed order takes milliseconds), so the search takes it
    # after every fixed-order candidate, against the tightest frontier: the answer must not change.
    request = PlanRequest(TINY, TOY_CHIP, gpus=4, global_batch=16, gpus_per_node=1,
                          schedules=("1f1b", "zb-h1", "zb-auto"), recompute=(NONE,), micro_batch_sizes=(1, 2),
                          zero=(ZeroStage.NONE,), context_parallel=(1,))
    top = 2
    result = run_plan(request, top=top)
    assert result.fitting()[0].candidate.schedule == "zb-auto"  # it wins here: taken last, still found
    everything = _brute_force(request)
    assert [o.candidate for o in result.fitting()[:top]] == [r[2] for r in everything[:top]]
    full_front = pareto_mask(np.array([r[0] for r in everything]), np.array([r[1] for r in everything]))
    assert {o.candidate for o in result.pareto()} == {r[2] for r, keep in zip(everything, full_front, strict=True)
                                                      if keep}


@pytest.fixture(scope="module")
def unpruned_plan():
    """One search with nothing pruned by time (top that large), shared by the bound and the front checks: every
    candidate that fits is simulated, so both are checked against the whole space, not only the top."""
    # 8 GPUs of 4 per node: two nodes, so bounds on NIC-crossing groups are checked too (about 1,300 candidates,
    # half of 16 GPUs of 8 per node's, every schedule family and both sides of the NIC still in)
    request = PlanRequest(MODEL_PRESETS["llama2-7b"], CHIP_PRESETS["h100-sxm"], gpus=8, global_batch=32,
                          gpus_per_node=4, schedules=("gpipe", "1f1b", "interleaved", "zb-h2", "dualpipe-v"),
                          micro_batch_sizes=(1,))
    return run_plan(request, top=10_000)


def test_bounds_are_lower_bounds(unpruned_plan):
    frame = unpruned_plan.frame()
    simulated = frame[frame["status"] == "simulated"]
    assert len(simulated) > 50
    assert (simulated["bound_step_time_s"] <= simulated["step_time_s"] * (1 + 1e-12)).all()
    checked = frame[frame["peak_gib"].notna()]
    assert (checked["bound_peak_gib"] <= checked["peak_gib"] * (1 + 1e-12)).all()


@pytest.mark.parametrize(("schedule", "pp", "m", "chunks", "held"), [
    ("1f1b", 4, 8, 1, (4, 3, 2, 1)),  # rank r warms up pp − r microbatches (Narayanan et al. 2021, §2.2)
    ("1f1b", 4, 2, 1, (2, 2, 2, 1)),  # no more than there are
    ("zb-h1", 4, 8, 1, (4, 3, 2, 1)),  # 1F1B's memory (Qi et al. 2024, §3.1)
    ("gpipe", 4, 8, 1, (8, 8, 8, 8)),  # every microbatch's forward before any backward
    # Megatron's interleaved warm-up, 2(pp − r − 1) + (v − 1)·pp chunk-microbatches, and the one in its first
    # steady forward: 11, 9, 7, 5 for pp 4, v 2
    ("interleaved", 4, 8, 2, tuple(2 * (4 - r - 1) + (2 - 1) * 4 + 1 for r in range(4))),
])
def test_held_microbatches_by_hand(schedule, pp, m, chunks, held):
    request = PlanRequest(MODEL_PRESETS["llama2-7b"], CHIP_PRESETS["h100-sxm"], gpus=pp, global_batch=m,
                          schedules=(schedule,), micro_batch_sizes=(1,), context_parallel=(1,))
    candidate = next(c for c in enumerate_candidates(request)
                     if (c.tp, c.pp, c.microbatches, c.chunks) == (1, pp, m, chunks))
    assert held_microbatches(request, candidate) == held
    # a synthesised order has none before a cost model builds it
    assert held_microbatches(request, replace(candidate, schedule="zb-auto")) is None


# Every placement (loop, interleaved, V, DualPipe's two copies) and a mixture of experts, whose all-to-all the
# floor leaves out as the bound does
_FLOOR_SPACES = [
    PlanRequest(MODEL_PRESETS["llama2-7b"], CHIP_PRESETS["h100-sxm"], gpus=8, global_batch=32, gpus_per_node=4,
                schedules=("gpipe", "1f1b", "interleaved", "zb-v", "dualpipe"), micro_batch_sizes=(1,),
                context_parallel=(1, 2)),
    PlanRequest(MODEL_PRESETS["mixtral-8x7b"], CHIP_PRESETS["h100-sxm"], gpus=16, global_batch=32,
                schedules=("1f1b", "dualpipe"), micro_batch_sizes=(1,), context_parallel=(1,)),
    _hand_request(),
]


@pytest.mark.parametrize("request_", _FLOOR_SPACES, ids=["llama2-7b", "mixtral", "toy"])
def test_the_time_floor_is_under_the_time_bound_and_near_it(request_):
    """The search waits each candidate by its floor and makes its bound only when nothing can come before it: the
    floor must never pass the bound (or the search would leave in another order, or drop a winner), and it must
    be close to it, or every bound is made anyway."""
    ratios = []
    for c in enumerate_candidates(request_):
        try:
            bound = time_bound(request_, c)
        except PipesimError:
            continue
        floor = time_floor(request_, c)
        assert 0 < floor < bound, c
        ratios.append(floor / bound)
    assert len(ratios) > 5
    assert np.median(ratios) > 0.8  # what it leaves out (the head, the sync, the optimizer) is a small part


def test_a_stage_pass_floor_is_under_the_cost_models_passes():
    """By hand on the cost model itself: under partial recomputation (two groups of layers, each under its own
    layout), a mixture of experts (its all-to-all left out of the floor) and a pass on the host's floor (a host
    taking 0.2 ms a kernel: a Llama 1B layer at tp 8 runs its kernels faster than that host issues them)."""
    h100 = CHIP_PRESETS["h100-sxm"]
    slow_host = replace(h100, host_kernel_overhead=2e-4)
    small = MODEL_PRESETS["llama3.2-1b"].with_shape(1024, 1)
    tp8 = Layout(tp=8, pp=2, microbatches=4)
    assert stage_time_parts(small, slow_host, tp8)[0].host_wait > 0  # the case is on the host's floor
    cases = [
        (MODEL_PRESETS["llama2-13b"], h100, Layout(tp=2, pp=2, microbatches=4, sequence_parallel=True,
                                                   recompute=Recompute.FULL, recompute_layers=5)),
        (MODEL_PRESETS["mixtral-8x7b"], h100, Layout(tp=2, pp=4, ep=4, dp=4, microbatches=8,
                                                     sequence_parallel=True)),
        (small, slow_host, tp8),
    ]
    for model, chip, layout in cases:
        costs = build_cost_model(model, chip, layout)
        floors = stage_pass_floors(model, chip, layout)
        assert len(floors) == layout.num_stages
        for s, floor in enumerate(floors):
            stage = costs.chunk_costs(s, layout.chunks)
            assert 0 < floor.forward <= (stage.forward - stage.a2a_forward) * (1 + 1e-12)
            assert 0 < floor.backward <= (stage.backward - stage.a2a_backward) * (1 + 1e-12)


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=40))
def test_pareto_front_is_exactly_the_non_dominated(points):
    t, m = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    mask = pareto_mask(t, m)
    for i in range(len(points)):
        dominated = any(t[j] <= t[i] and m[j] <= m[i] and (t[j] < t[i] or m[j] < m[i]) for j in range(len(points)))
        if mask[i]:
            assert not dominated
        elif not dominated:  # left out only as an exact duplicate of a point on the front
            assert any(mask[j] and t[j] == t[i] and m[j] == m[i] for j in range(len(points)))


def test_plan_front_points_are_not_dominated_by_any_simulated_point(unpruned_plan):
    result = unpruned_plan
    ok = [(o.evaluation.step_time, o.evaluation.peak_gib) for o in result.fitting()]
    front = result.pareto()
    assert front and len(front) < len(ok)  # a real front: some simulated points are dominated
    for o in front:
        t, m = o.evaluation.step_time, o.evaluation.peak_gib
        assert not any(t2 <= t and m2 <= m and (t2 < t or m2 < m) for t2, m2 in ok)


@pytest.fixture
def run_cli(capsys):
    """``pipesim plan -q ARGS`` through main() in this process (test_cli checks a refusal's process exit status
    once; an interpreter per call here would only add Python's start to the plan's own work)."""

    def call(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()  # only what this call prints
        code = main(["plan", "-q", *args])
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(["pipesim", "plan", "-q", *args], code, captured.out, captured.err)

    return call


@pytest.mark.parametrize(("args", "message"), [
    (["--gpus", "12", "--global-batch", "64"],
     "--gpus 12 is not a whole number of nodes of --gpus-per-node 8; "),
    # At most tp 8 · cp 2 (2048 tokens per rank) · pp 16 (a divisor of 80 layers and of 512/16) = 256: dp ≥ 2.
    (["--gpus", "512", "--global-batch", "63"],
     "--global-batch 63 is not divisible by dp × micro-batch size for any split of 512 GPUs (dp ∈ [2, "),
    (["--gpus", "7", "--global-batch", "8"],  # 7 GPUs split only as dp = 7
     "--global-batch 8 is not divisible by dp × micro-batch size for any split of 7 GPUs (dp ∈ [7], "
     "micro-batch sizes [1, 2, 4, 8]): use --global-batch 7 or 14"),
])
def test_refusals_name_the_input_and_the_fix(run_cli, args, message):
    proc = run_cli("--model", "llama2-70b", *args)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and line.startswith("pipesim: error: ") and message in line
    assert "use --g" in line


def test_nothing_fits_names_the_smallest_change(run_cli):
    proc = run_cli("--model", "llama2-70b", "--gpus", "8", "--global-batch", "64", "--memory-cap", "60",
                   "--schedules", "1f1b,interleaved", "--micro-batch-sizes", "1")
    assert proc.returncode == 2, proc.stdout
    line = proc.stderr.strip()
    assert "no configuration of llama2-70b on 8× h100-sxm fits in 60 GiB" in line
    # 69B params × 18 B over 8 GPUs is ~145 GiB each even with full recomputation; 16 GPUs still need
    # over 60 (ZeRO-1 only shards the 12 optimizer bytes over dp = 2); 32 GPUs bring it under.
    assert "raise --memory-cap to 146" in line and "use --gpus 32" in line


def test_nothing_fits_suggests_recomputation_when_it_was_left_out(run_cli):
    # Llama 2 7B at micro-batch 4: 22.4 GiB at least without recomputation, 14.9 GiB with full.
    base = ["--model", "llama2-7b", "--gpus", "8", "--global-batch", "64", "--micro-batch-sizes", "4",
            "--schedules", "1f1b"]
    proc = run_cli(*base, "--recompute", "none", "--memory-cap", "18")
    assert proc.returncode == 2
    assert "raise --memory-cap to 23; or allow --recompute full" in proc.stderr
    assert run_cli(*base, "--recompute", "none,full", "--memory-cap", "18").returncode == 0


def test_the_advices_walks_answer_what_they_are_asked():
    """least_memory finds the least exact peak; asked only whether anything fits in `enough` GiB, it stops at the
    first candidate that does (no more than that), or says none does; the weights' floor is under every
    candidate's peak. (The advice asks "does anything fit?" at up to four GPU counts: a cap no GPU count could
    meet once took it two and a half minutes to say so.)"""
    from pipesim.api.planning import plan_request
    from pipesim.plan.advice import least_memory, weights_floor_gib
    from pipesim.plan.evaluate import peak_memory, prepare

    request = plan_request("llama3.2-1b", 8, 64, hardware="h100-sxm", schedules=("1f1b", "gpipe"),
                           micro_batch_sizes=(1, 2))
    least, _ = least_memory(request)
    peaks = []
    for c in enumerate_candidates(request):
        model, layout = request.model_of(c), request.layout_of(c)
        try:
            peaks.append(peak_memory(model, request.chip, layout, prepare(model, request.chip, layout,
                                                                           c.schedule))[0])
        except PipesimError:
            continue
    assert least == pytest.approx(min(peaks))
    enough = sorted(peaks)[len(peaks) // 2]
    fits, _ = least_memory(request, enough=enough)
    assert least <= fits <= enough
    assert least_memory(request, enough=least * 0.99) is None
    floor = weights_floor_gib(request, 8)
    assert floor == pytest.approx(total_params(MODEL_PRESETS["llama3.2-1b"]) * 2 / 8 / GIB) and floor < least


def test_when_every_candidate_is_refused_the_reason_is_said_not_memory_advice():
    from pipesim.api.planning import PlanResult, plan_request
    from pipesim.plan.search import Outcome
    from pipesim.plan.search import PlanResult as SearchResult

    request = plan_request("llama3.2-1b", 8, 64, hardware="h100-sxm", schedules=("1f1b",))
    candidates = list(enumerate_candidates(request))[:5]
    nan = Bounds(float("nan"), float("nan"))
    refused = [Outcome(c, nan, Status.REJECTED, reason="the reason") for c in candidates[:4]]
    refused.append(Outcome(candidates[4], nan, Status.REJECTED, reason="another"))
    said = PlanResult(request, SearchResult(request, tuple(refused))).nothing_fits()
    assert said == ("every one of the 5 configurations was refused, 4 of them for this: the reason; 1 other "
                    "reason(s) for the rest")


@pytest.mark.parametrize(("flags", "message"), [
    (["--moe-dispatch-fp8"], "--moe-dispatch-fp8 moves a mixture-of-experts layer's tokens, but llama2-70b is dense"),
    (["--moe-dispatcher", "deepep"], "--moe-dispatcher deepep moves a mixture-of-experts layer's tokens"),
    (["--zero-collectives", "hierarchical"], "give the group with --shard-group N"),
])
def test_plan_refuses_options_that_would_change_nothing_or_every_candidate(run_cli, flags, message):
    proc = run_cli("--model", "llama2-70b", "--gpus", "64", "--global-batch", "64", *flags)
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1


def test_cli_writes_every_candidate_and_the_figure(run_cli, tmp_path):
    out, fig = tmp_path / "plan.csv", tmp_path / "pareto.png"
    proc = run_cli("--model", "gpt3-2.7b", "--hardware", "a100-80gb", "--gpus", "16", "--global-batch", "32",
                   "--schedules", "1f1b,zb-v,interleaved", "--top", "3", "-o", str(out), "--plot", str(fig))
    assert proc.returncode == 0, proc.stderr
    import pandas as pd

    frame = pd.read_csv(out)
    considered = int(proc.stdout.split("considered ")[1].split(",")[0])
    assert len(frame) == considered
    assert frame["status"].value_counts().sum() == considered
    overlapping = (frame["schedule"] == "interleaved") & (frame["pp"] > 1)
    assert overlapping.any() and (frame["overlap_p2p"] == overlapping).all()  # Megatron overlaps interleaved only
    assert fig.stat().st_size > 10_000
    assert proc.stdout.count("executor: torchrun") == 3 and proc.stdout.count("megatron: ") == 3


def test_interleaved_candidates_overlap_their_sends_unless_asked_not_to():
    request = _hand_request()
    interleaved = Candidate(1, 2, 1, 1, 4, "interleaved", 2, NONE, False)
    one_f_one_b = Candidate(1, 2, 1, 1, 4, "1f1b", 1, NONE, False)
    assert request.layout_of(interleaved).overlap_p2p and not request.layout_of(one_f_one_b).overlap_p2p
    blocking = replace(request, overlap_p2p=False)
    assert not blocking.layout_of(interleaved).overlap_p2p
    no_pipeline = Candidate(1, 1, 2, 1, 2, "interleaved", 2, NONE, False)
    assert not request.layout_of(no_pipeline).overlap_p2p


def test_torchtitan_candidates_keep_torch_pipelining_buffers():
    request = replace(_hand_request(), framework=Framework.TORCHTITAN)
    interleaved = Candidate(1, 2, 1, 1, 4, "interleaved", 2, NONE, False)
    one_f_one_b = Candidate(1, 2, 1, 1, 4, "1f1b", 1, NONE, False)
    no_pipeline = Candidate(1, 1, 2, 1, 2, "1f1b", 1, NONE, False)
    assert request.layout_of(interleaved).pipeline_buffers is PipelineBuffers.TORCH_RUNTIME
    assert request.layout_of(one_f_one_b).pipeline_buffers is PipelineBuffers.TORCH
    assert request.layout_of(no_pipeline).pipeline_buffers is PipelineBuffers.FREED
    assert _hand_request().layout_of(interleaved).pipeline_buffers is PipelineBuffers.FREED  # Megatron's


def test_pruning_counts_distinct_step_times_as_the_ranking_lists_them():
    """The ranking lists one configuration per step time (an exact tie needing more memory is left out), so a
    candidate can be dropped only once that many distinct step times are at most its bound: five ties of the
    best leave room for a slower one in a top of two."""
    frontier = _Frontier()
    for _ in range(5):
        frontier.add(1.0, 10.0)
    assert frontier.cannot_matter(Bounds(1.5, 20.0), top=1)
    assert not frontier.cannot_matter(Bounds(1.5, 20.0), top=2)  # counting configurations would drop it
    frontier.add(1.2, 10.0)
    assert frontier.cannot_matter(Bounds(1.5, 20.0), top=2)
    assert not frontier.cannot_matter(Bounds(1.1, 20.0), top=2)  # the second time is above this bound
    assert not frontier.cannot_matter(Bounds(1.5, 5.0), top=2)  # leaner than every faster one: the front
    # with its exact peak known (built, not simulated): a faster one needs less memory, or it might be on the front
    view = frontier.view()
    assert view.outranked(1.5, 12.0, top=2)
    assert not view.outranked(1.5, 10.0, top=2)  # a tie on memory too is left to the front, which keeps one
    assert not view.outranked(1.1, 12.0, top=2)


@pytest.mark.parametrize("framework", [None, Framework.TORCHTITAN])
def test_candidates_sharing_bounds_share_their_layout(framework):
    """The search makes one pair of bounds per key: the key must hold every layout field the schedule sets.
    Megatron overlaps the sends of its interleaved schedule and not those of looped BFS, whose placement and
    step boundary are the same: keyed by those alone, looped BFS took interleaved's bound."""
    request = PlanRequest(MODEL_PRESETS["llama2-7b"], CHIP_PRESETS["h100-sxm"], gpus=16, global_batch=64,
                          framework=framework, micro_batch_sizes=(1,), context_parallel=(1,),
                          schedules=("gpipe", "1f1b", "interleaved", "looped-bfs", "zb-h1", "zb-h2"))
    layouts: dict[tuple, set] = {}
    floored: dict[tuple, set] = {}  # those sharing a memory bound and a time floor differ in their sends alone
    for c in enumerate_candidates(request):
        floor_key, key = bounds_keys(request, c)
        layout = request.layout_of(c)
        layouts.setdefault(key, set()).add(layout)
        floored.setdefault(floor_key, set()).add(replace(layout, overlap_p2p=False, p2p_calls=P2pCalls.BATCHED))
    assert len(layouts) > 100
    assert all(len(same) == 1 for same in layouts.values())
    assert all(len(same) == 1 for same in floored.values())


def test_a_candidate_the_cost_model_refuses_is_rejected_though_it_could_not_win():
    """torchtitan's runtime keeps buffers DualPipe's two model copies cannot run with: the cost model refuses
    every such candidate. The search orders candidates by a floor made without a cost model and drops most
    unbuilt; it must still say these were refused, not that they could not win."""
    request = PlanRequest(MODEL_PRESETS["gpt3-2.7b"], CHIP_PRESETS["a100-80gb"], gpus=8, global_batch=32,
                          framework=Framework.TORCHTITAN, schedules=("1f1b", "dualpipe"), micro_batch_sizes=(1, 2))
    result = run_plan(request, top=1)
    dualpipe = [o for o in result.outcomes if o.candidate.schedule == "dualpipe" and o.candidate.pp > 1]
    assert dualpipe and result.count(Status.PRUNED_TIME) > 0
    for o in dualpipe:
        assert o.status in (Status.REJECTED, Status.PRUNED_MEMORY), o.candidate
        assert o.status is Status.PRUNED_MEMORY or "DualPipe's two model copies" in o.reason


def test_torchtitan_fp8_candidates_train_torchaos_linears():
    from pipesim.api.planning import plan_request

    request = plan_request("llama3.2-1b", 8, 32, framework="torchtitan")
    fp8 = Candidate(1, 1, 8, 1, 4, "1f1b", 1, NONE, False, precision=Precision.FP8)
    assert request.layout_of(fp8).fp8_linears is Fp8Linears.TORCHAO
    assert request.layout_of(replace(fp8, precision=Precision.BF16)).fp8_linears is Fp8Linears.TRANSFORMER_ENGINE
    megatron = plan_request("llama3.2-1b", 8, 32)
    assert megatron.layout_of(fp8).fp8_linears is Fp8Linears.TRANSFORMER_ENGINE


def test_candidates_overlap_their_data_parallel_sync_unless_asked_not_to():
    request = _hand_request()
    sharded = Candidate(1, 2, 1, 1, 4, "1f1b", 1, NONE, False, ZeroStage.OPTIMIZER)
    replicated = Candidate(1, 2, 1, 1, 4, "1f1b", 1, NONE, False)
    layout = request.layout_of(sharded)
    assert layout.overlap_grad_reduce and layout.overlap_param_gather
    plain = request.layout_of(replicated)  # no sharded state: no parameter gather to overlap
    assert plain.overlap_grad_reduce and not plain.overlap_param_gather
    blocking = replace(request, overlap_dp_sync=False).layout_of(sharded)
    assert not blocking.overlap_grad_reduce and not blocking.overlap_param_gather
    model = MODEL_PRESETS["llama2-70b"]
    argv = megatron_argv(sharded, model, 1024, overlap_dp_sync=True)
    assert "--overlap-grad-reduce" in argv and "--overlap-param-gather" in argv
    assert "--overlap-param-gather" not in megatron_argv(replicated, model, 1024, overlap_dp_sync=True)
    assert "--overlap-grad-reduce" not in megatron_argv(sharded, model, 1024)


def test_a_framework_without_megatrons_switches_syncs_as_its_code_does():
    """nanotron's DDP reduces beside the last backward (ZeRO 0 and 1) and gathers its ZeRO-1 shards after the
    step; DeepSpeed's pipeline engine reduces after the backward; --blocking-dp-sync changes neither."""
    sharded = Candidate(1, 2, 1, 1, 4, "1f1b", 1, NONE, False, ZeroStage.OPTIMIZER)
    for tuned in (True, False):
        nanotron = replace(_hand_request(), framework=Framework.NANOTRON, overlap_dp_sync=tuned)
        deepspeed = replace(_hand_request(), framework=Framework.MEGATRON_DEEPSPEED, overlap_dp_sync=tuned)
        assert (nanotron.layout_of(sharded).overlap_grad_reduce, nanotron.layout_of(sharded).overlap_param_gather) \
            == (True, False)
        assert not deepspeed.layout_of(sharded).overlap_grad_reduce
        assert not deepspeed.layout_of(sharded).overlap_param_gather


def test_megatron_flags():
    model = MODEL_PRESETS["llama2-70b"]
    c = Candidate(8, 8, 16, 1, 64, "interleaved", 2, Recompute.FULL, True, ZeroStage.OPTIMIZER, Precision.FP8, 2)
    argv = megatron_argv(c, model, 1024)
    text = " ".join(argv)
    assert "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8" in text
    assert "--num-layers-per-virtual-pipeline-stage 5" in text  # 80 layers / (8 ranks · 2 chunks)
    assert "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1" in text
    assert "--sequence-parallel" in argv and "--use-distributed-optimizer" in argv
    assert "--num-query-groups 8" in text and "--global-batch-size 1024" in text
    assert "--context-parallel-size 2" in text and "--fp8-format hybrid" in text
    # the plan overlapped the interleaved schedule's sends, Megatron-LM's default (its flag turns it off)
    assert not any("overlap-p2p" in arg for arg in argv)
    assert "--no-overlap-p2p-communication" in megatron_argv(c, model, 1024, overlap_p2p=False)
    one_f_one_b = Candidate(8, 8, 16, 1, 64, "1f1b", 1, NONE, True)
    assert not any("overlap-p2p" in arg for arg in megatron_argv(one_f_one_b, model, 1024))  # interleaved only
    assert megatron_argv(Candidate(8, 8, 16, 1, 64, "zb-v", 2, NONE, True), model, 1024) is None
    # ZeRO-3 without a pipeline is Megatron-FSDP's (its gradient buffer FP32 for pipesim's 18 bytes); with one, none
    fsdp = megatron_argv(Candidate(8, 1, 16, 1, 64, "1f1b", 1, NONE, True, ZeroStage.PARAMETERS), model, 1024)
    assert " ".join(fsdp).endswith("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
                                   "--megatron-fsdp-main-grads-dtype fp32 --bf16")
    assert megatron_argv(Candidate(8, 2, 8, 1, 64, "1f1b", 1, NONE, True, ZeroStage.PARAMETERS), model, 1024) is None
    # a parameter's bytes as Megatron-LM spells them: BF16 gradients, or the precision-aware optimizer's types (with
    # the distributed optimizer); an account it has no types for is a gap
    sharded = Candidate(8, 1, 16, 1, 64, "1f1b", 1, NONE, True, ZeroStage.OPTIMIZER)
    assert "--grad-reduce-in-bf16" in megatron_argv(sharded, model, 1024, param_bytes=OptimizerBytes(grads=2.0))
    argv = megatron_argv(sharded, model, 1024, param_bytes=OptimizerBytes(optimizer=6.0))
    assert argv[argv.index("--use-precision-aware-optimizer"):][:5] == [
        "--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"]
    assert megatron_argv(sharded, model, 1024, param_bytes=OptimizerBytes(optimizer=9.0)) is None
    replicated = Candidate(8, 1, 16, 1, 64, "1f1b", 1, NONE, True)
    assert megatron_argv(replicated, model, 1024, param_bytes=OptimizerBytes(optimizer=6.0)) is None


def test_executor_line_multi_node():
    c = Candidate(4, 8, 32, 1, 32, "zb-v", 2, NONE, True)
    argv = executor_argv(c, MODEL_PRESETS["llama2-70b"], 8)
    assert argv[:5] == ["torchrun", "--nnodes", "128", "--nproc-per-node", "8"]
    text = " ".join(argv)
    assert "-m executors.run zb-v --tp 4 --cp 1 --dp 32 --pp 8 --mb 32 --chunks 2" in text
    assert "--tp-mode reduce-scatter" in text


def test_executor_line_with_cp_is_one_the_executor_parses():
    """CP executes (executors/ring_attention.py): the planner's launch line carries --cp and no refusal."""
    pytest.importorskip("torch")
    from executors.run import parser
    from pipesim.plan.launch import executor_line

    model = MODEL_PRESETS["llama2-70b"]
    with_cp = executor_line(Candidate(8, 8, 16, 1, 64, "1f1b", 1, NONE, True, cp=2), model, 8)
    assert "--cp 2" in with_cp and "#" not in with_cp
    args = parser().parse_args(with_cp.split(" -m executors.run ")[1].split())
    assert args.cp == 2 and args.tp == 8


def test_the_training_codes_kernels_are_inputs_to_the_plan(capsys):
    """--attention / --elementwise are the kernels the training code runs (not searched): every candidate's layout
    carries them, eager element-wise ops make every simulated step slower, and the header names them."""
    from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels
    from pipesim.api.planning import plan

    space = dict(hardware="a100-80gb", schedules=("1f1b",), recompute=("none",), zero=(1,), precision=("bf16",),
                 cp=(1,), micro_batch_sizes=(1,))
    fused = plan("llama2-7b", 8, 16, top=3, **space)
    eager = plan("llama2-7b", 8, 16, top=3, elementwise="eager", attention="triton", **space)
    assert eager.request.elementwise is ElementwiseKernels.EAGER and eager.request.attention is AttentionKernel.TRITON
    layout = eager.request.layout_of(eager.best.candidate)
    assert layout.elementwise is ElementwiseKernels.EAGER and layout.attention is AttentionKernel.TRITON
    assert eager.best.evaluation.step_time > fused.best.evaluation.step_time
    slower, faster = _step_times(eager), _step_times(fused)
    common = slower.keys() & faster.keys()
    assert common and all(slower[c] > faster[c] for c in common)
    assert "triton attention and eager element-wise ops" in eager.header() and "attention" not in fused.header()


def test_the_loss_implementation_is_an_input_to_the_plan():
    """--loss pytorch: every candidate's layout carries it, its larger peak on the last stage's rank raises the
    memory of candidates whose peak is there, and the header names it."""
    from pipesim.analytic.layout import LossKernel
    from pipesim.api.planning import plan

    space = _SMALL_SPACE
    megatron = plan("llama3.1-8b", 8, 16, top=3, **space)
    pytorch = plan("llama3.1-8b", 8, 16, top=3, loss="pytorch", **space)
    assert pytorch.request.layout_of(pytorch.best.candidate).loss is LossKernel.PYTORCH

    def peaks(result):
        return {o.candidate: o.evaluation.peak_gib for o in result.search.outcomes if o.evaluation is not None}
    more, less = peaks(pytorch), peaks(megatron)
    common = more.keys() & less.keys()
    # never less; strictly more where the last stage's rank is the peak one (no pipeline: the only rank)
    assert common and all(more[c] >= less[c] for c in common)
    unpipelined = [c for c in common if c.pp == 1]
    assert unpipelined and all(more[c] > less[c] for c in unpipelined)
    assert "pytorch cross-entropy" in pytorch.header() and "cross-entropy" not in megatron.header()


def test_fsdp_zero2_collectives_are_an_input_to_the_plan():
    """--zero-collectives per-layer: ZeRO-2 candidates without pipelining run as FSDP's SHARD_GRAD_OP (each layer's
    gather and reduce-scatter every microbatch, across 16 nodes here, prefetched beside the layers: not the time of
    DeepSpeed's buckets, each microbatch's reduce-scatter exposed), every other candidate keeps its buckets, and the
    header names it."""
    from pipesim.analytic.layout import ZeroCollectives, ZeroStage
    from pipesim.api.planning import plan

    space = dict(hardware="h100-sxm", schedules=("1f1b",), recompute=("none",), zero=(1, 2), precision=("bf16",),
                 cp=(1,), micro_batch_sizes=(4,))
    bucketed = plan("llama3.2-1b", 128, 512, top=3, **space)
    fsdp = plan("llama3.2-1b", 128, 512, top=3, zero_collectives="per-layer", **space)

    layered, buckets = _step_times(fsdp), _step_times(bucketed)
    common = layered.keys() & buckets.keys()
    per_layer = [c for c in common if c.zero is ZeroStage.GRADIENTS and c.pp == 1]
    assert per_layer and all(layered[c] != buckets[c] for c in per_layer)
    assert all(layered[c] == buckets[c] for c in common if c.zero is not ZeroStage.GRADIENTS)
    for c in per_layer:
        assert fsdp.request.layout_of(c).zero_collectives is ZeroCollectives.PER_LAYER
    assert "per-layer ZeRO-2 collectives" in fsdp.header() and "ZeRO-2" not in bucketed.header()


def test_blocking_tp_collectives_are_an_input_to_the_plan(capsys):
    """--no-overlap-tp-dgrad: every TP collective waits, so each candidate with tensor parallelism is slower than
    with the column-parallel input-gradient collectives beside their weight gradients (the default); tp = 1
    candidates are unchanged, and the header names it. The CLI flag reaches the request."""
    from pipesim.api.planning import plan
    from pipesim.cli.main import main

    space = _SMALL_SPACE
    overlapped = plan("llama2-13b", 16, 64, top=3, **space)
    blocking = plan("llama2-13b", 16, 64, top=3, overlap_tp_dgrad=False, **space)

    slower, faster = _step_times(blocking), _step_times(overlapped)
    common = slower.keys() & faster.keys()
    with_tp = [c for c in common if c.tp > 1]
    assert with_tp and all(slower[c] > faster[c] for c in with_tp)
    assert all(slower[c] == faster[c] for c in common if c.tp == 1)
    assert "TP collectives all blocking" in blocking.header() and "blocking" not in overlapped.header()
    assert main([*_LLAMA2_13B_ON_16, "--no-overlap-tp-dgrad", "-q", "--top", "1"]) == 0
    assert "TP collectives all blocking" in capsys.readouterr().out


def test_plan_takes_where_the_column_parallel_inputs_come_from(capsys):
    """``column_input`` reaches every candidate: with sequence parallelism and tp > 1, nanotron's blocking second
    gather is slower than Megatron-LM's overlapped one; without either nothing changes; the header says so."""
    from pipesim.api.planning import plan
    from pipesim.cli.main import main

    space = _SMALL_SPACE
    default = plan("llama2-13b", 16, 64, top=3, **space)
    blocking = plan("llama2-13b", 16, 64, top=3, column_input="regather-blocking", **space)

    slower, faster = _step_times(blocking), _step_times(default)
    common = slower.keys() & faster.keys()
    gathered = [c for c in common if c.tp > 1 and c.sequence_parallel]
    assert gathered and all(slower[c] > faster[c] for c in gathered)
    assert all(slower[c] == faster[c] for c in common if c.tp == 1 or not c.sequence_parallel)
    assert "TP inputs gathered again, blocking" in blocking.header() and "gathered" not in default.header()
    assert main([*_LLAMA2_13B_ON_16, "--column-input", "saved", "-q", "--top", "1"]) == 0
    assert "gathered TP inputs kept" in capsys.readouterr().out


def test_plan_marks_the_candidates_that_peak_within_the_memory_band_of_the_cap(capsys):
    """A candidate that fits under the cap by less than the memory band (the error validation measured on
    published peak-memory rows) may not fit: the ranking marks it ≈cap, the data says may_not_fit."""
    from pipesim.analytic.error_band import memory_band
    from pipesim.api.planning import plan
    from pipesim.cli.main import main

    band = memory_band().relative
    ranked = plan("llama2-13b", gpus=16, global_batch=64, memory_cap=64, **_SMALL_SPACE).to_dict()["ranked"]
    assert ranked and all(r["peak_gib"] <= 64 for r in ranked)
    assert [r["may_not_fit"] for r in ranked] == [r["peak_gib"] * (1 + band) > 64 for r in ranked]
    assert any(r["may_not_fit"] for r in ranked) and not all(r["may_not_fit"] for r in ranked)
    assert main([*_LLAMA2_13B_ON_16, "--hardware", "h100-sxm", "--memory-cap", "64", "--top", "3"]) == 0
    out = capsys.readouterr().out
    marked = [line for line in out.splitlines() if " ≈cap" in line and not line.startswith("≈cap")]
    assert len(marked) == sum(r["may_not_fit"] for r in ranked[:3]) and "they may not fit" in out


def test_plan_marks_the_candidates_of_layouts_no_published_run_had(capsys):
    """FSDP alone (ZeRO-3 at tp 1 and pp 1) is what published runs measured; ZeRO-3 with tp or pp is not: those
    candidates carry ?band (their bands were measured on other layouts) and validated_layout False in the data."""
    from pipesim.api.planning import plan
    from pipesim.cli.main import main

    ranked = plan("llama2-13b", gpus=16, global_batch=64, top=30, **dict(_SMALL_SPACE, zero=(3,))).to_dict()["ranked"]
    # at dp 1 there is nothing to shard: ZeRO-3 is off there (no "zero3" in the label) and tp × pp was measured
    sharded = [r for r in ranked if "zero3" in r["label"]]
    alone = [r["validated_layout"] for r in sharded if r["label"].startswith("tp1 pp1 ")]
    combined = [r["validated_layout"] for r in sharded if not r["label"].startswith("tp1 pp1 ")]
    unsharded = [r["validated_layout"] for r in ranked if "zero3" not in r["label"]]
    assert alone and combined and unsharded and all(alone) and all(unsharded) and not any(combined)
    zero_at = _LLAMA2_13B_ON_16.index("--zero") + 1
    argv = [("3" if i == zero_at else a) for i, a in enumerate(_LLAMA2_13B_ON_16)]
    assert main([*argv, "--hardware", "h100-sxm", "--top", "30"]) == 0
    out = capsys.readouterr().out
    ranking = [line for line in out.splitlines() if line[:2].strip().isdigit()]
    flagged = [line for line in ranking if " ?band" in line]
    assert len(flagged) == len(combined) and not any(" tp1 pp1 " in line for line in flagged)
    assert "were measured on other layouts" in out


def test_layers_that_do_not_split_evenly_get_megatrons_lighter_ends():
    """Llama 3.1 405B's 126 layers divide by no power of two above 2; with the embedding and the loss counted as
    a layer each (128) they split over 4–64 slices, one layer fewer on the first and last: the layouts such
    models run at (pp 8: 15, 16 × 6, 15, Llama Team 2024 §3.3.2; pp 8 × v 8: 1, 2 × 62, 1, MLPerf's NeMo
    configs). By hand, and what the planner enumerates and hands the cost model and Megatron."""
    from pipesim.analytic.stage_split import pipeline_split
    from pipesim.api.planning import plan_request
    from pipesim.plan.launch import megatron_argv
    from pipesim.plan.space import enumerate_candidates

    assert pipeline_split(126, 8) == (15,) + (16,) * 6 + (15,)
    assert pipeline_split(126, 64) == (1,) + (2,) * 62 + (1,)
    assert pipeline_split(80, 8) == (10,) * 8 and pipeline_split(126, 2) == (63, 63)
    assert pipeline_split(70, 8) == (8,) + (9,) * 6 + (8,)  # GLM-130B's stated split (end stages one lighter)
    assert pipeline_split(61, 4) is None and pipeline_split(3, 5) is None and pipeline_split(5, 3) is None
    request = plan_request("llama3.1-405b", 512, 1152, seq_len=8192, schedules=["1f1b", "interleaved"],
                           micro_batch_sizes=[1])
    pp8 = [c for c in enumerate_candidates(request) if c.pp == 8 and c.schedule == "1f1b"]
    assert pp8 and all(c.stage_layers == (15,) + (16,) * 6 + (15,) for c in pp8)
    assert request.layout_of(pp8[0]).stage_layers == pp8[0].stage_layers
    v4 = next(c for c in enumerate_candidates(request) if c.pp == 8 and c.chunks == 4 and c.zero == 1)
    argv = megatron_argv(v4, request.model, 1152)
    assert "--account-for-embedding-in-pipeline-split" in argv and "--account-for-loss-in-pipeline-split" in argv
    assert argv[argv.index("--num-virtual-stages-per-pipeline-rank") + 1] == "4"
    assert "--num-layers-per-virtual-pipeline-stage" not in argv


def test_plan_keeps_fp8_parameters_where_a_distributed_optimizer_runs_fp8(capsys):
    """``fp8_params`` reaches the FP8 candidates with ZeRO-1 and no others: their peak drops by 2 bytes of every
    linear parameter (rowwise) and their step by the once-a-step weight cast the optimizer now does (no other
    candidate moves); the Megatron line carries --fp8-param-gather; the header names it."""
    from pipesim.api.planning import plan

    space = dict(_SMALL_SPACE, precision=("fp8", "bf16"))
    copy = plan("llama2-13b", 16, 64, top=3, **space)
    rowwise = plan("llama2-13b", 16, 64, top=3, fp8_params="rowwise", **space)
    peaks = {o.candidate: o.evaluation.peak_gib for o in copy.search.outcomes if o.evaluation is not None}
    lower = {o.candidate: o.evaluation.peak_gib for o in rowwise.search.outcomes if o.evaluation is not None}
    common = peaks.keys() & lower.keys()
    takes = [c for c in common if c.precision is Precision.FP8 and c.zero is ZeroStage.OPTIMIZER]
    assert takes and all(lower[c] < peaks[c] for c in takes)
    assert all(lower[c] == peaks[c] for c in common if c not in takes)  # BF16, or nothing sharded (dp = 1)
    fast, slow = _step_times(rowwise), _step_times(copy)
    assert all(fast[c] < slow[c] for c in takes)  # the optimizer writes the FP8 weights: no cast in the forward
    assert all(fast[c] == slow[c] for c in common if c not in takes)
    assert "FP8 parameters (rowwise)" in rowwise.header() and "FP8 parameters" not in copy.header()
    argv = [*_LLAMA2_13B_ON_16[:-10], "--schedules", "1f1b", "--recompute", "none", "--zero", "1", "--precision",
            "fp8", "--cp", "1", "--micro-batch-sizes", "1", "--fp8-params", "-q", "--top", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "--fp8-param-gather" in out and "FP8 parameters (both)" in out


def test_plan_gathers_fsdp_weights_in_fp8_where_torchao_runs_fp8_under_fsdp(capsys):
    """``fp8_all_gather`` (torchao's FSDP float8 all-gather) reaches the FP8 candidates under FSDP (ZeRO-3) with
    torchtitan's torchao linears and no others: their layouts carry it and their per-layer gathers move one byte a
    weight, so each is faster; BF16 and replicated (ZeRO-0) candidates do not move; the header names it; with Megatron's
    Transformer Engine linears it is refused in one line."""
    from pipesim.api.planning import plan, plan_request
    from pipesim.errors import PipesimError

    space = dict(hardware="h100-sxm", schedules=("1f1b",), recompute=("none",), zero=(0, 3),
                 precision=("fp8", "bf16"), cp=(1,), micro_batch_sizes=(1,), framework="torchtitan")
    # a top list long enough that the pruning (which differs between the two) leaves both kinds simulated in both
    plain = plan("llama2-7b", 8, 32, top=30, **space)
    gathered = plan("llama2-7b", 8, 32, top=30, fp8_all_gather=True, **space)
    slow, fast = _step_times(plain), _step_times(gathered)
    common = slow.keys() & fast.keys()
    takes = [c for c in common if c.precision is Precision.FP8 and c.zero is ZeroStage.PARAMETERS and c.pp == 1]
    assert takes and all(fast[c] < slow[c] for c in takes)
    others = [c for c in common if c.precision is not Precision.FP8 or c.zero is not ZeroStage.PARAMETERS]
    assert others and all(fast[c] == slow[c] for c in others)
    request = plan_request("llama2-7b", 8, 32, fp8_all_gather=True, **space)
    assert all(request.layout_of(c).fp8_all_gather == (c in takes) for c in takes + others)
    assert "weights gathered in FP8" in gathered.header() and "gathered in FP8" not in plain.header()
    with pytest.raises(PipesimError, match="--fp8-all-gather is torchao's"):
        plan_request("llama2-7b", 8, 32, fp8_all_gather=True, hardware="h100-sxm")


def test_an_interleaved_line_states_megatron_cores_microbatch_group_where_pp_does_not_divide_m():
    """Megatron-Core runs m = 10 on pp = 4 only with --microbatch-group-size-per-virtual-pipeline-stage: the least
    group it accepts is 5 (4 leaves a last group of 2 < pp), the order pipesim simulated."""
    model = MODEL_PRESETS["llama2-70b"]
    uneven = Candidate(8, 4, 1, 1, 10, "interleaved", 5, NONE, True)
    argv = megatron_argv(uneven, model, 10)
    flag = argv.index("--microbatch-group-size-per-virtual-pipeline-stage")
    assert argv[flag + 1] == "5"
    even = replace(uneven, microbatches=12)
    assert "--microbatch-group-size-per-virtual-pipeline-stage" not in megatron_argv(even, model, 12)


def test_a_gb200_plan_takes_whole_trays_and_launches_four_processes_a_host():
    """GB200 NVL72: 72 GPUs on one NVLink domain (tp stays inside it), 4 per host. 80 GPUs are a rack and two trays:
    planned, where whole 72-GPU nodes were required; the launch line starts 4 processes on each of 20 hosts."""
    from pipesim.api import plan

    result = plan("llama2-7b", 80, 80, top=1, hardware="gb200", schedules=("1f1b",), precision=("bf16",),
                  micro_batch_sizes=(1,))
    assert "80× gb200 (72 per NVLink domain, 4 per host)" in result.text()
    assert "--nnodes 20 --nproc-per-node 4" in result.text()
    with pytest.raises(PipesimError, match="not a whole number of hosts of 4 GPUs"):
        plan("llama2-7b", 82, 82, hardware="gb200")


def test_plan_searches_nvfp4_only_when_named_and_only_where_the_chip_has_it(capsys):
    """NVFP4 is a numerics choice: the default search is BF16 and FP8; named, it is searched on a Blackwell chip
    (its candidates faster than FP8's, the Megatron line carrying --fp4-format e2m1) and refused on one without it."""
    from pipesim.api.planning import plan

    space = dict(_SMALL_SPACE, hardware="b200")
    del space["precision"]
    default = plan("llama2-13b", 16, 64, top=3, **space)
    assert {o.candidate.precision for o in default.search.outcomes} == {Precision.BF16, Precision.FP8}
    named = plan("llama2-13b", 16, 64, top=3, precision=("fp8", "fp4"), **space)
    times = _step_times(named)
    fp4 = {replace(c, precision=Precision.FP8): t for c, t in times.items() if c.precision is Precision.FP4}
    assert fp4 and all(t < times[c] for c, t in fp4.items() if c in times)
    assert named.ranked[0].candidate.precision is Precision.FP4
    argv = ["plan", "--model", "llama2-13b", "--gpus", "16", "--global-batch", "64", "--hardware", "b200",
            "--schedules", "1f1b", "--recompute", "none", "--zero", "1", "--precision", "fp4", "--cp", "1",
            "--micro-batch-sizes", "1", "-q", "--top", "1"]
    assert main(argv) == 0
    assert "--fp4-format e2m1" in capsys.readouterr().out
    assert main([*argv[:7], "--hardware", "h100-sxm", *argv[9:]]) == 2
    assert "--precision fp4: chip h100-sxm has none of them" in capsys.readouterr().err


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=60),
       st.lists(st.tuples(st.integers(0, 31), st.integers(0, 31), st.integers(1, 4)), min_size=1, max_size=20))
def test_the_frontier_answers_as_counting_every_configuration_would(added, asked):
    """The frontier keeps distinct step times and a staircase of least peaks, not every configuration: each test
    answers as scanning all the simulated configurations would (step times and peaks on a small grid, so ties
    on either axis are common)."""
    frontier = _Frontier()
    for time, peak in added:
        frontier.add(float(time), float(peak))
    view = frontier.view()
    for time, memory, top in asked:
        fast = [peak for t, peak in added if t <= time]
        enough = len({t for t, _ in added if t <= time}) >= top
        assert view.cannot_matter(Bounds(float(time), float(memory)), top) == (enough and min(fast) <= memory)
        assert view.outranked(float(time), float(memory), top) == (enough and min(fast) < memory)
