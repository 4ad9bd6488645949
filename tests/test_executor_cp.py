"""Context parallelism executed: ring attention over the cp group gives the single-process numbers, and so
do the all-gather of the keys and values and Ulysses' all-to-alls (--cp-comm-type allgather|a2a, on 1F1B and on
ZB-H1's split backward at every tp).

Every built-in schedule (the loader's list) at cp = 2 × tp ∈ {1, 2}, pp = 2, sequence-parallel TP mode:
losses, every gradient and the parameters after two optimizer steps equal the one-process reference (fp32
tolerance) — at tp = 2 a schedule per runtime path unless PIPESIM_FULL_MATRIX=1
(tests/matrix.py). cp = 1 at tp ∈ {1, 2} is
``test_executor_equivalence``'s matrix, unchanged. The issue's
done-when command (``executors.run -s interleaved --tp 2 --cp 2 --pp 2``, all-reduce TP mode) runs in the
tp = 2 world from its own argv, with fewer microbatches. One spawned world per layout runs every config.
The ring's measured hops are in the timeline (CP_RING rows).
"""

from functools import cache

import pytest

torch = pytest.importorskip("torch")

from executors import run as run_cli  # noqa: E402
from executors.harness import spawn  # noqa: E402
from executors.model import ModelConfig  # noqa: E402
from executors.runtime import RunConfig, plan, reference_run, run_configs  # noqa: E402
from executors.tp_layers import TPMode  # noqa: E402
from pipesim.analytic.layout import CpComm  # noqa: E402
from pipesim.errors import PipesimError  # noqa: E402
from pipesim.io.timeline import RING_OP  # noqa: E402
from pipesim.program.grouped import P2PLowering  # noqa: E402
from pipesim.program.loader import builtin_names  # noqa: E402
from pipesim.topology import Topology  # noqa: E402
from tests.matrix import full_matrix  # noqa: E402
from tests.reference_checks import assert_matches_reference  # noqa: E402

TPS = [1, 2]
DONE_WHEN = "-s interleaved --tp 2 --cp 2 --pp 2 --mb 4 --steps 2"


def _config(tp: int, schedule: str) -> RunConfig:
    return RunConfig(schedule=schedule, topology=Topology(tp=tp, cp=2, pp=2), microbatches=4, steps=2,
                     tp_mode=TPMode.REDUCE_SCATTER, capture=True)


def _done_when() -> RunConfig:
    cfg = run_cli.config_from_args(run_cli.parser().parse_args(DONE_WHEN.split()), world_size=8)
    return RunConfig(**{**cfg.__dict__, "capture": True})


# The eight-process world is the suite's slowest (≈ 6 s a config on two cores): by default it runs one schedule
# per runtime path — fused backward, split backward (I/W), V placement — plus the done-when command
# (interleaved); PIPESIM_FULL_MATRIX=1 runs every built-in schedule there too.
TP2_SCHEDULES = ("1f1b", "zb-h1", "zb-v")


def _variants(tp: int) -> dict[str, RunConfig]:
    full = tp == 1 or full_matrix()
    variants = {s: _config(tp, s) for s in builtin_names() if full or s in TP2_SCHEDULES}
    if tp == 1:  # the NCCL path on gloo: the grouped-safe Program, its transfers issued in groups
        variants["zb-v-p2p-grouped"] = RunConfig(**{**_config(tp, "zb-v").__dict__, "p2p": P2PLowering.GROUPED})
    # the other two exchanges of keys and values (executors.cp_attention), on a fused and a split backward
    for schedule in ("1f1b", "zb-h1"):
        for comm in (CpComm.ALL_GATHER, CpComm.A2A):
            variants[f"{schedule}-{comm.value}"] = RunConfig(**{**_config(tp, schedule).__dict__, "cp_comm": comm})
    if tp == 2:
        variants["done-when"] = _done_when()
    return variants


@pytest.fixture(scope="module")
def world_results():
    cache_: dict = {}

    def of(tp):
        if tp not in cache_:
            variants = _variants(tp)
            configs = list(variants.values())
            results = spawn(run_configs, configs[0].topology.world_size, configs)[0]
            cache_[tp] = dict(zip(variants, results, strict=True))
        return cache_[tp]

    return of


