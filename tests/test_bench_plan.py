"""Planner benchmark (pytest-benchmark; skipped in the normal run): Llama 2 70B on 1,024 H100s, every
built-in schedule, global batch 1,024 sequences (Llama 2's 4M tokens), one process.
Run: ``python -m pytest tests/test_bench_plan.py --benchmark-only``. The goal is under 60 s on two cores."""

from __future__ import annotations

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.plan.search import Status, run_plan
from pipesim.plan.space import PlanRequest


def _fresh_plan(request: PlanRequest):
    from pipesim.analytic import to_costs
    from pipesim.plan import evaluate
    from pipesim.program.build import _build_cached

    # Count building every schedule, cost model and timeline, as a fresh `pipesim plan` does.
    _build_cached.cache_clear()
    for kept in (
        to_costs._LAYER_COSTS,
        to_costs._BREAKDOWNS,
        evaluate._COST_MODELS,
        evaluate._TIMELINES,
        evaluate._PROFILES,
    ):
        kept.clear()
    return run_plan(request, top=10)


def test_bench_plan_70b_on_1024_h100(benchmark):
    request = PlanRequest(MODEL_PRESETS["llama2-70b"], CHIP_PRESETS["h100-sxm"], gpus=1024, global_batch=1024)
    result = benchmark.pedantic(_fresh_plan, args=(request,), rounds=2, iterations=1)
    benchmark.extra_info.update(considered=result.considered, simulated=result.count(Status.SIMULATED))
    assert result.considered > 5000 and result.fitting()
    assert {o.candidate.schedule for o in result.outcomes} >= set(request.schedules)
