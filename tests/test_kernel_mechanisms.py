"""The kernel-level mechanisms of pipesim.analytic.kernels, by hand: the host floor (a pass lasts at least as
long as the host takes to issue its kernels: ChipSpec.host_kernel_overhead × layer_kernel_counts), eager
element-wise ops, FlashAttention in Triton, the element-wise backward ratio, and pipesim profile's measurements
of the last two chip fields."""

from dataclasses import replace

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.kernels import EMBEDDING_KERNELS, HEAD_KERNELS, layer_kernel_counts
from pipesim.analytic.layout import Layout, Precision, Recompute, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.time_breakdown import rank_times
from pipesim.analytic.to_costs import build_cost_model, stage_time_parts
from pipesim.program.ir import PipelineShape

H100 = CHIP_PRESETS["h100-sxm"]
# the H100 with every memory-bound kernel at one streaming rate: the byte counts' tests (the unvectorised kernels'
# own rates are tested apart, test_unvectorised_kernels_stream_at_their_measured_shares_by_hand)
ONE_RATE_H100 = replace(H100, strided_memory_efficiency=H100.memory_efficiency,
                        converting_memory_efficiency=H100.memory_efficiency)
LLAMA = MODEL_PRESETS["llama2-13b"]


def test_kernel_counts_of_a_dense_layer_by_hand():
    """Llama (RoPE, SwiGLU, no dropout), tp 2 with sequence parallelism, fused attention, BF16."""
    layout = Layout(tp=2, sequence_parallel=True, recompute=Recompute.FULL)
    counts = layer_kernel_counts(LLAMA, layout)
    gemms = 4  # QKV, attention output, gate+up, down
    forward = 2 + gemms + 2 + 1 + 2 + 1 + 4  # norms, GEMMs, RoPE q/k, flash, bias-dropout-adds, SwiGLU, AG/RS ×2
    assert counts.forward == forward
    assert counts.backward_input == 2 + gemms + 2 + 3 + 2 + 1 + 4  # flash backward is three kernels
    assert counts.backward_weight == gemms
    assert counts.recompute == forward  # full recomputation repeats the forward
    fp8 = layer_kernel_counts(LLAMA, replace(layout, precision=Precision.FP8, recompute=Recompute.SELECTIVE))
    assert fp8.forward == forward + gemms  # a cast-transpose per GEMM input
    assert fp8.recompute == 1  # selective: the attention kernel only
    ring = layer_kernel_counts(LLAMA, replace(layout, cp=4))
    assert ring.forward == forward + 2 * 3  # one attention kernel and one transfer per extra ring step


def test_a_pass_lasts_at_least_its_kernels_issue_time():
    layout = Layout(tp=8, sequence_parallel=True, pp=2, microbatches=4, overlap_p2p=True)
    slow_host = replace(H100, host_kernel_overhead=1e-3)  # 1 ms per kernel: every pass host-bound
    costs = build_cost_model(LLAMA, slow_host, layout)
    per_layer = layer_kernel_counts(LLAMA, layout)
    layers = LLAMA.layers // 2
    first, last = costs.stage(0), costs.stage(1)
    assert first.forward == pytest.approx(1e-3 * (layers * per_layer.forward + EMBEDDING_KERNELS.forward))
    assert last.forward == pytest.approx(1e-3 * (layers * per_layer.forward + HEAD_KERNELS.forward))
    assert last.backward_weight == pytest.approx(1e-3 * (layers * per_layer.backward_weight + 1))
    fused = layers * (per_layer.backward_input + per_layer.backward_weight) + HEAD_KERNELS.backward_input + 1
    assert last.backward == pytest.approx(1e-3 * fused)


def test_no_floor_on_a_large_layer_and_none_without_overhead():
    """A 13B layer's kernels run far longer than they take to issue: the default changes nothing."""
    layout = Layout(tp=2, pp=2, microbatches=4, overlap_p2p=True)
    default = build_cost_model(LLAMA, H100, layout)
    free = build_cost_model(LLAMA, replace(H100, host_kernel_overhead=0.0), layout)
    assert default.stage(0) == free.stage(0) and default.stage(1) == free.stage(1)
    assert all(part.host_wait == 0.0 for part in stage_time_parts(LLAMA, H100, layout))


def test_the_wait_is_reported_where_the_step_goes():
    layout = Layout(tp=8, sequence_parallel=True, pp=1, microbatches=4)
    chip = replace(H100, host_kernel_overhead=1e-3)
    gpu_only = replace(H100, host_kernel_overhead=0.0)
    wait = stage_time_parts(LLAMA, chip, layout)[0]
    device = stage_time_parts(LLAMA, gpu_only, layout)[0]
    costs = build_cost_model(LLAMA, chip, layout)
    device_costs = build_cost_model(LLAMA, gpu_only, layout)
    added = (costs.stage(0).forward + costs.stage(0).backward) - (device_costs.stage(0).forward
                                                                  + device_costs.stage(0).backward)
    assert wait.host_wait == pytest.approx(added) and device.host_wait == 0.0
    [rank] = rank_times(LLAMA, chip, layout, PipelineShape(1, 4, 1), step_time=10.0)
    assert rank.host_wait == pytest.approx(4 * wait.host_wait)
    assert "waiting for the host to launch kernels" in rank.text()


def test_eager_elementwise_bytes_by_hand():
    """--elementwise eager: the reference Llama modules' ops one kernel each (kernels._eager_bytes)."""
    from pipesim.analytic.kernels import elementwise_bytes
    from pipesim.analytic.layout import ElementwiseKernels

    model = MODEL_PRESETS["llama2-7b"]  # RMSNorm, RoPE, SwiGLU, no dropout, MHA: q = k = h
    h, f, d = model.hidden, model.ffn_hidden, 2
    fused = Layout()
    eager = replace(fused, elementwise=ElementwiseKernels.EAGER)
    fused_bytes = 2 * 2 * h * d + 2 * 3 * h * d + 3 * f * d + 2 * 2 * h * d  # norms, residuals, SwiGLU, RoPE
    assert elementwise_bytes(model, fused, 1) == fused_bytes
    eager_bytes = (2 * (28 + 4 * d) * h  # RMSNorm: to FP32, pow, mean, × rsqrt, back, × weight
                   + 2 * 3 * h * d  # residual adds: unchanged
                   + 5 * f * d  # silu(gate), × up
                   + (16 + 2 * d) * 2 * h  # RoPE in FP32 on q and k
                   + 2 * d * h)  # the attention output's transpose copy
    assert elementwise_bytes(model, eager, 1) == eager_bytes
    mpt = MODEL_PRESETS["mpt-7b"]  # LayerNorm (one kernel eager too), GELU, learned positions, no dropout
    assert elementwise_bytes(mpt, eager, 1) - elementwise_bytes(mpt, fused, 1) == 2 * d * mpt.hidden
    counts = layer_kernel_counts(model, eager)
    assert counts.forward == layer_kernel_counts(model, fused).forward + 2 * 7 + 2 * 2 + 1 + 1
    # the backward: each norm twelve kernels (elementwise_backward_bytes' ops), SwiGLU three
    assert counts.backward_input == layer_kernel_counts(model, fused).backward_input + 2 * 11 + 2 * 2 + 2 + 1


