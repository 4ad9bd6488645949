"""Measured cost tables (``pipesim profile``) and the one place the cost model looks them up.

A chip file written by ``pipesim profile`` carries, beside the roofline fields, a ``measured`` mapping of
tables timed on the machine itself:

- ``gemm``: rows ``{m, n, k, dtype, flops_per_s}`` — the achieved rate of one ``(M×K)·(K×N)`` product;
- ``attention``: rows ``{seq, head_dim, forward_flops_per_s, backward_flops_per_s}`` — fused causal attention
  (``scaled_dot_product_attention``), its FLOPs counted as :func:`pipesim.analytic.kernels.attention_core_times`
  counts them (the causal half; the backward 2.5× the forward);
- ``stream``: rows ``{kernel, bytes, bytes_per_s}`` — memory-bound kernels (layer norm, add, gelu, softmax,
  cross-entropy); the chip's ``hbm_bandwidth``/``memory_efficiency`` are derived from them by the profiler;
- ``collectives``: rows ``{op, ranks, latency_s, bandwidth}`` — a fit ``t = latency + bytes / bandwidth`` of one
  collective (``all_reduce``, ``reduce_scatter``, ``all_gather``, ``p2p``) over ``ranks`` processes;
- ``dtype``: the dtype whose GEMM rows serve the default (BF16) cost terms — ``bf16`` on GPUs, ``fp32`` on CPUs
  (what the executor computes in there).

Lookups (what :mod:`.kernels` and :mod:`.comm` call when a chip has a table):

- GEMM: the row of exactly this shape and dtype when there is one; otherwise the rate is interpolated
  linearly in ``log(rate)`` over ``log(2MNK)`` between the neighbouring sizes (rows of one size averaged in
  log), and held at the end rows' rates outside the measured range;
- attention: the rows of the nearest ``head_dim``, interpolated in log-log over ``seq``, held at the ends;
- collectives: the fit of this op at this group size; a group size that was not measured has no row, and the
  caller keeps the roofline (``ring`` formulas on the chip's link fields).
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import math
from dataclasses import dataclass, field

from pipesim.errors import PipesimError


class GemmDtype(enum.Enum):
    BF16 = "bf16"
    FP32 = "fp32"
    FP8 = "fp8"


class CollectiveOp(enum.Enum):
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    P2P = "p2p"
    ALL_TO_ALL = "all_to_all"  # a share of the link inside a node (collective_shares); `pipesim profile` skips it


class StreamKernel(enum.Enum):
    LAYER_NORM = "layer_norm"
    ADD = "add"
    GELU = "gelu"
    SOFTMAX = "softmax"
    CROSS_ENTROPY = "cross_entropy"
    COPY = "copy"
    # the kernels PyTorch cannot load vectorised (pipesim.analytic.kernels.UnvectorisedBytes): a gated activation
    # over the two halves of one tensor, and eager RMSNorm's chain through FP32
    STRIDED_GLU = "strided_glu"
    RMS_NORM_CHAIN = "rms_norm_chain"


@dataclass(frozen=True)
class GemmRow:
    m: int
    n: int
    k: int
    dtype: GemmDtype
    flops_per_s: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


@dataclass(frozen=True)
class AttentionRow:
    seq: int
    head_dim: int
    forward_flops_per_s: float
    backward_flops_per_s: float


@dataclass(frozen=True)
class StreamRow:
    kernel: StreamKernel
    bytes: float
    bytes_per_s: float


@dataclass(frozen=True)
class CollectiveRow:
    op: CollectiveOp
    ranks: int
    latency_s: float
    bandwidth: float  # bytes/s of the buffer: t = latency + bytes / bandwidth

    def time(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.bandwidth


@dataclass(frozen=True)
class MeasuredTables:
    dtype: GemmDtype
    gemm: tuple[GemmRow, ...] = ()
    attention: tuple[AttentionRow, ...] = ()
    stream: tuple[StreamRow, ...] = ()
    collectives: tuple[CollectiveRow, ...] = ()
    threads: int | None = None  # CPU threads per process the tables were measured with
    notes: tuple[str, ...] = field(default=())

    # -- lookups ---------------------------------------------------------------------------------------------
    def gemm_rate(self, m: int, n: int, k: int, dtype: GemmDtype) -> float | None:
        """Achieved FLOP/s of an ``M×N×K`` product in ``dtype``; None when no row of that dtype was measured."""
        rows = [r for r in self.gemm if r.dtype is dtype]
        if not rows:
            return None
        for r in rows:
            if (r.m, r.n, r.k) == (m, n, k):
                return r.flops_per_s
        by_size: dict[float, list[float]] = {}
        for r in rows:
            by_size.setdefault(r.flops, []).append(math.log(r.flops_per_s))
        points = sorted((math.log(s), sum(v) / len(v)) for s, v in by_size.items())
        return math.exp(_interpolate(points, math.log(2.0 * m * n * k)))

    def attention_rates(self, seq: int, head_dim: int) -> tuple[float, float] | None:
        """(forward, backward) FLOP/s of fused attention at ``seq`` and ``head_dim``; None without rows."""
        if not self.attention:
            return None
        nearest = min({r.head_dim for r in self.attention}, key=lambda d: (abs(math.log(d / head_dim)), d))
        rows = sorted((r for r in self.attention if r.head_dim == nearest), key=lambda r: r.seq)
        x = math.log(seq)
        fwd = _interpolate([(math.log(r.seq), math.log(r.forward_flops_per_s)) for r in rows], x)
        bwd = _interpolate([(math.log(r.seq), math.log(r.backward_flops_per_s)) for r in rows], x)
        return math.exp(fwd), math.exp(bwd)

    def collective(self, op: CollectiveOp, ranks: int) -> CollectiveRow | None:
        for r in self.collectives:
            if r.op is op and r.ranks == ranks:
                return r
        return None

    def stream_rate(self, kernels: tuple[StreamKernel, ...]) -> float | None:
        """Median bytes/s of the rows of ``kernels`` (None without rows): what the profiler derives
        ``hbm_bandwidth · memory_efficiency`` from."""
        rates = sorted(r.bytes_per_s for r in self.stream if r.kernel in kernels)
        if not rates:
            return None
        mid = len(rates) // 2
        return rates[mid] if len(rates) % 2 else math.sqrt(rates[mid - 1] * rates[mid])

    def sources(self) -> dict[str, str]:
        """Which cost terms these tables serve (for reports): term → 'measured' or 'roofline'."""
        ops = sorted({f"{r.op.value}×{r.ranks}" for r in self.collectives})
        return {
            "GEMMs": f"measured ({len(self.gemm)} shapes, {self.dtype.value})" if self.gemm else "roofline",
            "attention": f"measured ({len(self.attention)} points)" if self.attention else "roofline",
            "memory-bound": "measured (stream rate)" if self.stream else "roofline",
            "collectives": f"measured ({', '.join(ops)})" if ops else "roofline (single process: none measured)",
        }

    def to_dict(self) -> dict:
        return {
            "dtype": self.dtype.value,
            **({"threads": self.threads} if self.threads is not None else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
            "gemm": [{"m": r.m, "n": r.n, "k": r.k, "dtype": r.dtype.value, "flops_per_s": r.flops_per_s}
                     for r in self.gemm],
            "attention": [{"seq": r.seq, "head_dim": r.head_dim, "forward_flops_per_s": r.forward_flops_per_s,
                           "backward_flops_per_s": r.backward_flops_per_s} for r in self.attention],
            "stream": [{"kernel": r.kernel.value, "bytes": r.bytes, "bytes_per_s": r.bytes_per_s}
                       for r in self.stream],
            "collectives": [{"op": r.op.value, "ranks": r.ranks, "latency_s": r.latency_s,
                             "bandwidth": r.bandwidth} for r in self.collectives],
        }


def _interpolate(points: list[tuple[float, float]], x: float) -> float:
    """Piecewise-linear y(x) through sorted ``points``, held constant beyond the ends."""
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]  # unreachable: the points are sorted


# -- parsing (the schema of the ``measured`` field; one-line errors naming the entry and the fix) ------------
_FIX = "rerun pipesim profile, or fix the row as docs/model-and-chip-files.md shows"


def _enum(cls, value, where: str):
    try:
        return cls(value)
    except ValueError:
        raise PipesimError(f"{where}={value!r} must be one of {', '.join(m.value for m in cls)}") from None


def _num(row: dict, key: str, where: str, *, integer: bool = False, positive: bool = True,
         allow_zero: bool = False) -> float:
    if key not in row:
        raise PipesimError(f"{where}: missing {key!r}; {_FIX}")
    value = row[key]
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PipesimError(f"{where}.{key}={value!r} must be a finite number; {_FIX}")
    if integer:
        if float(value) != int(value):
            raise PipesimError(f"{where}.{key}={value!r} must be an integer; {_FIX}")
        value = int(value)
    if positive and (value < 0 or (value == 0 and not allow_zero)):
        raise PipesimError(f"{where}.{key}={value!r} must be {'≥' if allow_zero else '>'} 0; {_FIX}")
    return value


def _rows(data: dict, key: str, source: str, columns: tuple[str, ...]) -> list[tuple[str, dict]]:
    rows = data.get(key, [])
    if not isinstance(rows, list):
        raise PipesimError(f"{source}: measured.{key} must be a list of rows; {_FIX}")
    out = []
    for i, row in enumerate(rows):
        where = f"{source}: measured.{key}[{i}]"
        if not isinstance(row, dict):
            raise PipesimError(f"{where} must be a mapping with keys {', '.join(columns)}; {_FIX}")
        unknown = sorted(set(row) - set(columns))
        if unknown:
            raise PipesimError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; known: {', '.join(columns)}")
        out.append((where, row))
    return out


def parse_measured(data, source: str) -> MeasuredTables:
    """The ``measured`` mapping of a chip file, checked; one-line errors name the row and the fix."""
    if isinstance(data, MeasuredTables):
        return data
    if not isinstance(data, dict):
        raise PipesimError(f"{source}: measured must be a mapping of tables (gemm, attention, stream, "
                           f"collectives); {_FIX}")
    known = {"dtype", "threads", "notes", "gemm", "attention", "stream", "collectives"}
    unknown = sorted(map(str, set(data) - known))
    if unknown:
        raise PipesimError(f"{source}: measured has unknown key(s) {', '.join(unknown)}; known: "
                           f"{', '.join(sorted(known))}")
    if "dtype" not in data:
        raise PipesimError(f"{source}: measured.dtype is missing (bf16 or fp32: the GEMM rows the default "
                           f"precision reads); {_FIX}")
    dtype = _enum(GemmDtype, data["dtype"], f"{source}: measured.dtype")
    gemm = []
    for where, row in _rows(data, "gemm", source, ("m", "n", "k", "dtype", "flops_per_s")):
        dims = [_num(row, c, where, integer=True) for c in ("m", "n", "k")]
        gemm.append(GemmRow(*dims, _enum(GemmDtype, row.get("dtype", dtype.value), f"{where}.dtype"),
                            _num(row, "flops_per_s", where)))
    attention = []
    for where, row in _rows(data, "attention", source,
                            ("seq", "head_dim", "forward_flops_per_s", "backward_flops_per_s")):
        attention.append(AttentionRow(_num(row, "seq", where, integer=True), _num(row, "head_dim", where,
                                                                                   integer=True),
                                      _num(row, "forward_flops_per_s", where),
                                      _num(row, "backward_flops_per_s", where)))
    stream = []
    for where, row in _rows(data, "stream", source, ("kernel", "bytes", "bytes_per_s")):
        stream.append(StreamRow(_enum(StreamKernel, row.get("kernel"), f"{where}.kernel"),
                                _num(row, "bytes", where), _num(row, "bytes_per_s", where)))
    collectives = []
    for where, row in _rows(data, "collectives", source, ("op", "ranks", "latency_s", "bandwidth")):
        ranks = _num(row, "ranks", where, integer=True)
        if ranks < 2:
            raise PipesimError(f"{where}.ranks={ranks} must be ≥ 2 (a collective needs two processes); {_FIX}")
        collectives.append(CollectiveRow(_enum(CollectiveOp, row.get("op"), f"{where}.op"), ranks,
                                         _num(row, "latency_s", where, allow_zero=True),
                                         _num(row, "bandwidth", where)))
    seen = set()
    for r in gemm:
        if (r.m, r.n, r.k, r.dtype) in seen:
            raise PipesimError(f"{source}: measured.gemm has two rows for m={r.m} n={r.n} k={r.k} "
                               f"{r.dtype.value}; keep one")
        seen.add((r.m, r.n, r.k, r.dtype))
    if gemm and not any(r.dtype is dtype for r in gemm):
        raise PipesimError(f"{source}: measured.dtype={dtype.value} but no measured.gemm row has that dtype; "
                           f"{_FIX}")
    threads = data.get("threads")
    if threads is not None:
        threads = _num(data, "threads", f"{source}: measured", integer=True)
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise PipesimError(f"{source}: measured.notes must be a list of text lines")
    return MeasuredTables(dtype, tuple(gemm), tuple(attention), tuple(stream), tuple(collectives), threads,
                          tuple(notes))


def parse_provenance(data, source: str) -> dict:
    """The ``provenance`` mapping: text, numbers or lists of text per key (what profile recorded)."""
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise PipesimError(f"{source}: provenance must be a mapping of names to text (device, torch, date, ...)")
    for key, value in data.items():
        ok = isinstance(value, str | int | float) or (isinstance(value, list)
                                                       and all(isinstance(v, str | int | float) for v in value))
        if not ok or isinstance(value, bool):
            raise PipesimError(f"{source}: provenance.{key}={value!r} must be text, a number or a list of them")
    return dict(data)


# -- the call sites' helpers: None means "no table for this, use the roofline" -----------------------------
def measured_gemm_rate(tables: MeasuredTables | None, m: int, n: int, k: int, precision) -> float | None:
    """FLOP/s of an ``M×N×K`` product at ``precision`` (a :class:`pipesim.analytic.layout.Precision`): FP8 reads
    the fp8 rows, BF16 the rows of ``tables.dtype``; NVFP4 is not profiled (None: the chip's roofline rate)."""
    if tables is None or precision.value == "fp4":
        return None
    dtype = GemmDtype.FP8 if precision.value == "fp8" else tables.dtype
    return tables.gemm_rate(m, n, k, dtype)


def measured_attention_rates(tables: MeasuredTables | None, seq: int, head_dim: int) -> tuple[float, float] | None:
    return None if tables is None else tables.attention_rates(seq, head_dim)


def measured_collective_time(tables: MeasuredTables | None, op: CollectiveOp, ranks: int,
                             nbytes: float) -> float | None:
    """Seconds of one ``op`` of ``nbytes`` over ``ranks`` from the fit; None when not measured (or ranks < 2)."""
    if tables is None or ranks < 2:
        return None
    row = tables.collective(op, ranks)
    return None if row is None else row.time(nbytes)
