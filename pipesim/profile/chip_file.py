"""The measured chip file: the tables, the roofline fields derived from them, provenance; written atomically.

Roofline fields a measurement gives directly are derived, and the file says how (``measured.notes``):
``peak_flops`` = the best GEMM rate measured (so ``gemm_efficiency`` = 1: the table carries the shapes'
rates), ``hbm_bandwidth`` = the best stream rate (a copy, usually) and ``memory_efficiency`` = the median
element-wise kernel's rate over it, the attention efficiencies = the median attention rate over the peak,
the link fields = the P2P fit (else the copy rate, on one process, stated). Three more come from the machine
under load: ``sustained_clock_ratio`` (a GEMM burn, :mod:`~pipesim.profile.sustained`), ``collective_sm_share``
(GEMMs beside all-reduces, :mod:`~pipesim.profile.contention`) and, on a GPU, ``p2p_sync_overhead`` (passes
with and without a device sync after each send, :mod:`~pipesim.profile.p2p_sync`). On a CPU
``p2p_sync_overhead`` is 0: gloo's sends do not synchronise a device (the executor posts them and goes on).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pipesim.analytic.chip_spec import chip_from_dict
from pipesim.analytic.measured import CollectiveOp, GemmDtype, MeasuredTables
from pipesim.analytic.slowest_gpu import MAX_SPREAD
from pipesim.io.atomic import write_text_atomic
from pipesim.profile.contention import CONTENTION_MISSING, ContentionRun
from pipesim.profile.device import Device
from pipesim.profile.p2p_sync import P2P_SYNC_MISSING, P2pSyncRun
from pipesim.profile.stream import ELEMENTWISE, UNVECTORISED_FIELDS
from pipesim.profile.sustained import SUSTAINED_MISSING, SustainedRun


@dataclass
class Measurements:
    dtype: GemmDtype
    gemm: list = field(default_factory=list)
    attention: list = field(default_factory=list)
    stream: list = field(default_factory=list)
    collectives: list = field(default_factory=list)
    host_kernel_overhead: float | None = None  # seconds per kernel the host takes to issue (profile.host)
    elementwise_backward_ratio: float | None = None  # backward / forward of norms and activations (stream)
    gpu_speed_spread: float | None = None  # the processes' speed spread over the GEMM table (profile.spread)
    sustained: SustainedRun | None = None  # the burn's settled GEMM rate against a short run's (profile.sustained)
    contention: ContentionRun | None = None  # GEMMs alone and beside all-reduces (profile.contention)
    p2p_sync: P2pSyncRun | None = None  # passes with and without a device sync after each exchange (profile.p2p_sync)
    notes: list[str] = field(default_factory=list)


def _slug(text: str) -> str:
    keep = "".join(c.lower() if c.isalnum() else "-" for c in text)
    return "-".join(p for p in keep.split("-") if p)[:48] or "device"


def chip_dict(m: Measurements, device: Device, memory_gib: float, provenance: dict, name: str | None) -> dict:
    """The chip file's mapping (checked by :func:`pipesim.analytic.chip_spec.chip_from_dict` before writing)."""
    notes = list(m.notes)
    tables = MeasuredTables(m.dtype, tuple(m.gemm), tuple(m.attention), tuple(m.stream), tuple(m.collectives),
                            device.threads, ())
    main = [r.flops_per_s for r in m.gemm if r.dtype is m.dtype]
    peak = max(main)
    notes.append(f"peak_flops = the best {m.dtype.value} GEMM rate measured; gemm_efficiency = 1 (the gemm table "
                 f"carries each shape's rate)")
    fp8 = [r.flops_per_s for r in m.gemm if r.dtype is GemmDtype.FP8]
    best_stream = max(r.bytes_per_s for r in m.stream)
    elementwise = tables.stream_rate(ELEMENTWISE) or best_stream
    notes.append("hbm_bandwidth = the best stream rate measured; memory_efficiency = the median element-wise "
                 "kernel's (layer norm, add, gelu) rate over it")
    data = {
        "name": name or f"{_slug(device.name)}-measured",
        "peak_flops": peak,
        "memory_gib": round(memory_gib, 2),
        "hbm_bandwidth": best_stream,
        "memory_efficiency": min(1.0, elementwise / best_stream),
        "gemm_efficiency": 1.0,
    }
    for kernel, key in UNVECTORISED_FIELDS.items():
        if (rate := tables.stream_rate((kernel,))) is not None:
            data[key] = min(1.0, rate / best_stream)
            notes.append(f"{key} = the {kernel.value} kernel's rate (bytes as the cost model counts them) over "
                         f"hbm_bandwidth")
    if fp8:
        data["fp8_peak_flops"] = max(fp8)
        data["fp8_gemm_efficiency"] = 1.0
    if m.host_kernel_overhead is not None:
        data["host_kernel_overhead"] = m.host_kernel_overhead
        notes.append("host_kernel_overhead = a chain of tiny autograd-recorded ops timed per op (the host floor)")
    if m.elementwise_backward_ratio:
        data["elementwise_backward_ratio"] = m.elementwise_backward_ratio
        notes.append("elementwise_backward_ratio = layer norm's and GELU's backward over forward time (median)")
    if m.gpu_speed_spread is not None:
        data["gpu_speed_spread"] = min(m.gpu_speed_spread, MAX_SPREAD)
        notes.append("gpu_speed_spread = the standard deviation of the processes' log speeds over the GEMM table "
                     "(each process's geometric-mean rate over the median process's), measured on these processes "
                     "alone" + (f"; {m.gpu_speed_spread:.3f} measured, kept to the field's bound {MAX_SPREAD}"
                                if m.gpu_speed_spread > MAX_SPREAD else ""))
    else:
        notes.append("gpu_speed_spread: the default fitted to published runs (fewer than four processes cannot "
                     "measure a spread)")
    under_load = [(m.sustained, SUSTAINED_MISSING), (m.contention, CONTENTION_MISSING)]
    if device.cuda:  # a CPU has no device to synchronise: its p2p_sync_overhead is 0, below
        under_load.append((m.p2p_sync, P2P_SYNC_MISSING))
    for run, missing in under_load:
        data.update(measured_fields(run))
        notes.append(missing if run is None else run.note)
    if m.attention:
        data["attention_forward_efficiency"] = min(1.0, statistics.median(r.forward_flops_per_s
                                                                          for r in m.attention) / peak)
        data["attention_backward_efficiency"] = min(1.0, statistics.median(r.backward_flops_per_s
                                                                           for r in m.attention) / peak)
        notes.append("attention_*_efficiency = the median measured attention rate over peak_flops (the "
                     "attention table is what the cost model reads)")
    p2p = tables.collective(CollectiveOp.P2P, 2)
    if p2p is not None:
        data.update(intra_node_bandwidth=p2p.bandwidth, inter_node_bandwidth=p2p.bandwidth,
                    link_latency=p2p.latency_s, p2p_efficiency=1.0)
        notes.append("intra/inter_node_bandwidth and link_latency = the P2P fit between ranks 0 and 1 (one "
                     "machine: no separate inter-node figure)")
    else:
        data.update(intra_node_bandwidth=best_stream, inter_node_bandwidth=best_stream)
        notes.append("one process: collectives and P2P not measured; the link fields are the copy rate, a "
                     "placeholder (launch with torchrun --nproc-per-node N -m pipesim.profile to measure them)")
    if device.cuda:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        data["sm_count"] = props.multi_processor_count
        data["node_size"] = max(1, torch.cuda.device_count())
    else:
        import os

        data.update(sm_count=1, gemm_tile=[1, 1], node_size=os.cpu_count() or 1, p2p_sync_overhead=0.0)
        checked = ("" if m.p2p_sync is None else f"; the same passes with and without a sync after each "
                   f"exchange differ by {m.p2p_sync.difference * 1e6:+.3g} µs a pass here, noise")
        notes.append("CPU: no tile/wave quantization (sm_count 1, gemm_tile [1, 1]), node_size = the cores, "
                     f"p2p_sync_overhead 0 (gloo sends do not synchronise a device{checked})")
    data["measured"] = MeasuredTables(m.dtype, tables.gemm, tables.attention, tables.stream, tables.collectives,
                                      device.threads, tuple(notes)).to_dict()
    data["provenance"] = provenance
    chip_from_dict(data, "the measured chip")  # the schema the file will be read with: refuse before writing
    return data


def measured_fields(run: SustainedRun | ContentionRun | P2pSyncRun | None) -> dict:
    """The chip field a measurement under load sets, or nothing where it did not run (the default stands)."""
    return {} if run is None else {run.field: run.value}


def write_chip_file(path: str | Path, data: dict) -> None:
    header = ("# Written by pipesim profile: measured tables (the cost model reads them; pipesim/analytic/"
              "measured.py) and the roofline fields derived from them (measured.notes says how).\n")
    write_text_atomic(path, header + yaml.safe_dump(data, sort_keys=False, width=110))