def test_eager_ops_around_a_fused_norm_by_hand():
    """--elementwise eager-fused-norm (Aleph Alpha's scaling framework with flash-attn's rms_norm): the norms at
    the fused kernel's bytes, one kernel each and nothing more kept; every other op as --elementwise eager."""
    from pipesim.analytic.activations import layer_activation_bytes
    from pipesim.analytic.kernels import elementwise_bytes
    from pipesim.analytic.layout import ElementwiseKernels

    model = MODEL_PRESETS["llama2-7b"].with_shape(4096, 1)
    h, d = model.hidden, 2
    eager = Layout(elementwise=ElementwiseKernels.EAGER)
    fused_norm = replace(eager, elementwise=ElementwiseKernels.EAGER_FUSED_NORM)
    # RMSNorm twice a layer: 28 + 4d bytes per element eager, 2d fused
    norms = 2 * (28 + 4 * d - 2 * d) * h
    assert elementwise_bytes(model, eager, 1) - elementwise_bytes(model, fused_norm, 1) == norms
    assert layer_kernel_counts(model, eager).forward - layer_kernel_counts(model, fused_norm).forward == 2 * 7
    # autograd keeps the eager norm's FP32 input (4 bytes an element, twice a layer) only where the norm is eager
    assert layer_activation_bytes(model, eager) - layer_activation_bytes(model, fused_norm) == 4096 * 2 * 4 * h
    fused = replace(eager, elementwise=ElementwiseKernels.FUSED)
    assert elementwise_bytes(model, fused, 1) < elementwise_bytes(model, fused_norm, 1)  # RoPE, SwiGLU still eager


def test_an_eager_activation_between_fused_kernels_by_hand():
    """--elementwise eager-activation (nanotron: TritonRMSNorm, flash-attn's rotary, GLUActivation's
    ``act(gate) * up``, CausalSelfAttention's layout copies): against the fused setting, SwiGLU moves 5d bytes per
    inner element forward (silu: d + d, the product: 2d + d) against the fused kernel's 3d, 9d backward
    (autograd's three kernels) against 3d, and ``silu(gate)`` is kept, d per inner element; the attention's
    layout copies move d + d an element of q once, of k and v three times each (transpose, concatenation,
    permute) and of the output once, as much again backward, and the output projection keeps its copy, d per
    element. Kernels: one more forward for SwiGLU and six copies, two more backward and the six. The norms, RoPE
    and the adds stay as fused (no FP32 norm input)."""
    from pipesim.analytic.activations import layer_activation_bytes
    from pipesim.analytic.kernels import elementwise_backward_bytes, elementwise_bytes
    from pipesim.analytic.layout import ElementwiseKernels

    model = MODEL_PRESETS["llama2-7b"].with_shape(4096, 1)
    f, d = model.ffn_hidden, 2
    fused = Layout(tp=2)
    nanotron = replace(fused, elementwise=ElementwiseKernels.EAGER_ACTIVATION)
    h, kv = model.hidden, model.kv_dim  # llama2-7b: 4096 each (no GQA)
    copies = 2 * d * (h + h + 3 * (kv + kv)) / 2  # output, q, and k and v three times; over tp 2
    assert elementwise_bytes(model, nanotron, 1) - elementwise_bytes(model, fused, 1) == (5 - 3) * d * f / 2 + copies
    assert (elementwise_backward_bytes(model, nanotron, 1) - elementwise_backward_bytes(model, fused, 1)
            == (9 - 3) * d * f / 2 + copies)  # the copies: the forward's bytes again
    one, two = layer_kernel_counts(model, nanotron), layer_kernel_counts(model, fused)
    assert (one.forward - two.forward, one.backward_input - two.backward_input) == (1 + 6, 2 + 6)
    assert (layer_activation_bytes(model, nanotron) - layer_activation_bytes(model, fused)
            == 4096 * d * f / 2 + 4096 * d * h / 2)
    mpt = MODEL_PRESETS["mpt-7b"]  # an ungated GELU is one kernel either way: only the layout copies differ
    assert (elementwise_bytes(mpt, replace(nanotron, tp=1), 1) - elementwise_bytes(mpt, Layout(), 1)
            == 2 * d * 8 * mpt.hidden)
    assert Layout().elementwise is ElementwiseKernels.FUSED
    from pipesim.analytic.frameworks import Framework, knobs
    assert knobs(Framework.NANOTRON).elementwise is ElementwiseKernels.EAGER_ACTIVATION


def test_eager_backward_bytes_follow_autograds_formulas_by_hand():
    """Eager ops' input backward moves what autograd's formulas move (kernels.elementwise_backward_bytes): the
    FP32 RMSNorm 68 + 8d bytes an element against its forward's 28 + 4d, SwiGLU's silu(gate)·up 9d per inner
    element against 5d; every other op its forward's bytes. Fused kernels: the forward's bytes (the measured
    elementwise_backward_ratio is their whole difference)."""
    from pipesim.analytic.kernels import elementwise_backward_bytes, elementwise_bytes, layer_times
    from pipesim.analytic.layout import ElementwiseKernels

    model = MODEL_PRESETS["llama2-7b"]
    h, f, d = model.hidden, model.ffn_hidden, 2
    fused = Layout()
    assert elementwise_backward_bytes(model, fused, 3) == elementwise_bytes(model, fused, 3)
    eager = replace(fused, elementwise=ElementwiseKernels.EAGER)
    # two norms: x·w (2d) and w's gradient (3d + d), the cast back (d + 4), x·rsqrt's two gradients (8, then
    # 12 + 4), the mean's expansion (4), pow's 2·x·grad (8 + 12), the two paths summed (12), the cast (4 + d)
    norm_backward = (2 * d + 4 * d) + (d + 4) + 8 + 16 + 4 + 20 + 12 + (4 + d)
    assert norm_backward == 68 + 8 * d
    extra = 2 * (norm_backward - (28 + 4 * d)) * h + (9 - 5) * d * f
    assert elementwise_backward_bytes(model, eager, 1) - elementwise_bytes(model, eager, 1) == extra
    # around a fused norm only SwiGLU's backward differs from its forward
    fused_norm = replace(fused, elementwise=ElementwiseKernels.EAGER_FUSED_NORM)
    assert (elementwise_backward_bytes(model, fused_norm, 1) - elementwise_bytes(model, fused_norm, 1)
            == (9 - 5) * d * f)
    # tp shards SwiGLU's inner width, and sequence parallelism the norms' tokens, as in the forward
    tp4 = replace(eager, tp=4, sequence_parallel=True)
    assert (elementwise_backward_bytes(model, tp4, 1) - elementwise_bytes(model, tp4, 1)) == extra / 4
    mpt = MODEL_PRESETS["mpt-7b"]  # LayerNorm is one kernel eager too, GELU is not gated: nothing differs
    assert elementwise_backward_bytes(mpt, eager, 1) == elementwise_bytes(mpt, eager, 1)
    # the input backward carries the difference at the chip's stream bandwidth, the forward does not
    tokens = LLAMA.micro_batch * LLAMA.seq_len
    one, two = layer_times(LLAMA, eager, ONE_RATE_H100), layer_times(LLAMA, fused, ONE_RATE_H100)
    backward = elementwise_backward_bytes(LLAMA, eager, tokens) - elementwise_backward_bytes(LLAMA, fused, tokens)
    forward = elementwise_bytes(LLAMA, eager, tokens) - elementwise_bytes(LLAMA, fused, tokens)
    assert one.backward_input - two.backward_input == pytest.approx(
        H100.elementwise_backward_ratio * backward / H100.stream_bandwidth)
    assert one.forward - two.forward == pytest.approx(forward / H100.stream_bandwidth)


