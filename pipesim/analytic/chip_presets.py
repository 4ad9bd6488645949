"""Chip presets, each figure from the vendor datasheet or the measurement named beside it.

Bandwidths are one direction per chip (datasheet NVLink figures are bidirectional and are halved here).
Inter-node: one NIC per GPU as in DGX/HGX systems (A100: 200 Gb/s HDR; H100/H200/B200/MI300X: 400 Gb/s).
Memory: HBM capacity in GiB as the driver reports it where that differs from the marketing figure.

Kernel efficiencies (:mod:`pipesim.analytic.kernels`), one per chip and kernel class:

- GEMM: Bekman, "Machine Learning Engineering" (the Maximum Achievable Matmul FLOPS table, BF16, best shape
  of a shape sweep, each shape timed briefly): H100 SXM 792.1 of 989 TFLOP/s (0.80), A100 SXM 267.9 of 312
  (0.86). An 8192³ BF16 product through PyTorch on an H200 (same SMs and clocks as the H100) ran at 788
  TFLOP/s here (0.80). These are ``gemm_efficiency``: a short run's rate; tile and wave quantization are
  modelled separately.
- GEMM overheads (``gemm_tile_overhead``, ``gemm_kernel_overhead``): what a GEMM pays per output tile beyond its
  main loop and per kernel, fitted to OpenXLA's published table of measured H100 BF16 rates
  (``pipesim.validation.gemm_overheads``): 1.2 µs and 5 µs on every Hopper part; B200 1.0 µs and 6.5 µs, from
  the same file's B200 table; 0 on the others (no table).
- ZeRO-3's per-layer collectives (``zero3_overlap_share``, every chip the field's default, 0.25): a quarter of
  their kernels' work is taken to run beside compute, the rest exposed, and what the network takes beyond that
  work runs beside compute taking SMs; fitted to the published FSDP and ZeRO-3 runs: what the fit on every source
  chooses, and the fit without each source but one in turn (:func:`pipesim.analytic.comm.prefetched_overlap`,
  :mod:`pipesim.validation.constants`).
- Sustained clocks (``sustained_clock_ratio``): a training run holds all eight GPUs of a node at the power
  limit for hours, and the tensor cores run at the clock that limit sustains, below the boost clock a short
  benchmark sees. Hugging Face's gpu-fryer (README, reference table: cuBLAS 8192² BF16 products on every GPU of
  an 8×H100 80GB HBM3 node, burned for a minute) sustains ~730 TFLOP/s, against the 792 of a short run →
  0.92 for H100, H200 and H800 (the same die and 700 W limit). A100: NVIDIA computes its HPL peak at the clock
  the A100 sustains at its power limit, 1,305 MHz against the 1,410 MHz boost (G. Lockwood, "Peak FLOPS"
  notes) → 0.93. It scales the GEMM and fused-attention rates, whose benchmarks were short too; not the
  memory-bound kernels (HBM is not clocked down with the SMs).
- Memory-bound kernels PyTorch cannot load vectorised (``strided_memory_efficiency``, ``converting_memory_efficiency``):
  ATen loads an element-wise op vectorised only for contiguous operands of the op's own dtype, and Liger-Kernel's
  published kernel times (:mod:`pipesim.validation.memory_bound_kernels`) measure the rest: a gated activation
  over one fused GEMM's halves at 0.55 of HBM on H100 (every chip's default: no other measurement), the eager
  RMSNorm and RoPE chains through FP32 at 0.70 on H100 (the default) and 0.55 on A100 (the Ampere presets).
- The slowest GPU (``gpu_speed_spread``, every chip the field's default, 0.03): GPUs of one SKU differ in
  speed (Sinha et al. 2022, "Not All GPUs Are Created Equal", SC'22: 8 % average variation, up to 22 %, across
  the GPUs of five clusters) and a synchronous step waits for the slowest of its GPUs, so its compute takes
  ``1 + σ·E[max of n normals]`` times a typical GPU's (:mod:`pipesim.analytic.slowest_gpu`): +4.3 % on 8 GPUs,
  +9.1 % on 512, +11.4 % on 8,192. σ is fitted to the published runs by source left out.
- FP8 GEMM: no cuBLAS FP8 measurement was at hand; Shah et al. 2024 ("FlashAttention-3", abstract) reach
  close to 1.2 PFLOP/s with FP8 on H100, 0.61 of the 1,979 dense FP8 peak, taken as the FP8 tensor-core
  share (0.60) for every chip with FP8 until the slowest-GPU factor above; refit to the published FP8 rows
  with it (``pipesim.validation.constants``), it is 0.65, the field's default. Cross-check: torchtitan's
  Llama 3.1 8B benchmark (benchmarks/llama3_h100_202412_torchtitan.md, Table 1) runs 1.28× faster end to end
  with Float8 linears, which with about 70 % of the time in linears means FP8 GEMMs at ~1.46× the BF16 rate:
  0.58 of the FP8 peak. A bare cuBLAS FP8 product sustains more: gpu-fryer's reference table (README) gives
  ~1,530 TFLOP/s for 8192² FP8 on every GPU of an 8×H100 node burning for a minute, 0.77 of the dense peak,
  where the share at the sustained clock is 0.65 × 0.92 = 0.60: the share carries what a training step's FP8
  linears lose beyond the product (scaling, the recipe's bookkeeping, training shapes), as its doc says.
- Fused attention: Dao 2023 ("FlashAttention-2", abstract and §4.1): 50–73 % of the A100's peak in the
  forward, the backward lower; at 16k tokens and head size 128 the forward and backward together run at 189
  TFLOP/s causal (Figure 4 (d)), 0.61 of the peak → 0.71 forward and 0.57 backward, the backward's rate at 0.8
  of the forward's (0.60 and 0.48 before the figure's shapes were used, the abstract's range's middle, which
  stood for every sequence). H100 and H200: the FlashAttention-2 generation of kernels,
  which the published 2024 runs used (NeMo 24.07 and Llama 3's pre-training predate FlashAttention-3,
  July 2024): Shah et al. 2024 ("FlashAttention-3", abstract) measure FlashAttention-2 at 35 % of the H100's
  peak → 0.35 forward, and the backward at FlashAttention-2's own backward/forward ratio on A100 (0.8)
  → 0.28. FlashAttention-3 itself reaches up to 740 TFLOP/s (75 %) BF16 forward at long sequences, less at
  the 2k–8k causal sequences of training: 0.55 forward, 0.45 backward, the fields' defaults — a chip file
  sets them for a run that uses it. With FA3's constants the H100 rows of the published-runs table came
  out too fast where attention weighs: NeMo's tp = 1 rows −14…−22 % (now −6…−10 %), Llama 3 405B at 131k
  tokens −21 % (now +3 %).
- Fused attention by shape (``attention_shape_rates``, the Hopper presets): the same paper's FlashAttention-2
  rates on H100 at 512–16k tokens and head sizes 64 and 128 (§4.1, Figures 5 and 6) scale the two shares
  above, which stand for 16k tokens at head size 128, to a layer's own sequence and head size
  (:mod:`pipesim.analytic.attention_shapes`): at 4k tokens and head size 128 the forward reaches 0.95 of it,
  at 2k and 64 0.78. The A100 presets (A800 too: the same die) scale theirs by Dao 2023's own A100 figure
  (Figure 4 (c) and (d): causal forward + backward, 512–16k tokens, head sizes 64 and 128; only the combined
  rate is published, so both passes take its ratios): at 2k tokens and head size 128 0.82 of the 16k rate, at
  512 tokens 0.52. Until this release the A100 took one rate for every sequence, which made MosaicML's
  long-sequence rows 15–23 % too slow and its 512-token rows too fast (docs/validation-log.md). Other chips keep
  one rate (no such table at hand).
- Streaming: a device-to-device copy through PyTorch on an H200 moved 4.3 TB/s of 4.8 (0.90); the same
  share is used for every chip.
- Ring collectives (``collective_efficiency``): nccl-tests' bus bandwidth at large sizes on 8×A100 SXM over
  NVLink 3 is 230–250 GB/s of the link's 300 (Alaya New, "NCCL-tests in practice", reference table; other A100
  systems report 200–208: NVIDIA/nccl-tests issues #149, #178) → 0.80 for A100. Inside an H100 node the presets
  carry a measured share per collective and group size instead (``nvlink_collective_shares``: OpenXLA's H100
  collective table, :mod:`pipesim.validation.collective_shares`): an 8-GPU all-reduce 0.90 of NVLink's 450 GB/s,
  an all-gather 0.79, a reduce-scatter 0.74, a mixture-of-experts all-to-all 0.76, pairs of GPUs 0.46–0.73.
  nccl-tests' reference table gives the 8-GPU all-reduce 460–480 GB/s where NVLink SHARP reduces inside the
  switch (NCCL's NVLS algorithm); the measured table's 0.90 is the figure without it, uncertain by that much.
  Across nodes H100/H200 keep 1.0. B200 carries the same table's sm_100 shares of NVLink 5's 900 GB/s
  (0.49–0.72), and GB200 and GB300 the same file's tables of their NVL72 racks (groups of 4–72 GPUs: gathers
  and scatters 0.71–0.79, all-reduces 0.76–1.05). The H100 and B200 tables agree on the groups smaller than a
  node (pairs 0.46–0.62 and 0.50–0.54 of the link, fours 0.64–0.74 and 0.64–0.68), which NCCL runs with the same
  ring kernels on any NVSwitch system, so the A100 and A800 (NVSwitch 2, no table of their own) take the H100's
  shares for those groups and for gathers, scatters and all-to-alls, and keep their measured ring above for the
  8-GPU all-reduce (where the generations differ); the H800 (H100's NVSwitch, fewer links) takes the H100's table.
- Overlapped collectives take SMs (``collective_ctas``, 24 of the chip's ``sm_count``): see
  :func:`pipesim.analytic.comm.contended_overlap`; used for ZeRO-3's per-layer gathers and reduce-scatters.
- Pipeline P2P: Qi et al. 2024 (Table 9) profiled T_comm of one stage-boundary send on A100 SXM: 0.53–0.76 ms
  for the 25–28 MB boundary tensors of their 1.5B/6.2B models inside one node, 47–53 GB/s of NVLink's
  300 GB/s one way (0.16), and 0.38–0.46 ms for 10–13 MB across nodes. A100's ``p2p_efficiency`` is 0.16;
  other chips keep 1.0 (no measurement at hand).
- Pipeline P2P synchronisation (``p2p_sync_overhead``, 0.33 ms per call): Megatron-LM synchronises the device
  after each batched isend/irecv, so the next pass starts with nothing queued. Qi et al.'s runs spend
  1.3–4.8 ms per microbatch more than their own Table 9 profile of the passes and sends (Table 4's step time
  per microbatch); per synchronising call the 16 (model, schedule) cells gave 0.65–2.4 ms, median 1.18, until
  the part of it that is the step waiting for the slowest of its GPUs (``gpu_speed_spread`` above) was taken
  out: −0.2–0.7 ms, median 0.33 at the spread's 0.03 (0.45 at its earlier 0.025, 0.58 at 0.02;
  ``experiments/p2p_sync_overhead.py``). A cost of the host side and the
  software, not of the GPU: every chip takes it (the field's default); ``--overlap-p2p`` (no synchronisation)
  removes it.
- Wave quantization: SM counts from the datasheets; output tiles of 128×128 (Ampere) and 128×256 (Hopper
  wgmma kernels), NVIDIA's "Matrix Multiplication Background User's Guide" for the wave model.
B200 and MI300X have their own GEMM constants (a measured best shape, overheads fitted to OpenXLA's B200 and
MI300X tables) and collective shares (the same source's collective tables); otherwise they take the fields'
defaults (FlashAttention-3-class attention, which on MI300X is above its own measured GEMM rate: no attention
measurement of it was at hand). B200 and GB200 also have a measured FP8 share (Transformer Engine's te.Linear on
an HGX B200) and a sustained clock fitted to the three published Blackwell sources (FP8 runs of NeMo: MLPerf
v4.1's GPT-3 on DGX B200, v5.0's Llama 3.1 405B on GB200 NVL72, v5.1's 405B and 8B on DGX B200); their BF16 rates
meet no published run. MI300X: unvalidated, no published training run of it is in the test table.
"""

