"""The CostModel built from a model: per-stage FLOP times, ring collectives on the right link, every schedule."""

from dataclasses import replace

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.comm import (
    chunked_overlap,
    collective_time,
    contended_overlap,
    dp_grad_sync,
    fsdp_layer_comm,
    group_bandwidth,
    kernel_work_chip,
    overlapped,
    p2p_bandwidth,
    p2p_bytes,
    per_tensor_host_time,
    per_tensor_layer_comm,
    prefetched_overlap,
    ring_all_reduce_time,
    tp_layer_comm,
)
from pipesim.analytic.flops import layer_flops, lm_head_flops
from pipesim.analytic.kernels import gemm_time, layer_parameter_tensors, layer_times, linear_times
from pipesim.analytic.layout import BoundaryTensor, Layout, OptimizerBytes, Recompute, ZeroCollectives, ZeroStage
from pipesim.analytic.measured import CollectiveOp
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.model_spec import LayerKind
from pipesim.analytic.params import layer_params
from pipesim.analytic.to_costs import build_cost_model
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.program.build import build_program
from pipesim.sim.simulator import simulate

H100 = CHIP_PRESETS["h100-sxm"]
LLAMA = MODEL_PRESETS["llama2-13b"]


def test_stage_times_are_flops_over_rate_plus_tp_comm():
    """With --achievable-fraction (the override), every FLOP runs at one rate."""
    layout = Layout(tp=4, pp=4, microbatches=8, overlap_p2p=True)  # sends outside the compute
    chip = replace(H100, achievable_fraction=0.6)
    costs = build_cost_model(LLAMA, chip, layout)
    rate = 4 * H100.peak_flops * 0.6
    per_layer = layer_flops(LLAMA, layout)
    comm = tp_layer_comm(LLAMA, layout, H100)
    middle = costs.stage(1)
    assert middle.forward == pytest.approx(10 * (per_layer.forward / rate + comm.forward))
    assert middle.backward_weight == pytest.approx(10 * per_layer.backward_weight / rate)
    last = costs.stage(3)
    assert last.forward - middle.forward == pytest.approx(lm_head_flops(LLAMA).forward / rate)
    assert costs.stage(0).activation_bytes > middle.activation_bytes  # token ids on the first stage
    assert costs.time_unit == "s" and costs.stage(0).forward == middle.forward  # embedding lookup: no FLOPs


def test_tp_collectives_on_nvlink_at_their_measured_shares_by_hand():
    """On an H100 node each collective runs at the share of NVLink's 450 GB/s its op reaches over its group
    (``nvlink_collective_shares``, fitted to OpenXLA's measured table): an 8-GPU all-reduce 0.90, an all-gather
    0.79, a reduce-scatter 0.74. NCCL's tuner runs the faster protocol of its model: Simple (the bytes at the
    ring's bandwidth, 8.4 µs plus 3.4 µs per ring step) or LL128 (the bytes at 0.92 of it, 10 µs plus 1.9 µs
    per step). For these 42 MB: the all-reduce (14 steps) LL128 233.6 µs against Simple's 237.2; the
    all-gather (7 steps) Simple 135.4 against 135.5; the reduce-scatter Simple 142.4 against 143.1."""
    nbytes = 2 * 4096 * 5120
    all_reduce, gather, scatter = 233.595e-6, 135.435e-6, 142.411e-6
    comm = tp_layer_comm(LLAMA, Layout(tp=8), H100)
    assert comm.forward == pytest.approx(2 * all_reduce, rel=1e-4)
    assert comm.backward == pytest.approx(2 * all_reduce, rel=1e-4)
    assert 2 * 7 / 8 * nbytes / (450e9 * 0.90) / 0.92 + 10e-6 + 14 * 1.9e-6 == pytest.approx(all_reduce, rel=1e-4)
    # sequence parallel: an all-gather and a reduce-scatter in place of each all-reduce, each at its own share
    sp = tp_layer_comm(LLAMA, Layout(tp=8, sequence_parallel=True), H100)
    assert sp.forward == pytest.approx(2 * (gather + scatter), rel=1e-4)
    full = tp_layer_comm(LLAMA, Layout(tp=8, recompute=Recompute.FULL), H100)
    assert full.backward == pytest.approx(4 * all_reduce, rel=1e-4)


def test_a_pair_of_gpus_reaches_less_of_nvlink_than_the_whole_node():
    """OpenXLA's table: four tensor-parallel pairs of one H100 node all-reduce at 0.56 of NVLink each, the
    8-GPU group at 0.90; four GPUs between the two (0.68). The A100 takes the H100's shares for the groups smaller
    than a node and the gathers and scatters, and its own nccl-tests ring for the 8-GPU all-reduce (0.80); a chip
    with no table keeps one share for all."""
    from pipesim.analytic.measured import CollectiveOp

    assert group_bandwidth(H100, 2) == pytest.approx(450e9 * 0.56)
    assert group_bandwidth(H100, 4) == pytest.approx(450e9 * 0.68)
    assert group_bandwidth(H100, 8, op=CollectiveOp.REDUCE_SCATTER) == pytest.approx(450e9 * 0.74)
    assert group_bandwidth(H100, 16, stride=8) == pytest.approx(50e9)  # across nodes: the NIC, not the table
    a100 = CHIP_PRESETS["a100-80gb"]
    assert group_bandwidth(a100, 2) == pytest.approx(300e9 * 0.56)
    assert group_bandwidth(a100, 4) == pytest.approx(300e9 * 0.68)
    assert group_bandwidth(a100, 8) == pytest.approx(240e9)
    assert group_bandwidth(a100, 8, op=CollectiveOp.ALL_GATHER) == pytest.approx(300e9 * 0.79)
    assert group_bandwidth(a100, 16, stride=8) == pytest.approx(25e9 * 0.8)  # across nodes: the NIC's ring share
    tableless = replace(a100, nvlink_collective_shares=None)
    assert group_bandwidth(tableless, 2) == group_bandwidth(tableless, 8) == pytest.approx(240e9)