def test_unvectorised_kernels_stream_at_their_measured_shares_by_hand():
    """ATen loads vectorised only contiguous operands of the op's own dtype (``CUDALoops.cuh``): a gated activation
    over one fused GEMM's two halves (and an eager copy out of a transposed view) streams at
    ``strided_memory_efficiency``, the eager RMSNorm and RoPE chains
    through FP32 (and PyTorch's context-parallel merges) at ``converting_memory_efficiency``, the shares Liger's
    measured kernels give (pipesim.validation.memory_bound_kernels). A layer grows by exactly those bytes at the
    slower rates; contiguous fused kernels do not move."""
    from pipesim.analytic.kernels import attention_core_times, cp_merge_bytes, layer_times, repeat_kv_bytes
    from pipesim.analytic.layout import CpKernels, ElementwiseKernels, MlpUp

    model = MODEL_PRESETS["llama3.2-1b"]
    tokens = model.micro_batch * model.seq_len
    d, h, f = model.dtype_bytes, model.hidden, model.ffn_hidden
    strided = 1 / H100.strided_stream_bandwidth - 1 / H100.stream_bandwidth
    converting = 1 / H100.converting_stream_bandwidth - 1 / H100.stream_bandwidth
    ratio = H100.elementwise_backward_ratio
    # nanotron: fused norms and RoPE; silu(gate)·up over gate_up_proj's halves, 5d forward and 9d backward; and
    # its copies out of transposed views, strided too (d + d an element: the queries once, keys and values three
    # times, the attention output once; the same bytes backward)
    nanotron = Layout(tp=2, elementwise=ElementwiseKernels.EAGER_ACTIVATION)
    fast, slow = layer_times(model, nanotron, ONE_RATE_H100), layer_times(model, nanotron, H100)
    copies = 2 * d * (model.q_width + 3 * (model.k_width + model.v_width) + model.attention_out_width) / 2
    assert slow.forward - fast.forward == pytest.approx(tokens * (5 * d * f / 2 + copies) * strided)
    assert slow.backward_input - fast.backward_input == pytest.approx(
        ratio * tokens * (9 * d * f / 2 + copies) * strided)
    assert slow.backward_weight == fast.backward_weight
    # two linears (torchtitan's w1 and w3) hand the activation contiguous operands: the FP32 chains slow down, the
    # two norms (28 + 4d forward, 68 + 8d backward) and RoPE on the queries and keys (16 + 2d each way), and the
    # attention output's copy out of its transposed view
    eager = Layout(elementwise=ElementwiseKernels.EAGER, mlp_up=MlpUp.SPLIT)
    fast, slow = layer_times(model, eager, ONE_RATE_H100), layer_times(model, eager, H100)
    rope = (16 + 2 * d) * (model.q_width + model.k_width)
    out_copy = 2 * d * model.attention_out_width * strided
    assert slow.forward - fast.forward == pytest.approx(
        tokens * (((28 + 4 * d) * 2 * h + rope) * converting + out_copy))
    assert slow.backward_input - fast.backward_input == pytest.approx(
        ratio * tokens * (((68 + 8 * d) * 2 * h + rope) * converting + out_copy))
    # eager, grouped keys and values repeated to every query head are copied out of an expanded (stride-0) view
    repeated = replace(eager, kv_repeated=True)
    grew = (layer_times(model, repeated, H100).forward - layer_times(model, repeated, ONE_RATE_H100).forward
            - (slow.forward - fast.forward))
    assert grew == pytest.approx(tokens * repeat_kv_bytes(model, repeated) * strided)  # bytes a token, each way
    # fused kernels over contiguous operands stream at memory_efficiency alone
    assert layer_times(model, Layout(mlp_up=MlpUp.SPLIT), H100) == layer_times(
        model, Layout(mlp_up=MlpUp.SPLIT), ONE_RATE_H100)
    # PyTorch's ring-attention merges are eager FP32 chains too; Transformer Engine's are its own kernels
    ring = Layout(cp=2, cp_kernels=CpKernels.PYTORCH)
    merge_forward, merge_backward = cp_merge_bytes(model, ring)
    fast, slow = attention_core_times(model, ring, ONE_RATE_H100), attention_core_times(model, ring, H100)
    assert slow.forward - fast.forward == pytest.approx(merge_forward * converting)
    assert slow.backward_input - fast.backward_input == pytest.approx(merge_backward * converting)
    te = replace(ring, cp_kernels=CpKernels.TRANSFORMER_ENGINE)
    assert attention_core_times(model, te, H100) == attention_core_times(model, te, ONE_RATE_H100)
    # never faster than a streaming kernel: a chip whose measured memory_efficiency is below the shares' defaults
    # (a chip file written before the fields existed) prices them at its own streaming rate
    slow_hbm = replace(H100, memory_efficiency=0.4)
    assert slow_hbm.strided_stream_bandwidth == slow_hbm.converting_stream_bandwidth == slow_hbm.stream_bandwidth


def test_a_gathered_loss_runs_on_the_whole_vocabulary_on_every_tp_rank_by_hand():
    """--loss gathered: the logits all-gathered over tp, then F.cross_entropy over all of them on each rank."""
    from pipesim.analytic.activations import loss_transient_bytes, output_activation_bytes
    from pipesim.analytic.comm import collective_time, logits_gather_time
    from pipesim.analytic.kernels import CROSS_ENTROPY_BYTES, LOSS_PARALLEL_BYTES, head_times
    from pipesim.analytic.layout import LossKernel
    from pipesim.analytic.measured import CollectiveOp

    model = MODEL_PRESETS["llama2-7b"].with_shape(2048, 1)
    a100 = CHIP_PRESETS["a100-80gb"]
    pytorch = Layout(tp=4, loss=LossKernel.PYTORCH)  # at tp 4: torch's loss_parallel (LOSS_PARALLEL_BYTES)
    gathered = replace(pytorch, loss=LossKernel.GATHERED)
    logits = 2048 * model.vocab
    forward, backward = CROSS_ENTROPY_BYTES[LossKernel.PYTORCH]  # ATen's, on every logit of each rank
    sharded_forward, sharded_backward = LOSS_PARALLEL_BYTES
    stream = a100.stream_bandwidth
    assert head_times(model, gathered, a100).forward == pytest.approx(
        head_times(model, pytorch, a100).forward + (forward * logits - sharded_forward * logits / 4) / stream)
    assert head_times(model, gathered, a100).backward_input == pytest.approx(
        head_times(model, pytorch, a100).backward_input + (backward * logits - sharded_backward * logits / 4) / stream)
    assert logits_gather_time(model, gathered, a100) == collective_time(CollectiveOp.ALL_GATHER, 2 * logits, 4,
                                                                        a100, 4)
    assert logits_gather_time(model, pytorch, a100) == 0.0 and logits_gather_time(
        model, replace(gathered, tp=1), a100) == 0.0
    assert loss_transient_bytes(model, gathered) == pytest.approx(4 * 8 / 12 * loss_transient_bytes(model, pytorch))
    assert output_activation_bytes(model, gathered) - output_activation_bytes(model, pytorch) == 4 * (
        logits - logits / 4)
    # the gather sits on the last stage's forward, waited for
    layout = replace(gathered, pp=2, microbatches=4)
    plain = build_cost_model(model, a100, replace(layout, loss=LossKernel.PYTORCH))
    costs = build_cost_model(model, a100, layout)
    assert costs.stage(0) == plain.stage(0)
    added = costs.stage(1).forward - plain.stage(1).forward
    # compute runs no faster than peak: the gather, then ATen's loss on the whole vocabulary for loss_parallel's
    assert added >= logits_gather_time(model, layout, a100) + (forward * logits - sharded_forward * logits / 4) / stream


