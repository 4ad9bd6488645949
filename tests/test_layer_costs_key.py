"""The cost model caches one layer's costs and each stage's breakdown by the layout fields they depend on
(to_costs._layer_costs_key, _breakdowns_key): a cost model built through the caches equals one built from
scratch, over plan spaces that vary every field a search varies (dense and mixture-of-experts, with and
without pipelining, every ZeRO stage, FP8, cp, ep); every layout field varied alone from a base; and, drawn
over frameworks and settings, a prediction made after another of the same model and stages equals the same
prediction made with the caches empty. The breakdowns' key once lacked three fields a stage's memory reads: the
repeated K and V (found by drawing runs so), the loss and the column input (found when a plan with Transformer
Engine's fused loss, earlier in the suite, left a later prediction its smaller logits)."""

from __future__ import annotations

import enum
import warnings
from dataclasses import fields, replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pipesim
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
    """Empty the caches whose keys are written by hand (the lru_caches key on every argument)."""
    for cache in (to_costs._LAYER_COSTS, to_costs._BREAKDOWNS, to_costs._LAST_BUCKETS, to_costs._PASS_FLOORS):
        cache.clear()


def _warm_and_fresh(model, chip, base, changed):
    """``changed``'s cost model and stage breakdowns (which the memory report reads) made after ``base``'s filled
    the caches, and made again with them empty. Each from a new instance: a layout keeps its own breakdowns beside
    its fields, which would outlive the emptied caches and answer for them."""
    def made(layout):
        layout = replace(layout)
        return to_costs.build_cost_model(model, chip, layout), to_costs.stage_breakdowns(model, layout)

    _forget()
    made(base)
    warm = made(changed)
    _forget()
    return warm, made(changed)


# Every Layout field, and another valid value for it from a base layout. A field added to Layout must be added
# here (the test below fails otherwise), and a cache key that misses a field it changes fails here, whether or
# not a plan space varies it.
_DENSE_BASE = dict(tp=2, dp=2, pp=2, microbatches=4)
_OTHER = {
    "tp": 4, "dp": 4, "pp": 4, "chunks": 2, "microbatches": 8, "recompute": "full", "sequence_parallel": True,
    "distributed_optimizer": True, "attention": "triton", "elementwise": "eager",
    "loss": "pytorch", "grad_accumulation": "autograd",
    "halve_causal_attention": True, "param_bytes": "grads16", "stage_layers": (19, 21), "zero": 3, "cp": 2,
    "precision": "fp8", "async_tp": True, "overlap_tp_dgrad": False, "overlap_p2p": True,
    "overlap_grad_reduce": True, "overlap_param_gather": True, "ep": 2, "moe_imbalance": 1.3,
    "model_copies": 2, "zero_collectives": "per-layer", "column_input": "saved", "fp8_params": "rowwise",
    "fp8_recipe": "tensorwise", "recompute_layers": 1, "rank_order": "tp-cp-pp-dp", "cp_comm_ctas": 1,
    "p2p_tensor": "split", "p2p_calls": "sequential", "mlp_up": "split", "overlap_tp_local_shard": True,
    "cp_comm": "allgather", "cp_kernels": "pytorch", "cp_a2a_size": 4, "z_loss": True, "loss_input_copy": True,
    "distribute_saved_activations": True, "pipeline_buffers": "torch-runtime", "pipeline_outputs_kept": True,
    "fp8_linears": "torchao", "stages_after_head": 1, "fp8_all_gather": True, "fsdp2": True,
    "shard_group": 2, "recompute_modules": ("layernorm",), "moe_dispatcher": "deepep",
    "moe_dispatch_fp8": True, "mtp_stage": 0, "moe_shared_expert_overlap": True,
    "expert_tp": 1, "kv_repeated": True, "grad_buckets": "torch-ddp", "outer_optimizer_sharding": True,
}


def _other(name: str):
    from pipesim.analytic.layout import (
        AttentionKernel,
        BoundaryTensor,
        ColumnInput,
        CpComm,
        CpKernels,
        ElementwiseKernels,
        Fp8Linears,
        Fp8Params,
        Fp8Recipe,
        GradAccumulation,
        GradBuckets,
        LossKernel,
        MlpUp,
        MoeDispatcher,
        OptimizerBytes,
        P2pCalls,
        PipelineBuffers,
        Precision,
        RankOrder,
        Recompute,
        ZeroCollectives,
        ZeroStage,
    )

    value = _OTHER[name]
    return {"recompute": lambda: Recompute(value), "attention": lambda: AttentionKernel(value),
            "elementwise": lambda: ElementwiseKernels(value), "loss": lambda: LossKernel(value),
            "grad_accumulation": lambda: GradAccumulation(value),
            "precision": lambda: Precision(value),
            "zero": lambda: ZeroStage(value), "zero_collectives": lambda: ZeroCollectives(value),
            "column_input": lambda: ColumnInput(value), "fp8_params": lambda: Fp8Params(value),
            "fp8_recipe": lambda: Fp8Recipe(value), "fp8_linears": lambda: Fp8Linears(value),
            "param_bytes": lambda: OptimizerBytes(grads=2.0), "rank_order": lambda: RankOrder(value),
            "p2p_tensor": lambda: BoundaryTensor(value), "p2p_calls": lambda: P2pCalls(value),
            "pipeline_buffers": lambda: PipelineBuffers(value),
            "mlp_up": lambda: MlpUp(value), "cp_comm": lambda: CpComm(value),
            "cp_kernels": lambda: CpKernels(value), "moe_dispatcher": lambda: MoeDispatcher(value),
            "grad_buckets": lambda: GradBuckets(value)}.get(
                name, lambda: value)()


