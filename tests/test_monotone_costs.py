"""What must hold of any prediction, whatever the model, chip and layout: a faster chip never gives a slower step, a
setting that only saves memory never raises the peak, and one that only hides time never lengthens the step.

A planner ranks layouts by these predictions, so a cost term that turns the wrong way (a faster link that leaves a
step slower, a recomputation that keeps more) would reorder candidates for no physical reason. Each property is drawn
over presets, chips, layouts and frameworks; a combination pipesim refuses (a one-line error) is drawn again.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.analytic.chip_load import load_chip
from pipesim.errors import PipesimError

MODELS = ("llama3.2-1b", "gpt-1.7b", "llama3.1-8b", "mixtral-8x7b", "deepseek-v2-lite", "gpt3-2.7b")
CHIPS = ("h100-sxm", "a100-80gb", "b200", "h200", "a100-40gb")
SCHEDULES = ("1f1b", "gpipe", "interleaved", "zb-h1", "zb-v", "looped-bfs")
# a chip field changed the way that makes the chip no slower: more of a rate, less of a latency or a host cost
IMPROVEMENTS = (("peak_flops", 1.25), ("hbm_bandwidth", 1.25), ("intra_node_bandwidth", 1.5),
                ("inter_node_bandwidth", 1.5), ("link_latency", 0.5), ("collective_base_latency", 0.5),
                ("nvlink_hop_latency", 0.5), ("network_hop_latency", 0.5), ("host_kernel_overhead", 0.5),
                ("p2p_sync_overhead", 0.5), ("gemm_efficiency", 1.1), ("attention_forward_efficiency", 1.1),
                ("attention_backward_efficiency", 1.1), ("memory_efficiency", 1.05))
RELATIVE = 1e-9  # summation order aside, the two predictions are the same sums


@st.composite
def runs(draw, schedules=SCHEDULES, tps=(1, 2, 4, 8), pps=(1, 2, 4), dps=(1, 2, 4, 16)):
    """A step to simulate: a preset on a chip, its layout and the settings a published run varies."""
    schedule = draw(st.sampled_from(schedules))
    tp, pp = draw(st.sampled_from(tps)), draw(st.sampled_from(pps))
    options = dict(schedule=schedule, model=draw(st.sampled_from(MODELS)), tp=tp, pp=pp,
                   dp=draw(st.sampled_from(dps)), mb=draw(st.sampled_from((4, 8))),
                   chunks=2 if schedule in ("interleaved", "looped-bfs") else None,
                   recompute=draw(st.sampled_from(("none", "selective", "full"))),
                   sequence_parallel=tp > 1 and draw(st.booleans()),
                   framework=draw(st.sampled_from((None, "megatron", "nemo", "torchtitan", "nanotron"))),
                   seq_len=draw(st.sampled_from((None, 2048, 8192))))
    return {name: value for name, value in options.items() if value is not None}


def _simulate(hardware, **options):
    try:
        return pipesim.simulate(hardware=hardware, **options)
    except PipesimError:
        assume(False)  # refused as a whole (not this property's business): draw another


@pytest.mark.parametrize(("field", "factor"), IMPROVEMENTS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs(), chip=st.sampled_from(CHIPS))
def test_a_faster_chip_never_gives_a_slower_step(field, factor, run, chip):
    base = load_chip(chip)
    try:
        faster = dataclasses.replace(base, **{field: getattr(base, field) * factor})
    except PipesimError:
        assume(False)  # past the field's range (an efficiency above 1)
    before, after = _simulate(base, **run), _simulate(faster, **run)
    assert after.step_time <= before.step_time * (1 + RELATIVE), (field, factor, before.step_time, after.step_time)


def _peak(result) -> float:
    return result.model_report.memory.peak.total


# (what is set, from what, to what): each keeps less or the same on every rank
MEMORY_SAVINGS = (("recompute", "none", "selective"), ("recompute", "selective", "full"),
                  ("recompute", "none", "full"), ("distributed_optimizer", False, True),
                  ("sequence_parallel", False, True))


# what each setting needs to act at all: replicas to shard over, tensor-parallel ranks, pipeline stages
NEEDS = {"distributed_optimizer": dict(dps=(2, 4, 16)), "sequence_parallel": dict(tps=(2, 4, 8)),
         "async_tp": dict(tps=(2, 4, 8)), "overlap_p2p": dict(pps=(2, 4)), "overlap_grad_reduce": dict(dps=(2, 4, 16))}


@pytest.mark.parametrize(("name", "before_value", "after_value"), MEMORY_SAVINGS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), chip=st.sampled_from(CHIPS))
def test_a_setting_that_only_saves_memory_never_raises_the_peak(name, before_value, after_value, data, chip):
    run = data.draw(runs(**NEEDS.get(name, {})))
    before = _simulate(chip, **{**run, name: before_value})
    after = _simulate(chip, **{**run, name: after_value})
    assert _peak(after) <= _peak(before) * (1 + RELATIVE), (name, _peak(before), _peak(after))


# each overlaps work that would otherwise wait: the step may only get shorter
TIME_HIDING = (("async_tp", False, True), ("overlap_p2p", False, True), ("overlap_grad_reduce", False, True))


@pytest.mark.parametrize(("name", "before_value", "after_value"), TIME_HIDING)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), chip=st.sampled_from(CHIPS))
def test_a_setting_that_only_hides_time_never_lengthens_the_step(name, before_value, after_value, data, chip):
    run = data.draw(runs(**NEEDS[name]))
    if name == "overlap_grad_reduce":  # Megatron overlaps the distributed optimizer's reduce-scatter
        run = {**run, "distributed_optimizer": True}
    before = _simulate(chip, **{**run, name: before_value})
    after = _simulate(chip, **{**run, name: after_value})
    assert after.step_time <= before.step_time * (1 + RELATIVE), (name, before.step_time, after.step_time)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs(schedules=("1f1b", "gpipe", "interleaved", "zb-h1")), chip=st.sampled_from(CHIPS))
def test_twice_the_microbatches_take_longer_and_at_most_twice_as_long(run, chip):
    # the step's fixed costs (the gradient sync, the optimizer, the pipeline's fill and drain) are paid once
    once = _simulate(chip, **run)
    twice = _simulate(chip, **{**run, "mb": 2 * run["mb"]})
    assert once.step_time < twice.step_time <= 2 * once.step_time * (1 + RELATIVE)