def test_eager_modules_keep_more_activations_by_hand():
    """--elementwise eager: what autograd saves for the reference modules' ops (activations._eager_kept)."""
    from pipesim.analytic.activations import layer_activation_bytes
    from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels

    model = MODEL_PRESETS["llama2-7b"].with_shape(4096, 2)  # RMSNorm, SwiGLU, RoPE, no dropout, MHA
    s, b, h, f, d = 4096, 2, model.hidden, model.ffn_hidden, 2
    fused = Layout(tp=2)
    eager = replace(fused, elementwise=ElementwiseKernels.EAGER)
    # per token: two FP32 norm inputs beside their BF16 outputs (4 bytes more per element each, replicated over
    # tp without sequence parallelism); silu(gate), d·f; the attention output's transposed copy, d·h (both /tp)
    extra = s * b * (2 * 4 * h + (d * f + d * h) / 2)
    assert layer_activation_bytes(model, eager) - layer_activation_bytes(model, fused) == extra
    sequence_parallel = replace(eager, sequence_parallel=True)
    assert (layer_activation_bytes(model, sequence_parallel) - layer_activation_bytes(model, replace(
        sequence_parallel, elementwise=ElementwiseKernels.FUSED))) == s * b * (2 * 4 * h + d * f + d * h) / 2
    # selective recomputes the attention kernel, so only the copy is kept; the unfused path keeps no second copy
    for other in (replace(eager, recompute=Recompute.SELECTIVE), replace(eager, attention=AttentionKernel.UNFUSED)):
        base = replace(other, elementwise=ElementwiseKernels.FUSED)
        assert layer_activation_bytes(model, other) - layer_activation_bytes(model, base) == s * b * (
            2 * 4 * h + d * f / 2)
    for policy in (Recompute.FULL, Recompute.PER_OP):  # they keep what their policy saves, eager or not
        assert layer_activation_bytes(model, replace(eager, recompute=policy)) == layer_activation_bytes(
            model, replace(fused, recompute=policy))
    gpt = MODEL_PRESETS["gpt-swiglu-6.6b"].with_shape(2048, 2)  # LayerNorm: F.layer_norm keeps what fused does
    assert (layer_activation_bytes(gpt, eager) - layer_activation_bytes(gpt, fused)
            == 2048 * 2 * (d * gpt.ffn_hidden + d * gpt.hidden) / 2)


def test_profile_times_the_host_per_kernel():
    """pipesim profile's measurement: a chain of tiny autograd-recorded ops, timed per op (on this CPU, the
    dispatcher's cost per op; on a GPU, what the device waits for each launch)."""
    pytest.importorskip("torch")
    from pipesim.profile import host
    from pipesim.profile.device import open_device
    from pipesim.profile.timing import QUICK

    seconds = host.time_host_overhead(open_device(1, 0, 1), QUICK)
    assert 1e-8 < seconds < 1e-3  # microseconds per op on any CPU torch runs on


def test_triton_flash_attention_runs_at_the_published_ratio_below_flash_attention_2():
    """--attention triton: FlashAttention in Triton at 1/1.8 of FA2's rates (Dao 2023 §4.1: FA2 1.3–2.5×
    faster), the same memory (no scores stored)."""
    from pipesim.analytic.activations import layer_activation_bytes
    from pipesim.analytic.kernels import TRITON_FLASH_SLOWDOWN, attention_core_times
    from pipesim.analytic.layout import AttentionKernel

    fa2 = Layout()
    triton = replace(fa2, attention=AttentionKernel.TRITON)
    a, b = attention_core_times(LLAMA, fa2, H100), attention_core_times(LLAMA, triton, H100)
    assert TRITON_FLASH_SLOWDOWN == 1.8
    assert b.forward == pytest.approx(1.8 * a.forward) and b.backward_input == pytest.approx(1.8 * a.backward_input)
    assert layer_activation_bytes(LLAMA, triton) == layer_activation_bytes(LLAMA, fa2)
    assert layer_kernel_counts(LLAMA, triton) == layer_kernel_counts(LLAMA, fa2)


def test_flash_attention_v1_runs_at_its_measured_ratio_below_flash_attention_2_by_shape():
    """--attention flash1: FlashAttention v1 at FA2's rates over the ratio measured between the two on the chip, in
    one benchmark (causal forward + backward), at the call's sequence and head size: on an A100 Dao 2023's Figure 4
    (by hand 155/69 at 2k tokens of head size 128, 88/58 at 512 of head size 64), on an H100 the flash-attention
    repository's figure of the same benchmark (265/108 and 141/104), on a chip without a measured ratio (B200) the
    H100's; the ratio log2-interpolated between the sweep's points (midway from 4k to 8k: the mean of the two
    ratios) and held at its ends; under context parallelism, at the sequence a call sees. The same memory and
    kernels as FA2."""
    from pipesim.analytic.activations import layer_activation_bytes
    from pipesim.analytic.attention_shapes import flash1_slowdown
    from pipesim.analytic.chip_presets import CHIP_PRESETS
    from pipesim.analytic.kernels import attention_core_times, cp_merge_bytes
    from pipesim.analytic.layout import AttentionKernel

    a100 = CHIP_PRESETS["a100-80gb"].attention_shape_rates
    assert flash1_slowdown(2048, 128, a100) == pytest.approx(155 / 69)
    assert flash1_slowdown(512, 64, a100) == pytest.approx(88 / 58)
    assert flash1_slowdown(2 ** 12.5, 128, a100) == pytest.approx((173 / 76 + 182 / 80) / 2)
    assert flash1_slowdown(131072, 128, a100) == flash1_slowdown(16384, 128, a100) == pytest.approx(189 / 83)
    assert flash1_slowdown(256, 64, a100) == flash1_slowdown(512, 64, a100)
    hopper = H100.attention_shape_rates
    assert flash1_slowdown(2048, 128, hopper) == pytest.approx(265 / 108)
    assert flash1_slowdown(512, 64, hopper) == pytest.approx(141 / 104)
    assert CHIP_PRESETS["b200"].attention_shape_rates is None
    assert flash1_slowdown(2048, 128, None) == flash1_slowdown(2048, 128, hopper)

    fa2 = Layout()
    v1 = replace(fa2, attention=AttentionKernel.FLASH1)
    a, b = attention_core_times(LLAMA, fa2, H100), attention_core_times(LLAMA, v1, H100)
    ratio = flash1_slowdown(LLAMA.seq_len, LLAMA.qk_head_dim, hopper)
    assert ratio == pytest.approx(294 / 126)  # a 4k-token Llama layer of head size 128 on an H100
    assert b.forward == pytest.approx(ratio * a.forward) and b.backward_input == pytest.approx(ratio * a.backward_input)
    # under cp 4 each call sees a quarter of the sequence: the kernels at the ratio there, the merges unchanged
    cp_fa2, cp_v1 = replace(fa2, cp=4), replace(v1, cp=4)
    quarter = flash1_slowdown(LLAMA.seq_len / 4, LLAMA.qk_head_dim, hopper)
    assert quarter == pytest.approx(221 / 109)
    c, d = attention_core_times(LLAMA, cp_fa2, H100), attention_core_times(LLAMA, cp_v1, H100)
    merges = cp_merge_bytes(LLAMA, cp_fa2)[0] / H100.stream_bandwidth
    assert d.forward - merges == pytest.approx(quarter * (c.forward - merges))
    assert layer_activation_bytes(LLAMA, v1) == layer_activation_bytes(LLAMA, fa2)
    assert layer_kernel_counts(LLAMA, v1) == layer_kernel_counts(LLAMA, fa2)