def test_nccl_picks_ll128_when_a_rings_latency_outweighs_its_bytes_by_hand():
    """NCCL's tuner (src/graph/tuning.cc) predicts each protocol's time and runs the fastest. An all-gather over
    512 ranks in 64 nodes: Simple's latency is 8.4 + 448 · 3.4 + 63 · 9.6 = 2,136 µs, LL128's 10 + 448 · 1.9 +
    63 · 4.0 = 1,113 µs, so a 100 MB gather (250 µs of bytes at 400 GB/s) runs LL128; on one node a 1 GB one
    (2.2 ms of bytes) runs Simple. A chip without LL128 (RCCL on MI300X) always runs Simple."""
    from pipesim.analytic.comm import nccl_ring_time, ring_latency

    assert ring_latency(H100, 512, 512) == pytest.approx(2136.4e-6)
    assert ring_latency(H100, 512, 512, ll128=True) == pytest.approx(1113.2e-6)
    wire = 511 / 512 * 100e6 / 400e9
    assert nccl_ring_time(wire, H100, 512, 512) == pytest.approx(wire / 0.92 + 1113.2e-6)
    big = 7 / 8 * 1e9 / 450e9
    assert nccl_ring_time(big, H100, 8, 8) == pytest.approx(big + 8.4e-6 + 7 * 3.4e-6)
    mi300x = CHIP_PRESETS["mi300x"]
    assert mi300x.ll128_bandwidth_share == 0
    assert nccl_ring_time(wire, mi300x, 512, 512) == pytest.approx(wire + ring_latency(mi300x, 512, 512))


def test_a_collective_across_nodes_uses_a_nic_per_member_in_each_node_by_hand():
    """NCCL balances a cross-node collective's rings over the node's NICs: k members of the group per node
    move data through k NICs, capped by NVLink. A100: 25 GB/s NICs, 300 GB/s NVLink, 8 per node."""
    # the links alone (see the next test), with no share table inside the node
    a100 = replace(CHIP_PRESETS["a100-80gb"], collective_efficiency=1.0, nvlink_collective_shares=None)
    assert group_bandwidth(a100, 8) == 300e9  # inside one node
    assert group_bandwidth(a100, 32, stride=1) == 200e9  # tp = 1, dp = 32: 8 members per node, 8 NICs
    assert group_bandwidth(a100, 64, stride=2) == 100e9  # tp = 2: 4 members per node
    assert group_bandwidth(a100, 256, stride=8) == 25e9  # tp = 8: one member per node, its own NIC
    assert group_bandwidth(a100, 16, stride=8) == 25e9  # two members, in two nodes
    h100 = CHIP_PRESETS["h100-sxm"]  # 8 × 50 GB/s NICs exceed NVLink's 450 GB/s: NVLink caps it
    assert group_bandwidth(h100, 32) == 400e9
    assert group_bandwidth(replace(h100, inter_node_bandwidth=100e9), 32) == 450e9
    layout = Layout(tp=1, dp=32)
    # 32 ranks in 4 nodes: 2·31 steps, 2·3 of them across nodes (9.6 µs), the rest on NVLink (3.4 µs)
    expected = ring_all_reduce_time(4e9, 32, 200e9, 8.4e-6 + 56 * 3.4e-6 + 6 * 9.6e-6)
    assert dp_grad_sync(1e9, layout, a100).reduce == pytest.approx(expected)


def test_ring_collectives_reach_the_bus_bandwidth_nccl_tests_measure_by_hand():
    """A100's preset: nccl-tests' 240 GB/s bus bandwidth of NVLink's 300, so the 8-GPU all-reduce runs at 0.8 of
    the link inside a node, and every ring collective at 0.8 of the NICs across nodes; pipeline P2P keeps its own
    p2p_efficiency."""
    a100 = CHIP_PRESETS["a100-80gb"]
    assert a100.collective_efficiency == pytest.approx(0.8)
    assert group_bandwidth(a100, 8) == pytest.approx(240e9)
    assert group_bandwidth(a100, 256, stride=8) == pytest.approx(20e9)
    layout = Layout(tp=8)
    nbytes = 2 * 4096 * 5120  # one bsh tensor of llama2-13b (b = 1, s = 4096), BF16
    expected = 2 * (2 * 7 / 8 * nbytes / 240e9 + 56e-6)  # two all-reduces, NCCL's latency 56 µs each
    assert tp_layer_comm(LLAMA, layout, a100).forward == pytest.approx(expected)
    assert p2p_bandwidth(Layout(pp=4), a100) == pytest.approx(300e9 * 0.16)


def test_zero3_gathers_beside_compute_take_the_sms_nccl_holds_by_hand():
    """ZeRO-3's per-layer collectives are never free: while one runs, its 24 CTAs hold 24 of the chip's SMs, so
    the compute beside it is slowed by 24/sm_count of the collective's time; a collective longer than the
    compute sticks out as before."""
    assert contended_overlap(1.0, 10.0, 0.25) == pytest.approx(0.25)  # compute ends σ·comm later
    assert contended_overlap(8.0, 10.0, 0.25) == pytest.approx(2.0)
    assert contended_overlap(12.0, 10.0, 0.25) == pytest.approx(3.0)  # the collective dominates: comm − compute
    assert contended_overlap(12.0, 10.0, 0.0) == overlapped(12.0, 10.0)