def _other_cp_comm(value: str):
    from pipesim.analytic.layout import CpComm

    return CpComm(value)


def test_every_layout_field_is_in_the_cache_keys_that_need_it():
    from pipesim.analytic.layout import Layout

    names = [f.name for f in fields(Layout)]
    assert set(names) <= set(_OTHER), f"a Layout field without an alternative value here: {set(names) - set(_OTHER)}"
    chip = CHIP_PRESETS["h100-sxm"]
    for name in names:
        moe = name in ("ep", "moe_imbalance", "moe_dispatcher", "moe_dispatch_fp8", "moe_shared_expert_overlap",
                       "expert_tp")
        # grouped-query attention for the repeated K and V (llama2-13b's heads each have their own)
        model = MODEL_PRESETS["mixtral-8x7b" if moe else "llama3.1-8b" if name == "kv_repeated" else "llama2-13b"]
        base = Layout(**_DENSE_BASE, **({"sequence_parallel": True} if name in ("async_tp", "column_input",
                                                                                  "overlap_tp_local_shard") else {}),
                      **({"distributed_optimizer": True} if name in ("overlap_param_gather", "shard_group")
                         else {}),
                      **({"distributed_optimizer": True, "precision": _other("precision")} if name == "fp8_params"
                         else {}),
                      **({"precision": _other("precision")} if name in ("fp8_recipe", "fp8_linears") else {}),
                      **({"recompute": _other("recompute")} if name in ("recompute_layers",
                                                                       "distribute_saved_activations") else {}),
                      **({"loss": _other("loss")} if name == "z_loss" else {}),
                      **({"recompute": _other("recompute").SELECTIVE} if name == "recompute_modules" else {}),
                      **({"pipeline_buffers": _other("pipeline_buffers")} if name == "pipeline_outputs_kept"
                         else {}),
                      **({"cp": _other("cp")} if name in ("cp_comm_ctas", "cp_comm", "cp_kernels") else {}),
                      **({"cp": 4, "cp_comm": _other_cp_comm("a2a+p2p"), "cp_a2a_size": 2} if name == "cp_a2a_size"
                         else {}))
        if name == "model_copies":
            base = replace(base, pp=2, chunks=1)
        if name == "expert_tp":  # MoE parallel folding: tp 2 with sequence parallelism, ep over tp·dp
            base = replace(base, sequence_parallel=True, ep=2)
        if name == "moe_shared_expert_overlap":  # shared experts beside tokens that travel
            model = replace(model, name="with-shared", shared_experts=1)
            base = replace(base, ep=2)
        if name in ("moe_dispatcher", "moe_dispatch_fp8"):  # tokens that travel, DeepEP's for its FP8
            base = replace(base, ep=2, **({"moe_dispatcher": _other("moe_dispatcher")}
                                           if name == "moe_dispatch_fp8" else {}))
        if name == "fp8_all_gather":  # torchao's float8 linears under FSDP, gathering per layer
            base = replace(base, pp=1, zero=_other("zero"), precision=_other("precision"),
                           fp8_linears=_other("fp8_linears"))
        if name == "fsdp2":  # FSDP2's per-layer gathers, without pipelining
            base = replace(base, pp=1, zero=_other("zero"))
        if name == "mtp_stage":  # a model with a multi-token-prediction module, its layers all on stage 0
            model = replace(model, name="with-mtp", mtp_layers=1)
            base = replace(base, stage_layers=(model.layers, 0))
        if name == "stages_after_head":  # the last stage holds no layer, only the loss
            base = replace(base, stage_layers=(model.layers, 0))
        if name == "outer_optimizer_sharding":  # hybrid FSDP: ZeRO-3 in groups with replicas, no pipelining
            base = replace(base, pp=1, dp=4, zero=_other("zero"), shard_group=2)
        if name == "zero_collectives":  # FSDP's per-layer ZeRO-2 runs without pipelining
            base = replace(base, pp=1, zero=_other("zero").GRADIENTS)
        other = _other(name)
        # an enum field takes each of its values: one alternative can act as the base's does (the PyTorch loss
        # keeps what Megatron's does; Transformer Engine's does not)
        for value in (list(type(other)) if isinstance(other, enum.Enum) else [other]):
            try:
                warm, fresh = _warm_and_fresh(model, chip, base, replace(base, **{name: value}))
            except PipesimError:
                continue  # a value this base cannot take (another's base takes it)
            assert fresh == warm, (name, value)