def test_the_elementwise_backward_ratio_is_the_chips_and_profile_measures_it():
    """The memory-bound kernels' backward costs elementwise_backward_ratio × their forward: Qi et al.'s 1.0 by
    default (kernels.NON_GEMM_BACKWARD), measured by pipesim profile (layer norm's and GELU's backward over
    forward) on the machine it runs on."""
    pytest.importorskip("torch")
    from pipesim.analytic.kernels import NON_GEMM_BACKWARD, elementwise_bytes, layer_times
    from pipesim.profile import stream
    from pipesim.profile.device import open_device
    from pipesim.profile.timing import Repeats

    assert H100.elementwise_backward_ratio == NON_GEMM_BACKWARD
    layout = Layout(tp=2)
    one = layer_times(LLAMA, layout, ONE_RATE_H100)
    two = layer_times(LLAMA, layout, replace(ONE_RATE_H100, elementwise_backward_ratio=2.0))
    tokens = LLAMA.micro_batch * LLAMA.seq_len
    assert two.backward_input - one.backward_input == pytest.approx(
        elementwise_bytes(LLAMA, layout, tokens) / H100.stream_bandwidth)
    assert two.forward == one.forward and two.backward_weight == one.backward_weight
    # the median of 9 timed calls, not --quick's 3: one preempted call on a loaded machine cannot move it
    ratio = stream.time_backward_ratio(256, 128, open_device(1, 0, 1), Repeats(warmup=2, repeats=9))
    assert 0.05 < ratio < 50  # a backward costs something, and not orders of magnitude more than its forward


# torchtitan's per-op selective checkpointing and PyTorch's cross-entropy (the memory of its Table 1 rows)
LLAMA3_8B = MODEL_PRESETS["llama3.1-8b"]


def test_per_op_checkpointing_keeps_attention_and_every_other_matmul_by_hand():
    """Llama 3.1 8B, tp 1: wq (4096), wv (1024), w1 (14336) and w2 (4096) outputs, the attention output (4096)
    and the layer input (4096) per token, two bytes each."""
    from pipesim.analytic.activations import layer_activation_bytes
    from pipesim.analytic.flops import layer_flops
    from pipesim.analytic.kernels import layer_times, per_op_recomputed_gemms

    model = replace(LLAMA3_8B, seq_len=8192, micro_batch=2)
    layout = Layout(recompute=Recompute.PER_OP)
    tokens = 8192 * 2
    assert layer_activation_bytes(model, layout) == tokens * 2 * (4096 + 4096 + 1024 + 4096 + 14336 + 4096)
    # tp 2 with sequence parallelism: the input is sharded; w2's output is kept before its reduce-scatter
    sp = Layout(recompute=Recompute.PER_OP, tp=2, sequence_parallel=True)
    assert layer_activation_bytes(model, sp) == tokens * 2 * (4096 / 2 + (4096 + 1024 + 4096) / 2 + 14336 / 2 + 4096)
    # the recomputed matmuls are wk, wo and w3: their FLOPs, and their GEMM shapes on one rank
    assert layer_flops(model, layout).recompute == 2 * tokens * 4096 * (1024 + 4096 + 14336)
    assert per_op_recomputed_gemms(model, sp, tokens) == [(tokens, 512, 4096, 1), (tokens, 4096, 2048, 1),
                                                          (tokens, 7168, 4096, 1)]
    times = layer_times(model, layout, H100)
    selective = layer_times(model, Layout(recompute=Recompute.SELECTIVE), H100)
    full = layer_times(model, Layout(recompute=Recompute.FULL), H100)
    assert selective.recompute < times.recompute < full.recompute  # no attention, three of seven matmuls


def test_per_op_checkpointing_refuses_a_moe_layer():
    from pipesim.analytic.activations import layer_activation_bytes
    from pipesim.analytic.model_spec import LayerKind
    from pipesim.errors import PipesimError

    with pytest.raises(PipesimError, match="dense layers only"):
        layer_activation_bytes(MODEL_PRESETS["mixtral-8x7b"], Layout(recompute=Recompute.PER_OP), LayerKind.MOE)


@pytest.mark.parametrize(("loss", "extra"), [("megatron", 2), ("pytorch", 8), ("nanotron", 6), ("fused", 4),
                                             ("compiled", 2)])
def test_the_loss_peak_sits_on_the_last_stage_only(loss, extra):
    """Beyond the 4 FP32 bytes per logit stored: Megatron's in-place softmax holds 2 more (the BF16 copy),
    PyTorch's F.cross_entropy 8 more (the NLL's and log-softmax's gradients, FP32), nanotron's 6 more (the BF16
    logits and the FP32 cast its helper still holds when the max is subtracted into a new tensor)."""
    from pipesim.analytic.activations import loss_transient_bytes
    from pipesim.analytic.layout import LossKernel
    from pipesim.analytic.memory_gib import backward_working_set, memory_report
    from pipesim.program.build import build_program
    from pipesim.sim.simulator import simulate

    model = replace(LLAMA3_8B, seq_len=8192, micro_batch=2)
    layout = Layout(pp=2, microbatches=4, loss=LossKernel(loss))
    logits = 8192 * 2 * 128256
    assert loss_transient_bytes(model, layout) == extra * logits
    # at tp > 1 PyTorch's loss is loss_parallel, which holds 4 more (test_pytorchs_loss_over_vocabulary_shards...)
    sharded = extra + (4 if loss == "pytorch" else 0)
    assert loss_transient_bytes(model, replace(layout, tp=4, cp=2)) == sharded * logits / 8
    program = build_program("1f1b", 2, 4).program
    report = memory_report(model, H100, layout, simulate(program, build_cost_model(model, H100, layout, program.shape)))
    first, last = report.ranks
    assert first.working == backward_working_set(model, layout)
    assert last.working == max(first.working, extra * logits)


def test_nanotrons_loss_moves_megatrons_bytes_and_is_its_framework_default():
    """nanotron's ``_ShardedCrossEntropy`` runs Megatron's ops (the subtraction out of place reads and writes what
    the in-place one does), so only its peak differs: the step time is Megatron's loss's to the bit."""
    from pipesim.analytic.frameworks import Framework, knobs
    from pipesim.analytic.kernels import head_times
    from pipesim.analytic.layout import LossKernel

    layout = Layout(tp=2)
    assert head_times(LLAMA3_8B, replace(layout, loss=LossKernel.NANOTRON), H100) == head_times(LLAMA3_8B, layout, H100)
    assert knobs(Framework.NANOTRON).loss is LossKernel.NANOTRON and LossKernel.NANOTRON.vocab_parallel


def _loss_seconds(model, layout, chip) -> tuple[float, float]:
    """The head's forward and input backward less its GEMMs and final norm: the loss's memory-bound passes."""
    from pipesim.analytic.kernels import head_times
    from pipesim.analytic.layout import LossKernel

    times = head_times(model, layout, chip)
    base = head_times(model, replace(layout, loss=LossKernel.MEGATRON, z_loss=False, loss_input_copy=False), chip)
    return times.forward - base.forward, times.backward_input - base.backward_input


