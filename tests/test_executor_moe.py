"""The MoE executor computes what one process computes.

A spawned four-process gloo world runs a MoE GPT (top-2 of 4 experts) with its experts sharded over EP ranks
and the tokens dispatched and combined by all-to-all: pp2·dp2·ep2 under 1F1B, interleaved, DualPipe-V and
bidirectional DualPipe (whose overlapped pairs run one half after the other on CPU; also their grouped-safe
Programs, transfers issued in groups as on NCCL; DualPipe's two copies of the experts summed over the mirror
ranks), shared experts with a dense first block, pp1·dp4·ep2 (experts replicated twice: their gradients
sync over an expert data-parallel group of two), pp2·dp2 at ep = 1, tp2·dp2·ep2 in both TP modes and
cp2·pp2·ep2 under ZB-V. Losses, every gradient and the parameters after two steps equal the single-process run
with all experts (fp32 tolerance). Process-free: the router, the dispatch arithmetic (an exchange between
simulated EP ranks), the layer at ep = 1 against the reference, and the refusals.
"""

from functools import cache

import pytest

torch = pytest.importorskip("torch")

from executors import run as run_cli  # noqa: E402
from executors.harness import spawn  # noqa: E402
from executors.model import GPTStage, ModelConfig, init_full_weights  # noqa: E402
from executors.moe import MoEConfig, MoELayer, init_moe_weights, is_expert, reference_moe  # noqa: E402
from executors.moe_dispatch import inverse, local_expert_order, plan_dispatch, route  # noqa: E402
from executors.parallel_context import ParallelContext  # noqa: E402
from executors.runtime import RunConfig, plan, reference_run, run_configs  # noqa: E402
from executors.tp_layers import TPMode  # noqa: E402
from pipesim.program.grouped import P2PLowering  # noqa: E402
from pipesim.topology import Topology  # noqa: E402
from tests.reference_checks import assert_matches_reference  # noqa: E402

MOE = MoEConfig(experts=4, top_k=2, ffn_hidden=64)  # 2·hidden, the flags' default
SHARED = MoEConfig(experts=4, top_k=2, ffn_hidden=64, shared_experts=1, first_dense_layers=1)
EP2 = Topology(dp=2, pp=2, ep=2)
# The done-when, from the command line's own flags (docs/moe.md shows it under torchrun).
DONE_WHEN = "-s dualpipe-v --pp 2 --dp 2 --ep 2 --moe-experts 4 --moe-top-k 2 --mb 4 --steps 2"
AR, RS = TPMode.ALL_REDUCE, TPMode.REDUCE_SCATTER
# name → (topology, schedule, MoE layers, TP mode, P2P lowering: None is gloo's eager default)
CASES = {
    "1f1b-pp2-dp2-ep2": (EP2, "1f1b", MOE, AR, None),
    "interleaved-pp2-dp2-ep2": (EP2, "interleaved", MOE, AR, None),
    "done-when": (EP2, "dualpipe-v", MOE, AR, None),  # dualpipe-v at pp2·dp2·ep2, built from DONE_WHEN
    "1f1b-shared-first-dense-pp2-dp2-ep2": (EP2, "1f1b", SHARED, AR, None),
    "1f1b-pp1-dp4-ep2": (Topology(dp=4, pp=1, ep=2), "1f1b", MOE, AR, None),
    # ep = 1: every dp rank holds every expert, and expert gradients average over dp like dense ones.
    "1f1b-pp2-dp2-ep1": (Topology(dp=2, pp=2), "1f1b", MOE, AR, None),
    # The layer replicated over TP: all TP ranks compute it (all-reduce mode), or each its sequence slice.
    "1f1b-tp2-dp2-ep2": (Topology(tp=2, dp=2, pp=1, ep=2), "1f1b", MOE, AR, None),
    "1f1b-tp2-dp2-ep2-sequence-parallel": (Topology(tp=2, dp=2, pp=1, ep=2), "1f1b", MOE, RS, None),
    # EP folded over the cp ranks; a split backward (I, then W) on a V placement.
    "zb-v-cp2-pp2-ep2": (Topology(cp=2, pp=2, ep=2), "zb-v", MOE, AR, None),
    # What NCCL runs: the grouped-safe Program, each run of transfers issued as one group.
    "dualpipe-v-pp2-dp2-ep2-p2p-grouped": (EP2, "dualpipe-v", MOE, AR, P2PLowering.GROUPED),
    # Bidirectional DualPipe: two copies of each stage's experts, summed over the mirror pair of pp ranks.
    "dualpipe-pp2-dp2-ep2": (EP2, "dualpipe", MOE, AR, None),
    "dualpipe-pp2-dp2-ep2-p2p-grouped": (EP2, "dualpipe", MOE, AR, P2PLowering.GROUPED),
}


