"""How far a preset's constants sit from a measured chip file: each efficiency (and link bandwidth) the
measurement implies against the preset's own value (``experiments/gpu_check.py`` prints this on CUDA)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.measured import CollectiveOp, GemmDtype, StreamKernel
from pipesim.errors import PipesimError
from pipesim.profile.p2p_sync import P2P_SYNC_NOTE
from pipesim.profile.stream import ELEMENTWISE, UNVECTORISED_FIELDS
from pipesim.profile.sustained import SUSTAINED_NOTE


@dataclass(frozen=True)
class Gap:
    constant: str
    preset: float
    measured: float
    how: str

    @property
    def ratio(self) -> float:
        return self.measured / self.preset

    def text(self) -> str:
        return (f"{self.constant:<30} preset {self.preset:>10.4g}  measured {self.measured:>10.4g}  "
                f"({self.ratio - 1:+.0%})  {self.how}")


_NAMES = (("h200", "h200"), ("h100", "h100-sxm"), ("a100", "a100-80gb"), ("b200", "b200"), ("mi300x", "mi300x"))


def preset_for(device_name: str) -> str | None:
    """The preset a device name (``torch.cuda.get_device_name``) corresponds to, if any."""
    lowered = device_name.lower().replace(" ", "")
    return next((preset for key, preset in _NAMES if key in lowered), None)


def preset_gaps(measured: ChipSpec, preset: ChipSpec) -> list[Gap]:
    """Each preset constant beside what ``measured``'s tables give for it, in the preset's own terms (shares
    of the preset's peak and HBM bandwidth)."""
    tables = measured.measured
    if tables is None:
        raise PipesimError(f"chip {measured.name} has no measured tables; write one with pipesim profile")
    gaps = []
    main = [r.flops_per_s for r in tables.gemm if r.dtype is tables.dtype]
    if main:
        gaps.append(Gap("gemm_efficiency", preset.gemm_efficiency, max(main) / preset.peak_flops,
                        f"best {tables.dtype.value} GEMM / preset peak"))
    fp8 = [r.flops_per_s for r in tables.gemm if r.dtype is GemmDtype.FP8]
    if fp8 and preset.fp8_peak_flops:
        gaps.append(Gap("fp8_gemm_efficiency", preset.fp8_gemm_efficiency, max(fp8) / preset.fp8_peak_flops,
                        "best FP8 GEMM / preset FP8 peak"))
    if tables.attention:
        fwd = statistics.median(r.forward_flops_per_s for r in tables.attention)
        bwd = statistics.median(r.backward_flops_per_s for r in tables.attention)
        expected_fwd, expected_bwd = _preset_attention_at(preset, tables.attention)
        gaps += [Gap("attention_forward_efficiency", expected_fwd, fwd / preset.peak_flops,
                     "median SDPA forward / preset peak (preset at the same sequences and head sizes)"),
                 Gap("attention_backward_efficiency", expected_bwd,
                     bwd / preset.peak_flops, "median SDPA backward / preset peak (the same)")]
    if any(note.startswith(SUSTAINED_NOTE) for note in tables.notes):  # a burn ran (chip_file says so)
        gaps.append(Gap("sustained_clock_ratio", preset.sustained_clock_ratio, measured.sustained_clock_ratio,
                        "GEMM burn's settled rate / its short run's"))
    if measured.collective_sm_share is not None:
        gaps.append(Gap("collective SM share", preset.comm_sm_share, measured.comm_sm_share,
                        "GEMMs' rate lost beside all-reduces (preset: collective_ctas / sm_count)"))
    if any(note.startswith(P2P_SYNC_NOTE) for note in tables.notes):  # measured on a GPU (chip_file says so)
        gaps.append(Gap("p2p_sync_overhead", preset.p2p_sync_overhead, measured.p2p_sync_overhead,
                        "passes with a device sync after each exchange minus without, s a pass"))
    elementwise = tables.stream_rate(ELEMENTWISE)
    if elementwise:
        gaps.append(Gap("memory_efficiency", preset.memory_efficiency, elementwise / preset.hbm_bandwidth,
                        "median layer norm/add/gelu / preset HBM bandwidth"))
    for kernel, key in UNVECTORISED_FIELDS.items():
        if rate := tables.stream_rate((kernel,)):
            gaps.append(Gap(key, getattr(preset, key), rate / preset.hbm_bandwidth,
                            f"{kernel.value} (bytes as the cost model counts them) / preset HBM bandwidth"))
    copy = tables.stream_rate((StreamKernel.COPY,))
    if copy:
        gaps.append(Gap("memory_efficiency (copy)", preset.memory_efficiency, copy / preset.hbm_bandwidth,
                        "device copy / preset HBM bandwidth"))
    p2p = tables.collective(CollectiveOp.P2P, 2)
    if p2p:
        gaps.append(Gap("intra_node_bandwidth·p2p_eff", preset.intra_node_bandwidth * preset.p2p_efficiency,
                        p2p.bandwidth, "P2P fit, bytes/s"))
        gaps.append(Gap("link_latency", preset.link_latency, p2p.latency_s, "P2P fit latency, s"))
    for row in tables.collectives:
        if row.op is CollectiveOp.ALL_REDUCE:
            bus = row.bandwidth * 2 * (row.ranks - 1) / row.ranks  # the ring formula's per-chip link rate
            gaps.append(Gap(f"intra_node_bandwidth (all-reduce×{row.ranks})", preset.intra_node_bandwidth, bus,
                            "all-reduce fit as ring bus bandwidth, bytes/s"))
    return gaps


def _preset_attention_at(preset: ChipSpec, rows) -> tuple[float, float]:
    """The preset's two attention efficiencies at the measured rows' sequences and head sizes (the medians), scaled
    by its ``attention_shape_rates`` where it has them: what the measurement should be compared with."""
    if preset.attention_shape_rates is None:
        return preset.attention_forward_efficiency, preset.attention_backward_efficiency
    shares = [preset.attention_shape_rates.factors(r.seq, r.head_dim) for r in rows]
    return (preset.attention_forward_efficiency * statistics.median(f for f, _ in shares),
            preset.attention_backward_efficiency * statistics.median(b for _, b in shares))


def check_compare_preset(preset: str) -> None:
    """Refuse a preset to compare with that is neither a chip preset's name nor ``auto``, in one line."""
    from pipesim.analytic.chip_presets import CHIP_PRESETS

    if preset != "auto" and preset not in CHIP_PRESETS:
        raise PipesimError(f"--compare {preset!r} is not a chip preset; use one of {', '.join(CHIP_PRESETS)} or auto")


def comparison_lines(measured: ChipSpec, preset: str) -> list[str]:
    """What ``pipesim chips FILE --compare PRESET`` prints for one measured chip: a heading and each gap, or why
    there is nothing to compare. ``preset``: a preset's name, or ``auto``, the one the measured device's name
    matches (its provenance's ``device``)."""
    from pipesim.analytic.chip_presets import CHIP_PRESETS

    check_compare_preset(preset)
    device = (measured.provenance or {}).get("device", "")
    name = preset_for(device) if preset == "auto" else preset
    if name is None:
        return [f"{measured.name}: no preset matches device {device!r}; name one with --compare PRESET"]
    return ([f"{measured.name} against the {name} preset (measured / preset − 1):"]
            + [f"  {gap.text()}" for gap in preset_gaps(measured, CHIP_PRESETS[name])])