def test_the_loss_as_its_code_runs_it_by_hand():
    """Each loss's bytes a logit, forward and backward, against Megatron's (38, 14), read off the ops:
    F.cross_entropy on FP32 logits (22, 22); OLMo-core's eager z-loss ``logits.logsumexp(-1)`` (ATen's composite:
    max 4, subtraction 8, exp 8, sum 4; backward three ops of 8 and the two gradients summed, 12) adds (24, 36);
    its ``logits[..., :-1, :].contiguous()`` adds (8, 12) on FP32 logits, (4, 6) on BF16; a fused kernel on FP32
    logits (the cast 6 and one read 4; one read, the FP32 gradient and the cast back 4 + 4 + 6) is (10, 14), its
    z-loss free; a compiled loss reads the BF16 logits twice and once back, writing a BF16 gradient: (4, 4);
    nanotron's z-loss backward clones the softmax, scales a copy and adds them: 28. Megatron-Core's
    --cross-entropy-loss-fusion (its ops in compiled pieces: the cast with the max 6, the subtraction, exp and sum
    in place 8, the division in place 8; backward the scaling written back and its BF16 cast 4 + 4 + 2) is
    (22, 10); Transformer Engine's (two reads of the BF16 logits and the gradient written into them; backward
    its scaling in place) is (6, 4)."""
    from pipesim.analytic.layout import LossKernel

    model = MODEL_PRESETS["llama3.2-1b"].with_shape(4096, 4)
    logits = 4096 * 4 * model.vocab / H100.stream_bandwidth
    cases = [(Layout(loss=LossKernel.PYTORCH), 22, 22),
             (Layout(loss=LossKernel.PYTORCH, z_loss=True), 22 + 24, 22 + 36),
             (Layout(loss=LossKernel.PYTORCH, z_loss=True, loss_input_copy=True), 22 + 24 + 8, 22 + 36 + 12),
             (Layout(loss=LossKernel.FUSED, z_loss=True, loss_input_copy=True), 10 + 8, 14 + 12),
             (Layout(loss=LossKernel.COMPILED, z_loss=True), 4, 4),
             (Layout(loss=LossKernel.COMPILED, loss_input_copy=True), 4 + 4, 4 + 6),  # a BF16 copy
             (Layout(loss=LossKernel.NANOTRON, z_loss=True), 38, 14 + 28),
             (Layout(loss=LossKernel.MEGATRON_FUSED), 6 + 8 + 8, 4 + 4 + 2),
             (Layout(loss=LossKernel.TE), 2 + 2 + 2, 2 + 2)]
    for layout, forward, backward in cases:
        assert _loss_seconds(model, layout, H100) == pytest.approx(((forward - 38) * logits, (backward - 14) * logits))


def test_the_z_loss_and_input_copy_reach_memory_and_refusals():
    """An eager z-loss and the input copy each hold one more FP32 tensor of the logits' size; a compiled loss
    keeps the BF16 logits, not an FP32 copy; Megatron's loss has no z-loss, refused in one line."""
    from pipesim.analytic.activations import loss_transient_bytes, output_activation_bytes
    from pipesim.analytic.layout import LossKernel
    from pipesim.errors import PipesimError

    model = MODEL_PRESETS["llama3.2-1b"].with_shape(4096, 1)
    logits = 4096 * model.vocab
    eager = Layout(loss=LossKernel.PYTORCH)
    assert loss_transient_bytes(model, replace(eager, z_loss=True, loss_input_copy=True)) == (8 + 4 + 4) * logits
    assert loss_transient_bytes(model, Layout(loss=LossKernel.FUSED, z_loss=True)) == 4 * logits  # in the kernel
    assert output_activation_bytes(model, eager) - output_activation_bytes(
        model, Layout(loss=LossKernel.COMPILED)) == 2 * logits
    te = Layout(loss=LossKernel.TE)  # the gradient written into the BF16 logits it keeps: nothing beyond them
    assert loss_transient_bytes(model, te) == 0
    assert output_activation_bytes(model, eager) - output_activation_bytes(model, te) == 2 * logits
    for loss in (LossKernel.MEGATRON, LossKernel.MEGATRON_FUSED, LossKernel.TE):
        with pytest.raises(PipesimError, match="--z-loss: Megatron-LM's cross-entropy"):
            Layout(loss=loss, z_loss=True)


def test_autograd_gradient_accumulation_costs_a_pass_over_the_gradients_by_hand():
    """PyTorch's AccumulateGrad adds each microbatch's weight gradient into .grad (read two, write one) on m − 1
    of a step's m microbatches; Megatron's fused accumulation costs nothing beyond the GEMM."""
    from pipesim.analytic.layout import GradAccumulation, ZeroStage
    from pipesim.analytic.params import stage_params

    layout = Layout(pp=2, chunks=2, microbatches=8, overlap_p2p=True)
    autograd = replace(layout, grad_accumulation=GradAccumulation.AUTOGRAD)
    fused_costs, autograd_costs = build_cost_model(LLAMA, H100, layout), build_cost_model(LLAMA, H100, autograd)
    layers = LLAMA.layers // 4
    params = stage_params(LLAMA, 1, 4, layers, layers)  # a middle stage: its layers' weights only
    # per chunk per microbatch: 3 passes of 4-byte FP32 gradients over the stream rate, on 7 of 8 microbatches;
    # a stage's values are a rank's share, v = 2 chunks of it
    by_hand = 2 * 3 * 4 * params / H100.stream_bandwidth * 7 / 8
    middle_fused, middle_autograd = fused_costs.stage(1), autograd_costs.stage(1)
    assert middle_autograd.backward_weight - middle_fused.backward_weight == pytest.approx(by_hand, rel=1e-9)
    assert middle_autograd.backward - middle_fused.backward == pytest.approx(by_hand, rel=1e-9)
    assert middle_autograd.forward == middle_fused.forward
    assert middle_autograd.backward_input == middle_fused.backward_input
    # where the step goes counts it as compute (the parts add up to what the cost model runs)
    parts = stage_time_parts(LLAMA, H100, autograd)[1].compute - stage_time_parts(LLAMA, H100, layout)[1].compute
    assert parts == pytest.approx(by_hand / 2, rel=1e-9)  # one chunk's share
    # one microbatch: nothing to add to; ZeRO-3 without pipelining accumulates the rank's 1/(dp·cp) shard only
    single = replace(autograd, microbatches=1)
    assert build_cost_model(LLAMA, H100, single).stage(1) == build_cost_model(
        LLAMA, H100, replace(single, grad_accumulation=GradAccumulation.FUSED)).stage(1)
    fsdp = Layout(dp=8, zero=ZeroStage.PARAMETERS, microbatches=4, grad_accumulation=GradAccumulation.AUTOGRAD)
    extra = (build_cost_model(LLAMA, H100, fsdp).stage(0).backward_weight
             - build_cost_model(LLAMA, H100, replace(fsdp, grad_accumulation=GradAccumulation.FUSED))
             .stage(0).backward_weight)
    whole = stage_params(LLAMA, 0, 1, LLAMA.layers, 0)
    assert extra == pytest.approx(3 * 4 * whole / 8 / H100.stream_bandwidth * 3 / 4, rel=1e-9)


def test_grad_accumulation_flag_reaches_the_step():
    import json

    from pipesim.cli.main import main

    def step(*extra):
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["simulate", "--model", "llama2-7b", "--pp", "2", "--mb", "8", "--json", *extra]) == 0
        return json.loads(out.getvalue())["model_report"]["step_time_s"]

    assert step("--grad-accumulation", "autograd") > step() == step("--grad-accumulation", "fused")