def _config(name: str) -> RunConfig:
    if name == "done-when":
        cfg = run_cli.config_from_args(run_cli.parser().parse_args(DONE_WHEN.split()), world_size=4)
        return RunConfig(**{**cfg.__dict__, "capture": True})
    topology, schedule, moe, mode, p2p = CASES[name]
    return RunConfig(
        schedule=schedule,
        topology=topology,
        microbatches=4,
        steps=2,
        model=ModelConfig(moe=moe),
        tp_mode=mode,
        p2p=p2p,
        capture=True,
    )


def _world(rank: int, world_size: int, configs: list[RunConfig]):
    """Every config's run, plus the routed experts this rank's first stage holds under EP2."""
    results = run_configs(rank, world_size, configs)
    ctx = ParallelContext.create(EP2)
    cfg = ModelConfig(moe=MOE)
    stage = GPTStage(
        cfg, ctx.pp_rank, 2, 0, init_full_weights(cfg), ctx.tp_group, TPMode.ALL_REDUCE, ep_group=ctx.ep_group
    )
    first = f"blocks.{2 * ctx.pp_rank}.mlp.experts."  # the stage's first block (two per stage)
    experts = sorted(name for name, p in stage.named_parameters() if is_expert(p) and name.startswith(first))
    return results, (ctx.pp_rank, ctx.coords.dp, experts)


@pytest.fixture(scope="module")
def world():
    configs = [_config(name) for name in CASES]
    outputs = spawn(_world, 4, configs)
    return dict(zip(CASES, outputs[0][0], strict=True)), [held for _, held in outputs]


