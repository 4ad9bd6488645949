"""The executor computes what one process computes: losses, every gradient and the parameters after two
optimizer steps, for gpipe, 1f1b and interleaved × TP mode, and the zero-bubble / V family (zb-h1, zb-h2,
zb-v, dualpipe-v, looped-bfs; split backward, V placement with its same-rank hand-off) in sequence-parallel mode, each
× tp ∈ {1, 2} × dp ∈ {1, 2} at pp = 2; and every schedule's grouped-safe Program issued in groups, as on NCCL.

One spawned world per layout runs every schedule × mode, to amortise process start and group init.
"""

import pytest
import torch

from executors.harness import spawn
from executors.interpreter import RecvPolicy
from executors.runtime import RunConfig, reference_run, run_configs
from executors.tp_layers import TPMode
from pipesim.program.grouped import P2PLowering
from pipesim.topology import Topology

pytestmark = pytest.mark.distributed

CLASSIC = ("gpipe", "1f1b", "interleaved")
# Split backward (I then W), V placement and breadth-first chunks: the harder TP mode is enough for them.
ZERO_BUBBLE = ("zb-h1", "zb-h2", "zb-v", "dualpipe-v", "looped-bfs")
RTOL, ATOL = 1e-5, 1e-6


@pytest.mark.parametrize(("tp", "dp"), [(1, 1), (2, 1), (1, 2), (2, 2)])
def test_matches_single_process(tp, dp):
    topology = Topology(tp=tp, dp=dp, pp=2)
    configs = [
        RunConfig(schedule=s, topology=topology, microbatches=4, steps=2, tp_mode=mode, capture=True)
        for s in CLASSIC
        for mode in TPMode
    ]
    configs += [
        RunConfig(schedule=s, topology=topology, microbatches=4, steps=2, tp_mode=TPMode.REDUCE_SCATTER,
                  capture=True)
        for s in ZERO_BUBBLE
    ]
    # Operations issued one by one at their instruction give the same numbers as eager posting; so does every
    # schedule's grouped-safe Program issued in groups (the NCCL policy, pipesim.program.grouped).
    configs.append(RunConfig(schedule="interleaved", topology=topology, microbatches=4, steps=2,
                             tp_mode=TPMode.REDUCE_SCATTER, capture=True, recv_policy=RecvPolicy.AT_USE))
    configs += [
        RunConfig(schedule=s, topology=topology, microbatches=4, steps=2, tp_mode=TPMode.REDUCE_SCATTER,
                  capture=True, p2p=P2PLowering.GROUPED)
        for s in (CLASSIC + ZERO_BUBBLE if tp == dp == 1 else ("1f1b", "zb-v"))
    ]
    results = spawn(run_configs, topology.world_size, configs)[0]
    for cfg, got in zip(configs, results, strict=True):
        ref = reference_run(cfg)
        where = f"{cfg.schedule} {cfg.tp_mode.value} tp={tp} dp={dp}"
        torch.testing.assert_close(
            torch.tensor(got.losses),
            torch.tensor(ref.losses),
            rtol=RTOL,
            atol=ATOL,
            msg=lambda m, w=where: f"{w} losses: {m}",
        )
        for step, (grads, ref_grads) in enumerate(zip(got.full_grads, ref.grads, strict=True)):
            assert grads.keys() == ref_grads.keys(), where
            for name, expected in ref_grads.items():
                torch.testing.assert_close(
                    grads[name],
                    expected,
                    rtol=RTOL,
                    atol=ATOL,
                    msg=lambda m, w=where, n=name, s=step: f"{w} step {s} grad {n}: {m}",
                )
        for name, expected in ref.params.items():
            torch.testing.assert_close(
                got.full_params[name],
                expected,
                rtol=RTOL,
                atol=ATOL,
                msg=lambda m, w=where, n=name: f"{w} param {n} after 2 steps: {m}",
            )