def test_overlapped_gradient_reduce_and_parameter_gather_expose_what_the_passes_do_not_hide():
    """--overlap-grad-reduce: a stage's data-parallel reduce runs in buckets beside its last backward and then
    asynchronously beside whatever follows, but for the bucket the backward fills last (a share ℓ of the stage:
    grad_buckets), reduced after it: the REDUCE_GRAD holds the rank σ·(1 − ℓ)·c (the SMs its kernels take) and
    hands max(σ·r, r − x) − σ·r + ℓ·c to the rank's channel, r = (1 − ℓ)·c, so alone the two expose
    max(σ·r, r − x) + ℓ·c (comm.contended_overlap); Megatron buckets the first stage alone, every other stage is
    one bucket (ℓ = 1). --overlap-param-gather: the distributed optimizer's all-gather beside the next step's first
    forward through the rank's chunks, max(σ·g', g' − f), but for the first bucket (b of the rank holding the
    first stage), gathered before it: b·g + that of g' = (1 − b)·g. The passes themselves do not change."""
    from pipesim.analytic.comm import dp_grad_sync, optimizer_step_time
    from pipesim.analytic.kernels import grad_buffer_zeroing_time
    from pipesim.analytic.layout import ZeroStage
    from pipesim.analytic.to_costs import rank_params, stage_breakdown, stage_last_bucket

    base = Layout(tp=8, dp=64, pp=2, chunks=2, microbatches=8, sequence_parallel=True, zero=ZeroStage.OPTIMIZER,
                  overlap_p2p=True)
    over = replace(base, overlap_grad_reduce=True, overlap_param_gather=True)
    plain, overlapped = build_cost_model(LLAMA, H100, base), build_cost_model(LLAMA, H100, over)
    sigma = H100.comm_sm_share
    parts = stage_time_parts(LLAMA, H100, over)
    shares = [stage_last_bucket(LLAMA, over, s) for s in range(base.num_stages)]
    assert 0 < shares[0] < 0.5 and shares[1:] == [1.0] * (base.num_stages - 1)
    for s in range(base.num_stages):
        c = dp_grad_sync(stage_breakdown(LLAMA, base, s).params, base, H100).reduce
        x = parts[s].backward_pass  # one chunk's backward; stage values are a rank's share, v = 2 chunks of it
        rest, tail = (1 - shares[s]) * c, shares[s] * c
        assert plain.stage(s).reduce_grad == pytest.approx(2 * c, rel=1e-12)
        assert plain.stage(s).reduce_grad_async == 0.0
        assert overlapped.stage(s).reduce_grad == pytest.approx(2 * sigma * rest, rel=1e-12, abs=1e-15)
        alone = overlapped.stage(s).reduce_grad + overlapped.stage(s).reduce_grad_async
        assert alone == pytest.approx(2 * (max(sigma * rest, rest - x) + tail), rel=1e-12)
        assert alone <= plain.stage(s).reduce_grad
        assert (overlapped.stage(s).forward, overlapped.stage(s).backward) == (plain.stage(s).forward,
                                                                               plain.stage(s).backward)
    shape = PipelineShape(2, 8, 2)
    step_plain, step_over = [], []
    held = rank_params(LLAMA, base, shape)
    for rank, params in enumerate(held):
        gather = dp_grad_sync(params, base, H100).gather
        first = gather * stage_breakdown(LLAMA, base, 0).params * shares[0] / params if rank == 0 else 0.0
        forward = sum(parts[s].forward_pass for s in shape.rank_slices(rank))
        cleared = grad_buffer_zeroing_time(params, base, H100)  # the next step's gradient buffer
        step_plain.append(optimizer_step_time(params, base, H100) + gather + cleared)
        rest = gather - first
        step_over.append(optimizer_step_time(params, base, H100) + first + max(sigma * rest, rest - forward)
                         + cleared)
    assert plain.optimizer_step == pytest.approx(max(step_plain), rel=1e-12)
    assert overlapped.optimizer_step == pytest.approx(max(step_over), rel=1e-12)
    # a network too slow for the backward to hide: the rest of the first stage's reduce waits after it, and its
    # last bucket after that
    slow = replace(H100, inter_node_bandwidth=H100.inter_node_bandwidth / 100)
    c = dp_grad_sync(stage_breakdown(LLAMA, base, 0).params, base, slow).reduce
    x = stage_time_parts(LLAMA, slow, over)[0].backward_pass
    rest, tail = (1 - shares[0]) * c, shares[0] * c
    waits = build_cost_model(LLAMA, slow, over).stage(0)
    assert rest > x and waits.reduce_grad + waits.reduce_grad_async == pytest.approx(2 * (rest - x + tail))
    assert waits.reduce_grad_async == pytest.approx(2 * (rest - x - sigma * rest + tail))


def test_overlapped_parameter_gather_needs_a_sharded_optimizer():
    from pipesim.errors import PipesimError

    with pytest.raises(PipesimError, match=r"--overlap-param-gather .* add --distributed-optimizer"):
        Layout(dp=8, overlap_param_gather=True)


# --- nanotron's asynchronous TP: the all-gathers beside the local shard's GEMM ---------------------------------


