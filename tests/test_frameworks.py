"""--framework (pipesim.analytic.frameworks): a training framework's name sets the layout fields its code
decides; a flag given explicitly wins; the validation sources that run on a framework state the same
settings as its preset; the planner searches "selective" as the framework means it."""

import json

import pytest

from pipesim.analytic.frameworks import KNOBS, Framework, GradReduce, knobs
from pipesim.analytic.layout import (
    BoundaryTensor,
    ColumnInput,
    ElementwiseKernels,
    GradAccumulation,
    GradBuckets,
    LossKernel,
    P2pCalls,
    Precision,
    Recompute,
    RecomputeModule,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.api.model_options import ModelOptions
from pipesim.api.model_setup import model_setup
from pipesim.api.planning import plan_request
from pipesim.api.simulation import simulate
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.program.ir import PipelineShape
from pipesim.validation.sources import runs_by_source

SHAPE = PipelineShape(1, 4, 1)


def _layout(**options):
    return model_setup("llama3.2-1b", "h100-sxm", ModelOptions(tp=2, dp=4, sequence_parallel=True, **options),
                       SHAPE).layout


@pytest.mark.parametrize("framework", list(Framework))
def test_a_framework_sets_the_fields_its_code_decides(framework):
    """Each field on a layout where it acts: the column-parallel input where sequence parallelism gathers it;
    the sends, their calls and the boundary tensor's split on a pipeline (pp 2) without sequence parallelism
    (torchtitan's TP always has it, so each rank sends the 1/tp it holds, whatever the field)."""
    layout, k = _layout(framework=framework.value), KNOBS[framework]
    assert (layout.elementwise, layout.loss, layout.grad_accumulation, layout.overlap_tp_dgrad,
            layout.column_input, layout.mlp_up) == (
        k.elementwise, k.loss, k.grad_accumulation, k.overlap_tp_dgrad, k.column_input, k.mlp_up)
    assert layout.overlap_grad_reduce == k.grad_reduce.overlaps(layout.sharding)
    options = ModelOptions(tp=2, dp=2, framework=framework.value)
    piped = model_setup("llama3.2-1b", "h100-sxm", options, PipelineShape(2, 4, 1)).layout
    sent = BoundaryTensor.WHOLE if k.tp_shards_sequence else k.p2p_tensor
    assert (piped.p2p_tensor, piped.p2p_calls) == (sent, k.p2p_calls)


def test_a_frameworks_defaults_for_what_the_layout_lacks_earn_no_note(capsys):
    """Without a pipeline there are no sends, at tp 1 no TP collectives: a framework's sequential sends, split
    boundary tensor and waiting TP collectives fall back to the defaults unasked, with no note; asked, each is
    noted as changing nothing."""
    alone = model_setup("llama3.2-1b", "h100-sxm", ModelOptions(dp=8, framework="megatron-deepspeed"), SHAPE).layout
    assert (alone.p2p_calls, alone.p2p_tensor, alone.overlap_tp_dgrad) == (
        P2pCalls.BATCHED, BoundaryTensor.WHOLE, True)
    assert alone.inert_flag_notes == []
    asked = model_setup("llama3.2-1b", "h100-sxm", ModelOptions(dp=8, p2p_calls="sequential", p2p_tensor="split",
                                                                 overlap_tp_dgrad=False), SHAPE).layout
    notes = asked.inert_flag_notes
    assert len(notes) == 2 and "--p2p-calls sequential, --p2p-tensor split changes nothing" in notes[0]
    assert "--no-overlap-tp-dgrad changes nothing" in notes[1]
    assert main(["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--pp", "1", "--dp", "8", "--mb",
                 "4", "--overlap-p2p"]) == 0
    assert "note: --overlap-p2p changes nothing here: there are no pipeline sends (--pp 1)" in capsys.readouterr().out
    # the ranks' order: with one pipeline rank, Megatron-LM's two orders are one
    mapped = model_setup("llama3.2-1b", "h100-sxm", ModelOptions(dp=8, tp=2, tp_pp_dp_mapping=True), SHAPE).layout
    assert mapped.inert_flag_notes == ["--tp-pp-dp-mapping changes nothing here: with one pipeline rank both orders "
                                       "number the ranks alike (--pp 1)"]
    # the buckets decide only what of an overlapped sync is left after the passes
    def buckets(**given):
        return model_setup("llama3.2-1b", "h100-sxm", ModelOptions(dp=8, grad_buckets="torch-ddp", **given),
                           SHAPE).layout.inert_flag_notes
    assert buckets() == ["--grad-buckets torch-ddp changes nothing here: no data-parallel sync runs beside the passes "
                         "(add --overlap-grad-reduce)"]
    assert buckets(overlap_grad_reduce=True) == []
    assert model_setup("llama3.2-1b", "h100-sxm", ModelOptions(dp=8, zero=3, zero_collectives="per-layer"),
                       SHAPE).layout.inert_flag_notes == ["--zero-collectives per-layer changes nothing here: ZeRO-3 "
                                                          "without pipelining gathers and reduce-scatters per layer "
                                                          "already"]
    # a framework's own buckets, unasked, fall back where nothing overlaps, without a note
    titan = model_setup("llama3.1-8b", "h100-sxm", ModelOptions(dp=4, tp=2, framework="torchtitan", zero=3),
                        PipelineShape(2, 8, 1)).layout
    assert titan.grad_buckets is GradBuckets.MEGATRON and titan.inert_flag_notes == []
    assert main(["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--pp", "1", "--dp", "8", "--mb",
                 "4", "--moe-shared-expert-overlap"]) == 0
    assert "note: --moe-shared-expert-overlap changes nothing here: llama3.2-1b has no shared experts" in \
        capsys.readouterr().out


def test_megatron_is_the_default_and_a_given_flag_wins():
    assert _layout() == _layout(framework="megatron")
    given = _layout(framework="torchtitan", elementwise="fused", loss="megatron", grad_accumulation="fused",
                    overlap_tp_dgrad=True, column_input="regather", mlp_up="fused", overlap_grad_reduce=False,
                    grad_buckets="megatron")
    assert given == _layout()
    assert _layout(framework="megatron-deepspeed", p2p_tensor="whole").p2p_tensor is BoundaryTensor.WHOLE
    assert _layout(framework="nanotron", column_input="saved").column_input is ColumnInput.SAVED


def test_selective_and_zero2_mean_what_the_framework_means():
    """torchtitan's "selective" is per-op SAC; its ZeRO-2 is FSDP's SHARD_GRAD_OP, per layer. Other stages and
    other frameworks keep the layout's own meaning."""
    assert _layout(framework="torchtitan", recompute="selective").recompute is Recompute.PER_OP
    assert _layout(framework="torchtitan", recompute="full").recompute is Recompute.FULL
    assert _layout(framework="megatron", recompute="selective").recompute is Recompute.SELECTIVE
    assert _layout(framework="torchtitan", zero=2).zero_collectives is ZeroCollectives.PER_LAYER
    assert _layout(framework="torchtitan", zero=3).zero_collectives is ZeroCollectives.BUCKETED
    assert _layout(framework="megatron-deepspeed", zero=2).zero_collectives is ZeroCollectives.BUCKETED


def test_a_knob_value_the_library_does_not_know_is_named_in_a_one_line_error():
    with pytest.raises(PipesimError, match="mlp_up='twice' is not one of 'fused', 'split'"):
        _layout(mlp_up="twice")
    with pytest.raises(PipesimError, match="p2p_calls='async' is not one of 'batched', 'sequential'"):
        _layout(p2p_calls="async")


def test_an_unknown_framework_is_named_in_a_one_line_error():
    with pytest.raises(PipesimError, match="framework 'jax' is not known; use one of megatron, nemo, torchtitan"):
        knobs("jax")
    with pytest.raises(PipesimError, match="framework 'jax'"):
        _layout(framework="jax")


def test_the_sources_that_run_on_a_framework_state_its_settings():
    """Each validation row names its framework (``PublishedRun.framework``) and that code's settings; the preset
    must agree with them where the row does not state otherwise (torchtitan's rows are compiled, so their
    element-wise kernels are fused by their own statement; SmolLM3's TP is asynchronous by its config)."""
    shared = {Framework.TORCHTITAN: ("loss", "mlp_up"),
              Framework.MEGATRON_DEEPSPEED: ("overlap_tp_dgrad", "grad_accumulation", "p2p_tensor", "p2p_calls"),
              Framework.NANOTRON: ("elementwise", "loss", "grad_accumulation")}
    named = [run for runs in runs_by_source().values() for run in runs if run.framework is not None]
    assert {run.framework for run in named} == set(shared)
    for run in named:
        knobs = KNOBS[run.framework]
        assert all(getattr(run, field) is getattr(knobs, field) for field in shared[run.framework]), run.label
        assert run.overlap_grad_reduce is knobs.grad_reduce.overlaps(run.zero)
        if run.framework is Framework.TORCHTITAN:
            assert run.recompute is knobs.selective
    by_source = runs_by_source()
    assert {module for module, runs in by_source.items() if any(r.framework for r in runs)} == {
        "torchtitan2024", "glm130b_2022", "neox20b_2022", "smol2025"}
    megatron = KNOBS[Framework.MEGATRON]
    for run in by_source["korthikanti2023"] + by_source["nemotron4_340b_2024"]:
        assert (run.elementwise, run.loss, run.overlap_tp_dgrad, run.column_input) == (
            megatron.elementwise, megatron.loss, megatron.overlap_tp_dgrad, megatron.column_input)


def test_frameworks_that_wait_for_their_collectives_predict_a_slower_step(capsys):
    """By hand: the same tp 2 layout under nanotron's defaults (TP collectives waited for, the input gathered
    again and waited for, gradients summed by a pass of their own) cannot be faster than under Megatron's."""
    def step(*extra):
        assert main(["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--tp", "2", "--dp", "4",
                     "--pp", "1", "--mb", "4", "--sequence-parallel", "--json", *extra]) == 0
        import json
        return json.loads(capsys.readouterr().out)["model_report"]["step_time_s"]

    assert step("--framework", "nanotron") > step("--framework", "megatron") == step()


def test_nanotrons_ddp_reduces_the_gradients_beside_the_last_backward(capsys):
    """nanotron's DDP comm hook reduces each FP32 bucket as it fills during the last microbatch's backward
    (GradReduce.DDP_HOOKS, ZeRO 0 and 1), and torchtitan's replicate each module's beside it; Megatron unasked
    and DeepSpeed's engine after it; a flag given wins either way, and the overlapped reduce cannot make the step
    longer."""
    assert _layout(framework="nanotron").overlap_grad_reduce
    assert _layout(framework="nanotron", zero=1).overlap_grad_reduce
    assert not _layout(framework="nanotron", overlap_grad_reduce=False).overlap_grad_reduce
    assert _layout(framework="torchtitan").overlap_grad_reduce
    assert not _layout(framework="torchtitan", zero=2).overlap_grad_reduce  # FSDP's per-layer reduce-scatters
    others = ("megatron", "megatron-deepspeed")
    assert not any(_layout(framework=f).overlap_grad_reduce for f in others)
    assert _layout(framework="megatron", overlap_grad_reduce=True).overlap_grad_reduce
    assert GradReduce.DDP_HOOKS.overlaps(ZeroStage.OPTIMIZER) and not GradReduce.DDP_HOOKS.overlaps(ZeroStage.GRADIENTS)
    assert not GradReduce.AFTER_BACKWARD.overlaps(ZeroStage.NONE)

    def step(*extra):
        assert main(["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--dp", "8", "--pp", "1",
                     "--mb", "2", "--framework", "nanotron", "--json", *extra]) == 0
        import json
        return json.loads(capsys.readouterr().out)["model_report"]["step_time_s"]

    assert step() == step("--overlap-grad-reduce") < step("--no-overlap-grad-reduce")
    # one data-parallel rank: nothing to reduce, so the framework's default is dropped and an explicit flag noted
    alone = model_setup("llama3.2-1b", "h100-sxm", ModelOptions(framework="nanotron"), SHAPE).layout
    assert not alone.overlap_grad_reduce and alone.grad_reduce_note is None
    asked = model_setup("llama3.2-1b", "h100-sxm", ModelOptions(overlap_grad_reduce=True), SHAPE).layout
    assert "changes nothing" in asked.grad_reduce_note
    assert _layout(framework="nanotron").grad_reduce_note is None


def test_the_planner_searches_selective_as_the_framework_means_it():
    request = plan_request("llama3.2-1b", 8, 64, framework="torchtitan")
    assert Recompute.PER_OP in request.recompute and Recompute.SELECTIVE not in request.recompute
    assert request.grad_accumulation is GradAccumulation.AUTOGRAD and request.loss is LossKernel.PYTORCH
    assert request.elementwise is ElementwiseKernels.EAGER and request.zero_collectives is ZeroCollectives.PER_LAYER
    assert plan_request("llama3.2-1b", 8, 64, framework="torchtitan", loss="megatron").loss is LossKernel.MEGATRON
    default = plan_request("llama3.2-1b", 8, 64)
    assert default == plan_request("llama3.2-1b", 8, 64, framework="megatron")
    assert Recompute.SELECTIVE in default.recompute and default.grad_accumulation is GradAccumulation.FUSED


def test_pipesim_frameworks_lists_every_framework_and_its_defaults(capsys):
    import pipesim

    table = pipesim.frameworks()
    assert list(table["framework"]) == [f.value for f in Framework]
    titan = table.set_index("framework").loc["torchtitan"]
    assert (titan["loss"], titan["selective"], titan["column_input"]) == ("pytorch", "per-op", "saved")
    assert (titan["cp_kernels"], titan["cp_comm_type"]) == ("pytorch", "allgather")
    assert table.set_index("framework").loc["megatron", "overlap_p2p"] == "interleaved,interleaved-overlap"
    assert main(["frameworks"]) == 0
    out = capsys.readouterr().out
    assert all(f.value in out for f in Framework) and "regather-blocking" in out


def test_a_framework_refuses_what_its_code_does_not_offer(capsys):
    """nanotron shards the optimizer state at most and runs 1F1B or all-forward-all-backward; DeepSpeed's engine
    runs 1F1B only: simulate refuses the rest in one line, plan searches only what the framework offers."""
    assert main(["simulate", "--model", "llama3.2-1b", "--framework", "nanotron", "--zero", "3", "--dp", "4"]) == 2
    assert "--zero 3: nanotron does not shard that way (it offers --zero 0, 1)" in capsys.readouterr().err
    # what was asked is named: --distributed-optimizer, not a --zero the user never typed
    assert main(["simulate", "--model", "llama3.2-1b", "--framework", "torchtitan", "--distributed-optimizer",
                 "--dp", "4"]) == 2
    assert "--distributed-optimizer (ZeRO-1): torchtitan does not shard that way" in capsys.readouterr().err
    # torchtitan's FSDP under a pipeline keeps the gathered weights all step: --zero 3, said so
    assert main(["simulate", "--model", "llama3.2-1b", "--framework", "torchtitan", "--zero", "2", "--dp", "4",
                 "--pp", "2"]) == 2
    assert "which pipesim runs as --zero 3: use --zero 3" in capsys.readouterr().err
    assert main(["simulate", "--model", "llama3.2-1b", "--framework", "megatron-deepspeed", "-s", "interleaved",
                 "--pp", "2"]) == 2
    assert "schedule interleaved: megatron-deepspeed's pipeline engine does not run it" in capsys.readouterr().err
    nanotron = plan_request("llama3.2-1b", 8, 64, framework="nanotron")
    assert set(nanotron.schedules) == {"1f1b", "gpipe"} and {int(z) for z in nanotron.zero} == {0, 1}
    titan = plan_request("llama3.2-1b", 8, 64, framework="torchtitan")
    assert {int(z) for z in titan.zero} == {0, 2, 3} and "zb-v" in titan.schedules
    with pytest.raises(PipesimError, match="schedule interleaved: nanotron"):
        plan_request("llama3.2-1b", 8, 64, framework="nanotron", schedules=["interleaved"])
    assert main(["simulate", "--model", "llama3.2-1b", "--framework", "nanotron", "-s", "gpipe", "--pp", "2"]) == 0


def test_nanotron_recomputes_every_layer_or_none(capsys):
    """nanotron's one recomputation switch (``recompute_layer``) checkpoints every decoder layer: no selective
    policy, no partial one. simulate refuses them in one line; plan searches none and full."""
    base = ["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--dp", "8", "--pp", "1", "--mb", "4",
            "--framework", "nanotron"]
    assert main([*base, "--recompute", "selective"]) == 2
    assert "--recompute selective: nanotron does not recompute that way (it offers --recompute none, full)" in (
        capsys.readouterr().err)
    assert main([*base, "--recompute", "full", "--recompute-layers", "4"]) == 2
    assert "nanotron recomputes every layer or none" in capsys.readouterr().err
    assert main([*base, "--recompute", "full"]) == 0
    assert plan_request("llama3.2-1b", 8, 64, framework="nanotron").recompute == (Recompute.NONE, Recompute.FULL)
    with pytest.raises(PipesimError, match="nanotron does not recompute that way"):
        plan_request("llama3.2-1b", 8, 64, framework="nanotron", recompute=["selective"])
    assert Recompute.SELECTIVE in plan_request("llama3.2-1b", 8, 64).recompute


def test_nanotron_trains_in_bf16_so_plan_searches_nothing_else(capsys):
    """nanotron's Llama and Qwen modules have no FP8 linears: simulate refuses --fp8 in one line, and plan
    searches BF16 alone unless FP8 is asked for, which it refuses alike."""
    assert main(["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--dp", "8", "--pp", "1", "--mb",
                 "4", "--framework", "nanotron", "--fp8"]) == 2
    assert "fp8 GEMMs: nanotron's model code does not train in them" in capsys.readouterr().err
    request = plan_request("llama3.2-1b", 8, 64, framework="nanotron")
    assert request.precision == (Precision.BF16,)
    assert Precision.FP8 in plan_request("llama3.2-1b", 8, 64).precision
    with pytest.raises(PipesimError, match="trains in bf16"):
        plan_request("llama3.2-1b", 8, 64, framework="nanotron", precision=["fp8"])


def test_torchtitans_selective_on_a_moe_model_is_named_not_silently_changed():
    """torchtitan's "selective" is per-op, modelled for dense layers only: simulate says so for a MoE model; plan
    searches none and full for it instead of building candidates it must reject."""
    with pytest.raises(PipesimError, match="under --framework torchtitan it is per-op, modelled for dense layers"):
        model_setup("mixtral-8x7b", "h100-sxm", ModelOptions(framework="torchtitan", recompute="selective"),
                    PipelineShape(4, 8, 1))
    assert set(plan_request("mixtral-8x7b", 64, 256, framework="torchtitan").recompute) == {Recompute.NONE,
                                                                                           Recompute.FULL}


def test_torchtitans_tensor_parallelism_is_always_sequence_parallel():
    """torchtitan's TP plan shards every norm along the sequence, so tp > 1 under it is the sequence-parallel
    layout, activations and all (the same memory as asking for it); tp 1 has nothing to shard; plan searches
    only that under it, both elsewhere."""
    def setup(framework, **options):
        return model_setup("llama3.2-1b", "h100-sxm", ModelOptions(framework=framework, dp=4, **options), SHAPE)

    titan = setup("torchtitan", tp=2)
    asked = setup("torchtitan", tp=2, sequence_parallel=True)
    assert titan.layout == asked.layout and titan.layout.sequence_parallel
    assert not setup("torchtitan", tp=1).layout.sequence_parallel
    assert not setup("megatron", tp=2).layout.sequence_parallel
    assert plan_request("llama3.2-1b", 8, 64, framework="torchtitan").sequence_parallel == (True,)
    assert set(plan_request("llama3.2-1b", 8, 64, framework="nanotron").sequence_parallel) == {False, True}


def test_a_frameworks_column_input_earns_no_note_where_nothing_is_gathered(capsys):
    """nanotron's regather-blocking default matters only under sequence parallelism; without it a run must not
    be told that a flag it never gave "changes nothing". A --column-input the user gave still is."""
    base = ["simulate", "--model", "llama3.2-1b", "--tp", "2", "--dp", "4", "--pp", "1", "--framework", "nanotron"]
    assert main(base) == 0
    assert "--column-input" not in capsys.readouterr().out
    assert main([*base, "--column-input", "saved"]) == 0
    assert "--column-input saved changes nothing here" in capsys.readouterr().out
    assert main([*base, "--sequence-parallel", "--json"]) == 0
    assert '"column_input": "regather-blocking"' in capsys.readouterr().out


def test_the_dp_sync_overlaps_are_noted_only_where_asked_and_idle(capsys):
    """Without a pipeline, ZeRO-3's per-layer gathers and reduce-scatters leave nothing of the sync for the step's
    end: --overlap-grad-reduce and --overlap-param-gather change no prediction there, and given they are noted;
    NeMo's recipes set both unasked, which earns no note; under a pipeline (a stage gathered all step) they act."""
    base = ["simulate", "--model", "llama3.2-1b", "--dp", "8", "--mb", "4", "--zero", "3", "--json"]

    def run(*flags):
        assert main([*base, *flags]) == 0
        report = json.loads(capsys.readouterr().out)["model_report"]
        return report["step_time_s"], report["layout"]["inert_flag_notes"]

    step, notes = run("--pp", "1")
    overlapped, noted = run("--pp", "1", "--overlap-grad-reduce", "--overlap-param-gather")
    assert overlapped == step and notes == []
    assert noted == ["--overlap-grad-reduce, --overlap-param-gather changes nothing here: ZeRO-3's per-layer "
                     "gathers and reduce-scatters run beside the layers, leaving no sync for the step's end"]
    assert run("--pp", "1", "--framework", "nemo")[1] == []
    piped, _ = run("--pp", "2")
    piped_overlapped, piped_notes = run("--pp", "2", "--overlap-grad-reduce", "--overlap-param-gather")
    assert piped_overlapped < piped and piped_notes == []


def test_async_tp_wins_over_a_framework_whose_tp_waits():
    """torchtitan's plain TP waits for its collectives; with enable_async_tensor_parallel (--async-tp) every one
    overlaps a GEMM. The framework's default must not be read as the contradicting --no-overlap-tp-dgrad, which,
    given, still is."""
    options = dict(framework="torchtitan", tp=2, dp=4, async_tp=True)
    assert model_setup("llama3.2-1b", "h100-sxm", ModelOptions(**options), SHAPE).layout.overlap_tp_dgrad
    with pytest.raises(PipesimError, match="--no-overlap-tp-dgrad contradicts --async-tp"):
        model_setup("llama3.2-1b", "h100-sxm", ModelOptions(**options, overlap_tp_dgrad=False), SHAPE)


def _sends_overlap(schedule, chunks=None, **options):
    result = simulate(schedule, 4, 8, chunks, model="llama3.2-1b", hardware="h100-sxm", dp=2, **options)
    return result.setup.layout.overlap_p2p


def test_the_pipeline_sends_overlap_as_the_framework_runs_the_schedule():
    """Unasked, Megatron-LM overlaps its interleaved schedule's sends (its --overlap-p2p-communication default)
    and blocks on 1F1B's; torchtitan overlaps those of the schedules torch's multi-stage runtime runs (zb-v) and
    blocks on its single-stage Schedule1F1B's. A flag given wins, and sequential calls (one blocking call after
    the other) mean blocking sends, not a refusal of the default."""
    assert _sends_overlap("interleaved", 2) and not _sends_overlap("1f1b")
    assert not _sends_overlap("interleaved", 2, overlap_p2p=False) and _sends_overlap("1f1b", overlap_p2p=True)
    assert not _sends_overlap("interleaved", 2, p2p_calls="sequential")
    assert _sends_overlap("zb-v", framework="torchtitan") and not _sends_overlap("1f1b", framework="torchtitan")
    assert not _sends_overlap("zb-v")  # Megatron-LM has no such schedule of its own: pipesim's default, blocking
    assert all(not knobs(f).overlapped_p2p_schedules for f in (Framework.NANOTRON, Framework.MEGATRON_DEEPSPEED))
    # without a pipeline there is nothing to overlap: the default stays unset, so no note of a flag nobody gave
    alone = simulate("interleaved", 1, 4, 2, model="llama3.2-1b", hardware="h100-sxm", dp=2)
    assert not alone.setup.layout.overlap_p2p and alone.setup.layout.inert_flag_notes == []


def test_a_megatron_launch_line_overlaps_the_interleaved_sends_unless_it_says_not_to(capsys):
    """A pasted Megatron-LM line means what Megatron-LM makes of it: no flag, overlapped interleaved sends, the
    same step as --overlap-p2p; --no-overlap-p2p-communication, blocking ones, a slower step."""
    line = ["simulate", "--model", "llama3.2-1b", "--hardware", "h100-sxm", "--pipeline-model-parallel-size", "4",
            "--num-layers-per-virtual-pipeline-stage", "2", "--micro-batch-size", "1", "--global-batch-size", "16",
            "--json"]

    def step(*flags):
        assert main(line + list(flags)) == 0
        return json.loads(capsys.readouterr().out)["model_report"]["step_time_s"]

    unasked, overlapped, blocking = step(), step("--overlap-p2p"), step("--no-overlap-p2p-communication")
    assert unasked == overlapped < blocking


def test_nemos_recipes_shard_the_optimizer_and_overlap_its_sync_unasked():
    """--framework nemo is Megatron's command line plus what NeMo's recipes set: the distributed optimizer over
    the replicas, its gradient reduce and parameter gather overlapped, the fused cross-entropy. Each given flag
    wins; a run without replicas has nothing to shard and earns no note."""
    megatron_flags = _layout(distributed_optimizer=True, overlap_grad_reduce=True, overlap_param_gather=True,
                             loss="megatron-fused")
    nemo = _layout(framework="nemo")
    assert nemo == megatron_flags
    assert (nemo.sharding, nemo.overlap_grad_reduce, nemo.overlap_param_gather, nemo.loss) == (
        ZeroStage.OPTIMIZER, True, True, LossKernel.MEGATRON_FUSED)
    whole = _layout(framework="nemo", zero=0)
    assert (whole.sharding, whole.overlap_grad_reduce, whole.overlap_param_gather) == (ZeroStage.NONE, True, False)
    assert _layout(framework="nemo", distributed_optimizer=False) == whole  # the API's explicit no
    blocking = _layout(framework="nemo", overlap_grad_reduce=False, overlap_param_gather=False)
    assert (blocking.sharding, blocking.overlap_grad_reduce, blocking.overlap_param_gather) == (
        ZeroStage.OPTIMIZER, False, False)
    alone = model_setup("llama3.2-1b", "h100-sxm", ModelOptions(tp=8, framework="nemo"), SHAPE).layout
    assert (alone.sharding, alone.overlap_param_gather, alone.inert_flag_notes) == (ZeroStage.NONE, False, [])
    context = model_setup("llama3.2-1b", "h100-sxm", ModelOptions(tp=4, cp=2, framework="nemo"), SHAPE).layout
    assert context.sharding is ZeroStage.OPTIMIZER  # Megatron-Core shards over dp·cp
    assert _layout(framework="nemo", recompute="selective", recompute_modules=["core_attn", "layernorm"]) \
        .recompute_modules == (RecomputeModule.CORE_ATTN, RecomputeModule.LAYERNORM)


def test_nemos_overlapped_sync_is_a_faster_step_where_the_sync_is_exposed(capsys):
    """An 18B model at tp 8 over 32 replicas: Megatron's command line reduces the gradients after the backward
    and gathers the parameters after the step; NeMo's recipes do both beside the passes, so the step is shorter,
    by at most the sync Megatron's exposes. Its band quotes no framework record: the bands pool Megatron-Core's
    runs, NeMo's most of them."""
    common = ["simulate", "--model", "gpt-18.4b", "--tp", "8", "--dp", "32", "--pp", "1", "--mb", "8",
              "--seq-len", "4096", "--sequence-parallel", "--json"]
    steps = {}
    for framework in ("megatron", "nemo"):
        assert main([*common, "--framework", framework]) == 0
        report = json.loads(capsys.readouterr().out)["model_report"]
        steps[framework] = (report["step_time_s"], report["step_time_band"].get("framework"))
    plain, nemo = steps["megatron"][0], steps["nemo"][0]
    assert 0.75 * plain < nemo < 0.95 * plain
    assert steps["nemo"][1] is None


def test_nemos_fp8_recipes_keep_the_weights_in_fp8_where_the_optimizer_is_sharded():
    """NeMo's FP8 mixes set fp8_param_gather: an FP8 run under --framework nemo keeps its linears' weights in FP8
    alone (no BF16 copy), where its optimizer state is sharded; BF16 runs, a run without replicas and a given
    --fp8-params off keep them in BF16. The weights held fall by the BF16 copy, 2 bytes a parameter of each
    linear."""
    from pipesim.analytic.layout import Fp8Params

    assert _layout(framework="nemo", fp8=True).fp8_params is Fp8Params.BOTH
    assert _layout(framework="nemo").fp8_params is Fp8Params.OFF
    assert _layout(framework="nemo", fp8=True, zero=0).fp8_params is Fp8Params.OFF
    assert _layout(framework="nemo", fp8=True, fp8_params="off").fp8_params is Fp8Params.OFF
    assert _layout(framework="megatron", fp8=True, distributed_optimizer=True).fp8_params is Fp8Params.OFF
    assert main(["simulate", "--model", "llama3.1-8b", "--tp", "2", "--dp", "4", "--pp", "1", "--mb", "4",
                 "--fp8", "--framework", "nemo", "--fp8-params", "off"]) == 0

    def peak(**extra):
        return simulate(None, model="llama3.1-8b", tp=2, dp=4, pp=1, mb=4, fp8=True, framework="nemo",
                        **extra).model_report.memory.peak.total

    assert peak() < peak(fp8_params="off")


def test_an_exposed_data_parallel_sync_names_the_switches_that_would_hide_it(capsys):
    """An 18B model at tp 8 over 32 replicas with the distributed optimizer: Megatron's command line leaves the
    sync after the passes (16 % of the step), and the report names the switches that overlap it, each only while
    it is off; with both, under NeMo's recipes, or under a framework without them (nanotron's DDP) it says
    nothing. A 1.7B model's sync over 64 replicas, 3 % of its step, earns no note either."""
    common = dict(model="gpt-18.4b", tp=8, dp=32, pp=1, mb=8, seq_len=4096, sequence_parallel=True)

    def note(**extra):
        return simulate(None, **common, **extra).model_report.dp_sync_note

    plain = note(distributed_optimizer=True)
    assert "of the step on rank 0 waits on the data-parallel sync; --overlap-grad-reduce --overlap-param-gather (" \
        in plain
    reduced = note(distributed_optimizer=True, overlap_grad_reduce=True)
    assert "sync; --overlap-param-gather (" in reduced and "--overlap-grad-reduce" not in reduced
    gathered = note(distributed_optimizer=True, overlap_param_gather=True)
    assert "sync; --overlap-grad-reduce (" in gathered and "--overlap-param-gather" not in gathered
    assert note(distributed_optimizer=True, overlap_grad_reduce=True, overlap_param_gather=True) is None
    assert note(framework="nemo") is None and note(framework="nanotron") is None
    assert main(["simulate", "--model", "gpt-18.4b", "--tp", "8", "--dp", "32", "--pp", "1", "--mb", "8",
                 "--seq-len", "4096", "--sequence-parallel", "--distributed-optimizer", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_report"]["layout"]["dp_sync_note"] == plain
    assert simulate(None, model="gpt-1.7b", dp=64, pp=1, mb=8, seq_len=4096).model_report.dp_sync_note is None


def test_a_parameter_gather_overlapped_alone_is_noted_as_megatron_lm_refuses_it(capsys):
    """Megatron-LM asserts ``--overlap-grad-reduce`` beside ``--overlap-param-gather`` (arguments.py): pipesim
    simulates the pair as given, a what-if, and says so under Megatron-LM; with the reduce overlapped too, under
    NeMo (which sets Megatron-Core's DDP config itself) or without replicas it says nothing."""
    common = dict(model="llama2-7b", pp=1, mb=4, distributed_optimizer=True, overlap_param_gather=True)

    def note(**extra):
        return simulate(None, **common, **extra).model_report.param_gather_note

    assert "Megatron-LM refuses --overlap-param-gather without --overlap-grad-reduce" in note(dp=8)
    assert note(dp=8, overlap_grad_reduce=True) is None
    assert note(dp=8, framework="nemo", overlap_grad_reduce=False) is None
    assert note(dp=1) is None  # nothing reduced, nothing gathered
    assert main(["simulate", "--model", "llama2-7b", "--pp", "1", "--mb", "4", "--dp", "8", "--distributed-optimizer",
                 "--overlap-param-gather", "--json"]) == 0
    assert "Must use --overlap-param-gather" in json.loads(capsys.readouterr().out)["model_report"]["layout"][
        "param_gather_note"]