@pytest.mark.parametrize("change", [dict(shard_group=2), dict(rank_order="tp-cp-pp-dp"),
                                    dict(shard_group=2, outer_optimizer_sharding=True)])
def test_zero3s_per_layer_collectives_key_their_group_and_its_ranks(change):
    """ZeRO-3 without pipelining gathers and reduce-scatters every layer within its shard group, ranks dp_stride
    apart: a cached layer of another group, or another rank order, must not be taken for it (it once was, for a
    library caller reusing one ChipSpec: the key read dp alone)."""
    from pipesim.analytic.layout import Layout, RankOrder, ZeroStage

    chip = CHIP_PRESETS["h100-sxm"]
    model = MODEL_PRESETS["llama2-13b"]
    base = Layout(tp=2, dp=4, pp=1, microbatches=4, zero=ZeroStage.PARAMETERS)
    values = {k: RankOrder(v) if k == "rank_order" else v for k, v in change.items()}
    warm, fresh = _warm_and_fresh(model, chip, base, replace(base, **values))
    assert fresh == warm


@pytest.mark.parametrize("base", [
    dict(tp=2, dp=4, pp=1, microbatches=4, zero=3),  # ZeRO-3's per-layer collectives
    dict(tp=2, dp=4, pp=1, microbatches=4, zero=3, sequence_parallel=True),
    dict(tp=1, dp=8, pp=1, microbatches=4, zero=2, zero_collectives="per-layer"),  # FSDP's SHARD_GRAD_OP
    dict(tp=2, dp=2, pp=2, cp=2, microbatches=4),  # context parallelism
])
def test_every_field_changed_on_other_bases_is_in_the_keys_too(base):
    """The per-field check above changes each field on one base; a field that matters only on another (the shard
    group under ZeRO-3 did) slips past it. Here every field takes its other value on bases that run other code
    paths, skipping the combinations a Layout refuses."""
    from pipesim.analytic.layout import Layout, ZeroCollectives, ZeroStage

    chip, model = CHIP_PRESETS["h100-sxm"], MODEL_PRESETS["llama3.1-8b"]
    given = dict(base, zero=ZeroStage(base.get("zero", 0)))
    if "zero_collectives" in given:
        given["zero_collectives"] = ZeroCollectives(given["zero_collectives"])
    start = Layout(**given)
    checked = 0
    for name in (f.name for f in fields(Layout)):
        try:
            warm, fresh = _warm_and_fresh(model, chip, start, replace(start, **{name: _other(name)}))
        except PipesimError:
            continue
        assert fresh == warm, name
        checked += 1
    assert checked > 30  # most fields apply on every base


# what a second run may change from the first: settings that leave the model and the stage count alone, so that
# the second meets the first's cache entries wherever a key would let it
_SECOND_RUN = {
    "framework": (None, "megatron", "nemo", "torchtitan", "nanotron", "megatron-deepspeed"),
    "recompute": ("none", "selective", "full"), "repeat_kv": (False, True), "attention": ("fused", "unfused"),
    "elementwise": ("fused", "eager"), "fp8": (False, True), "column_input": ("regather", "saved"),
    "loss": ("megatron", "pytorch", "fused", "te", "compiled", "gathered", "megatron-fused"),
    "distributed_optimizer": (False, True), "overlap_grad_reduce": (False, True), "async_tp": (False, True),
    "hardware": ("h100-sxm", "h200", "b200"), "dp": (2, 4), "mb": (4, 8),
}


@st.composite
def _run_pairs(draw):
    first = dict(schedule=draw(st.sampled_from(("1f1b", "zb-h1", "interleaved"))),
                 model=draw(st.sampled_from(("llama3.1-8b", "mixtral-8x7b", "qwen3-30b-a3b", "gpt3-2.7b"))),
                 tp=draw(st.sampled_from((1, 2, 4))), sequence_parallel=draw(st.booleans()), seq_len=4096,
                 **{name: draw(st.sampled_from(values)) for name, values in _SECOND_RUN.items()})
    # the same number of stages either way: pp 2, or pp 1 with two chunks (interleaved); an invalid mix is redrawn
    if first["schedule"] == "interleaved" and draw(st.booleans()):
        first.update(pp=1, chunks=2)
    else:
        first.update(pp=2, chunks=None)
    changed = draw(st.sets(st.sampled_from(sorted(_SECOND_RUN)), min_size=1, max_size=3))
    second = {**first, **{name: draw(st.sampled_from(_SECOND_RUN[name])) for name in changed}}

    def clean(run):  # async TP needs tensor parallelism to overlap
        return {k: v for k, v in run.items() if v is not None and not (k == "async_tp" and run["tp"] == 1)}

    return clean(first), clean(second)


def _predict(run):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pipesim.simulate(**run)
    except PipesimError:
        assume(False)  # a combination pipesim refuses: draw another
    return result.step_time, result.model_report.memory.peak.total


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(pair=_run_pairs())
def test_a_prediction_does_not_depend_on_what_was_predicted_before(pair):
    first, second = pair
    _forget()
    _predict(first)
    warm = _predict(second)
    _forget()
    assert _predict(second) == warm, (first, second)