@pytest.mark.parametrize("recompute", [Recompute.NONE, Recompute.FULL])
def test_local_shard_overlap_hides_what_the_shards_gemms_cover_by_hand(recompute):
    from pipesim.analytic.comm import CollectiveOp, collective_time
    from pipesim.analytic.kernels import gemm_time

    model = replace(MODEL_PRESETS["llama3.2-1b"], seq_len=4096)
    chip = CHIP_PRESETS["h100-sxm"]
    base = Layout(tp=2, pp=1, microbatches=1, sequence_parallel=True, recompute=recompute,
                  overlap_tp_dgrad=False)
    local = replace(base, overlap_tp_local_shard=True)
    # by hand: 4096 tokens, 2048 of them the rank's own; one all-gather moves the b·s·h BF16 activation
    tokens, rows, h, t = 4096, 2048, model.hidden, 2
    gather = collective_time(CollectiveOp.ALL_GATHER, 2 * tokens * h, t, chip, t)
    sigma = chip.comm_sm_share
    # forward: QKV (h → (h + 2·kv)/t) and the fused gate-and-up (h → 2·ffn/t) on the rank's 2048 rows
    column = [gemm_time(rows, (h + 2 * model.kv_dim) // t, h, chip, Precision.BF16),
              gemm_time(rows, 2 * model.ffn_hidden // t, h, chip, Precision.BF16)]
    # backward: the output projection's (h/t → h) and the down projection's (ffn/t → h) input gradients
    row = [gemm_time(rows, h // t, h, chip, Precision.BF16), gemm_time(rows, model.ffn_hidden // t, h, chip,
                                                                        Precision.BF16)]
    hidden_fwd = sum(gather - max(sigma * gather, gather - g) for g in column)
    hidden_bwd = sum(gather - max(sigma * gather, gather - g) for g in row)
    assert 0 < hidden_fwd < 2 * gather and 0 < hidden_bwd < 2 * gather
    if recompute is Recompute.FULL:
        hidden_bwd += hidden_fwd  # the recomputed forward gathers again, beside the same GEMMs
    before, after = stage_time_parts(model, chip, base)[0], stage_time_parts(model, chip, local)[0]
    assert before.exposed_comm - after.exposed_comm == pytest.approx(model.layers * (hidden_fwd + hidden_bwd))
    assert after.compute == before.compute


def test_local_shard_overlap_needs_gathers_and_is_not_async_tp():
    assert Layout(tp=2, overlap_tp_local_shard=True).inert_flag_notes[-1].startswith("--overlap-tp-local-shard "
                                                                                      "changes nothing")
    with pytest.raises(Exception, match="keep one"):
        Layout(tp=2, sequence_parallel=True, async_tp=True, overlap_tp_local_shard=True)


def test_pytorchs_loss_over_vocabulary_shards_is_loss_parallel_by_hand():
    """--loss pytorch at tp > 1 is torch's loss_parallel (torchtitan's loss under tp): the log-softmax as eager ops,
    38 bytes a logit each way, 12 held beyond the kept log-probabilities; at tp 1, ATen's fused log-softmax."""
    from pipesim.analytic.activations import (
        LOSS_PARALLEL_TRANSIENT_BYTES,
        LOSS_TRANSIENT_BYTES,
        loss_transient_bytes,
    )
    from pipesim.analytic.kernels import CROSS_ENTROPY_BYTES, LOSS_PARALLEL_BYTES, cross_entropy_bytes, head_times
    from pipesim.analytic.layout import LossKernel

    model = MODEL_PRESETS["llama3.1-8b"].with_shape(8192, 2)
    h100 = CHIP_PRESETS["h100-sxm"]
    sharded, whole = Layout(tp=8, loss=LossKernel.PYTORCH), Layout(loss=LossKernel.PYTORCH)
    assert sharded.torch_loss_parallel and not whole.torch_loss_parallel
    assert not Layout(tp=8, loss=LossKernel.GATHERED).torch_loss_parallel  # a gathered loss is ATen's, whole
    assert cross_entropy_bytes(sharded) == LOSS_PARALLEL_BYTES == (38, 38)
    assert cross_entropy_bytes(whole) == CROSS_ENTROPY_BYTES[LossKernel.PYTORCH] == (22, 22)
    logits = 8192 * 2 * model.vocab / 8
    assert loss_transient_bytes(model, sharded) == pytest.approx(LOSS_PARALLEL_TRANSIENT_BYTES * logits)
    assert LOSS_PARALLEL_TRANSIENT_BYTES - LOSS_TRANSIENT_BYTES[LossKernel.PYTORCH] == 4
    # against Megatron's vocabulary-parallel loss on the same shards: the same forward bytes (38), 24 more backward
    megatron = head_times(model, Layout(tp=8), h100)
    torch_lp = head_times(model, sharded, h100)
    assert torch_lp.forward == pytest.approx(megatron.forward)
    assert torch_lp.backward_input - megatron.backward_input == pytest.approx(24 * logits / h100.stream_bandwidth)


def test_fsdp2_copies_each_gathered_layer_out_on_the_compute_stream_by_hand():
    """PyTorch's FSDP2 (fully_shard) gathers a layer into one flat buffer and copies it into the parameters on the
    compute stream (foreach_all_gather_copy_out): read and write the gathered bytes, before the forward and again
    before the backward under ZeRO-3; FSDP1's flat parameters are views of the buffer. Under pipelining a stage
    gathers once a step: nothing per layer."""
    from pipesim.analytic.kernels import FSDP2_COPY_OUT_PASSES, fsdp2_copy_out_bytes, layer_times
    from pipesim.analytic.layout import ZeroCollectives, ZeroStage
    from pipesim.analytic.model_spec import LayerKind
    from pipesim.analytic.params import layer_params
    from pipesim.errors import PipesimError

    model = LLAMA3_8B.with_shape(8192, 2)
    fsdp1 = Layout(dp=8, zero=ZeroStage.PARAMETERS)
    fsdp2 = replace(fsdp1, fsdp2=True)
    gathered = layer_params(model, LayerKind.DENSE) * 2 * FSDP2_COPY_OUT_PASSES  # BF16, read and written
    assert FSDP2_COPY_OUT_PASSES == 2
    assert fsdp2_copy_out_bytes(model, fsdp2) == (gathered, gathered)
    assert fsdp2_copy_out_bytes(model, fsdp1) == (0.0, 0.0)
    one, two = layer_times(model, fsdp1, H100), layer_times(model, fsdp2, H100)
    assert two.forward - one.forward == pytest.approx(gathered / H100.stream_bandwidth)
    assert two.backward_input - one.backward_input == pytest.approx(gathered / H100.stream_bandwidth)
    assert two.backward_weight == one.backward_weight and two.recompute == one.recompute
    # a recomputed forward finds its layer gathered already: its recompute carries no copy-out
    full = layer_times(model, replace(fsdp2, recompute=Recompute.FULL), H100)
    assert full.recompute == layer_times(model, replace(fsdp1, recompute=Recompute.FULL), H100).recompute
    # FSDP's ZeRO-2 (SHARD_GRAD_OP) keeps the forward's gather for the backward: one copy-out
    zero2 = replace(fsdp2, zero=ZeroStage.GRADIENTS, zero_collectives=ZeroCollectives.PER_LAYER)
    assert fsdp2_copy_out_bytes(model, zero2) == (gathered, 0.0)
    assert fsdp2_copy_out_bytes(model, replace(fsdp2, pp=2)) == (0.0, 0.0)
    with pytest.raises(PipesimError, match="--fsdp2 is PyTorch's fully_shard"):
        Layout(dp=8, fsdp2=True)


def test_torchtitans_fsdp_is_fsdp2_unless_told_otherwise():
    from pipesim.api.simulation import simulate

    run = dict(model="llama3.1-8b", hardware="h100-sxm", pp=1, mb=1, dp=8)
    assert simulate(**run, framework="torchtitan", zero=3).setup.layout.fsdp2
    assert not simulate(**run, framework="torchtitan", zero=3, fsdp2=False).setup.layout.fsdp2
    assert not simulate(**run, framework="torchtitan").setup.layout.fsdp2  # DDP: nothing sharded
    assert not simulate(**run, zero=3).setup.layout.fsdp2 and simulate(**run, zero=3, fsdp2=True).setup.layout.fsdp2
    # under pipelining a stage gathers once a step, and FSDP2 holds each layer's BF16 gradients for its post-backward
    # hook to add into the stage's FP32 accumulators: kept, and not noted as idle
    piped = dict(run, pp=2, mb=8, dp=4, zero=3)
    assert simulate(**piped, framework="torchtitan").setup.layout.fsdp2
    notes = simulate(**piped, fsdp2=True).model_report.layout.inert_flag_notes
    assert not any(note.startswith("--fsdp2") for note in notes)
    # and each note gives the reason that holds for its layout, not all of them
    for layout, reason in ((Layout(dp=1, zero=ZeroStage.PARAMETERS, fsdp2=True), "nothing is sharded"),
                           (Layout(dp=8, zero=ZeroStage.GRADIENTS, fsdp2=True), "ZeRO-2 keeps the weights whole")):
        [note] = [n for n in layout.inert_flag_notes if n.startswith("--fsdp2")]
        assert reason in note and "pipeline" not in note


def test_fsdp2_under_pipelining_holds_a_layers_bf16_gradients_in_the_backward_by_hand():
    """torchtitan's FSDP + PP: a stage's weights stay gathered and its gradients sync once a step, so autograd
    writes each microbatch's BF16 gradients onto a layer's unsharded parameters and the layer's post-backward hook
    adds them into the FP32 accumulators (FSDP2's accumulate_unsharded_grad_if_needed). Llama 3.1 405B at tp 8:
    one layer's 3,187,703,808 parameters (attention 570,425,344, MLP 3 · 16,384 · 53,248, norms 2 · 16,384) over
    8, 2 bytes each, on top of the working set. Not without pipelining (the per-layer reduce-scatter's buffers are
    counted there) nor under FSDP1."""
    from pipesim.analytic.memory_gib import backward_working_set, fsdp2_layer_gradients
    from pipesim.analytic.params import largest_layer_params

    model = MODEL_PRESETS["llama3.1-405b"].with_shape(seq_len=8192, micro_batch=1)
    piped = Layout(tp=8, dp=8, pp=8, microbatches=16, zero=ZeroStage.PARAMETERS, fsdp2=True)
    assert largest_layer_params(model) == 3_187_703_808
    assert fsdp2_layer_gradients(model, piped) == 3_187_703_808 / 8 * 2
    assert backward_working_set(model, piped) - backward_working_set(model, replace(piped, fsdp2=False)) == \
        3_187_703_808 / 8 * 2
    assert fsdp2_layer_gradients(model, replace(piped, pp=1, microbatches=1)) == 0
