"""The share of NVLink each NCCL collective reaches inside a node, fitted to published measured tables.

The tables: OpenXLA's default collective performance table (``xla/service/gpu/model/collective_interpolator_data.h``,
``kDefaultCollectivePTable``), its ``sm_90`` entries (H100) shipped as ``pipesim/validation/data/
xla_h100_collectives.csv``, its ``sm_100`` entries (taken as B200) as ``xla_b200_collectives.csv``, and its
``gfx942`` entries (MI300X, RCCL over Infinity Fabric, as AMD added them to ROCm's fork of XLA) as
``xla_mi300x_collectives.csv``: the throughput of all-reduce, all-gather, reduce-scatter and all-to-all over
groups of 8, 4 and 2 GPUs of one node (the groups of 2 and 4 running at once, as tensor-parallel groups do) for
buffers of 1 KiB to 2 GiB (1 GiB on MI300X); and, from the same file in that fork, its ``sm_100_GB200`` and
``sm_103`` entries (a GB200 and a GB300 NVL72 rack: groups of 4 to 72 of the rack's GPUs, all running at once, 16 B
to 32 GiB) as ``xla_gb200_collectives.csv`` and ``xla_gb300_collectives.csv``. They are
microbenchmarks, not training runs: no row of the published-runs table informs these shares, so validation does
not refit them.

The fit, per collective and group size: over buffers of at least 16 MiB (where a fixed cost per call no longer
dominates), least squares of ``time = fixed + bus bytes / (share · link)``, with NCCL's bus bytes (an all-reduce
moves ``2(n−1)/n`` of the buffer per GPU, a gather, scatter or all-to-all ``(n−1)/n``: nccl-tests' PERFORMANCE.md)
and the chip's intra-node link (H100's NVLink 450 GB/s, B200's 900 GB/s one way; MI300X's seven Infinity Fabric
links, 448 GB/s one way, of which a pair of GPUs has one and a group of four three). The share is what the preset takes
(:class:`pipesim.analytic.collective_shares.CollectiveShares`); the fixed part is left out: it holds XLA's own launch
of each measured program (49–123 µs at 1 KiB on H100), where pipesim charges NCCL's latency model
(:func:`pipesim.analytic.comm.ring_latency`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

import numpy as np

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.collective_shares import OPTIONAL_OPS, SHARED_OPS, CollectiveShares
from pipesim.analytic.measured import CollectiveOp

TABLE = "xla_h100_collectives.csv"
# Every shipped table: the preset whose shares it sets and that preset's intra-node link (bytes/s one way)
TABLES: dict[str, str] = {"h100-sxm": "xla_h100_collectives.csv", "b200": "xla_b200_collectives.csv",
                          "gb200": "xla_gb200_collectives.csv", "gb300": "xla_gb300_collectives.csv",
                          "mi300x": "xla_mi300x_collectives.csv"}
MIN_FIT_BYTES = 16 * 2**20


@dataclass(frozen=True)
class MeasuredCollective:
    """One measured call: ``op`` over ``ranks`` GPUs of an ``nbytes`` buffer (the unsharded one) in ``seconds``."""

    op: CollectiveOp
    ranks: int
    nbytes: int
    seconds: float

    @property
    def bus_bytes(self) -> float:
        """Bytes each GPU moves on its link (nccl-tests' bus bandwidth convention)."""
        factor = 2 if self.op is CollectiveOp.ALL_REDUCE else 1
        return factor * (self.ranks - 1) / self.ranks * self.nbytes


@dataclass(frozen=True)
class ShareFit:
    op: CollectiveOp
    ranks: int
    share: float  # of the chip's intra-node link
    fixed_s: float  # the fitted per-call constant (XLA's launch and NCCL's latency together)
    rows: int
    rms_log_error: float  # of the fitted times over the rows used


def load_table(name: str = TABLE) -> list[MeasuredCollective]:
    """The shipped table's rows (comment lines start with ``#``)."""
    text = resources.files("pipesim.validation.data").joinpath(name).read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return [MeasuredCollective(CollectiveOp(r["op"]), int(r["ranks"]), int(r["bytes"]),
                               int(r["bytes"]) / float(r["throughput"])) for r in csv.DictReader(lines)]


def link_bandwidth(chip_name: str) -> float:
    """The preset's intra-node link, what its shares are of."""
    return CHIP_PRESETS[chip_name].intra_node_bandwidth


def fit_share(rows: list[MeasuredCollective], op: CollectiveOp, ranks: int, link: float) -> ShareFit:
    """The asymptotic bus-bandwidth share of ``link`` that ``op`` over ``ranks`` GPUs reaches (see the module doc)."""
    used = [r for r in rows if r.op is op and r.ranks == ranks and r.nbytes >= MIN_FIT_BYTES]
    if len(used) < 2:
        raise ValueError(f"{op.value} over {ranks} ranks: {len(used)} rows of at least {MIN_FIT_BYTES} bytes")
    bus = np.array([r.bus_bytes for r in used])
    seconds = np.array([r.seconds for r in used])
    (fixed, per_byte), *_ = np.linalg.lstsq(np.vstack([np.ones_like(bus), bus]).T, seconds, rcond=None)
    predicted = fixed + bus * per_byte
    rms = float(np.sqrt(np.mean(np.log(predicted / seconds) ** 2)))
    return ShareFit(op, ranks, float(1.0 / per_byte / link), float(fixed), len(used), rms)


def fit_table(chip_name: str = "h100-sxm") -> list[ShareFit]:
    """Every (collective, group size) of ``chip_name``'s table, fitted."""
    rows = load_table(TABLES[chip_name])
    sizes = sorted({r.ranks for r in rows})
    return [fit_share(rows, op, n, link_bandwidth(chip_name)) for op in SHARED_OPS + OPTIONAL_OPS for n in sizes]


def fitted_shares(chip_name: str = "h100-sxm", digits: int = 2) -> CollectiveShares:
    """The fit as the presets carry it (shares rounded to ``digits``)."""
    fits = fit_table(chip_name)
    return CollectiveShares(**{op.value: tuple((f.ranks, round(f.share, digits)) for f in fits if f.op is op)
                               for op in SHARED_OPS + OPTIONAL_OPS})
