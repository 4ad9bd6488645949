"""The executor computes what one process computes: losses, every gradient and the parameters after two
optimizer steps, for **every built-in schedule** (parametrized over the loader's list, so a new schedule file
is executed without anyone adding it here) × tp ∈ {1, 2} × dp ∈ {1, 2} at pp = 2, in sequence-parallel TP
mode; plus the variants that exercise other runtime paths (all-reduce TP mode, receives posted at use, NCCL-style
grouped issue) on the schedules where they apply.

One spawned world per layout runs every config (a module-scoped cache), to amortise process start and group
init; each (layout, config) is still its own test.
"""

from functools import lru_cache

import pytest

torch = pytest.importorskip("torch")

from executors.harness import spawn  # noqa: E402 — only after torch is known present
from executors.interpreter import RecvPolicy  # noqa: E402
from executors.runtime import RunConfig, reference_run, run_configs  # noqa: E402
from executors.tp_layers import TPMode  # noqa: E402
from pipesim.program.loader import builtin_names  # noqa: E402
from pipesim.topology import Topology  # noqa: E402

pytestmark = pytest.mark.distributed

RTOL, ATOL = 1e-5, 1e-6
LAYOUTS = [(1, 1), (2, 1), (1, 2), (2, 2)]  # (tp, dp)
# (schedule, TP mode, receive policy or None for the backend's default)
VARIANTS = [(s, TPMode.REDUCE_SCATTER, None) for s in builtin_names()] + [
    # The all-reduce TP mode on the fused-backward schedules, one and two chunks.
    ("gpipe", TPMode.ALL_REDUCE, None), ("1f1b", TPMode.ALL_REDUCE, None), ("interleaved", TPMode.ALL_REDUCE, None),
    # Operations issued one by one at their instruction, and in groups (the NCCL policy), give the same numbers
    # as eager posting; GROUPED runs schedules the grouped validator accepts.
    ("interleaved", TPMode.REDUCE_SCATTER, RecvPolicy.AT_USE), ("1f1b", TPMode.REDUCE_SCATTER, RecvPolicy.GROUPED),
    ("zb-h1", TPMode.REDUCE_SCATTER, RecvPolicy.GROUPED), ("gpipe", TPMode.REDUCE_SCATTER, RecvPolicy.GROUPED),
]


def _config(layout, variant) -> RunConfig:
    (tp, dp), (schedule, mode, policy) = layout, variant
    return RunConfig(schedule=schedule, topology=Topology(tp=tp, dp=dp, pp=2), microbatches=4, steps=2,
                     tp_mode=mode, capture=True, recv_policy=policy)


@pytest.fixture(scope="module")
def world_results():
    """Results of every variant on a layout, from one spawned world per layout (run on first use)."""
    cache: dict = {}

    def of(layout):
        if layout not in cache:
            configs = [_config(layout, v) for v in VARIANTS]
            results = spawn(run_configs, configs[0].topology.world_size, configs)[0]
            cache[layout] = dict(zip(VARIANTS, results, strict=True))
        return cache[layout]

    return of


@lru_cache(maxsize=None)
def _reference(model, optimizer, lr, dp, microbatches, steps):
    """The single-process run depends on the model, the optimizer and the global batch only — not on the
    schedule or tp — so the 60 cases share two of them."""
    cfg = RunConfig(schedule="1f1b", topology=Topology(dp=dp, pp=2), microbatches=microbatches, steps=steps,
                    model=model, optimizer=optimizer, lr=lr)
    return reference_run(cfg)


def _variant_id(variant) -> str:
    schedule, mode, policy = variant
    return f"{schedule}-{mode.value}" + (f"-{policy.value}" if policy else "")


@pytest.mark.parametrize("layout", LAYOUTS, ids=[f"tp{tp}-dp{dp}" for tp, dp in LAYOUTS])
@pytest.mark.parametrize("variant", VARIANTS, ids=[_variant_id(v) for v in VARIANTS])
def test_matches_single_process(world_results, layout, variant):
    cfg = _config(layout, variant)
    got = world_results(layout)[variant]
    ref = _reference(cfg.model, cfg.optimizer, cfg.lr, cfg.topology.dp, cfg.microbatches, cfg.steps)
    where = f"{_variant_id(variant)} tp={layout[0]} dp={layout[1]}"
    torch.testing.assert_close(torch.tensor(got.losses), torch.tensor(ref.losses), rtol=RTOL, atol=ATOL,
                               msg=lambda m: f"{where} losses: {m}")
    for step, (grads, ref_grads) in enumerate(zip(got.full_grads, ref.grads, strict=True)):
        assert grads.keys() == ref_grads.keys(), where
        for name, expected in ref_grads.items():
            torch.testing.assert_close(grads[name], expected, rtol=RTOL, atol=ATOL,
                                       msg=lambda m, n=name, s=step: f"{where} step {s} grad {n}: {m}")
    for name, expected in ref.params.items():
        torch.testing.assert_close(got.full_params[name], expected, rtol=RTOL, atol=ATOL,
                                   msg=lambda m, n=name: f"{where} param {n} after 2 steps: {m}")
