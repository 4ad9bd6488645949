"""How fast a fused attention kernel runs at the shape a training step gives it, not at a benchmark's best.

A chip's ``attention_forward_efficiency`` and ``attention_backward_efficiency`` are one rate each: what a
FlashAttention-class kernel reaches on long causal sequences of head size 128. Two things make a real layer's
attention slower, and both grow as models get smaller or more finely split:

- **Sequence length and head size.** A kernel's thread block (CTA) owns one tile of 128 query rows and loops
  over the key tiles; loading its queries and writing its output and softmax statistics cost the same however
  long that loop is, and under a causal mask the diagonal tile is computed whole and half thrown away. So short
  sequences run below the long-sequence rate, and head size 64 (half the FLOPs per byte moved) below head size
  128. Shah et al. 2024 ("FlashAttention-3", arXiv 2407.08608, §4.1, Figures 5 and 6) measure FlashAttention-2
  on an H100 SXM5 at 512 to 16k tokens (16k tokens per batch, hidden 2048): causal forward at head size 128
  from 191 to 335 TFLOP/s, at head size 64 from 180 to 299. A chip that carries such a table
  (``ChipSpec.attention_shape_rates``, :class:`AttentionShapeRates`) scales its two efficiencies by the
  table's rate at the layer's shape over its rate at the reference shape (16k tokens, head size 128, causal).
  Dao 2023 (FlashAttention-2, Figure 4) gives the same for FlashAttention-2 on A100 (forward and backward
  together). A table may also carry the causal backward where it was measured (cuDNN's own training benchmark
  does, NVIDIA/cudnn-frontend's ``benchmark/sdpa_benchmark_training``: its Blackwell kernels on GB200 and GB300
  at 2k–32k tokens, which a chip file can give; the Blackwell presets do not carry it, docs/validation-log.md says
  why).
- **Grids too small for the chip** (:func:`cta_imbalance`). The kernel launches one CTA per query tile, per
  head and per sequence: ``⌈s/128⌉ · b · heads/tp`` of them. Under a causal mask the CTA of the i-th tile does
  i tiles of work, so the last row's CTA is the longest. When there are barely more CTAs than SMs (one
  sequence, a few heads per tensor-parallel rank) the kernel lasts as long as its longest CTAs, not as long as
  its work spread over every SM: a single 4k sequence with 4 heads per rank (128 CTAs on 132 SMs) takes twice
  the time its FLOPs at the full rate would. The kernels do not split a query tile's keys across SMs in
  training (FlashAttention-2's split-KV path is for decoding), so nothing evens it out. Taken as
  longest-processing-time-first list scheduling of the CTAs on the SMs, one CTA per SM at a time: the most
  favourable order a scheduler could find, so the factor is a lower bound on the kernel's real time.

``pipesim profile``'s measured attention tables are timed at the run's own batch, heads and sequence, so they
already contain both effects; neither applies to them (:func:`pipesim.analytic.kernels.attention_core_times`).
"""

from __future__ import annotations

import functools
import heapq
from dataclasses import dataclass

from pipesim.analytic.interpolate import interpolate_log2
from pipesim.errors import PipesimError, naming

#: Query rows (and key columns) of one CTA's tile: FlashAttention-2's forward tile at head sizes 64–128 and
#: FlashAttention-3's; the unit of the causal work split.
FLASH_TILE = 128
#: Beyond this many CTAs per SM the longest CTAs are a negligible tail (under 1 % for the causal split);
#: the schedule is not simulated there.
WAVES_SIMULATED = 16
#: The reference shape the chip's attention efficiencies stand for: head size 128, causal, 16k tokens (the
#: benchmarks the efficiencies come from run 8k–16k tokens; a table that goes further, cuDNN's to 32k, is read
#: there too, and one that stops short is held at its longest sequence).
REFERENCE_HEAD_DIM = 128
REFERENCE_SEQ = 16384

Grid = tuple[tuple[int, tuple[tuple[int, float], ...]], ...]  # ((head_dim, ((seq, TFLOP/s), ...)), ...)
#: The sequence lengths of FlashAttention's published benchmark sweeps (Dao 2023, Shah et al. 2024): 16k tokens a
#: batch at 512, 1k, 2k, 4k, 8k and 16k tokens a sequence.
BENCHMARK_SEQS = (512, 1024, 2048, 4096, 8192, 16384)