def test_async_tp_exposes_its_first_chunk_and_the_reduce_scatters_sm_share():
    # 8 s of collectives in 4 chunks beside 10 s of GEMMs, σ = 0.2: the first 2 s wait for nothing to hide
    # behind; the other 6 overlap and slow the GEMMs by 0.2·6 = 1.2 s → 3.2 s beyond the compute
    assert chunked_overlap(8.0, 10.0, 4, 0.2) == pytest.approx(2.0 + 1.2)
    # longer than the GEMMs: the rest sticks out, 2 + (6 − 3) = 5
    assert chunked_overlap(8.0, 3.0, 4, 0.2) == pytest.approx(5.0)
    # on H100 only the reduce-scatter half of the volume takes SMs: σ = 24/132 · 0.5
    model = MODEL_PRESETS["llama2-70b"]
    layout = Layout(tp=8, microbatches=2, async_tp=True, sequence_parallel=True)
    plain = build_cost_model(model, H100, Layout(tp=8, microbatches=2, sequence_parallel=True))
    overlapped_tp = build_cost_model(model, H100, layout)
    comm = tp_layer_comm(model, layout, H100).forward
    gemm = linear_times(model, layout, H100, model.seq_len, LayerKind.DENSE).forward
    per_layer = chunked_overlap(comm, gemm, 8, 24 / 132 * 0.5)
    assert per_layer == pytest.approx(comm / 8 + 24 / 132 * 0.5 * comm * 7 / 8)  # the GEMMs outlast the rest
    assert plain.default.forward - overlapped_tp.default.forward == pytest.approx(
        model.layers * (comm - per_layer), rel=1e-9)
    a100 = CHIP_PRESETS["a100-80gb"]
    assert a100.comm_sm_share == pytest.approx(24 / 108) and H100.comm_sm_share == pytest.approx(24 / 132)
    model = MODEL_PRESETS["llama2-7b"]
    layout = Layout(dp=8, zero=ZeroStage.PARAMETERS, recompute=Recompute.FULL)
    overlapping = replace(a100, zero3_overlap_share=1.0)  # the whole collective beside compute (the old rule)
    costs = build_cost_model(model, overlapping, layout)
    free = build_cost_model(model, replace(overlapping, collective_ctas=0), layout)
    layer = layer_times(model, layout, a100)
    fsdp = fsdp_layer_comm(layer_params(model) / layout.tp, layout, a100)
    assert fsdp.forward < layer.forward  # hidden under the old rule: only the SMs it takes show
    share = 24 / 108
    extra_forward = model.layers * share * fsdp.forward  # one stage holds every layer (pp = 1)
    extra_backward = model.layers * max(share * fsdp.backward,
                                        fsdp.backward - layer.backward_input - layer.backward_weight - layer.recompute)
    assert costs.stage(0).forward - free.stage(0).forward == pytest.approx(extra_forward)
    assert costs.stage(0).backward - free.stage(0).backward == pytest.approx(extra_backward)