@cache
def _reference(model: ModelConfig, dp: int):
    """The one-process run depends on the model and the global batch (dp · 4 microbatches) only. One thread:
    the model is tiny, and more only spin on a loaded machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = RunConfig(topology=Topology(dp=dp), microbatches=4, steps=2, model=model)
        return reference_run(cfg)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.distributed
@pytest.mark.parametrize("name", list(CASES))
def test_moe_matches_single_process(world, name):
    cfg = _config(name)
    assert_matches_reference(world[0][name], _reference(cfg.model, cfg.topology.dp), name)
    if cfg.schedule == "dualpipe":  # the two copies of every stage, experts included, are still identical
        assert world[0][name].copy_difference == 0.0


@pytest.mark.distributed
def test_each_ep_rank_holds_its_share_of_the_experts(world):
    for pp_rank, dp_rank, experts in world[1]:
        layer = f"blocks.{2 * pp_rank}.mlp.experts"
        held = [f"{layer}.{e}.{fc}.weight" for e in (2 * dp_rank, 2 * dp_rank + 1) for fc in ("fc1", "fc2")]
        assert experts == sorted(held), (pp_rank, dp_rank)


# --- process-free ---------------------------------------------------------------------------------------------


def test_route_takes_the_top_k_renormalised_and_breaks_ties_towards_the_lower_index():
    logits = torch.tensor([[0.0, 2.0, 1.0, 2.0], [3.0, 3.0, 3.0, -1.0]])
    routing = route(logits, top_k=2)
    assert routing.experts.tolist() == [[1, 3], [0, 1]]
    torch.testing.assert_close(routing.gates, torch.full((2, 2), 0.5))
    logits = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
    routing = route(logits, top_k=3)
    top = logits.topk(3, dim=-1)
    assert torch.equal(routing.experts, top.indices)
    torch.testing.assert_close(routing.gates, torch.softmax(top.values, dim=-1))


def test_dispatch_between_simulated_ep_ranks_delivers_each_copy_to_its_expert():
    """Two EP ranks of four experts: what each receives, regrouped by local expert, is exactly the tokens routed
    to that expert, in (source rank, token) order; sending the rows back and undoing the sort restores them."""
    gen = torch.Generator().manual_seed(2)
    ep, experts, k = 2, 4, 2
    tokens = [torch.randn(n, 3, generator=gen) for n in (5, 7)]  # uneven counts per rank
    routings = [route(torch.randn(len(t), experts, generator=gen), k) for t in tokens]
    plans = [plan_dispatch(r.experts, experts, ep) for r in routings]
    sent = [t[p.source_tokens].split(p.send_splits) for t, p in zip(tokens, plans, strict=True)]
    returned: list[list[torch.Tensor]] = [[] for _ in range(ep)]  # per source rank, what each dest sends back
    for dest in range(ep):
        recv_counts = torch.stack([p.send_counts[dest] for p in plans])
        received = torch.cat([rows[dest] for rows in sent])
        by_expert, sizes = local_expert_order(recv_counts)
        for local, part in enumerate(received[by_expert].split(sizes)):
            expert = dest * experts // ep + local
            chose = [t[(r.experts == expert).any(dim=1)] for t, r in zip(tokens, routings, strict=True)]
            assert torch.equal(part, torch.cat(chose)), (dest, local)
        # The combine: the rows regrouped and restored, then split back by source (the swapped splits).
        restored = received[by_expert][inverse(by_expert)]
        for src, rows in enumerate(restored.split(recv_counts.sum(dim=1).tolist())):
            returned[src].append(rows)
    for src, (t, p) in enumerate(zip(tokens, plans, strict=True)):
        copies = torch.cat(returned[src])[inverse(p.order)].view(len(t), k, 3)  # copy t·k + j: token t
        assert torch.equal(copies, t[:, None, :].expand(-1, k, -1))


def test_layer_at_ep1_equals_the_reference_forward_and_backward():
    moe = MoEConfig(experts=4, top_k=2, ffn_hidden=16, shared_experts=1)
    gen = torch.Generator().manual_seed(3)
    weights = init_moe_weights("m", moe, 8, 2, lambda *shape, scale: torch.randn(*shape, generator=gen) * scale)
    layer = MoELayer("m", moe, weights, None)
    x = torch.randn(5, 3, 8, generator=gen, requires_grad=True)  # [s, b, h]
    ref_w = {name: w.clone().requires_grad_() for name, w in weights.items()}
    ref_x = x.detach().clone().requires_grad_()
    out, ref = layer(x), reference_moe(ref_x, ref_w, "m", moe)
    torch.testing.assert_close(out, ref)
    grad = torch.randn(out.shape, generator=gen)
    out.backward(grad)
    ref.backward(grad)
    torch.testing.assert_close(x.grad, ref_x.grad)
    for name, param in layer.named_parameters():
        torch.testing.assert_close(param.grad, ref_w[f"m.{name}"].grad, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize(
    ("argv", "world_size", "named"),
    [
        ("--moe-experts 3 --ep 2 --dp 2 --pp 1", 2, "--moe-experts 3 is not divisible by --ep 2"),
        ("--moe-experts 4 --ep 2 --pp 2", 2, "--ep 2 must divide dp·cp"),
        ("--moe-experts 4 --moe-top-k 5 --pp 2", 2, "--moe-top-k 5"),
        ("--moe-top-k 2 --pp 2", 2, "--moe-top-k describes MoE layers"),
        ("--ep 2 --dp 2 --pp 1", 2, "--ep 2 shards experts, but the model is dense"),
        ("--moe-experts 4 --moe-first-dense 4 --pp 2", 2, "--moe-first-dense 4"),
    ],
)
def test_bad_moe_flags_are_refused_in_one_line_before_any_process_group(monkeypatch, capsys, argv, world_size, named):
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    assert run_cli.main(argv.split()) == run_cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("executors.run: error: ") and named in err[0], err


def test_the_done_when_program_has_overlapped_pairs():
    """DualPipe-V at pp2 with 4 microbatches runs F-and-B pairs (one half after the other on CPU)."""
    cfg = _config("done-when")
    assert cfg.model == ModelConfig(moe=MOE) and cfg.topology == EP2
    program = plan(cfg, 4)
    assert any(ins.overlap for code in program.ranks for ins in code)


def test_emulation_of_moe_layers_is_refused(tmp_path, monkeypatch, capsys):
    costs = tmp_path / "costs.yaml"
    costs.write_text("time_unit: s\ndefault: {forward: 0.001, backward: 0.002}\n")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert run_cli.main(["--pp", "2", "--moe-experts", "4", "--emulate", str(costs)]) == run_cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--emulate does not model MoE layers" in err[0], err
