"""The executor computes what one process computes: losses, every gradient and the parameters after two
optimizer steps, for **every built-in schedule** (parametrized over the loader's list, so a new schedule file
is executed without anyone adding it here) × tp ∈ {1, 2} × dp ∈ {1, 2} at pp = 2, in sequence-parallel TP
mode; every schedule's grouped-safe Program issued in groups, as on NCCL (all at tp = dp = 1, two elsewhere);
plus the variants that exercise other runtime paths (all-reduce TP mode, receives posted at use). At tp = dp = 2
(eight processes) a schedule per runtime path unless PIPESIM_FULL_MATRIX=1 (tests/matrix.py).

One spawned world per layout runs every config (a module-scoped cache), to amortise process start and group
init; each (layout, config) is still its own test.
"""

from functools import cache

import pytest

torch = pytest.importorskip("torch")

from executors.harness import spawn  # noqa: E402 — only after torch is known present
from executors.interpreter import RecvPolicy  # noqa: E402
from executors.runtime import RunConfig, reference_run, run_configs  # noqa: E402
from executors.tp_layers import TPMode  # noqa: E402
from pipesim.program.grouped import P2PLowering  # noqa: E402
from pipesim.program.loader import builtin_names  # noqa: E402
from pipesim.topology import Topology  # noqa: E402
from tests.matrix import full_matrix  # noqa: E402
from tests.reference_checks import assert_matches_reference  # noqa: E402

pytestmark = pytest.mark.distributed

LAYOUTS = [(1, 1), (2, 1), (1, 2), (2, 2)]  # (tp, dp)
RS, AR = TPMode.REDUCE_SCATTER, TPMode.ALL_REDUCE
# (schedule, TP mode, receive policy, P2P lowering); None: the backend's default.
EVERY_LAYOUT = [(s, RS, None, None) for s in builtin_names()] + [
    # The all-reduce TP mode on the fused-backward schedules, one and two chunks.
    ("gpipe", AR, None, None), ("1f1b", AR, None, None), ("interleaved", AR, None, None),
    # Operations issued one by one at their instruction give the same numbers as eager posting.
    ("interleaved", RS, RecvPolicy.AT_USE, None),
]
# Every schedule's grouped-safe Program issued in groups (the NCCL policy, pipesim.program.grouped).
GROUPED = [(s, RS, None, P2PLowering.GROUPED) for s in builtin_names()]
GROUPED_BEYOND_TP1_DP1 = [v for v in GROUPED if v[0] in ("1f1b", "zb-v")]
# The eight-process tp2·dp2 world is the suite's slowest: by default it runs a schedule per runtime path —
# fused backward, split backward (I/W), two chunks in a loop, V placement, overlapped F-and-B pairs — and the
# grouped ones; every other variant runs at tp2·dp1 and tp1·dp2. PIPESIM_FULL_MATRIX=1 runs all of them here.
TP2_DP2_SCHEDULES = ("1f1b", "zb-h1", "interleaved", "zb-v", "dualpipe-v")


def variants_of(layout) -> list[tuple]:
    every = EVERY_LAYOUT
    if layout == (2, 2) and not full_matrix():
        every = [v for v in EVERY_LAYOUT if v[0] in TP2_DP2_SCHEDULES and v[1:] == (RS, None, None)]
    return every + (GROUPED if layout == (1, 1) else GROUPED_BEYOND_TP1_DP1)


def _config(layout, variant) -> RunConfig:
    (tp, dp), (schedule, mode, policy, p2p) = layout, variant
    return RunConfig(schedule=schedule, topology=Topology(tp=tp, dp=dp, pp=2), microbatches=4, steps=2,
                     tp_mode=mode, capture=True, recv_policy=policy, p2p=p2p)


@pytest.fixture(scope="module")
def world_results():
    """Results of every variant on a layout, from one spawned world per layout (run on first use)."""
    cache: dict = {}

    def of(layout):
        if layout not in cache:
            variants = variants_of(layout)
            configs = [_config(layout, v) for v in variants]
            results = spawn(run_configs, configs[0].topology.world_size, configs)[0]
            cache[layout] = dict(zip(variants, results, strict=True))
        return cache[layout]

    return of


@cache
def _reference(model, optimizer, lr, dp, microbatches, steps):
    """The single-process run depends on the model, the optimizer and the global batch only — not on the
    schedule, tp or P2P policy — so every case shares one of two."""
    cfg = RunConfig(schedule="1f1b", topology=Topology(dp=dp, pp=2), microbatches=microbatches, steps=steps,
                    model=model, optimizer=optimizer, lr=lr)
    return reference_run(cfg)


def _variant_id(variant) -> str:
    schedule, mode, policy, p2p = variant
    return (f"{schedule}-{mode.value}" + (f"-{policy.value}" if policy else "")
            + (f"-p2p-{p2p.value}" if p2p else ""))


CASES = [(layout, v) for layout in LAYOUTS for v in variants_of(layout)]


@pytest.mark.parametrize(("layout", "variant"), CASES,
                         ids=[f"{_variant_id(v)}-tp{tp}-dp{dp}" for (tp, dp), v in CASES])
def test_matches_single_process(world_results, layout, variant):
    cfg = _config(layout, variant)
    got = world_results(layout)[variant]
    ref = _reference(cfg.model, cfg.optimizer, cfg.lr, cfg.topology.dp, cfg.microbatches, cfg.steps)
    where = f"{_variant_id(variant)} tp={layout[0]} dp={layout[1]}"
    assert_matches_reference(got, ref, where)


def test_interleaved_with_megatron_cores_larger_groups_matches_single_process():
    """Three microbatches on two ranks: pp does not divide m, so the chunks are visited in one group of 3
    (Megatron-Core's rule, pipesim.program.limits.interleaved_microbatch_group); plain and overlapped pairs, and
    the grouped P2P Program NCCL would run, each equal the single-process run."""
    variants = [("interleaved", None), ("interleaved-overlap", None), ("interleaved", P2PLowering.GROUPED)]
    configs = [RunConfig(schedule=s, topology=Topology(pp=2), microbatches=3, steps=2, capture=True, p2p=p2p)
               for s, p2p in variants]
    results = spawn(run_configs, 2, configs)[0]
    ref = _reference(configs[0].model, configs[0].optimizer, configs[0].lr, 1, 3, 2)
    for (schedule, p2p), got in zip(variants, results, strict=True):
        assert_matches_reference(got, ref, f"{schedule} m=3 pp=2" + (f" {p2p.value}" if p2p else ""))