@pytest.mark.parametrize("sequence_parallel", [True, False])
def test_column_parallel_input_gradient_collectives_hide_behind_their_weight_gradients_by_hand(sequence_parallel):
    """Megatron-LM and Transformer Engine issue a column-parallel linear's input-gradient collective (reduce-scatter
    with SP, all-reduce without) asynchronously and compute its weight gradient meanwhile: per layer, the fused
    QKV's and the MLP's up projection's, each hiding c − max(σ·c, c − w) of its collective c behind its wgrad w."""
    model = MODEL_PRESETS["llama2-70b"]  # h 8192, GQA with 8 KV heads, SwiGLU of 28672
    blocking = Layout(tp=8, microbatches=2, sequence_parallel=sequence_parallel, overlap_tp_dgrad=False)
    hiding = replace(blocking, overlap_tp_dgrad=True)
    tokens = model.micro_batch * model.seq_len
    op = CollectiveOp.REDUCE_SCATTER if sequence_parallel else CollectiveOp.ALL_REDUCE
    c = collective_time(op, 2 * tokens * 8192, 8, H100, 8)  # one b·s·h BF16 activation over the 8 ranks
    qkv = gemm_time(8192, (8192 + 2 * 8 * 128) // 8, tokens, H100, blocking.precision)  # Xᵀ·dY: h × (h + 2·kv)/t
    up = gemm_time(8192, 2 * 28672 // 8, tokens, H100, blocking.precision)  # gate and up fused
    sigma = 24 / 132
    hidden = sum(c - max(sigma * c, c - w) for w in (qkv, up))
    assert qkv < c < up  # the QKV wgrad hides part of its collective; the up projection's hides all but σ·c
    assert hidden == pytest.approx(c - (c - qkv) + c - sigma * c)
    off, on = build_cost_model(model, H100, blocking), build_cost_model(model, H100, hiding)
    # the fused backward (1F1B's) gains it on every layer; a split backward's B (zero bubble) waits for it all
    assert off.default.backward - on.default.backward == pytest.approx(model.layers * hidden, rel=1e-9)
    assert on.default.backward_input == off.default.backward_input
    assert on.default.forward == off.default.forward
    # where the step goes: a split backward's report counts the collectives the fused one hides
    from pipesim.analytic.to_costs import stage_time_parts
    fused, split = (stage_time_parts(model, H100, hiding, None, split_backward=s) for s in (False, True))
    assert split[0].exposed_comm - fused[0].exposed_comm == pytest.approx(model.layers * hidden, rel=1e-9)
    # async TP has its own model of every collective; tp = 1 has nothing to hide
    assert not replace(hiding, async_tp=True, sequence_parallel=True).hides_tp_dgrad
    assert not Layout(microbatches=2).hides_tp_dgrad
    with pytest.raises(PipesimError, match="contradicts --async-tp"):
        Layout(tp=8, sequence_parallel=True, async_tp=True, overlap_tp_dgrad=False)


def test_sequence_parallel_gathers_each_column_input_again_for_its_weight_gradient_by_hand():
    """Korthikanti et al. §4.2.2: sequence parallelism keeps a column-parallel linear's input sharded and the
    backward all-gathers it again for the weight gradient, two per layer (QKV's input, the MLP's). Megatron-LM
    and TE start it beside the input-gradient GEMM g: max(σ·c, c − g) each (``regather``, the default); nanotron
    waits for it: c each (``regather-blocking``); DTensor keeps the gathered input (``saved``): no gather, but
    tp times those inputs' bytes, unless a per-op policy recomputes the gather (blocking again)."""
    from pipesim.analytic.activations import head_input_bytes, layer_activation_bytes
    from pipesim.analytic.layout import ColumnInput

    model = MODEL_PRESETS["llama2-70b"]  # h 8192, GQA with 8 KV heads, SwiGLU of 28672
    tokens = model.micro_batch * model.seq_len
    c = collective_time(CollectiveOp.ALL_GATHER, 2 * tokens * 8192, 8, H100, 8)  # one b·s·h BF16 activation
    layouts = {mode: Layout(tp=8, microbatches=2, sequence_parallel=True, column_input=mode) for mode in ColumnInput}
    precision = layouts[ColumnInput.SAVED].precision
    qkv = gemm_time(tokens, 8192, (8192 + 2 * 8 * 128) // 8, H100, precision)  # dY·Wᵀ: tokens × h, over (h + 2kv)/t
    up = gemm_time(tokens, 8192, 2 * 28672 // 8, H100, precision)  # gate and up fused
    sigma = 24 / 132
    assert qkv < c < up  # QKV's input-gradient GEMM hides part of its gather; the up projection's all but σ·c
    overlapped = max(sigma * c, c - qkv) + max(sigma * c, c - up)
    costs = {mode: build_cost_model(model, H100, layout).default for mode, layout in layouts.items()}
    saved = costs[ColumnInput.SAVED]
    per_layer = {ColumnInput.REGATHER: overlapped, ColumnInput.REGATHER_BLOCKING: 2 * c}
    for mode, exposed in per_layer.items():
        assert costs[mode].backward_input - saved.backward_input == pytest.approx(model.layers * exposed, rel=1e-9)
        assert costs[mode].forward == saved.forward
    # memory: the kept inputs, gathered, where sequence parallelism keeps 1/t of them
    kept = {mode: layer_activation_bytes(model, layout) for mode, layout in layouts.items()}
    assert kept[ColumnInput.REGATHER] == kept[ColumnInput.REGATHER_BLOCKING]
    assert kept[ColumnInput.SAVED] - kept[ColumnInput.REGATHER] == pytest.approx(2 * 2 * tokens * 8192 * (1 - 1 / 8))
    # the output layer is column-parallel too and no recomputation reaches it: kept gathered under every policy
    for policy in (Recompute.NONE, Recompute.FULL, Recompute.PER_OP):
        head = {mode: head_input_bytes(model, replace(layout, recompute=policy)) for mode, layout in layouts.items()}
        assert head[ColumnInput.SAVED] - head[ColumnInput.REGATHER] == pytest.approx(2 * tokens * 8192 * (1 - 1 / 8))
        assert head[ColumnInput.REGATHER] == 2 * 2 * tokens * 8192 / 8  # the norm's and the head's inputs, sharded
    # torchtitan's per-op checkpointing saves matmuls, not all-gathers: the gather is recomputed, waited for
    per_op = {mode: replace(layout, recompute=Recompute.PER_OP) for mode, layout in layouts.items()}
    saved_per_op, blocking_per_op = (build_cost_model(model, H100, per_op[m]).default
                                     for m in (ColumnInput.SAVED, ColumnInput.REGATHER_BLOCKING))
    assert saved_per_op.backward_input == blocking_per_op.backward_input
    assert layer_activation_bytes(model, per_op[ColumnInput.SAVED]) == layer_activation_bytes(
        model, per_op[ColumnInput.REGATHER])
    # nothing to gather without sequence parallelism or at tp = 1
    for base in (Layout(tp=8, microbatches=2), Layout(microbatches=2, sequence_parallel=False)):
        assert len({build_cost_model(model, H100, replace(base, column_input=m)).default for m in ColumnInput}) == 1


def test_zero3_collectives_prefetched_one_layer_ahead_are_exposed_but_their_overlapping_share_by_hand():
    """prefetched_overlap: 1 − η of the collective's kernel work exposed in full, the rest of the collective
    contended beside the compute."""
    assert prefetched_overlap(8.0, 10.0, 0.25, 0.0) == pytest.approx(8.0)  # nothing runs beside compute
    assert prefetched_overlap(8.0, 10.0, 0.25, 1.0) == pytest.approx(contended_overlap(8.0, 10.0, 0.25))
    assert prefetched_overlap(8.0, 10.0, 0.25, 0.5) == pytest.approx(4.0 + 0.25 * 4.0)
    assert prefetched_overlap(8.0, 3.0, 0.25, 0.5) == pytest.approx(4.0 + (4.0 - 3.0))  # the rest sticks out
    # a collective waiting on a thin network: only its kernels' work (2 of its 8 s) is serialised, the 6 s the
    # network takes beyond it run beside the compute, taking the SMs the kernels hold
    assert prefetched_overlap(8.0, 10.0, 0.25, 0.0, 2.0) == pytest.approx(2.0 + 0.25 * 6.0)
    assert prefetched_overlap(8.0, 10.0, 0.25, 0.5, 2.0) == pytest.approx(1.0 + 0.25 * 7.0)
    assert prefetched_overlap(8.0, 10.0, 0.25, 0.5, 9.0) == prefetched_overlap(8.0, 10.0, 0.25, 0.5)  # at most all
    # inside one node the kernels move every byte, so their work is the whole collective: with none of it beside
    # compute (zero3_overlap_share 0), a stage's forward is its layers' compute plus every layer's gather, its
    # backward plus every gather and reduce-scatter (the GPUs alike, so that the 8 GPUs' compute is the lone GPU's:
    # pipesim.analytic.slowest_gpu)
    preset = replace(CHIP_PRESETS["a100-80gb"], gpu_speed_spread=0.0)
    a100 = replace(preset, zero3_overlap_share=0.0)
    model = MODEL_PRESETS["llama2-7b"]
    layout = Layout(dp=8, zero=ZeroStage.PARAMETERS)
    costs = build_cost_model(model, a100, layout)
    alone = build_cost_model(model, a100, replace(layout, dp=1, zero=ZeroStage.NONE))
    fsdp = fsdp_layer_comm(layer_params(model) / layout.tp, layout, a100)
    assert fsdp_layer_comm(layer_params(model) / layout.tp, layout, kernel_work_chip(a100)) == fsdp
    assert costs.stage(0).forward - alone.stage(0).forward == pytest.approx(model.layers * fsdp.forward, rel=1e-9)
    assert costs.stage(0).backward - alone.stage(0).backward == pytest.approx(model.layers * fsdp.backward,
                                                                              rel=1e-9)
    # the presets (the fit's quarter): three quarters exposed in full, the quarter beside the layer's compute,
    # which outlasts it, so only the SMs it takes show (a forward has no recomputation here)
    assert preset.zero3_overlap_share == 0.25
    layer = layer_times(model, layout, preset)
    assert fsdp.forward / 4 < layer.forward
    fitted = build_cost_model(model, preset, layout)
    exposed = 0.75 * fsdp.forward + contended_overlap(0.25 * fsdp.forward, layer.forward, preset.comm_sm_share)
    assert fitted.stage(0).forward - alone.stage(0).forward == pytest.approx(model.layers * exposed, rel=1e-9)


def test_fsdp_zero2_gathers_each_layer_once_and_reduce_scatters_it_every_microbatch_by_hand():
    """FSDP's SHARD_GRAD_OP (``--zero 2 --zero-collectives per-layer``): per layer and microbatch, one gather of
    the BF16 weights before the forward and one reduce-scatter of the FP32 gradients after the backward; no
    second gather (ZeRO-3 has one), and nothing of the data-parallel sync is left for the step's end."""
    model = MODEL_PRESETS["llama2-7b"]
    # the 32 GPUs' compute the lone GPU's, and the collectives exposed in full (below)
    a100 = replace(CHIP_PRESETS["a100-80gb"], gpu_speed_spread=0.0, zero3_overlap_share=0.0)
    per_layer = Layout(dp=32, microbatches=2, zero=ZeroStage.GRADIENTS, zero_collectives=ZeroCollectives.PER_LAYER)
    assert per_layer.gathers_per_layer and not per_layer.regathers_for_backward
    params = layer_params(model)
    # 4 nodes: the node's 8 NICs (8 × 25 GB/s) carry the rings, at the share NCCL's rings reach (0.8)
    n, bandwidth = 32, 8 * 25e9 * 0.8
    latency = 8.4e-6 + 28 * 3.4e-6 + 3 * 9.6e-6  # 31 ring steps, 3 of them between nodes
    gather = (n - 1) / n * params * 2 / bandwidth + latency
    scatter = (n - 1) / n * params * 4 / bandwidth + latency
    fsdp = fsdp_layer_comm(params, per_layer, a100)
    assert fsdp.forward == pytest.approx(gather) and fsdp.backward == pytest.approx(scatter)
    zero3 = fsdp_layer_comm(params, replace(per_layer, zero=ZeroStage.PARAMETERS), a100)
    assert zero3.backward == pytest.approx(gather + scatter)
    # with none of them beside compute (zero3_overlap_share 0) their kernels' work is exposed in full, every layer
    # and microbatch: the same rings with the network as fast as NVLink (the rings then at NVLink's 300 GB/s a
    # GPU, 0.8 of it reached), and what the four nodes' NICs take beyond that runs beside the layer, holding its SMs
    fast = 300e9 * 0.8
    work_gather = (n - 1) / n * params * 2 / fast + latency
    work_scatter = (n - 1) / n * params * 4 / fast + latency
    work = fsdp_layer_comm(params, per_layer, kernel_work_chip(a100))
    assert work.forward == pytest.approx(work_gather, rel=1e-6) and work.backward == pytest.approx(work_scatter,
                                                                                                 rel=1e-6)
    layer = layer_times(model, per_layer, a100)
    sigma = a100.comm_sm_share
    costs = build_cost_model(model, a100, per_layer)
    alone = build_cost_model(model, a100, replace(per_layer, dp=1, zero=ZeroStage.NONE,
                                                  zero_collectives=ZeroCollectives.BUCKETED))
    forward = work_gather + contended_overlap(gather - work_gather, layer.forward, sigma)
    backward = work_scatter + contended_overlap(scatter - work_scatter, layer.backward_input + layer.backward_weight,
                                                sigma)
    assert costs.stage(0).forward - alone.stage(0).forward == pytest.approx(model.layers * forward, rel=1e-6)
    assert costs.stage(0).backward - alone.stage(0).backward == pytest.approx(model.layers * backward, rel=1e-6)
    assert costs.stage(0).reduce_grad == 0.0  # nothing waits for the step's end
    # DeepSpeed's bucketed ZeRO-2 instead reduce-scatters the whole stage once per microbatch at the end
    bucketed = build_cost_model(model, a100, replace(per_layer, zero_collectives=ZeroCollectives.BUCKETED))
    assert bucketed.stage(0).reduce_grad > 0.0
    assert bucketed.stage(0).forward == pytest.approx(alone.stage(0).forward)


def test_per_layer_zero_collectives_need_zero2_without_pipelining():
    from pipesim.errors import PipesimError

    for bad in (dict(zero=ZeroStage.OPTIMIZER), dict(zero=ZeroStage.GRADIENTS, pp=2)):
        with pytest.raises(PipesimError, match="--zero-collectives per-layer"):
            Layout(dp=8, zero_collectives=ZeroCollectives.PER_LAYER, **bad)
    # nothing to shard (dp·cp = 1): it runs as ZeRO-0, no per-layer collectives
    assert not Layout(zero=ZeroStage.GRADIENTS, zero_collectives=ZeroCollectives.PER_LAYER).gathers_per_layer


def test_dp_sync_link_and_distributed_optimizer():
    params = 1e9
    inside = dp_grad_sync(params, Layout(tp=2, dp=4), H100)  # 8 ranks: one node
    across = dp_grad_sync(params, Layout(tp=8, dp=4), H100)  # 32 ranks: NICs
    # four members of one node: the measured 4-GPU all-reduce share of NVLink, 0.68
    assert inside.reduce == pytest.approx(ring_all_reduce_time(4e9, 4, H100.intra_node_bandwidth * 0.68,
                                                               8.4e-6 + 6 * 3.4e-6))
    # four members, one per node (tp = 8): every step crosses a node
    assert across.reduce == pytest.approx(ring_all_reduce_time(4e9, 4, H100.inter_node_bandwidth, 8.4e-6 + 6 * 9.6e-6))
    zero = dp_grad_sync(params, Layout(tp=8, dp=4, distributed_optimizer=True), H100)
    # reduce-scatter moves half an all-reduce's bytes; its latency has one base, not two halves
    assert zero.reduce == pytest.approx(across.reduce / 2 + (8.4e-6 + 3 * 9.6e-6) - (8.4e-6 + 6 * 9.6e-6) / 2)
    assert zero.gather == pytest.approx(zero.reduce / 2, rel=1e-3)  # BF16 parameters: half the FP32 bytes
    assert p2p_bandwidth(Layout(tp=2, pp=4), H100) == H100.intra_node_bandwidth
    assert p2p_bandwidth(Layout(tp=8, pp=2), H100) == H100.inter_node_bandwidth


def test_zero1_by_an_fp32_all_reduce_moves_whole_gradients_by_hand():
    """--zero-collectives all-reduce-fp32 (Aleph Alpha's scaling): ZeRO-1 whose gradients are all-reduced whole,
    cast to FP32 for the wire, whatever the buffer keeps; the BF16 weights then all-gathered as before."""
    params, bf16_grads = 1e9, OptimizerBytes(grads=2.0)
    base = Layout(tp=8, dp=4, zero=ZeroStage.OPTIMIZER, param_bytes=bf16_grads)
    fp32 = replace(base, zero_collectives=ZeroCollectives.ALL_REDUCE_FP32)
    plain = dp_grad_sync(params, Layout(tp=8, dp=4), H100)  # no sharding: an all-reduce of FP32 gradients
    scattered, reduced = dp_grad_sync(params, base, H100), dp_grad_sync(params, fp32, H100)
    assert reduced.reduce == pytest.approx(plain.reduce)  # 4 bytes a gradient all-reduced, though the buffer keeps 2
    assert reduced.gather == scattered.gather  # the same BF16 weights gathered
    assert reduced.reduce > 3.5 * scattered.reduce  # an all-reduce at twice the bytes, not a reduce-scatter
    for zero in (ZeroStage.NONE, ZeroStage.GRADIENTS, ZeroStage.PARAMETERS):
        with pytest.raises(PipesimError, match=r"--zero-collectives all-reduce-fp32 .* needs --zero 1"):
            Layout(dp=4, zero=zero, zero_collectives=ZeroCollectives.ALL_REDUCE_FP32)
    assert ZeroCollectives.ALL_REDUCE_FP32.applies_to(ZeroStage.OPTIMIZER, 8)


def test_a_boundary_tensor_is_sent_whole_or_split_over_tp_by_hand():
    """Without sequence parallelism every tp rank holds the b·s·h boundary tensor: Megatron-Core sends all of it
    from each (the default), Megatron-LM 2021's scatter/gather and DeepSpeed send 1/tp (--p2p-tensor split).
    Sequence parallelism splits it either way."""
    model = MODEL_PRESETS["llama2-13b"].with_shape(4096, 2)
    tensor = 2 * 2 * 4096 * model.hidden  # BF16, micro-batch 2
    whole = Layout(tp=8, pp=4)
    assert whole.p2p_tensor is BoundaryTensor.WHOLE
    assert p2p_bytes(model, whole) == tensor
    assert p2p_bytes(model, replace(whole, p2p_tensor=BoundaryTensor.SPLIT)) == tensor / 8
    assert p2p_bytes(model, replace(whole, sequence_parallel=True)) == tensor / 8
    assert p2p_bytes(model, Layout(tp=8, pp=4, cp=2)) == tensor / 2  # each cp rank sends its half of the sequence


def test_split_gate_and_up_projections_by_hand():
    """--mlp-up split (Aleph Alpha's ParallelSwiGLUMLP, torchtitan's and Hugging Face's w1/w3): the gated MLP's
    fused up projection becomes two GEMMs of half its width and, without sequence parallelism, each of the two
    column-parallel linears all-reduces its own input gradient: one all-reduce of b·s·h more a layer's backward
    (2 + 3 where a fused one makes 2 + 2); with sequence parallelism the two share their input's gather."""
    from pipesim.analytic.kernels import column_parallel_weight_grads, layer_gemms
    from pipesim.analytic.layout import MlpUp
    from pipesim.analytic.model_spec import LayerKind

    model = MODEL_PRESETS["llama2-13b"].with_shape(4096, 1)
    h, f = model.hidden, model.ffn_hidden
    fused = Layout(tp=4)
    split = replace(fused, mlp_up=MlpUp.SPLIT)
    assert [(n, k) for _, n, k, _ in layer_gemms(model, fused, 4096)][2:] == [(2 * f // 4, h), (h, f // 4)]
    assert [(n, k) for _, n, k, _ in layer_gemms(model, split, 4096)][2:] == [(f // 4, h), (f // 4, h), (h, f // 4)]
    one = collective_time(CollectiveOp.ALL_REDUCE, 2 * 4096 * h, 4, H100, 4)
    assert tp_layer_comm(model, split, H100).forward == tp_layer_comm(model, fused, H100).forward == 2 * one
    assert tp_layer_comm(model, fused, H100).backward == pytest.approx(2 * one)
    assert tp_layer_comm(model, split, H100).backward == pytest.approx(3 * one)
    # full recomputation repeats the forward's two, not the backward's third
    full = replace(split, recompute=Recompute.FULL)
    assert tp_layer_comm(model, full, H100).backward == pytest.approx(5 * one)
    # one weight gradient beside each input-gradient collective: the fused up projection's, or gate's and up's
    assert len(column_parallel_weight_grads(model, fused, H100, 4096)) == 2
    assert len(column_parallel_weight_grads(model, split, H100, 4096)) == 3
    # sequence parallelism gathers the shared input once: no collective more; a MoE layer's experts are apart
    sp, sp_split = replace(fused, sequence_parallel=True), replace(split, sequence_parallel=True)
    assert tp_layer_comm(model, sp_split, H100) == tp_layer_comm(model, sp, H100)
    mixtral = MODEL_PRESETS["mixtral-8x7b"]
    assert (tp_layer_comm(mixtral, replace(split, ep=1), H100, LayerKind.MOE)
            == tp_layer_comm(mixtral, fused, H100, LayerKind.MOE))
    # a model without a gated MLP has nothing to split: a one-line refusal when asked
    assert main(["simulate", "--model", "gpt3-175b", "--tp", "8", "--mlp-up", "split"]) == 2


def test_sequential_blocking_calls_wait_out_both_transfers_by_hand():
    """--p2p-calls sequential (DeepSpeed's pipeline engine, Aleph Alpha's scaling): a step's send and the receive it
    pairs with are blocking calls one after the other, so each pass waits out two transfers of its boundary where
    Megatron-LM's batched call (the default) moves both directions at once and waits out one."""
    from pipesim.analytic.layout import P2pCalls
    from pipesim.analytic.to_costs import stage_time_parts

    model = MODEL_PRESETS["llama2-13b"].with_shape(4096, 1)
    batched = Layout(tp=8, pp=4, dp=1, microbatches=8)  # a stage a node: every boundary on the NIC
    sequential = replace(batched, p2p_calls=P2pCalls.SEQUENTIAL)
    wire = p2p_bytes(model, batched) / H100.inter_node_bandwidth
    one, two = build_cost_model(model, H100, batched), build_cost_model(model, H100, sequential)
    for stage in range(4):
        sends = (stage < 3) + (stage > 0)  # its forward's output and its backward's input gradient
        added = (two.stage(stage).forward + two.stage(stage).backward
                 - one.stage(stage).forward - one.stage(stage).backward)
        assert added == pytest.approx(sends * wire)
    parts_one, parts_two = stage_time_parts(model, H100, batched), stage_time_parts(model, H100, sequential)
    assert [p.p2p_wire for p in parts_two] == pytest.approx([2 * p.p2p_wire for p in parts_one])
    with pytest.raises(PipesimError, match=r"--p2p-calls sequential .* --overlap-p2p"):
        replace(sequential, overlap_p2p=True)


@pytest.mark.parametrize(("schedule", "chunks"), [("gpipe", None), ("1f1b", None), ("interleaved", 2)])
def test_every_schedule_gets_real_unit_timelines(schedule, chunks):
    built = build_program(schedule, 4, 8, chunks)
    shape = built.program.shape
    layout = Layout(tp=4, pp=4, chunks=shape.chunks, microbatches=8)
    result = simulate(built.program, build_cost_model(LLAMA, H100, layout, shape))
    assert 0.1 < result.metrics.makespan < 100  # seconds, not units
    assert result.memory.peak_bytes is not None


def test_cli_writes_trace_in_seconds(tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert main(["simulate", "--model", "llama2-13b", "--tp", "4", "--pp", "4", "--mb", "8", "-s", "gpipe",
                 "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert trace.is_file() and "step time" in out and f"wrote trace {trace}" in out


def test_ring_latency_is_nccls_ring_simple_model_by_hand():
    """NCCL src/graph/tuning.cc (Ring, Simple): base 8.4 µs, 3.4 µs per NVLink step, 9.6 µs per network step."""
    from pipesim.analytic.comm import ring_latency

    assert ring_latency(H100, 1, 1) == 0.0
    assert ring_latency(H100, 8, 8) == pytest.approx(8.4e-6 + 7 * 3.4e-6)  # reduce-scatter in one node
    assert ring_latency(H100, 8, 8, all_reduce=True) == pytest.approx(8.4e-6 + 14 * 3.4e-6)
    assert ring_latency(H100, 16, 16) == pytest.approx(8.4e-6 + 14 * 3.4e-6 + 1 * 9.6e-6)  # two nodes
    assert ring_latency(H100, 4, 32) == pytest.approx(8.4e-6 + 3 * 9.6e-6)  # one member per node


def test_layer_parameter_tensors_add_up_to_the_layer():
    """One tensor per weight matrix (fused QKV and gate-up), a bias per matrix when the model has biases, each
    norm's weight (and LayerNorm's bias): together exactly the layer's parameters."""
    gpt, llama = MODEL_PRESETS["gpt3-175b"], MODEL_PRESETS["llama3.1-8b"]
    h = gpt.hidden
    assert layer_parameter_tensors(gpt, Layout()) == [3 * h * h, 3 * h, h * h, h, 4 * h * h, 4 * h, 4 * h * h, h,
                                                      h, h, h, h]
    assert sum(layer_parameter_tensors(gpt, Layout())) == layer_params(gpt)
    assert len(layer_parameter_tensors(llama, Layout())) == 6  # no biases; two RMSNorm weights
    assert sum(layer_parameter_tensors(llama, Layout())) == layer_params(llama)
    assert sum(layer_parameter_tensors(llama, Layout(tp=4))) == pytest.approx(
        layer_params(llama) / 4, rel=1e-3)  # the matrices split, the norms whole


def test_deepspeed_2021_zero3_communicates_tensor_by_tensor_by_hand():
    """``--zero 3 --zero-collectives per-tensor`` (DeepSpeed v0.3.13–v0.5.x): every tensor of at least 10⁵
    elements gathered on its own before the forward, before the backward and before the recomputed forward;
    every tensor's gradient reduce-scattered on its own; each collective costing the host one operation per
    rank (10 µs on the presets) while the device, synchronised, waits."""
    model = MODEL_PRESETS["gpt3-175b"]
    a100 = replace(CHIP_PRESETS["a100-80gb"], zero3_overlap_share=0.0)  # the collectives exposed in full (below)
    layout = Layout(dp=16, zero=ZeroStage.PARAMETERS, zero_collectives=ZeroCollectives.PER_TENSOR,
                    recompute=Recompute.FULL)
    assert layout.collectives_per_tensor
    tensors = layer_parameter_tensors(model, layout)
    big = [size for size in tensors if size >= 100_000]
    assert len(big) == 4  # the four matrices; GPT-3's biases (≤ 4h = 49,152) and norms stay gathered

    def each(op, sizes, width):
        return sum(collective_time(op, size * width, 16, a100, 16) for size in sizes)

    gathers = each(CollectiveOp.ALL_GATHER, big, 2)
    scatters = each(CollectiveOp.REDUCE_SCATTER, tensors, 4)
    comm = per_tensor_layer_comm(tensors, layout, a100)
    assert comm.forward == pytest.approx(gathers)
    assert comm.backward == pytest.approx(2 * gathers + scatters)  # backward's and the recompute's gathers
    selective = replace(layout, recompute=Recompute.SELECTIVE)
    assert per_tensor_layer_comm(tensors, selective, a100).backward == pytest.approx(gathers + scatters)
    # the bytes are the per-layer gather's; only the latencies differ (one per tensor)
    whole = fsdp_layer_comm(layer_params(model), layout, a100)
    assert whole.forward < comm.forward < whole.forward * 1.05
    host = per_tensor_host_time(tensors, layout, a100)
    assert host.forward == pytest.approx(4 * 16 * 10e-6)  # 4 gathers × 16 ranks × 10 µs
    assert host.backward == pytest.approx((8 + 12) * 16 * 10e-6)  # 8 gathers, 12 reduce-scatters
    # exposed in full, every layer and microbatch (the device synchronised before each gather), where the per-layer
    # ZeRO-3 of the same layout exposes its kernels' work and runs the rest beside the layer
    per_layer = replace(layout, zero_collectives=ZeroCollectives.BUCKETED)
    assert not per_layer.collectives_per_tensor
    cheap = build_cost_model(model, a100, per_layer)  # first, so a cache that ignored the option would answer
    costs = build_cost_model(model, a100, layout)
    work = fsdp_layer_comm(layer_params(model), layout, kernel_work_chip(a100))
    layer = layer_times(model, layout, a100)
    extra = comm.forward + host.forward - prefetched_overlap(whole.forward, layer.forward, a100.comm_sm_share, 0.0,
                                                             work.forward)
    assert costs.stage(0).forward - cheap.stage(0).forward == pytest.approx(model.layers * extra, rel=1e-6)
    # the host's part grows with the ranks: twice the ranks, twice the host time
    wider = per_tensor_host_time(tensors, replace(layout, dp=32), a100)
    assert wider.backward == pytest.approx(2 * host.backward)


def test_deepspeed_2021_zero3_holds_a_tensor_at_a_time_by_hand():
    """Memory of DeepSpeed's 2021 ZeRO-3 (``--zero-collectives per-tensor``): beside the shards, the largest
    parameter tensor gathered with the prefetch bucket (5·10⁷ elements) after it, and the gradients waiting for
    the reduce bucket (5·10⁸ elements) or the largest tensor, where that is larger; FSDP's per-layer ZeRO-3 holds
    two whole layers of each. The 530B model's largest tensor is its MLP's 4h·h matrix, 1.68·10⁹ elements."""
    from pipesim.analytic.memory_gib import static_bytes

    model = MODEL_PRESETS["gpt-529.6b"]
    per_tensor = Layout(dp=640, zero=ZeroStage.PARAMETERS, zero_collectives=ZeroCollectives.PER_TENSOR,
                        param_bytes=OptimizerBytes(grads=2.0))
    per_layer = replace(per_tensor, zero_collectives=ZeroCollectives.BUCKETED)
    params = 1e9
    largest = 4 * model.hidden * model.hidden
    assert largest == 1_677_721_600
    weights, grads, optimizer = static_bytes(params, per_tensor, model)
    assert weights == pytest.approx(2 * params / 640 + 2 * (largest + 50_000_000))
    assert grads == pytest.approx(2 * params / 640 + 2 * largest)
    assert optimizer == pytest.approx(12 * params / 640)
    layer_weights, layer_grads, _ = static_bytes(params, per_layer, model)
    assert layer_weights == pytest.approx(2 * params / 640 + 2 * 2 * layer_params(model))
    assert layer_grads == pytest.approx(2 * params / 640 + 2 * 2 * layer_params(model))
    # a model whose largest tensor is under the reduce bucket holds the bucket's gradients
    small = MODEL_PRESETS["gpt3-1.3b"]
    assert 4 * small.hidden * small.hidden < 500_000_000
    assert static_bytes(params, per_tensor, small)[1] == pytest.approx(2 * params / 640 + 2 * 500_000_000)


def test_per_tensor_zero_collectives_need_zero3_without_pipelining():
    from pipesim.errors import PipesimError

    for bad in (dict(zero=ZeroStage.GRADIENTS), dict(zero=ZeroStage.PARAMETERS, pp=2)):
        with pytest.raises(PipesimError, match="--zero-collectives per-tensor"):
            Layout(dp=8, zero_collectives=ZeroCollectives.PER_TENSOR, **bad)
    assert not Layout(zero=ZeroStage.PARAMETERS, zero_collectives=ZeroCollectives.PER_TENSOR).collectives_per_tensor