@cache
def _reference(model, optimizer, lr, microbatches, steps):
    # The reference depends on the model, optimizer and global batch only: cp splits sequences, not the batch.
    cfg = RunConfig(topology=Topology(pp=2), microbatches=microbatches, steps=steps, model=model,
                    optimizer=optimizer, lr=lr)
    return reference_run(cfg)


CASES = [(tp, v) for tp in TPS for v in _variants(tp)]


@pytest.mark.distributed
@pytest.mark.parametrize(("tp", "variant"), CASES, ids=[f"{v}-cp2-tp{tp}" for tp, v in CASES])
def test_cp_matches_single_process(world_results, tp, variant):
    cfg = _variants(tp)[variant]
    got = world_results(tp)[variant]
    ref = _reference(cfg.model, cfg.optimizer, cfg.lr, cfg.microbatches, cfg.steps)
    where = f"{variant} cp=2 tp={tp}"
    assert_matches_reference(got, ref, where)
    # Every attention layer's forward and backward exchange over the cp group, and the timeline shows each wait.
    ring = got.timeline[got.timeline["op"] == RING_OP]
    layers_per_rank = cfg.model.layers // cfg.topology.pp
    waits = {CpComm.P2P: 1 + 3,  # cp − 1 forward K/V hops; cp − 1 K/V + cp dK/dV backward
             CpComm.ALL_GATHER: 1 + 2,  # the gather; the gather again and the gradients' reduce-scatter
             CpComm.A2A: 4 + 4}[cfg.cp_comm]  # q, k, v and the output, and their gradients back
    assert len(ring) == cfg.steps * cfg.microbatches * cfg.topology.pp * layers_per_rank * waits, where
    if cfg.cp_comm is not CpComm.P2P:
        assert (ring["peer"] == -1).all(), where  # a collective has no single peer
    hop = 2 * cfg.model.micro_batch_size * cfg.model.seq_len // 2 * cfg.model.hidden // tp * 4  # a rank's K and V
    # a hop carries a rank's K and V; the all-gather and reduce-scatter every rank's (cp = 2); an all-to-all one
    # of q, k, v or the output
    moved = {CpComm.P2P: hop, CpComm.ALL_GATHER: 2 * hop, CpComm.A2A: hop // 2}[cfg.cp_comm]
    assert set(ring["bytes"]) == {moved}, where


def test_cp_bad_input_is_one_line_before_any_process_group():
    cfg = RunConfig(topology=Topology(cp=2, pp=2), model=ModelConfig(seq_len=6))
    with pytest.raises(PipesimError, match=r"--seq-len 6 is not divisible by 2·cp = 4"):
        plan(cfg, 4)
    cfg = RunConfig(topology=Topology(tp=4, cp=2), model=ModelConfig(seq_len=12), tp_mode=TPMode.REDUCE_SCATTER)
    with pytest.raises(PipesimError, match=r"--seq-len 12 / --cp 2 is not divisible by --tp 4"):
        plan(cfg, 8)
    # Ulysses splits each TP rank's heads over the cp ranks: 4 heads over tp 2 are 2, which cp 4 does not divide
    cfg = RunConfig(topology=Topology(tp=2, cp=4), model=ModelConfig(seq_len=16), cp_comm=CpComm.A2A)
    with pytest.raises(PipesimError, match=r"--heads 4 over --tp 2 are 2, which --cp 4 does not divide"):
        plan(cfg, 8)
    # the hierarchical exchange is priced by the simulator, not executed: refused, not run as Ulysses
    cfg = RunConfig(topology=Topology(cp=4), model=ModelConfig(seq_len=16), cp_comm=CpComm.A2A_P2P)
    with pytest.raises(PipesimError, match="a2a\\+p2p is not executed"):
        plan(cfg, 4)
    args = run_cli.parser().parse_args(["1f1b", "--cp", "2", "--cp-comm-type", "allgather"])
    assert run_cli.config_from_args(args, world_size=4).cp_comm is CpComm.ALL_GATHER