def benchmark_sweep(*rates: float) -> tuple[tuple[int, float], ...]:
    """One head size's rates at :data:`BENCHMARK_SEQS`, in order: a grid's ``(seq, rate)`` points."""
    return tuple(zip(BENCHMARK_SEQS, rates, strict=True))


# Dao 2023 ("FlashAttention-2", arXiv 2307.08691, Figure 4 (c) and (d); the flash-attention repository's
# assets/flash2_a100_fwd_bwd_benchmark.png): causal forward + backward TFLOP/s on an A100 80GB SXM4, BF16, head
# sizes 64 and 128, for FlashAttention-2 and, in the same runs, FlashAttention (v1, its CUDA kernels).
#: FlashAttention-2's bars: the A100 presets' attention shape table.
DAO2023_A100_FLASH2: Grid = ((64, benchmark_sweep(88, 119, 140, 156, 165, 171)),
                             (128, benchmark_sweep(99, 133, 155, 173, 182, 189)))
#: FlashAttention's (v1) bars: 1.5-2.3x below FlashAttention-2's at the same shape.
DAO2023_A100_FLASH1: Grid = ((64, benchmark_sweep(58, 70, 77, 87, 92, 97)),
                             (128, benchmark_sweep(55, 62, 69, 76, 80, 83)))
# The same benchmark on an H100 80GB SXM5 (the flash-attention repository's assets/flash2_h100_fwd_bwd_benchmark.png,
# the README's H100 figure for FlashAttention-2; panels (c) and (d), causal): both kernels run their Ampere code
# there (neither has Hopper kernels), v1 1.4-2.5x below v2.
FLASH_ATTENTION_H100_FLASH2: Grid = ((64, benchmark_sweep(141, 192, 232, 257, 273, 284)),
                                     (128, benchmark_sweep(163, 221, 265, 294, 308, 328)))
FLASH_ATTENTION_H100_FLASH1: Grid = ((64, benchmark_sweep(104, 123, 136, 138, 149, 156)),
                                     (128, benchmark_sweep(98, 109, 108, 126, 135, 137)))


def slowdown_grid(faster: Grid, slower: Grid) -> Grid:
    """How many times longer the ``slower`` kernel takes than the ``faster`` one, point by point: two kernels'
    rates measured in the same benchmark, at the same head sizes and sequences."""
    ratios = []
    for (head_dim, fast), (same_head, slow) in zip(faster, slower, strict=True):
        if head_dim != same_head or [seq for seq, _ in fast] != [seq for seq, _ in slow]:
            raise PipesimError("attention slowdown: the two kernels' grids must be measured at the same shapes")
        ratios.append((head_dim, tuple((seq, f / r) for (seq, f), (_, r) in zip(fast, slow, strict=True))))
    return tuple(ratios)


#: FlashAttention v1's slowdown below FlashAttention-2 on an A100 (the Ampere presets') and on an H100 (the Hopper
#: presets', and the default of a chip whose attention table gives none).
A100_FLASH1_SLOWDOWN: Grid = slowdown_grid(DAO2023_A100_FLASH2, DAO2023_A100_FLASH1)
H100_FLASH1_SLOWDOWN: Grid = slowdown_grid(FLASH_ATTENTION_H100_FLASH2, FLASH_ATTENTION_H100_FLASH1)


def _sorted_grid(grid: Grid, name: str) -> Grid:
    if not grid:
        raise PipesimError(f"attention shape rates: {name} has no head sizes; give at least one")
    result = []
    for head_dim, points in sorted(grid):
        points = tuple(sorted(points))
        if head_dim < 1 or not points:
            raise PipesimError(f"attention shape rates: {name} head size {head_dim} needs a head size ≥ 1 and "
                               "at least one seq: rate point")
        if len({seq for seq, _ in points}) < len(points):
            raise PipesimError(f"attention shape rates: {name} head size {head_dim} lists a sequence twice")
        if any(seq < 1 or rate <= 0 for seq, rate in points):
            raise PipesimError(f"attention shape rates: {name} head size {head_dim}: sequences must be ≥ 1 and "
                               "rates > 0")
        result.append((head_dim, points))
    if len({head_dim for head_dim, _ in result}) < len(result):
        raise PipesimError(f"attention shape rates: {name} lists a head size twice")
    return tuple(result)


