"""The grouped-safe Program runs for real: every built-in schedule, issued in groups (batch_isend_irecv, as on
NCCL) on gloo, computes what one process computes — losses, every gradient, the parameters after the step.

One spawned world at pp = 4 (the tiny model, one step) runs every schedule; pp = 2 runs in
test_executor_equivalence's worlds.
"""

import pytest

torch = pytest.importorskip("torch")

from executors.harness import spawn  # noqa: E402 — only after torch is known present
from executors.model import ModelConfig  # noqa: E402
from executors.runtime import RunConfig, plan, reference_run, run_configs  # noqa: E402
from pipesim.program.build import build_program  # noqa: E402
from pipesim.program.grouped import P2PLowering  # noqa: E402
from pipesim.program.loader import builtin_names  # noqa: E402
from pipesim.topology import Topology  # noqa: E402

pytestmark = pytest.mark.distributed

RTOL, ATOL = 1e-5, 1e-6
TINY = ModelConfig(layers=8, hidden=16, heads=2, seq_len=8, micro_batch_size=1, vocab=32)
# Microbatches per depth that every built-in schedule accepts (dualpipe: even; dualpipe-v ≥ 2·pp).
MICROBATCHES = {4: 8}


@pytest.mark.parametrize("pp", sorted(MICROBATCHES))
def test_every_schedule_in_grouped_mode_matches_single_process(pp):
    topology = Topology(pp=pp)
    m = MICROBATCHES[pp]
    configs = [
        RunConfig(schedule=name, topology=topology, microbatches=m, steps=1, model=TINY, capture=True,
                  p2p=P2PLowering.GROUPED)
        for name in builtin_names()
    ]
    # Not vacuous: the run really executes reordered Programs where lower()'s own would hang on NCCL.
    reordered = [c.schedule for c in configs if plan(c, pp) != build_program(c.schedule, pp, m).program]
    assert {"interleaved", "zb-v"} <= set(reordered), reordered
    results = spawn(run_configs, pp, configs)[0]
    for cfg, got in zip(configs, results, strict=True):
        ref = reference_run(cfg)
        where = f"{cfg.schedule} pp={pp} grouped"
        torch.testing.assert_close(torch.tensor(got.losses), torch.tensor(ref.losses), rtol=RTOL, atol=ATOL,
                                   msg=lambda msg, w=where: f"{w} losses: {msg}")
        (grads,), (ref_grads,) = got.full_grads, ref.grads
        assert grads.keys() == ref_grads.keys(), where
        for name, expected in ref_grads.items():
            torch.testing.assert_close(grads[name], expected, rtol=RTOL, atol=ATOL,
                                       msg=lambda msg, w=where, n=name: f"{w} grad {n}: {msg}")
        for name, expected in ref.params.items():
            torch.testing.assert_close(got.full_params[name], expected, rtol=RTOL, atol=ATOL,
                                       msg=lambda msg, w=where, n=name: f"{w} param {n}: {msg}")
