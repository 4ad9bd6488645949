"""Bidirectional DualPipe (DeepSeek-V3 technical report §3.2.1): the dual placement, the schedule, its
bubble and memory against the paper's Table 2, the overlapped pairs, the analytic model's two copies of the
parameters, the planner, and the executor's mirror-summed copies against the single-process run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import pipesim.api as api
from pipesim.errors import PipesimError, ScheduleError
from pipesim.io.torch_csv import export_rows
from pipesim.program.build import build_program
from pipesim.program.grouped import relabel
from pipesim.program.ir import F, Op, Placement, Program, Schedule, instruction
from pipesim.program.loader import load_schedule
from pipesim.program.lowering import lower
from pipesim.program.validate import CommSemantics, validate
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import Engine, simulate

# Issue #25's done-when command (the DeepSeek-V3 report's layout: PP16, EP64, ZeRO-1 DP, FP8, 61 layers).
DONE_WHEN = (
    "simulate --model deepseek-v3 --hardware h800 --pp 16 --dp 128 --ep 64 -s dualpipe --mb 120 "
    "--distributed-optimizer --fp8 --stage-layers 3,4,4,4,4,4,4,4,4,4,4,4,4,4,3,3"
)
SHAPES = [(pp, m) for pp in (2, 4, 6, 8) for m in (2 * pp, 2 * pp + 2, 4 * pp)]
MOE_COSTS = StageCosts(
    forward=1.0, backward=2.0, backward_input=1.0, backward_weight=1.0, a2a_forward=0.4, a2a_backward=0.8
)


def _program(pp: int, m: int) -> Program:
    return build_program("dualpipe", pp, m).program


@pytest.mark.parametrize(("pp", "m"), SHAPES)
def test_validates_under_every_semantics(pp, m):
    program = _program(pp, m)
    assert program.shape.placement is Placement.DUAL
    validate(program, CommSemantics.BUFFERED)
    reordered = relabel(program)  # the grouped-safe order NCCL runs
    for semantics in CommSemantics:
        validate(reordered, semantics)


def test_limits_refuse_with_the_fix():
    source = load_schedule("dualpipe")
    for pp, m, what in ((3, 6, "pp must be even"), (4, 9, "use --mb 10"), (4, 6, "use --mb 8")):
        assert not source.limits.accepts(pp, m, 2)
        with pytest.raises(ScheduleError, match=what):
            source.build(pp, m, 2)
    with pytest.raises(ScheduleError, match="exactly two chunks"):
        source.build(4, 8, 1)


def test_each_microbatch_passes_its_own_pipeline_and_mirror_ranks_run_one_order():
    """Down microbatches (0..m/2−1) only on chunk 0, up ones only on chunk 1; rank pp−1−r runs rank r's
    order with the directions swapped (DualPipe's ``phase ^= is_in_second_half``)."""
    pp, m = 6, 16
    schedule = build_program("dualpipe", pp, m).schedule
    half = m // 2
    for order in schedule.orders:
        assert all((ins.mb >= half) == (ins.chunk == 1) for ins in order)
        assert sum(ins.op is Op.F for ins in order) == m  # m/2 per chunk
    for r in range(pp):
        mirrored = [instruction(i.op, (i.mb + half) % m, 1 - i.chunk, None, i.overlap) for i in schedule.orders[r]]
        assert mirrored == list(schedule.orders[pp - 1 - r])


def test_validator_names_a_microbatch_on_the_other_pipeline():
    program = _program(2, 4)
    ranks = [list(code) for code in program.ranks]
    first_f = next(i for i, ins in enumerate(ranks[0]) if ins.op is Op.F)
    ranks[0][first_f] = F(0, 1)  # down microbatch 0 on the up pipeline's stage
    with pytest.raises(ScheduleError, match=r"mbs 0\.\.1 pass only chunk 0 \(the down pipeline\)"):
        validate(Program(program.name, program.shape, ranks))
    # Completeness asks for the microbatch's own pipeline only: a full V-style order is refused too.
    v_orders = build_program("dualpipe-v", 2, 4).schedule.orders
    with pytest.raises(ScheduleError, match="dual placement"):
        validate(
            lower(
                Schedule.from_orders(
                    "x", [list(o) for o in v_orders], microbatches=4, chunks=2, placement=Placement.DUAL
                )
            )
        )


@pytest.mark.parametrize("pp", [2, 4, 6, 8])
@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_bubble_equals_table_2_where_the_closed_form_is_exact(pp, scale):
    """DeepSeek-V3 Table 2, (PP/2 − 1)(F&B + B − 3W), on every rank, with F&B = F + B (no all-to-all) and
    F = I = W, B = I + W — the case the schedule's analytic_bubble claims."""
    costs = StageCosts(forward=scale, backward=2 * scale, backward_input=scale, backward_weight=scale)
    for m in (2 * pp, 4 * pp):
        metrics = simulate(_program(pp, m), CostModel(costs)).metrics
        claimed = load_schedule("dualpipe").analytic(pp, m, 2, costs)
        expected = (pp // 2 - 1) * (costs.forward + 2 * costs.backward - 3 * costs.backward_weight)
        assert claimed.span_bubble == pytest.approx(expected)
        assert [r.span_bubble for r in metrics.ranks] == pytest.approx([expected] * pp)


def test_no_closed_form_is_claimed_where_it_does_not_hold():
    source = load_schedule("dualpipe")
    uneven = StageCosts(forward=1.0, backward=3.0, backward_input=1.5, backward_weight=1.5)
    assert source.analytic(4, 8, 2, uneven) is None
    metrics = simulate(_program(4, 8), CostModel(uneven)).metrics
    assert metrics.ranks[0].span_bubble != pytest.approx(2.5)  # the formula's value: it really differs here
    assert source.analytic(4, 8, 2, MOE_COSTS) is None


@pytest.mark.parametrize(("pp", "m"), SHAPES)
def test_peak_activations_are_pp_plus_one(pp, m):
    """DeepSeek-V3 Table 2: DualPipe holds PP + 1 microbatches' activations (units of a rank's share)."""
    peaks = simulate(_program(pp, m), CostModel()).memory.peak_activations
    assert peaks == pytest.approx([pp + 1] * pp)


def test_each_chunk_costs_a_whole_rank_share():
    """A microbatch passes one chunk per rank, so each chunk takes the full F (not 1/2 as on a V) and the
    total work per rank equals 1F1B's with the same m."""
    costs = CostModel(StageCosts())
    busy = [r.busy for r in simulate(_program(4, 8), costs).metrics.ranks]
    assert busy == pytest.approx([8 * (1.0 + 2.0)] * 4)
    stage_overrides = CostModel(StageCosts(), overrides={1: {"forward": 2.0}})
    table_costs = stage_overrides.shape_costs(_program(4, 8).shape)
    assert [c.forward for c in table_costs] == [1.0, 2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0]  # stage 5 copies slice 1


def _sequential(program: Program) -> Program:
    """The same compute order with every pair run one op after the other."""
    schedule = build_program("dualpipe", program.shape.pp, program.shape.microbatches).schedule
    plain = [[instruction(i.op, i.mb, i.chunk) for i in order] for order in schedule.orders]
    return lower(
        Schedule.from_orders(
            "dualpipe-sequential", plain, microbatches=program.shape.microbatches, chunks=2, placement=Placement.DUAL
        )
    )


@pytest.mark.parametrize(("pp", "m"), [(4, 8), (4, 16), (8, 24)])
def test_pairs_hide_the_all_to_all(pp, m):
    program = _program(pp, m)
    assert program.columns.has_pairs
    costs = CostModel(MOE_COSTS)
    paired = simulate(program, costs).metrics.makespan
    sequential = simulate(_sequential(program), costs).metrics.makespan
    assert paired < sequential
    no_a2a = CostModel(StageCosts())  # nothing to hide: pairs are never faster
    assert simulate(program, no_a2a).metrics.makespan >= simulate(_sequential(program), no_a2a).metrics.makespan


@pytest.mark.parametrize(
    "costs", [CostModel(MOE_COSTS), CostModel(StageCosts(p2p_bytes=10.0), p2p_latency=0.3, p2p_bandwidth=20.0)]
)
def test_engines_agree(costs):
    program = _program(6, 14)
    for steps in (1, 3):
        graph = simulate(program, costs, engine=Engine.GRAPH, steps=steps)
        simpy = simulate(program, costs, engine=Engine.SIMPY, steps=steps)
        np.testing.assert_allclose(graph.start, simpy.start)
        np.testing.assert_allclose(graph.end, simpy.end)


def test_program_text_round_trips_and_torch_csv_refuses():
    program = _program(4, 8)
    assert Program.from_text(program.to_text()) == program
    with pytest.raises(ScheduleError, match="no PyTorch action CSV"):
        export_rows(program)


def test_two_copies_of_the_parameters_per_rank():
    """Rank r holds slice r of one copy and slice pp−1−r of the other: the pipeline holds every parameter
    twice (DeepSeek-V3 Table 2, 2× parameters), and the layout records it."""
    dual = api.simulate("dualpipe", 4, 8, model="gpt-7.5b", hardware="h100-sxm").model_report
    single = api.simulate("1f1b", 4, 8, model="gpt-7.5b", hardware="h100-sxm").model_report
    slices = [r.params for r in single.memory.ranks]
    assert dual.layout.model_copies == 2 and dual.layout.chunks == 1
    assert [r.params for r in dual.memory.ranks] == pytest.approx([slices[r] + slices[3 - r] for r in range(4)])
    assert sum(r.weights for r in dual.memory.ranks) == pytest.approx(2 * sum(r.weights for r in single.memory.ranks))
    assert dual.to_dict()["layout"]["model_copies"] == 2


def test_done_when_command_prints_step_exposed_all_to_all_and_gib(capsys):
    from pipesim.cli.main import main

    assert main(DONE_WHEN.split()) == 0
    out = capsys.readouterr().out
    assert "dual placement, 32 stages" in out and "two model copies" in out
    assert "MoE all-to-all exposed" in out and "hidden by overlap" in out
    assert "peak rank" in out and "GiB" in out


def test_memory_limit_and_stage_costs_name_model_slices():
    """Costs describe the pp model slices (the copies share them): a stage override beyond slice pp−1 is an
    error naming the range."""
    with pytest.raises(PipesimError, match=r"stages 0\.\.3"):
        api.simulate("dualpipe", 4, 8, stage_cost={5: {"forward": 2.0}})
    result = api.simulate("dualpipe", 4, 8, stage_cost={1: {"forward": 2.0}})
    assert result.metrics.makespan > api.simulate("dualpipe", 4, 8).metrics.makespan


def test_layout_refuses_copies_it_cannot_hold():
    from pipesim.analytic.layout import Layout

    with pytest.raises(PipesimError, match="model_copies=2"):
        Layout(pp=3, model_copies=2)
    with pytest.raises(PipesimError, match="model_copies=3"):
        replace(Layout(pp=4), model_copies=3)


@pytest.mark.distributed
def test_executor_sums_the_copies_and_matches_one_process():
    """pp = 4 (mirror pairs 0↔3 and 1↔2), dense GPT on gloo: losses, every gradient and the parameters after
    two steps equal the single-process run, and each stage's two copies are still identical. (pp = 2 with
    tp and dp, and its grouped-safe Program, run in tests/test_executor_equivalence.py; MoE with ep = 2 in
    tests/test_executor_moe.py.)"""
    from executors.harness import spawn
    from executors.runtime import RunConfig, reference_run, run_configs
    from pipesim.topology import Topology
    from tests.reference_checks import assert_matches_reference

    cfg = RunConfig(schedule="dualpipe", topology=Topology(pp=4), microbatches=8, steps=2, capture=True)
    (got,) = spawn(run_configs, 4, [cfg])[0]
    assert_matches_reference(got, reference_run(cfg), "dualpipe pp=4")
    assert got.copy_difference == 0.0


def test_plan_searches_dualpipe_with_its_two_copies():
    """The planner's space holds dualpipe where the schedule builds (pp even, m even ≥ 2·pp), with the two
    copies in its layout; its exact peak memory is that of simulating the same configuration, and shapes
    it refuses come back rejected with the schedule's reason."""
    from pipesim.analytic.memory_gib import GIB

    result = api.plan(
        "gpt-7.5b",
        16,
        12,
        schedules=["dualpipe"],
        recompute=["none"],
        zero=[1],
        precision=["bf16"],
        micro_batch_sizes=[1, 2],
        top=50,
        jobs=1,
    )
    dual = [o for o in result.search.outcomes if o.candidate.schedule == "dualpipe" and o.candidate.pp > 1]
    simulated = [o for o in dual if o.status.value == "simulated"]
    rejected = [o for o in dual if o.status.value == "rejected"]
    assert simulated and rejected
    assert all("dualpipe" in o.reason or "dual placement" in o.reason for o in rejected)
    best = min(simulated, key=lambda o: o.evaluation.step_time)
    c = best.candidate
    layout = result.request.layout_of(c)
    assert (layout.model_copies, layout.chunks, c.chunks) == (2, 1, 2)
    direct = api.simulate(
        "dualpipe",
        c.pp,
        c.microbatches,
        model="gpt-7.5b",
        hardware="h100-sxm",
        tp=c.tp,
        dp=c.dp,
        micro_batch_size=c.micro_batch_size,
        distributed_optimizer=True,
        param_bytes="18",
        sequence_parallel=c.sequence_parallel or None,
    )  # the plan's defaults
    assert best.peak_gib == pytest.approx(direct.model_report.memory.peak.total / GIB, rel=1e-6)


def test_calibrate_reads_a_dual_timeline_as_model_slices():
    """A timeline does not name its placement: calibrate recognises the dual one (each half of the microbatch
    ids on its own half of the stages) and folds the copies onto the pp slices at a whole share each, so the
    costs it writes simulate the same step again; a V timeline is not taken for one."""
    from pipesim.analysis.calibrate import calibrate, dual_slices

    costs = CostModel(StageCosts(), overrides={1: {"forward": 2.0, "backward_input": 1.5}}, time_unit="s")
    program = _program(4, 8)
    timeline = simulate(program, costs).timeline
    notes: list[str] = []
    fitted = calibrate(timeline, notes=notes)
    assert (fitted.num_stages, fitted.chunks) == (4, 1)
    assert fitted.default.forward == pytest.approx(1.0)
    assert fitted.stage(1).forward == pytest.approx(2.0)
    assert any("two model copies" in n for n in notes)
    again = simulate(program, fitted).metrics.makespan
    assert again == pytest.approx(simulate(program, costs).metrics.makespan)
    v_timeline = simulate(build_program("dualpipe-v", 4, 8).program, CostModel()).timeline
    assert dual_slices(v_timeline[v_timeline["op"].isin(["F", "B", "I", "W"])]) is None


def test_gradient_sync_adds_the_mirror_sum_of_the_held_shard():
    """Each chunk's REDUCE_GRAD is its slice's data-parallel sync plus the two copies' sum over the mirror
    ranks: a two-rank all-reduce of the shard left after ZeRO-1's reduce-scatter (the whole gradient without
    sharding, so more)."""
    from pipesim.analytic.chip_load import load_chip
    from pipesim.analytic.comm import mirror_grad_sum
    from pipesim.analytic.layout import Layout, ZeroStage
    from pipesim.analytic.to_costs import stage_reduce_grad

    chip = load_chip("h100-sxm")
    single = Layout(pp=4, dp=8, microbatches=8, zero=ZeroStage.OPTIMIZER)
    dual = replace(single, model_copies=2)
    params = 1e9
    assert mirror_grad_sum(params, single, chip) == 0.0
    mirror = mirror_grad_sum(params, dual, chip)
    assert mirror > 0.0
    assert stage_reduce_grad(params, dual, chip).busy == pytest.approx(stage_reduce_grad(params, single, chip).busy
                                                                       + mirror)
    assert mirror_grad_sum(params, replace(dual, zero=ZeroStage.NONE), chip) > 4 * mirror  # 8× the bytes