from __future__ import annotations

from pipesim.analytic.attention_shapes import (
    A100_FLASH1_SLOWDOWN,
    DAO2023_A100_FLASH2,
    H100_FLASH1_SLOWDOWN,
    AttentionShapeRates,
    benchmark_sweep,
)
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.collective_shares import CollectiveShares
from pipesim.analytic.measured import CollectiveOp

GB = 1e9
TFLOPS = 1e12
# FlashAttention-2 on Hopper: 35 % of peak forward (Shah et al. 2024, abstract), backward at FA2's A100 ratio
# (0.35 · 0.8); the clock sustained at the power limit: gpu-fryer's 8×H100 730 TFLOP/s over a short 792
# and what a training step's BF16 GEMMs reach of that, fitted to the published Hopper runs (0.94:
# pipesim.validation.constants, experiments/validation_loso.py; the module docstring says why). The GEMM
# overheads per output tile and per kernel: fitted to OpenXLA's measured H100 GEMM table
# (pipesim.validation.gemm_overheads, experiments/gemm_overheads.py); the same SMs on every Hopper part.
# FlashAttention-2 on an H100 SXM5 (Shah et al. 2024, "FlashAttention-3", §4.1, Figures 5 and 6: 16k tokens per
# batch, hidden 2048, BF16), TFLOP/s at 512, 1k, 2k, 4k, 8k and 16k tokens: the causal and unmasked forward and
# the unmasked backward (the figures give no causal backward), at head sizes 64 and 128. Only the ratios are
# used, to scale the two efficiencies above to a layer's shape (pipesim.analytic.attention_shapes).
_HOPPER_ATTENTION_SHAPES = AttentionShapeRates(
    forward_causal=((64, benchmark_sweep(180, 229, 262, 284, 295, 299)),
                    (128, benchmark_sweep(191, 260, 298, 319, 333, 335))),
    forward=((64, benchmark_sweep(282, 306, 318, 321, 322, 324)),
             (128, benchmark_sweep(309, 350, 362, 368, 370, 370))),
    backward=((64, benchmark_sweep(198, 238, 264, 279, 287, 291)),
              (128, benchmark_sweep(214, 260, 291, 310, 318, 322))),
    flash1_slowdown=H100_FLASH1_SLOWDOWN)