def _rate(grid: Grid, seq: float, head_dim: int) -> float:
    """The grid's rate at (seq, head_dim): log₂-linear in each, held at the ends."""
    by_dim = [(d, interpolate_log2(points, seq)) for d, points in grid]
    return interpolate_log2(tuple(by_dim), head_dim)


@dataclass(frozen=True)
class AttentionShapeRates:
    """A fused attention kernel's measured rates (FLOP/s, any unit: only ratios are used) by head size and
    sequence length: the causal forward, and optionally the unmasked forward and the unmasked backward (both or
    neither) and the causal backward. Where the causal backward is not measured it is taken as the unmasked
    backward times the causal forward's share of the unmasked forward at the same shape: the mask costs both
    passes the same diagonal tiles (FlashAttention's benchmark figures publish no causal backward). Without any
    backward, the backward scales as the forward does. Optionally ``flash1_slowdown``: how many times longer
    FlashAttention v1 takes than FlashAttention-2 on this chip, causal forward and backward together, measured
    in one benchmark (:func:`flash1_slowdown`)."""

    forward_causal: Grid
    forward: Grid = ()
    backward: Grid = ()
    backward_causal: Grid = ()
    flash1_slowdown: Grid = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "forward_causal", _sorted_grid(self.forward_causal, "forward_causal"))
        if bool(self.forward) != bool(self.backward):
            raise PipesimError("attention shape rates: give both forward and backward (unmasked), or neither")
        if self.forward:
            object.__setattr__(self, "forward", _sorted_grid(self.forward, "forward"))
            object.__setattr__(self, "backward", _sorted_grid(self.backward, "backward"))
        if self.backward_causal:
            object.__setattr__(self, "backward_causal", _sorted_grid(self.backward_causal, "backward_causal"))
        if self.flash1_slowdown:
            object.__setattr__(self, "flash1_slowdown", _sorted_grid(self.flash1_slowdown, "flash1_slowdown"))
            if any(ratio < 1 for _, points in self.flash1_slowdown for _, ratio in points):
                raise PipesimError("attention shape rates: flash1_slowdown is how many times longer v1 takes than "
                                   "FlashAttention-2; every ratio must be ≥ 1")

    def _backward_causal(self, seq: float, head_dim: int) -> float:
        if self.backward_causal:
            return _rate(self.backward_causal, seq, head_dim)
        if not self.backward:
            return _rate(self.forward_causal, seq, head_dim)
        mask_share = _rate(self.forward_causal, seq, head_dim) / _rate(self.forward, seq, head_dim)
        return _rate(self.backward, seq, head_dim) * mask_share

    @functools.cached_property
    def _reference(self) -> tuple[float, float]:
        return (_rate(self.forward_causal, REFERENCE_SEQ, REFERENCE_HEAD_DIM),
                self._backward_causal(REFERENCE_SEQ, REFERENCE_HEAD_DIM))

    def factors(self, seq: float, head_dim: int) -> tuple[float, float]:
        """The causal kernel's forward and backward rates at (seq, head_dim) over its rates at the reference
        shape (16k tokens, head size 128): what scales the chip's two attention efficiencies."""
        forward, backward = self._reference
        return (_rate(self.forward_causal, seq, head_dim) / forward,
                self._backward_causal(seq, head_dim) / backward)

    def to_dict(self) -> dict:
        def grid(g: Grid) -> dict:
            return {head_dim: dict(points) for head_dim, points in g}
        data = {"forward_causal": grid(self.forward_causal)}
        if self.forward:
            data |= {"forward": grid(self.forward), "backward": grid(self.backward)}
        if self.backward_causal:
            data["backward_causal"] = grid(self.backward_causal)
        if self.flash1_slowdown:
            data["flash1_slowdown"] = grid(self.flash1_slowdown)
        return data


