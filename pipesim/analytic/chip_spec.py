"""What it runs on: an accelerator's compute, memory and links (ChipSpec), loaded from a preset or a file.

Link bandwidths are **one direction, per chip**, in bytes/s: a ring collective or a P2P send moves data one
way per link at a time, so that is the figure every formula in :mod:`pipesim.analytic.comm` divides by.
Datasheets quote NVLink as bidirectional totals (A100 600 GB/s = 300 GB/s each way); presets halve them.

Kernel efficiencies (one constant per chip and kernel class, each preset citing its measurement; see
:mod:`pipesim.analytic.kernels`): ``gemm_efficiency`` (a large GEMM's share of peak), the fused attention
forward/backward shares, ``memory_efficiency`` (a streaming kernel's share of HBM bandwidth), and the SM
count and GEMM tile for wave quantization. ``achievable_fraction``, when set (``--achievable-fraction``),
replaces all of that by one fraction of peak for every FLOP, element-wise work folded in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from pipesim.analytic.attention_shapes import AttentionShapeRates, parse_attention_shape_rates
from pipesim.analytic.collective_shares import CollectiveShares, parse_collective_shares
from pipesim.analytic.layout import Precision
from pipesim.analytic.measured import MeasuredTables, parse_measured, parse_provenance
from pipesim.analytic.slowest_gpu import MAX_SPREAD
from pipesim.analytic.spec_fields import Field, Kind, parse_fields
from pipesim.errors import PipesimError

FIELDS: tuple[Field, ...] = (
    Field("name", Kind.TEXT, "", "shown in reports", default="the file name"),
    Field("peak_flops", Kind.FLOAT, "FLOP/s", "dense BF16 tensor-core peak (no sparsity)", required=True, low=0,
          low_open=True),
    Field("memory_gib", Kind.FLOAT, "GiB", "usable HBM per chip", required=True, low=0, low_open=True),
    Field("hbm_bandwidth", Kind.FLOAT, "bytes/s", "HBM bandwidth", required=True, low=0, low_open=True),
    Field("intra_node_bandwidth", Kind.FLOAT, "bytes/s", "per chip, one direction, inside a node (NVLink)",
          required=True, low=0, low_open=True),
    Field("inter_node_bandwidth", Kind.FLOAT, "bytes/s", "per chip, one direction, between nodes (NIC)",
          required=True, low=0, low_open=True),
    Field("node_size", Kind.INT, "chips", "chips sharing the intra-node link", default=8, low=1),
    Field("host_gpus", Kind.INT, "chips", "chips per host, what a launcher's --nproc-per-node counts, where it is "
          "fewer than node_size (GB200 NVL72: 4 per compute tray, 72 on one NVLink domain)", default="node_size",
          low=1),
    Field("link_latency", Kind.FLOAT, "s", "per P2P transfer (pipeline and ring-attention sends)", default=10e-6,
          low=0),
    Field("collective_base_latency", Kind.FLOAT, "s", "a ring collective's fixed latency (NCCL's tuning model, "
          "Simple protocol)", default=8.4e-6, low=0),
    Field("nvlink_hop_latency", Kind.FLOAT, "s", "a ring collective's latency per step inside a node",
          default=3.4e-6, low=0),
    Field("network_hop_latency", Kind.FLOAT, "s", "a ring collective's latency per step between nodes",
          default=9.6e-6, low=0),
    Field("ll128_base_latency", Kind.FLOAT, "s", "a ring collective's fixed latency with NCCL's LL128 protocol "
          "(its tuning model)", default=10.0e-6, low=0),
    Field("ll128_nvlink_hop_latency", Kind.FLOAT, "s", "LL128: latency per ring step inside a node",
          default=1.9e-6, low=0),
    Field("ll128_network_hop_latency", Kind.FLOAT, "s", "LL128: latency per ring step between nodes",
          default=4.0e-6, low=0),
    Field("ll128_bandwidth_share", Kind.FLOAT, "fraction", "share of the Simple protocol's bandwidth LL128 "
          "reaches (NCCL's model: 120 of every 128 bytes are data); 0: the collective library has no LL128 "
          "(RCCL on MI300X)", default=0.92, low=0, high=1),
    Field("collective_efficiency", Kind.FLOAT, "fraction", "share of the link bandwidth a ring collective "
          "reaches (nccl-tests' bus bandwidth over the link's); inside a node nvlink_collective_shares replaces it "
          "where the chip has them", default=1.0, low=0, high=1, low_open=True),
    Field("p2p_efficiency", Kind.FLOAT, "fraction", "share of the link bandwidth a send/recv inside a node reaches "
          "(pipeline boundaries, ring-attention hops)",
          default=1.0, low=0, high=1, low_open=True),
    Field("p2p_channel_bandwidth", Kind.FLOAT, "bytes/s", "what one NCCL channel (one CTA) of a send/recv moves "
          "inside a node, the bound of a group whose CTAs are capped (--cp-comm-ctas); NCCL's own per-channel "
          "figure (src/graph/tuning.cc, perChMaxRingLL128Bws: Ampere 20, Hopper 36.7, Blackwell 40 GB/s)",
          default=36.7e9, low=0, low_open=True),
    Field("p2p_sync_overhead", Kind.FLOAT, "s", "device idle time per synchronising pipeline P2P call (blocking "
          "sends: Megatron-LM's batched isend/irecv then a device synchronize); unused with --overlap-p2p",
          default=0.33e-3, low=0),
    Field("host_kernel_overhead", Kind.FLOAT, "s", "host CPU time to issue one kernel (framework dispatch and "
          "cudaLaunchKernel): a pass is never shorter than its kernels' issue time", default=10e-6, low=0),
    Field("elementwise_backward_ratio", Kind.FLOAT, "ratio", "backward over forward time of the memory-bound "
          "kernels (norms, activations, residual adds)", default=1.0, low=0, low_open=True),
    Field("fp8_peak_flops", Kind.FLOAT, "FLOP/s", "dense FP8 peak; absent: the chip has no FP8 (--fp8 refused)",
          low=0, low_open=True),
    Field("fp4_peak_flops", Kind.FLOAT, "FLOP/s", "dense NVFP4 peak (block-scaled FP4 tensor cores); absent: the "
          "chip has none (--fp4 refused)", low=0, low_open=True),
    Field("gemm_efficiency", Kind.FLOAT, "fraction", "share of peak a large GEMM reaches in a short benchmark",
          default=0.8, low=0, high=1, low_open=True),
    Field("fp8_gemm_efficiency", Kind.FLOAT, "fraction", "share of the FP8 peak a large FP8 GEMM reaches",
          default=0.65, low=0, high=1, low_open=True),
    Field("fp4_gemm_efficiency", Kind.FLOAT, "fraction", "share of the NVFP4 peak a large NVFP4 GEMM reaches "
          "(its inputs already quantized)", default=0.6, low=0, high=1, low_open=True),
    Field("attention_forward_efficiency", Kind.FLOAT, "fraction", "fused attention forward, share of peak",
          default=0.55, low=0, high=1, low_open=True),
    Field("attention_backward_efficiency", Kind.FLOAT, "fraction", "fused attention backward, share of peak",
          default=0.45, low=0, high=1, low_open=True),
    Field("sustained_clock_ratio", Kind.FLOAT, "fraction", "tensor-core throughput a training run sustains at "
          "the power limit, over a short benchmark's (scales the GEMM and attention rates, a measured chip's "
          "tables too, not the roofline of --achievable-fraction); pipesim profile measures it with a GEMM burn",
          default=1.0, low=0, high=1, low_open=True),
    Field("training_gemm_ratio", Kind.FLOAT, "fraction", "share of a short benchmark's BF16 GEMM rate (at the "
          "sustained clock) that the GEMMs of a training step reach; fitted to published runs "
          "(pipesim.validation.constants), not measured; not applied to measured tables nor to FP8, whose share "
          "is itself an in-training figure", default=1.0, low=0, high=1, low_open=True),
    Field("gemm_tile_overhead", Kind.FLOAT, "s", "time one SM spends per GEMM output tile beyond its main loop "
          "(filling the pipeline, writing the tile): GEMMs with a short inner dimension K pay it most; fitted to a "
          "published GEMM table (pipesim.validation.gemm_overheads); 0: none", default=0.0, low=0),
    Field("gemm_kernel_overhead", Kind.FLOAT, "s", "time every GEMM kernel takes beyond its tiles (ramp-up and "
          "tail); fitted with gemm_tile_overhead; 0: none", default=0.0, low=0),
    Field("zero3_overlap_share", Kind.FLOAT, "fraction", "share of the kernel work of ZeRO-3's (and FSDP's "
          "ZeRO-2's) per-layer gathers and reduce-scatters (their time at the intra-node link's bandwidth) that "
          "runs beside compute, the rest exposed; what the network takes beyond that work runs beside compute too; "
          "fitted to published FSDP and ZeRO-3 runs (pipesim.validation.constants), not measured", default=0.25,
          low=0, high=1),
    Field("gpu_speed_spread", Kind.FLOAT, "fraction", "relative standard deviation of the speed of GPUs of "
          "this SKU (manufacturing and power management): a synchronous step on n GPUs runs at the slowest's "
          "pace (pipesim.analytic.slowest_gpu); fitted to published runs (pipesim.validation.constants); 0: "
          "every GPU alike", default=0.03, low=0, high=MAX_SPREAD),
    Field("fp8_weight_transpose", Kind.BOOL, "", "whether FP8 GEMMs take only the TN layout (Hopper, Ada), so "
          "FP8 parameters keep a transposed FP8 copy beside their data (--fp8-params both) and every FP8 cast of "
          "an activation writes its transpose too; Blackwell's take any layout, and Transformer Engine then makes "
          "neither (1 byte a parameter, one FP8 write a cast)", default=True),
    Field("memory_efficiency", Kind.FLOAT, "fraction", "share of HBM bandwidth a streaming kernel reaches",
          default=0.9, low=0, high=1, low_open=True),
    Field("strided_memory_efficiency", Kind.FLOAT, "fraction", "share of HBM bandwidth an element-wise kernel "
          "reaches reading the two halves of one tensor (a gated MLP's activation on one fused gate-and-up GEMM's "
          "output), which neither PyTorch's kernels nor compiled ones load vectorised, and eager copies out of "
          "transposed views (taken at most memory_efficiency); measured on H100, the default "
          "(pipesim.validation.memory_bound_kernels)",
          default=0.55, low=0, high=1, low_open=True),
    Field("converting_memory_efficiency", Kind.FLOAT, "fraction", "share of HBM bandwidth the eager RMSNorm and "
          "RoPE chains reach (PyTorch ops through FP32 and back, broadcasting, over rotated or complex views, "
          "which run unvectorised; taken at most memory_efficiency); measured on H100 (the default) and A100 "
          "(pipesim.validation.memory_bound_kernels)", default=0.70, low=0, high=1, low_open=True),
    Field("sm_count", Kind.INT, "SMs", "streaming multiprocessors (compute units), for wave quantization",
          default=132, low=1, high=10_000),
    Field("collective_ctas", Kind.INT, "SMs", "SMs an NCCL collective holds while it runs beside compute (one CTA "
          "per channel; NCCL's CTAs never share an SM with a compute kernel)", default=24, low=0),
    Field("collective_sm_share", Kind.FLOAT, "fraction", "share of the compute's rate a collective takes while it "
          "runs beside it, as pipesim profile measures it (GEMMs timed alone and beside all-reduces); absent: "
          "collective_ctas / sm_count", low=0, high=1),
    Field("gemm_tile", Kind.INT_PAIR, "elements", "GEMM output tile [rows, columns] one SM computes at a time",
          default=(128, 256), low=1, high=4096),
    Field("achievable_fraction", Kind.FLOAT, "fraction", "one share of peak for all work, replacing the "
          "per-kernel model (what --achievable-fraction sets)", low=0, high=1, low_open=True),
    Field("nvlink_collective_shares", Kind.TABLE, "fraction", "share of the intra-node link an all-reduce, "
          "all-gather and reduce-scatter (and optionally a MoE all-to-all) inside one node reach, by group size "
          "({all_reduce: {2: s, 8: s}, all_gather: ..., reduce_scatter: ..., all_to_all: ...}; "
          "pipesim/analytic/collective_shares.py); absent: collective_efficiency for all (the all-to-all: the "
          "whole link)", parse=parse_collective_shares),
    Field("attention_shape_rates", Kind.TABLE, "FLOP/s", "a fused attention kernel's measured rates by head size "
          "and sequence ({forward_causal: {128: {512: r, 16384: r}, 64: {...}}, forward: {...}, backward: {...}, "
          "backward_causal: {...}}; only ratios are used): the two attention efficiencies scale by the rate at a "
          "layer's shape over the rate at head size 128 and 16k tokens (pipesim/analytic/attention_shapes.py); "
          "absent: one rate at every shape. Optionally flash1_slowdown: {128: {2048: 2.45, ...}}, how many times "
          "longer FlashAttention v1 takes than FlashAttention-2 on the chip (--attention flash1; absent: the "
          "H100's)", parse=parse_attention_shape_rates),
    Field("measured", Kind.TABLE, "", "tables timed by `pipesim profile` (gemm, attention, stream, collectives; "
          "pipesim/analytic/measured.py): the cost model reads them instead of the roofline", parse=parse_measured),
    Field("provenance", Kind.TABLE, "", "where and how the tables were measured (device, versions, date, "
          "command)", parse=parse_provenance),
)


@dataclass(frozen=True)
class ChipSpec:
    """One accelerator and the node it sits in."""

    name: str
    peak_flops: float  # dense BF16 FLOP/s (no structured sparsity)
    memory_gib: float  # usable HBM capacity, GiB
    hbm_bandwidth: float  # bytes/s
    intra_node_bandwidth: float  # bytes/s per chip, one direction (NVLink / Infinity Fabric)
    inter_node_bandwidth: float  # bytes/s per chip, one direction (one NIC per chip)
    node_size: int = 8  # chips sharing the intra-node fabric
    # chips per host (a launcher's --nproc-per-node) where an NVLink domain spans several hosts; None: node_size
    host_gpus: int | None = None
    link_latency: float = 10e-6  # s per P2P transfer (NCCL small-message latency order)
    # A ring collective's latency: NCCL's own cost model (src/graph/tuning.cc, ncclTopoTuneModel), Ring/Simple:
    # base 8.4 µs, 3.4 µs per step on NVLink, 9.6 µs per step on the network (pipesim.analytic.comm.ring_latency)
    collective_base_latency: float = 8.4e-6
    nvlink_hop_latency: float = 3.4e-6
    network_hop_latency: float = 9.6e-6
    # The same model's LL128 protocol (the same tuning.cc table): base 10 µs, 1.9 µs per step on NVLink, 4.0 µs per
    # step on the network, at 0.92 of Simple's bandwidth. NCCL runs each call with the protocol its model predicts
    # fastest, so a ring of hundreds of ranks, whose latency outweighs its bytes, runs LL128
    # (pipesim.analytic.comm.nccl_ring_time). NCCL enables LL128 on NVLink-connected Volta to Blackwell.
    ll128_base_latency: float = 10.0e-6
    ll128_nvlink_hop_latency: float = 1.9e-6
    ll128_network_hop_latency: float = 4.0e-6
    ll128_bandwidth_share: float = 0.92
    collective_efficiency: float = 1.0  # share of the link a ring collective reaches (nccl-tests bus bandwidth)
    # Inside one node, by collective and group size, from a measured table where one is at hand (the Hopper
    # presets: OpenXLA's H100 table, pipesim.validation.collective_shares); None: collective_efficiency.
    nvlink_collective_shares: CollectiveShares | None = None
    p2p_efficiency: float = 1.0  # share of the link a send/recv reaches (pipeline and ring-attention sends)
    # One NCCL channel's send/recv inside a node, what a CTA-capped group reaches per CTA (see the field's doc)
    p2p_channel_bandwidth: float = 36.7e9
    p2p_sync_overhead: float = 0.33e-3  # s the device idles per synchronising P2P call (see the presets)
    # The host issues every kernel: framework dispatch, then cudaLaunchKernel. Meta's Holistic Trace Analysis
    # docs (features/cuda_kernel_launch_stats): "Usually, the launch time on the CPU side is between 5-20
    # microseconds"; 10 µs is the middle of that range on a log scale, before any Python module overhead. When
    # a pass's kernels are shorter than that (small layers, wide tensor parallelism, small micro-batches) the
    # device waits for the host (pipesim.analytic.kernels.layer_kernel_counts, to_costs._host_floor).
    host_kernel_overhead: float = 10e-6
    # Backward / forward time of the memory-bound kernels: 1.0 from Qi et al. 2024's A100 per-pass profile
    # (pipesim.analytic.kernels.NON_GEMM_BACKWARD); `pipesim profile` measures it on the machine it runs on.
    elementwise_backward_ratio: float = 1.0
    fp8_peak_flops: float | None = None  # dense FP8 FLOP/s; None: no FP8 tensor cores
    fp4_peak_flops: float | None = None  # dense NVFP4 FLOP/s; None: no block-scaled FP4 tensor cores
    gemm_efficiency: float = 0.8
    fp8_gemm_efficiency: float = 0.65
    fp4_gemm_efficiency: float = 0.6
    attention_forward_efficiency: float = 0.55
    attention_backward_efficiency: float = 0.45
    # The fused attention kernel's measured rates by sequence and head size, which scale the two efficiencies
    # above at a layer's own shape (the Hopper presets: FlashAttention-2 on H100, Shah et al. 2024;
    # pipesim.analytic.attention_shapes). None: the efficiencies at every shape.
    attention_shape_rates: AttentionShapeRates | None = None
    # The efficiencies above come from short benchmarks, run at boost clocks; a training run keeps every GPU of
    # the node at its power limit for hours, where the tensor cores run at the clock the limit sustains.
    sustained_clock_ratio: float = 1.0
    # What the benchmarks above still miss inside a training step (fitted, not measured: see the Hopper presets and
    # pipesim.validation.constants). 1.0: the benchmarks' rate, as on A100, where the published runs agree with it.
    training_gemm_ratio: float = 1.0
    # A GEMM kernel's cost beyond its tiles' main loops (pipesim.analytic.kernels.gemm_time): per output tile, the
    # SM's prologue and epilogue; per kernel, its ramp-up and tail. Fitted to a published table of measured GEMM
    # rates (pipesim.validation.gemm_overheads); 0 where no such table is at hand.
    gemm_tile_overhead: float = 0.0
    gemm_kernel_overhead: float = 0.0
    # Relative standard deviation of one GPU's speed about the SKU's typical one (pipesim.analytic.slowest_gpu):
    # a step on n GPUs waits for the slowest of them. Fitted to the published runs (pipesim.validation.constants).
    gpu_speed_spread: float = 0.03
    # How much of ZeRO-3's per-layer collectives (prefetched one layer ahead) really runs beside compute: fitted to
    # the published FSDP and ZeRO-3 runs (pipesim.validation.constants; pipesim.analytic.comm.prefetched_overlap):
    # a quarter, what the fit on every source and on every source but one chooses.
    zero3_overlap_share: float = 0.25
    # Whether an FP8 parameter keeps a transposed copy (Fp8Params.BOTH's second byte): Transformer Engine creates one
    # only where FP8 GEMMs take the TN layout alone (``create_transpose = columnwise_usage &&
    # !non_tn_fp8_gemm_supported()``, transformer_engine/pytorch/csrc/extensions/quantizer.cpp since v2.x;
    # ``non_tn_fp8_gemm_supported``: compute capability ≥ 10.0, Blackwell).
    fp8_weight_transpose: bool = True
    memory_efficiency: float = 0.9
    # What the element-wise kernels PyTorch cannot vectorise reach (ATen loads vectorised only contiguous operands of
    # the op's own dtype): a gated activation over a fused GEMM's halves and eager copies out of transposed views;
    # the eager RMSNorm and RoPE chains through FP32.
    # Measured: Liger-Kernel's published kernel times (pipesim.validation.memory_bound_kernels).
    strided_memory_efficiency: float = 0.55
    converting_memory_efficiency: float = 0.70
    sm_count: int = 132
    # NCCL runs one CTA per channel and its CTAs never share an SM with a compute kernel (NVIDIA/nccl issue #689,
    # the maintainers' answer), so an overlapped collective takes these SMs from the GEMMs beside it
    # (pipesim.analytic.comm.contended_overlap). 24: the channels NCCL builds on an 8-GPU NVSwitch node — HGX A100
    # (NVIDIA/nccl-tests issue #100: "Channel 23/24") and an FSDP all-gather on H100 (NVIDIA developer forum,
    # "Compute-communication overlap causes severe GEMM performance degradation": ncclAllGather launches 24 blocks).
    collective_ctas: int = 24
    # The share measured whole where pipesim profile ran beside a collective (pipesim.profile.contention); it
    # replaces the CTA count's, which stands for the SMs alone.
    collective_sm_share: float | None = None
    gemm_tile: tuple[int, int] = (128, 256)
    achievable_fraction: float | None = None  # set: one fraction of peak for everything (the old model)
    measured: MeasuredTables | None = None  # pipesim profile's tables (pipesim.analytic.measured)
    provenance: dict | None = field(default=None, compare=False, hash=False)  # where the tables come from

    def __post_init__(self) -> None:
        for f in FIELDS:  # presets and replace() get the same checks as files
            value = getattr(self, f.key)
            if value is not None and f.key != "name" and f.kind is not Kind.TABLE:
                from pipesim.analytic.spec_fields import check_value

                check_value(value, f, f"chip {self.name}")

    def _peak(self, precision: Precision) -> float | None:
        """The dense peak at ``precision``; None where the chip has no such tensor cores."""
        return {Precision.BF16: self.peak_flops, Precision.FP8: self.fp8_peak_flops,
                Precision.FP4: self.fp4_peak_flops}[precision]

    def peak_for(self, precision: Precision) -> float:
        peak = self._peak(precision)
        if peak is None:
            name = {Precision.FP8: "FP8", Precision.FP4: "NVFP4"}[precision]
            have = "; Blackwell's b200 and gb200 have them" if precision is Precision.FP4 else ""
            raise PipesimError(f"chip {self.name} has no {name} tensor cores (no {precision.value}_peak_flops"
                               f"{have}); drop --{precision.value}")
        return peak

    def supports(self, precision: Precision) -> bool:
        """Whether the chip's tensor cores take ``precision`` (BF16 always)."""
        return self._peak(precision) is not None

    def gemm_share(self, precision: Precision) -> float:
        """The share of ``precision``'s sustained peak a large GEMM of a training step reaches: BF16 a short
        benchmark's best shape times what a step reaches of it; the FP8 and FP4 shares are their own figures."""
        if precision is Precision.FP8:
            return self.fp8_gemm_efficiency
        if precision is Precision.FP4:
            return self.fp4_gemm_efficiency
        return self.gemm_efficiency * self.training_gemm_ratio

    def with_overrides(self, *, achievable_fraction: float | None = None, gpu_speed_spread: float | None = None,
                       inter_node_gbps: float | None = None) -> ChipSpec:
        """This chip with each run-wide override the user gave (not None) in place of its own value;
        ``inter_node_gbps``: each GPU's share of its node's network, Gb/s (the nodes' NICs together ÷ their GPUs)."""
        given = {"achievable_fraction": achievable_fraction, "gpu_speed_spread": gpu_speed_spread,
                 "inter_node_bandwidth": None if inter_node_gbps is None else inter_node_gbps * 1e9 / 8}
        return replace(self, **{k: v for k, v in given.items() if v is not None})

    def sustained_peak_for(self, precision: Precision) -> float:
        """The tensor-core peak at the clock a training run sustains (what the kernel efficiencies multiply)."""
        return self.peak_for(precision) * self.sustained_clock_ratio

    @property
    def stream_bandwidth(self) -> float:
        """Bytes/s a memory-bound kernel reaches."""
        return self.hbm_bandwidth * self.memory_efficiency

    @property
    def strided_stream_bandwidth(self) -> float:
        """Bytes/s an element-wise kernel reaches over the strided halves of one tensor; never more than a streaming
        kernel's (a chip file measured before the field existed keeps the default, which its own
        ``memory_efficiency`` may be below)."""
        return self.hbm_bandwidth * min(self.strided_memory_efficiency, self.memory_efficiency)

    @property
    def converting_stream_bandwidth(self) -> float:
        """Bytes/s the eager chains through FP32 (RMSNorm's, RoPE's) reach; never more than a streaming kernel's."""
        return self.hbm_bandwidth * min(self.converting_memory_efficiency, self.memory_efficiency)

    @property
    def comm_sm_share(self) -> float:
        """Share of the compute an overlapped collective takes from the kernels beside it: measured, or its
        CTAs' share of the SMs."""
        if self.collective_sm_share is not None:
            return self.collective_sm_share
        return min(1.0, self.collective_ctas / self.sm_count)

    @property
    def gpus_per_host(self) -> int:
        """Chips per host: ``host_gpus``, or the whole node where the fast link stays inside one host."""
        return self.node_size if self.host_gpus is None else self.host_gpus

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 2**30

    def to_dict(self) -> dict:
        data = asdict(self)
        data["gemm_tile"] = list(self.gemm_tile)
        for key in [k for k, v in data.items() if v is None]:  # unset optional fields: a valid chip file again
            del data[key]
        if self.measured is not None:
            data["measured"] = self.measured.to_dict()
        if self.nvlink_collective_shares is not None:
            data["nvlink_collective_shares"] = self.nvlink_collective_shares.to_dict()
        if self.attention_shape_rates is not None:
            data["attention_shape_rates"] = self.attention_shape_rates.to_dict()
        return data


def chip_from_dict(data: dict, source: str) -> ChipSpec:
    values = parse_fields(data, FIELDS, source)
    values.setdefault("name", source)
    return ChipSpec(**values)