_HOPPER_KERNELS = {"attention_forward_efficiency": 0.35, "attention_backward_efficiency": 0.28,
                   "attention_shape_rates": _HOPPER_ATTENTION_SHAPES,
                   "sustained_clock_ratio": round(730 / 792, 3), "training_gemm_ratio": 0.94,
                   "gemm_tile_overhead": 1.2e-6, "gemm_kernel_overhead": 5.0e-6}

# Inside an H100 NVSwitch node, the share of NVLink's 450 GB/s (bus bandwidth) each NCCL collective reaches, by
# group size: fitted to OpenXLA's measured H100 collective table (pipesim.validation.collective_shares,
# experiments/collective_shares.py). The parts with H100's NVLink 4 and NVSwitch take it, the H800 too: its NVLink
# is cut to fewer links, and a share is of the part's own link (no table of the H800 at hand).
_HOPPER_NVLINK = CollectiveShares(all_reduce=((2, 0.56), (4, 0.68), (8, 0.90)),
                                  all_gather=((2, 0.62), (4, 0.74), (8, 0.79)),
                                  reduce_scatter=((2, 0.46), (4, 0.64), (8, 0.74)),
                                  all_to_all=((2, 0.73), (4, 0.79), (8, 0.76)))
# The same table's sm_100 entries, of NVLink 5's 900 GB/s (taken as B200's: the table names no GPU model).
_B200_NVLINK = CollectiveShares(all_reduce=((2, 0.54), (4, 0.64), (8, 0.69)),
                                all_gather=((2, 0.50), (4, 0.64), (8, 0.69)),
                                reduce_scatter=((2, 0.53), (4, 0.68), (8, 0.72)),
                                all_to_all=((2, 0.49), (4, 0.67), (8, 0.67)))