def flash1_slowdown(seq: float, head_dim: int, rates: AttentionShapeRates | None = None) -> float:
    """How many times longer FlashAttention (v1: ``flash_attn_unpadded_func``, flash-attn 1.x, 2022 to mid-2023)
    takes than FlashAttention-2 at a causal layer's sequence and head size, on the chip whose attention table is
    ``rates``: its ``flash1_slowdown`` grid, log2-interpolated, held at the sweep's ends; a chip whose table gives
    none takes the H100's (:data:`H100_FLASH1_SLOWDOWN`, the newest chip both kernels were measured on). Each grid
    is the two kernels' measured rates in one benchmark: on an A100 Dao 2023's Figure 4 (by hand: head size 128 at
    2k tokens, 155 / 69 = 2.25; head size 64 at 512, 88 / 58 = 1.52), on an H100 the flash-attention repository's
    figure of the same benchmark (265 / 108 = 2.45 and 141 / 104 = 1.36).

    Why v1 is slower (Dao 2023, section 3): its outer loop runs over key blocks, so every query block's output
    is read, rescaled and written back once per key block, and it spreads the work over sequences and heads
    only; v2 swaps the loops, keeps each output block on chip and also splits over query blocks."""
    grid = rates.flash1_slowdown if rates is not None and rates.flash1_slowdown else H100_FLASH1_SLOWDOWN
    return _rate(grid, seq, head_dim)


def parse_attention_shape_rates(value, source: str) -> AttentionShapeRates:
    """A chip file's ``attention_shape_rates``: ``{forward_causal: {128: {512: 191, 16384: 335}, 64: {...}},
    forward: {...}, backward: {...}, backward_causal: {...}, flash1_slowdown: {...}}`` (head size → sequence →
    rate, or for ``flash1_slowdown`` a ratio ≥ 1; forward and backward optional, together; backward_causal and
    flash1_slowdown optional); one-line errors naming the file and the entry."""
    keys = ("forward_causal", "forward", "backward", "backward_causal", "flash1_slowdown")
    if not isinstance(value, dict) or "forward_causal" not in value:
        raise PipesimError(f"{source}: attention_shape_rates must map forward_causal (and optionally forward, "
                           "backward, backward_causal and flash1_slowdown) to {head_size: {seq: rate}}")
    unknown = set(value) - set(keys)
    if unknown:
        raise PipesimError(f"{source}: attention_shape_rates has unknown key(s) {sorted(unknown)}; use "
                           f"{', '.join(keys)}")
    grids = {}
    for key in keys:
        if key not in value:
            continue
        entry = value[key]
        try:
            grids[key] = tuple((int(d), tuple((int(s), float(r)) for s, r in points.items()))
                               for d, points in entry.items())
        except (AttributeError, TypeError, ValueError):
            raise PipesimError(f"{source}: attention_shape_rates.{key} must map integer head sizes to "
                               "{integer seq: number}") from None
    with naming(source):
        return AttentionShapeRates(**grids)


@functools.lru_cache(maxsize=4096)
def cta_imbalance(tiles: int, sequence_heads: int, sm_count: int) -> float:
    """How much longer a causal fused-attention kernel takes than its work spread evenly over ``sm_count`` SMs,
    when it launches ``tiles`` query tiles for each of ``sequence_heads`` (sequence, head) pairs and the i-th
    tile's CTA does i units of work (the key tiles at or below the diagonal). ≥ 1; 1 for grids of many waves.

    The CTAs are scheduled longest first, each on the least-loaded SM (LPT list scheduling); the kernel ends
    with its last SM. By hand: 32 tiles × 4 heads = 128 CTAs on 132 SMs each run alone, the longest 32 units,
    where 4·(32·33/2)/132 = 16 units would fill every SM: 2.0."""
    if tiles < 1 or sequence_heads < 1 or sm_count < 1:
        raise PipesimError(f"attention grid: tiles {tiles}, sequence-heads {sequence_heads} and SMs {sm_count} "
                           "must all be ≥ 1")
    if tiles * sequence_heads >= WAVES_SIMULATED * sm_count:
        return 1.0
    work = sequence_heads * tiles * (tiles + 1) / 2
    loads = [0] * sm_count
    for size in range(tiles, 0, -1):
        for _ in range(sequence_heads):
            heapq.heapreplace(loads, loads[0] + size)
    return max(loads) / (work / sm_count)
