"""The cost model caches one layer's costs and each stage's breakdown by the layout fields they depend on
(to_costs._layer_costs_key, _breakdowns_key): a cost model built through the caches equals one built from
scratch, over plan spaces that vary every field a search varies (dense and mixture-of-experts, with and
without pipelining, every ZeRO stage, FP8, cp, ep)."""

from __future__ import annotations

import pytest

import pipesim.analytic.to_costs as to_costs
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.errors import PipesimError
from pipesim.plan.evaluate import schedule_traits
from pipesim.plan.space import PlanRequest, enumerate_candidates
from pipesim.program.ir import PipelineShape

SPACES = [
    ("llama2-7b", "h100-sxm", 32, 64, ("1f1b", "interleaved", "zb-v")),
    ("mixtral-8x7b", "h100-sxm", 64, 128, ("1f1b", "dualpipe-v")),
    ("gpt3-2.7b", "a100-80gb", 16, 64, ("gpipe", "zb-h1")),
]


@pytest.mark.parametrize(("model", "chip", "gpus", "batch", "schedules"), SPACES)
def test_cached_layer_costs_give_the_fresh_cost_model(model, chip, gpus, batch, schedules):
    request = PlanRequest(
        MODEL_PRESETS[model],
        CHIP_PRESETS[chip],
        gpus=gpus,
        global_batch=batch,
        schedules=schedules,
        micro_batch_sizes=(1, 2),
    )
    candidates = list(enumerate_candidates(request))
    assert len(candidates) > 300
    _forget()
    built = []
    for c in candidates:  # in order: each layout meets the entries its predecessors left
        layout, spec = request.layout_of(c), request.model_of(c)
        shape = PipelineShape(c.pp, c.microbatches, c.chunks, schedule_traits(c.schedule, c.chunks).placement)
        try:
            built.append((spec, layout, shape, to_costs.build_cost_model(spec, request.chip, layout, shape)))
        except PipesimError:
            continue
    # The caches are used, so this compares something.
    assert len(built) - len(to_costs._LAYER_COSTS) > len(built) // 2
    assert len(built) - len(to_costs._BREAKDOWNS) > len(built) // 2
    for spec, layout, shape, cached in built[::4]:
        breakdowns = to_costs.stage_breakdowns(spec, layout)
        _forget()
        assert to_costs.stage_breakdowns(spec, layout) == breakdowns, layout
        _forget()
        assert to_costs.build_cost_model(spec, request.chip, layout, shape) == cached, layout


def _forget() -> None:
    to_costs._LAYER_COSTS.clear()
    to_costs._BREAKDOWNS.clear()
