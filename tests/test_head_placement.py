"""Where the model's end runs (Layout.stages_after_head), by hand: nanotron's cost balance can put the LM head on a
stage before the last and leave the logits' FP32 cast and the loss to the stages after it, the logits crossing the
boundaries between (``models/base.py``, ``build_model``). Llama 3.2 1B over 8 stages is such a split: 3,2,3,2,3,2,1
layers and the head, then the cast and the loss alone."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pipesim.analytic.activations import head_input_bytes, loss_logit_bytes
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import boundary_bandwidths, p2p_bytes, stage_output_bytes
from pipesim.analytic.frameworks import Framework, knobs
from pipesim.analytic.kernels import LOGIT_CAST_BYTES, head_part_times, head_times
from pipesim.analytic.layout import HeadParts, Layout, LossKernel, P2pCalls, PipelineBuffers
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.params import output_params
from pipesim.analytic.to_costs import build_cost_model, compute_pace, stage_breakdowns
from pipesim.api.simulation import simulate
from pipesim.errors import PipesimError
from pipesim.plan.launch import executor_gaps
from pipesim.plan.space import PlanRequest, enumerate_candidates
from pipesim.program.ir import PipelineShape
from tests.bad_input.helpers import call, check_refusal

MODEL = MODEL_PRESETS["llama3.2-1b"].with_shape(4096, 1)
CHIP = CHIP_PRESETS["h100-sxm"]
SPLIT = (3, 2, 3, 2, 3, 2, 1, 0)
# nanotron's engine: blocking sends and receives one after the other, its loss; the head on stage 6
NANOTRON = Layout(pp=8, microbatches=32, stage_layers=SPLIT, p2p_calls=P2pCalls.SEQUENTIAL, loss=LossKernel.NANOTRON,
                  stages_after_head=1)
HEAD_LAST = replace(NANOTRON, stages_after_head=0)
LOGITS = 4096 * 128256  # one microbatch's logits, one tp rank's shard at tp 1


def test_the_parts_of_the_head_go_where_the_layout_says():
    assert [NANOTRON.head_parts(s) for s in (5, 6, 7)] == [HeadParts(), HeadParts(projection=True),
                                                           HeadParts(cast=True, loss=True)]
    assert HEAD_LAST.head_parts(7) == HeadParts(True, True, True) and HEAD_LAST.head_parts(6) == HeadParts()
    two = replace(NANOTRON, stage_layers=(3, 3, 3, 3, 2, 2, 0, 0), stages_after_head=2)
    assert [two.head_parts(s) for s in (5, 6, 7)] == [HeadParts(projection=True), HeadParts(cast=True),
                                                      HeadParts(loss=True)]
    # the split nanotron makes, and where its head lands
    assert knobs(Framework.NANOTRON).split_layers(MODEL, 8) == SPLIT
    assert knobs(Framework.NANOTRON).stages_after_head(MODEL, 8) == 1
    assert knobs(Framework.NANOTRON).stages_after_head(MODEL, 4) == 0
    assert knobs(Framework.MEGATRON).stages_after_head(MODEL, 8) == 0


def test_the_head_parts_sum_to_the_whole_head():
    parts = head_part_times(MODEL, NANOTRON, CHIP)
    whole = head_times(MODEL, NANOTRON, CHIP)
    total = parts.of(HeadParts(projection=True))
    rest = parts.of(HeadParts(cast=True, loss=True))
    assert total.forward + rest.forward == pytest.approx(whole.forward)
    assert total.backward_input + rest.backward_input == pytest.approx(whole.backward_input)
    assert total.backward_weight == whole.backward_weight and rest.backward_weight == 0
    # the cast alone: read 2 and write 4 bytes a logit forward, read 4 and write 2 backward, at the stream rate
    assert parts.cast.forward == pytest.approx(LOGIT_CAST_BYTES[0] * LOGITS / CHIP.stream_bandwidth)
    assert LOGIT_CAST_BYTES == (6, 6)


def test_the_logits_cross_the_boundary_after_the_head():
    hidden = p2p_bytes(MODEL, NANOTRON)
    assert [stage_output_bytes(MODEL, NANOTRON, s) for s in (5, 6, 7)] == [hidden, 2 * LOGITS, hidden]
    two = replace(NANOTRON, stage_layers=(3, 3, 3, 3, 2, 2, 0, 0), stages_after_head=2)
    # the head's BF16 logits, then the cast's FP32 ones
    assert [stage_output_bytes(MODEL, two, s) for s in (4, 5, 6)] == [hidden, 2 * LOGITS, 4 * LOGITS]


def test_the_cost_model_moves_the_head_the_loss_and_the_logits_send():
    ours, last = build_cost_model(MODEL, CHIP, NANOTRON), build_cost_model(MODEL, CHIP, HEAD_LAST)
    parts = head_part_times(MODEL, NANOTRON, CHIP)
    pace = compute_pace(CHIP, NANOTRON)
    bandwidth = boundary_bandwidths(NANOTRON, CHIP, PipelineShape(8, 32, 1))[6]
    transfers = P2pCalls.SEQUENTIAL.transfers_per_pass
    # stage 6: the projection joins it, and its blocking send carries the logits instead of the hidden state
    sent = transfers * (2 * LOGITS - p2p_bytes(MODEL, NANOTRON)) / bandwidth
    assert ours.stage(6).forward - last.stage(6).forward == pytest.approx(pace * parts.projection.forward + sent)
    # stage 7: the cast and the loss alone (no output to send), and its backward sends the logits' gradient
    assert ours.stage(7).forward == pytest.approx(pace * (parts.cast.forward + parts.loss.forward))
    assert ours.stage(7).p2p_bytes == p2p_bytes(MODEL, NANOTRON) and ours.stage(6).p2p_bytes == 2 * LOGITS
    back = ours.stage(7).backward_input - pace * (parts.cast.backward_input + parts.loss.backward_input)
    assert back == pytest.approx(transfers * 2 * LOGITS / bandwidth + CHIP.p2p_sync_overhead)
    # the stages before are untouched
    assert all(ours.stage(s) == last.stage(s) for s in range(6))


def test_memory_moves_the_head_weights_and_the_loss_logits():
    ours, last = stage_breakdowns(MODEL, NANOTRON), stage_breakdowns(MODEL, HEAD_LAST)
    assert ours[7].params == 0 and ours[7].end_params == 0
    assert ours[6].params - last[6].params == output_params(MODEL, 8)
    assert ours[7].activation_bytes == pytest.approx(loss_logit_bytes(MODEL, NANOTRON))
    assert ours[6].activation_bytes - last[6].activation_bytes == pytest.approx(head_input_bytes(MODEL, NANOTRON))
    assert ours[:6] == last[:6]


@pytest.mark.parametrize(("change", "message"), [
    (dict(stages_after_head=3), "give 0, 1 or 2"),
    (dict(stage_layers=(3, 2, 3, 2, 3, 2, 2, 1)), "ending in 1 zero"),
    (dict(stage_layers=None), "an even split"),
    (dict(chunks=2, stage_layers=None), "one stage a rank"),
    (dict(pipeline_buffers=PipelineBuffers.TORCH), "one stage a rank"),
])
def test_a_placement_nanotron_cannot_make_is_refused(change, message):
    with pytest.raises(PipesimError, match=message):
        replace(NANOTRON, **change)


def test_nanotron_runs_the_split_it_makes_and_the_flag_reproduces_it():
    run = dict(model="llama3.2-1b", hardware="h100-sxm", pp=8, mb=32, dp=1, seq_len=4096, framework="nanotron")
    unasked = simulate(**run)
    assert unasked.setup.layout.stages_after_head == 1 and unasked.setup.layout.stage_layers == SPLIT
    asked = simulate(**run, stage_layers=SPLIT, stages_after_head=1)
    assert asked.step_time == unasked.step_time
    # an explicit split keeps the head last unless told otherwise, and that is another prediction
    assert simulate(**run, stage_layers=SPLIT).step_time != unasked.step_time


def test_the_cli_says_where_the_head_runs_and_refuses_a_placement_without_its_split():
    argv = ["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--framework", "nanotron", "--pp", 8,
            "--mb", 32, "--seq-len", 4096]
    code, out, err = call(argv)
    assert code == 0, err
    assert "the LM head on stage 6, the logits' FP32 cast and the loss on stage 7" in out
    report = json.loads(call([*argv, "--json"])[1])
    assert report["model_report"]["layout"]["stages_after_head"] == 1
    code, _, err = call(["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--pp", 8, "--mb", 32,
                         "--stages-after-head", 1])
    check_refusal(code, err, ("--stages-after-head 1", "--stage-layers"))


def test_the_planner_now_considers_the_split_it_refused():
    request = PlanRequest(MODEL_PRESETS["llama3.2-1b"], CHIP, gpus=8, global_batch=256,
                          framework=Framework.NANOTRON, schedules=("1f1b",))
    deep = [c for c in enumerate_candidates(request) if c.pp == 8]
    assert deep and all(request.layout_of(c).stages_after_head == 1 for c in deep)
    # the executor runs the same split with its head on the last stage, and the plan says so
    assert any("not the head 1 stage(s) before the loss" in gap
               for gap in executor_gaps(deep[0], request.model, stages_after_head=1))
    assert not any("LM head" in gap for gap in executor_gaps(deep[0], request.model))