# The GB200 and GB300 NVL72 racks: the same file's "sm_100_GB200" and "sm_103" entries (in ROCm's fork of XLA at
# d02afb4), groups of 4 to 72 GPUs of one rack all running at once (pipesim.validation.collective_shares): gathers
# and scatters 0.71-0.79 of NVLink 5, an all-reduce over 8 GPUs 0.94 and over 16-72 about the whole link (1.0-1.05:
# NVLink SHARP reduces in the rack's switches), all-to-alls 0.69-0.75. The HGX B200's eight-GPU board reaches less
# (above): a rack's collectives inside its NVLink domain take the rack's own table.
# The racks' tables start at groups of 4; a pair of GPUs takes the B200 board's measured pair (the same NVLink 5
# and ring kernels: on both measured boards a pair reaches well under a group of four).
def _with_board_pairs(rack: CollectiveShares) -> CollectiveShares:
    board = _B200_NVLINK
    return CollectiveShares(**{op: ((2, board.share(CollectiveOp(op), 2)), *rack.points(CollectiveOp(op)))
                               for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")})


_GB200_NVLINK = _with_board_pairs(CollectiveShares(
    all_reduce=((4, 0.76), (8, 0.94), (16, 1.01), (18, 1.03), (32, 1.05), (36, 1.04), (64, 1.04), (72, 1.01)),
    all_gather=((4, 0.71), (8, 0.75), (16, 0.76), (18, 0.75), (32, 0.77), (36, 0.75), (64, 0.77), (72, 0.74)),
    reduce_scatter=((4, 0.75), (8, 0.78), (16, 0.79), (18, 0.78), (32, 0.79), (36, 0.78), (64, 0.78), (72, 0.77)),
    all_to_all=((4, 0.69), (8, 0.75), (16, 0.74), (18, 0.71), (32, 0.74), (36, 0.70), (64, 0.73), (72, 0.71))))
_GB300_NVLINK = _with_board_pairs(CollectiveShares(
    all_reduce=((4, 0.76), (8, 0.94), (16, 1.03), (18, 1.03), (32, 1.05), (36, 1.04), (64, 1.03), (72, 0.99)),
    all_gather=((4, 0.72), (8, 0.75), (16, 0.77), (18, 0.74), (32, 0.76), (36, 0.75), (64, 0.76), (72, 0.72)),
    reduce_scatter=((4, 0.75), (8, 0.77), (16, 0.78), (18, 0.77), (32, 0.78), (36, 0.77), (64, 0.77), (72, 0.75)),
    all_to_all=((4, 0.69), (8, 0.74), (16, 0.74), (18, 0.71), (32, 0.70), (36, 0.71), (64, 0.71), (72, 0.69))))

# MI300X: OpenXLA's measured gfx942 collective table (as AMD added it to ROCm's fork of XLA), RCCL over the seven
# Infinity Fabric links (448 GB/s one way in all; a pair of GPUs has one 64 GB/s link, a group of four three):
# pipesim.validation.collective_shares. The field is named for NVLink; it is the share of the intra-node link.
_MI300X_XGMI = CollectiveShares(all_reduce=((2, 0.11), (4, 0.31), (8, 0.68)),
                                all_gather=((2, 0.11), (4, 0.30), (8, 0.71)),
                                reduce_scatter=((2, 0.11), (4, 0.29), (8, 0.71)),
                                all_to_all=((2, 0.11), (4, 0.31), (8, 0.66)))

# FP8 GEMMs on a B200, measured: Transformer Engine's te.Linear under fp8_autocast (delayed scaling) ran an
# 8192×8192×8192 forward at 2,377.1 TFLOP/s on an HGX B200 (NVIDIA/TransformerEngine issue #1747, its benchmark
# table), 0.53 of the 4,500 FP8 peak. That time holds the two casts (input and weight: read BF16, write FP8, 403 MB
# at 0.9 of the 8 TB/s, 56 µs) which pipesim counts apart (kernels.quantization_cast_bytes): the GEMM alone
# 407 µs, 2,704 TFLOP/s, 0.601 of the peak. The field's default (0.65, Hopper's FP8 rows) put the Blackwell rows
# 4-9 points further off. A short benchmark's rate: the clock a training run sustains is a separate, fitted factor.
_B200_FP8_SHARE = 0.60
# NVFP4 GEMMs on a B200, measured: torchao's matmul benchmark (pytorch/ao pull request #2427,
# benchmarks/float8/bench_matmul.py --recipe nvfp4, "gpu_name: NVIDIA B200", its printed peaks bf16 2.25e15, fp8
# 4.5e15, fp4 9.0e15) ran an 8192×8192×8192 product of inputs already in NVFP4 at 5.37e15 FLOP/s, 0.597 of the
# dense FP4 peak (BF16 1.42e15 in the same run, 0.631). The casts are counted apart (kernels.NVFP4_CAST_BYTES),
# so the kernel's share is the field. A short benchmark's rate, as the FP8 share is.
_B200_FP4_SHARE = round(5.37e15 / 9.0e15, 3)
# The tensor-core clock a B200 sustains through a training run, as a share of a short benchmark's: fitted to the
# published Blackwell runs by source left out (pipesim.validation.constants: blackwell_sustained_clock)
_BLACKWELL_SUSTAINED = 0.84
# What one NCCL channel moves over NVLink, in NCCL's own cost model (src/graph/tuning.cc, perChMaxRingLL128Bws,
# by architecture): the bound of a send/recv whose communicator is capped at a few CTAs (--cp-comm-ctas).
# Hopper's 36.7 GB/s is the field's default.
_AMPERE_CHANNEL = 20e9
_BLACKWELL_CHANNEL = 40e9
# Fused attention on Blackwell: no preset sets it, so it runs at the field defaults (0.55 forward, 0.45 backward)
# at every sequence, with no shape table: no measured Blackwell table by sequence is at hand (cuDNN's kernels, which
# Transformer Engine calls there). A check on the forward: FlashAttention-4's paper (arXiv 2603.05451, 2026,
# abstract) reaches 1,613 TFLOP/s on a B200 and runs up to 1.3x cuDNN 9.13, so cuDNN's forward is near 1,240 there
# if the two maxima share a shape, 0.55 of the 2,250 dense BF16 peak. Lending the H100's shape profile moves the
# cp 2 rows 1 point of their 13-point gap to cp 1 (experiments/attention_kernel_checks.py): not adopted, an analogy
# and not the cause.
# What every Blackwell preset shares (one tensor-core generation: the B200's measured kernels, the fitted clock):
# the GEMM rate and overheads, the NVLink collective shares, the FP8 and FP4 shares, FP8 weights kept without a
# transpose. Each preset adds its own peaks, memory, links and SM count.
_BLACKWELL_KERNELS = {"gemm_efficiency": round(1652 / 2250, 3), "gemm_tile_overhead": 1.0e-6,
                      "gemm_kernel_overhead": 6.5e-6, "nvlink_collective_shares": _B200_NVLINK,
                      "fp8_weight_transpose": False, "fp8_gemm_efficiency": _B200_FP8_SHARE,
                      "fp4_gemm_efficiency": _B200_FP4_SHARE, "sustained_clock_ratio": _BLACKWELL_SUSTAINED,
                      "p2p_channel_bandwidth": _BLACKWELL_CHANNEL}
_A100_SUSTAINED = round(1305 / 1410, 3)  # the clock NVIDIA's A100 HPL peak assumes at the power limit, over boost
_A100_RING = 240 / 300  # nccl-tests bus bandwidth on 8×A100 SXM (230–250 GB/s) over NVLink 3's 300 GB/s
# FlashAttention-2 on an A100 SXM4 80GB (Dao 2023, Figure 4 (c) and (d), the flash-attention repository's
# assets/flash2_a100_fwd_bwd_benchmark.png: 16k tokens per batch, hidden 2048, BF16), causal forward + backward
# TFLOP/s at 512, 1k, 2k, 4k, 8k and 16k tokens, head sizes 64 and 128. Only a combined figure is published,
# so both passes scale by it (pipesim.analytic.attention_shapes).
_AMPERE_ATTENTION_SHAPES = AttentionShapeRates(forward_causal=DAO2023_A100_FLASH2, flash1_slowdown=A100_FLASH1_SLOWDOWN)
# The two efficiencies stand for that figure's reference shape (16k tokens, head size 128, 189 TFLOP/s forward
# + backward: 0.61 of the 312 peak), split with the backward at 0.8 of the forward's rate as before:
# 3.5 / (1/f + 2.5/(0.8 f)) = 0.61 → f = 0.71 (the paper's abstract: "up to 73 %" forward), b = 0.57.
# Inside an A100 or A800 node (NVLink 3, NVSwitch 2) no measured table is at hand. The two NVSwitch generations
# that have one agree on the groups smaller than a node, which NCCL runs with the same ring kernels on any NVSwitch
# system: pairs of GPUs reach 0.46-0.62 of the link on H100 and 0.50-0.54 on B200, groups of four 0.64-0.74 and
# 0.64-0.68. Those take the H100's shares. The 8-GPU all-reduce is where the generations differ (H100 0.90, B200
# 0.69), and the A100's own is measured (nccl-tests' ring, 0.80; NVSwitch 2 has no NVLink SHARP to reduce in).
_AMPERE_NVLINK = CollectiveShares(all_reduce=((2, 0.56), (4, 0.68), (8, _A100_RING)),
                                  all_gather=_HOPPER_NVLINK.all_gather,
                                  reduce_scatter=_HOPPER_NVLINK.reduce_scatter,
                                  all_to_all=_HOPPER_NVLINK.all_to_all)
_AMPERE_KERNELS = {"attention_forward_efficiency": 0.71, "attention_backward_efficiency": 0.57,
                   "attention_shape_rates": _AMPERE_ATTENTION_SHAPES, "sustained_clock_ratio": _A100_SUSTAINED,
                   "gemm_efficiency": 0.86, "p2p_efficiency": 0.16, "p2p_channel_bandwidth": _AMPERE_CHANNEL,
                   "collective_efficiency": _A100_RING, "nvlink_collective_shares": _AMPERE_NVLINK,
                   "converting_memory_efficiency": 0.55}

_PRESETS = [
    # NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB): BF16 312 TFLOPS dense (624 with sparsity);
    # 80GB HBM2e (81920 MiB); 2,039 GB/s; NVLink 600 GB/s bidirectional; 108 SMs; no FP8.
    ChipSpec("a100-80gb", 312 * TFLOPS, 80.0, 2039 * GB, 300 * GB, 25 * GB, sm_count=108, gemm_tile=(128, 128),
             **_AMPERE_KERNELS),
    # NVIDIA A100 Tensor Core GPU datasheet (SXM 40GB): the 80GB part's compute, NVLink and SMs; 40GB HBM2
    # (40960 MiB); 1,555 GB/s. Inter-node as MosaicML's A100 40GB table states it: 1600 Gbps per 8-GPU node.
    ChipSpec("a100-40gb", 312 * TFLOPS, 40.0, 1555 * GB, 300 * GB, 25 * GB, sm_count=108, gemm_tile=(128, 128),
             **_AMPERE_KERNELS),
    # NVIDIA A800 SXM4 80GB (the export variant of the A100): the A100 80GB's die, clocks, HBM2e and SMs, NVLink
    # cut to 400 GB/s bidirectional → 200 GB/s one way (NVIDIA's A800 product brief; the same cut as the H800's
    # from the H100); inter-node as the FlagPerf DGX A800 hosts state it: 200 Gb/s InfiniBand per GPU. Kernel
    # and link-efficiency constants: the A100's.
    ChipSpec("a800-80gb", 312 * TFLOPS, 80.0, 2039 * GB, 200 * GB, 25 * GB, sm_count=108, gemm_tile=(128, 128),
             **_AMPERE_KERNELS),
    # NVIDIA H100 datasheet (SXM): BF16 1,979 TFLOPS with sparsity → 989.4 dense, FP8 3,958 → 1,979 dense;
    # 80GB HBM3 (nvidia-smi 81559 MiB = 79.6 GiB); 3.35 TB/s; NVLink 900 GB/s bidirectional; 132 SMs.
    ChipSpec("h100-sxm", 989.4 * TFLOPS, 79.6, 3350 * GB, 450 * GB, 50 * GB, fp8_peak_flops=1979 * TFLOPS,
             nvlink_collective_shares=_HOPPER_NVLINK, **_HOPPER_KERNELS),
    # Meta's Grand Teton H100 (torchtitan, benchmarks/llama3_h100_202412_torchtitan.md, "Hardware"): SXM H100
    # with 96GB HBM2e at 2.4 TB/s, run at a 500 W power limit, NVLink within the 8-GPU host, 400 Gb/s RDMA per
    # GPU. Its peak is "between SXM and NVL" (the file's footnote 2), not published: the middle of the two
    # datasheet figures is taken, the point estimate "between" gives (SXM 989.4 BF16 / 1,979 FP8 dense at 700 W;
    # H100 NVL 835.5 / 1,670.5 dense at 350-400 W, H100 datasheet: 1,671 / 3,341 with sparsity), uncertain by
    # ±8 % either way; the SXM figures were used before, an upper bound. 96GB taken as 96 GiB (no nvidia-smi
    # reading at hand).
    ChipSpec("h100-96gb-hbm2e", (989.4 + 835.5) / 2 * TFLOPS, 96.0, 2400 * GB, 450 * GB, 50 * GB,
             fp8_peak_flops=(1979 + 1670.5) / 2 * TFLOPS, nvlink_collective_shares=_HOPPER_NVLINK,
             **_HOPPER_KERNELS),
    # NVIDIA H800 SXM (the export variant of the H100): the H100 SXM's die, clocks and HBM3 (80GB, 3.35 TB/s,
    # 989.4 BF16 / 1,979 FP8 dense TFLOPS), NVLink cut to 400 GB/s bidirectional → 200 GB/s one way (vendor
    # briefings of the part, as the DeepSeek-V3 report's §3.2.2 discussion of its "NVLink (160 GB/s)" achieved
    # and "IB (50 GB/s)" reflects); one 400 Gb/s InfiniBand NIC per GPU (DeepSeek-V3 report §3.1: 8 GPUs per
    # node, IB across nodes) → 50 GB/s. Kernel constants: the H100's (same SMs).
    ChipSpec("h800", 989.4 * TFLOPS, 79.6, 3350 * GB, 200 * GB, 50 * GB, fp8_peak_flops=1979 * TFLOPS,
             nvlink_collective_shares=_HOPPER_NVLINK, **_HOPPER_KERNELS),
    # NVIDIA H200 datasheet (SXM): the H100's compute; 141GB HBM3e (nvidia-smi 143771 MiB = 140.4 GiB);
    # 4.8 TB/s; NVLink 900 GB/s bidirectional; 400 Gb/s NICs.
    ChipSpec("h200", 989.4 * TFLOPS, 140.4, 4800 * GB, 450 * GB, 50 * GB, fp8_peak_flops=1979 * TFLOPS,
             nvlink_collective_shares=_HOPPER_NVLINK, **_HOPPER_KERNELS),
    # NVIDIA HGX B200 datasheet: 8 GPUs give FP16/BF16 36 PFLOPS sparse → 2.25 PFLOPS dense per GPU, FP8
    # 72 → 4.5 PFLOPS; 1.44 TB HBM3e total → 180 GB each: 183,359 MiB (179.1 GiB) as MLPerf Training v5.1's B200
    # system descriptions give it (e.g. Nebius/systems/nebius_b200_n1.json); 64 TB/s → 8 TB/s each;
    # NVLink 5 1.8 TB/s bidirectional per GPU; 148 SMs. DGX B200: 8× ConnectX-7 400 Gb/s. GEMM: cuBLAS's best
    # measured BF16 shape on a B200, 1,652 TFLOP/s at 4096×8192×8192 (pyptx.dev "Performance", its cuBLAS
    # column), 0.734 of the peak; the per-tile and per-kernel overheads fitted to OpenXLA's measured sm_100 table
    # at that rate (pipesim.validation.gemm_overheads: 1.0 µs, 6.5 µs). Collectives inside the node: OpenXLA's
    # sm_100 collective table (pipesim.validation.collective_shares), 0.50–0.72 of NVLink 5. FP8 GEMMs in any
    # layout (sm_100): FP8 parameters keep no transpose and casts write none (fp8_weight_transpose, Transformer
    # Engine's quantizer). FP8 GEMMs: _B200_FP8_SHARE above. NVFP4: 144 PFLOPS with sparsity for DGX B200's 8
    # GPUs → 9 PFLOPS dense each (the peak torchao prints), at _B200_FP4_SHARE. The sustained clock: fitted to the
    # published Blackwell runs (pipesim.validation.constants), no burn-in measurement of a B200 being at hand.
    ChipSpec("b200", 2250 * TFLOPS, 179.1, 8000 * GB, 900 * GB, 50 * GB, fp8_peak_flops=4500 * TFLOPS,
             fp4_peak_flops=9000 * TFLOPS, sm_count=148, **_BLACKWELL_KERNELS),
    # NVIDIA GB200 NVL72 (the Blackwell GPU of a Grace-Blackwell superchip, 72 to an NVLink domain): the B200's die
    # at 1,200 W, so FP16/BF16 2.5 PFLOPS dense and FP8 5 PFLOPS (NVIDIA's Blackwell figures for the GB200 variant,
    # as G. Lockwood's B200 notes tabulate them: 2,500 / 5,000 dense against the HGX B200's 2,250 / 4,500 at
    # 1,000 W); 8 TB/s HBM3e; MLPerf Training v5.0's system description of NVIDIA's Tyche (8× GB200 NVL72,
    # NVIDIA/systems/tyche_ngpu512_ngc25.04_nemo.json): 189,471 MiB per GPU (185.0 GiB), "NVLINK Gen5 1800 GB/s +
    # NVSWITCH Gen5" (900 GB/s one way, every GPU of the rack's 72 through the switches: node_size 72), 4 GPUs
    # and 4× ConnectX-7 NDR 400 Gb/s per compute tray (50 GB/s per GPU). Kernel constants: the B200's (same die,
    # same SM count, and the same share of each peak). NVFP4: GB200 NVL72's 1,440 PFLOPS with sparsity over 72
    # GPUs → 10 PFLOPS dense each. Collectives inside the domain: the B200's 8-GPU shares,
    # for groups of any size up to 72 (no measured table beyond 8).
    ChipSpec("gb200", 2500 * TFLOPS, 185.0, 8000 * GB, 900 * GB, 50 * GB, fp8_peak_flops=5000 * TFLOPS,
             fp4_peak_flops=10000 * TFLOPS, node_size=72, host_gpus=4, sm_count=148,
             **(_BLACKWELL_KERNELS | {"nvlink_collective_shares": _GB200_NVLINK})),
    # NVIDIA Blackwell Ultra in an HGX B300 node: the B200's tensor-core rates in BF16 (2.25 PFLOPS dense) and FP8
    # (4.5), FP4 raised to 13.5 PFLOPS dense (NVIDIA's HGX B300 figures, 36 / 72 PFLOPS with sparsity and 108
    # PFLOPS dense FP4 for 8 GPUs; third parties give 13-14 PF), 8 TB/s HBM3e, NVLink 5 at 1.8 TB/s bidirectional,
    # 160 SMs (Blackwell Ultra's, against the B200's 148). MLPerf Training v5.1's system description of Nebius's
    # B300 node (mlcommons/training_results_v5.1, Nebius/systems/nebius_b300_n1.json): "B300-SXM-270GB", 275,040
    # MiB per GPU (268.6 GiB), "8x ConnectX-8 IB XDR 800Gb/s" (100 GB/s per GPU), "B300 TGP 1100W". Kernel shares
    # and overheads, collective shares, the FP8 and FP4 GEMM shares and the sustained clock: the B200's, the same
    # tensor-core generation. Written before any B300 run was in pipesim's table (mlperf_v51_blackwell_ultra came
    # after); its doubled softmax-exponent rate (NVIDIA's "2x attention" for Blackwell Ultra) is not in the attention
    # rates.
    ChipSpec("b300", 2250 * TFLOPS, 268.6, 8000 * GB, 900 * GB, 100 * GB, fp8_peak_flops=4500 * TFLOPS,
             fp4_peak_flops=13500 * TFLOPS, sm_count=160, **_BLACKWELL_KERNELS),
    # NVIDIA GB300 NVL72 (Blackwell Ultra in a Grace-Blackwell rack, 72 to an NVLink domain): 1,080 PFLOPS dense
    # FP4, 360 FP8 and 180 BF16 for the rack (NVIDIA's GB300 NVL72 figures) → 15, 5 and 2.5 PFLOPS per GPU; 8 TB/s
    # HBM3e. MLPerf Training v5.1's system description of NVIDIA's Theia (8× GB300 NVL72,
    # NVIDIA/systems/theia_ngpu512_ngc25.09_nemo.json): 284,208 MiB per GPU (277.5 GiB), "NVLINK Gen5 1800 GB/s +
    # NVSWITCH Gen5", 4 GPUs and "4x ConnectX-8 IB XDR 800 Gb/s" per compute tray (100 GB/s per GPU). The rest
    # as the b300 preset above.
    ChipSpec("gb300", 2500 * TFLOPS, 277.5, 8000 * GB, 900 * GB, 100 * GB, fp8_peak_flops=5000 * TFLOPS,
             fp4_peak_flops=15000 * TFLOPS, node_size=72, host_gpus=4, sm_count=160,
             **(_BLACKWELL_KERNELS | {"nvlink_collective_shares": _GB300_NVLINK})),
    # AMD Instinct MI300X datasheet: BF16 1307.4 TFLOPS dense (2614.9 sparse), FP8 2614.9 dense; 192 GB HBM3;
    # 5.3 TB/s; Infinity Fabric 896 GB/s aggregate bidirectional peer bandwidth (7 links × 128 GB/s) → 448 GB/s
    # one direction for a ring that uses all links; 304 compute units. 400 Gb/s NIC per GPU. RCCL enables LL128
    # only on MI200 (gfx90a) with its tuning table (RCCL's src/graph/tuning.cc), so MI300X rings run Simple.
    # GEMM: OpenXLA's measured gfx942 table (pipesim.validation.gemm_overheads): its best BF16 shape, 583 TFLOP/s
    # at 4096³ (0.446 of the peak; the table stops at 4096, larger shapes may reach about a tenth more), with
    # 128×128 output tiles and 2.6 µs per tile fitted at that rate (no per-kernel cost). Collectives inside the
    # node: the same source's collective table, 0.11 (pairs) to 0.71 (all eight) of the 448 GB/s.
    ChipSpec("mi300x", 1307.4 * TFLOPS, 192.0, 5300 * GB, 448 * GB, 50 * GB, fp8_peak_flops=2614.9 * TFLOPS,
             sm_count=304, ll128_bandwidth_share=0.0, gemm_efficiency=round(583.1 / 1307.4, 3),
             gemm_tile=(128, 128), gemm_tile_overhead=2.6e-6, gemm_kernel_overhead=0.0,
             nvlink_collective_shares=_MI300X_XGMI),
]

CHIP_PRESETS: dict[str, ChipSpec] = {c.name: c for c in _PRESETS}
