"""The grouped-safe lowering (pipesim.program.grouped): every built-in schedule and random user compute
orders become deadlock-free under NCCL's grouped point-to-point semantics, computing the same thing; the CLI
shows it; the executor refuses an unproven Program on NCCL before any communication."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipesim.cli.main import main
from pipesim.errors import DeadlockError, PipesimError, ScheduleError
from pipesim.program.build import build_program
from pipesim.program.grouped import P2PLowering, grouped_program, relabel
from pipesim.program.ir import B, F, I, PipelineShape, Placement, Program, Schedule, W
from pipesim.program.loader import builtin_names, load_schedule
from pipesim.program.lowering import lower
from pipesim.program.validate import CommSemantics, validate
from pipesim.sim.costs import CostModel
from pipesim.sim.grouped_timing import StreamScope, grouped_makespan
from pipesim.sim.simulator import simulate

MICROBATCHES = (1, 2, 3, 4, 5, 8, 16)


def _grid():
    for name in builtin_names():
        for pp in (2, 3, 4, 8):
            for m in sorted({*MICROBATCHES, 2 * pp, 2 * pp + 2}):  # 2·pp + 2: dualpipe wants m even, ≥ 2·pp
                yield name, pp, m


def _same_computation(original: Program, grouped: Program) -> None:
    """Each rank runs the same instructions, and its compute/REDUCE_GRAD/STEP sequence is unchanged."""
    for rank, (a, b) in enumerate(zip(original.ranks, grouped.ranks, strict=True)):
        assert Counter(a) == Counter(b), f"rank {rank} runs other instructions"
        local = [ins for ins in a if not ins.op.is_comm]
        assert [ins for ins in b if not ins.op.is_comm] == local, f"rank {rank}: compute order changed"


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_schedule_is_grouped_safe(name):
    """pp ∈ {2, 3, 4, 8} × m from 1 (below pp) to 2·pp and 16: every shape the schedule accepts validates
    under grouped semantics after the grouped lowering and is the same computation; the reordered Program
    validates under every semantics."""
    built = 0
    for schedule, pp, m in _grid():
        if schedule != name:
            continue
        try:
            eager = build_program(name, pp, m).program
        except ScheduleError:
            continue  # the schedule does not support this shape (e.g. interleaved needs m % pp == 0)
        grouped = build_program(name, pp, m, p2p=P2PLowering.GROUPED).program
        validate(grouped, CommSemantics.GROUPED)
        _same_computation(eager, grouped)
        reordered = relabel(eager)  # what grouped_program returns where lower()'s Program is not proven safe
        for semantics in CommSemantics:  # safe even with each send on its own (rendezvous)
            validate(reordered, semantics)
        _same_computation(eager, reordered)
        built += 1
    assert built >= 8, f"{name}: too few shapes built to mean anything"


def test_unsafe_schedules_are_reordered_and_safe_ones_kept_when_faster():
    """lower() alone hangs interleaved and the V family under grouped sends; the pass reorders them. Of the
    already-proven Programs it keeps gpipe's and 1f1b's (as fast) and replaces zb-h1's, whose input-gradient
    sends wait for the neighbour's backward (33 units under grouped sends, reordered 27 = buffered)."""
    for name in ("interleaved", "zb-v", "zb-h2", "dualpipe-v", "looped-bfs"):
        eager = build_program(name, 4, 8).program
        with pytest.raises(DeadlockError, match="to post the receive"):
            validate(eager, CommSemantics.GROUPED)
        with pytest.raises(DeadlockError):
            grouped_makespan(eager)
        grouped = grouped_program(eager)
        assert grouped is not eager
        validate(grouped, CommSemantics.GROUPED)
    for name in ("gpipe", "1f1b"):
        eager = build_program(name, 4, 8).program
        assert grouped_program(eager) is eager
    eager = build_program("zb-h1", 4, 8).program
    assert grouped_makespan(eager) == 33 and grouped_makespan(relabel(eager)) == 27
    assert grouped_program(eager) == relabel(eager)


@pytest.mark.parametrize(("pp", "m"), [(4, 8), (4, 16), (8, 16)])
def test_reordered_programs_wait_for_nothing_in_ideal_timing(pp, m):
    """With the costs the labels were computed from (unit, no transfer time), no send of a reordered Program
    waits for its receive: the step under grouped rendezvous sends is as short as with buffered sends."""
    for name in builtin_names():
        program = grouped_program(build_program(name, pp, m).program)
        assert grouped_makespan(program) == pytest.approx(simulate(program).metrics.makespan), name


def test_grouped_timing_charges_rendezvous():
    """A hand check of the timed model: pp=2 GPipe, one microbatch, transfers of 0.5. Rank 1 posts its
    receive at 0, rank 0 sends after F (1) and holds until it lands (1.5); rank 1 runs F, B (1.5–4.5) and
    sends back; rank 0's B waits for it (5) and ends at 7."""
    program = build_program("gpipe", 2, 1).program
    assert grouped_makespan(program, CostModel(p2p_latency=0.5)) == pytest.approx(7.0)


def _random_schedule(rng: random.Random) -> Schedule:
    """A random valid compute order: a random topological order of every (microbatch, stage) F and
    backward (fused B, or I then W) projected onto the ranks — what a user may write by hand."""
    pp, m = rng.randint(2, 4), rng.randint(1, 6)
    chunks = rng.choice((1, 2))
    placement = rng.choice(tuple(Placement)) if chunks == 2 else Placement.LOOP
    m += m % 2 if placement is Placement.DUAL else 0  # half the microbatches each way
    split = rng.random() < 0.5
    shape = PipelineShape(pp, m, chunks, placement)
    done: set[tuple[str, int, int]] = set()

    def ready(kind: str, mb: int, stage: int) -> bool:
        if kind == "F":
            return shape.is_first_stage(stage) or ("F", mb, stage - 1) in done
        if kind == "B":
            return ("F", mb, stage) in done and (shape.is_last_stage(stage) or ("B", mb, stage + 1) in done)
        return ("B", mb, stage) in done  # W after its I

    todo = [(k, mb, s) for mb in range(m) for s in range(shape.num_stages) for k in ("FBW" if split else "FB")
            if shape.visits(mb, s)]  # under DUAL a microbatch passes its own pipeline only
    orders: list[list] = [[] for _ in range(pp)]
    while todo:
        kind, mb, stage = rng.choice([t for t in todo if ready(*t)])
        todo.remove((kind, mb, stage))
        done.add((kind, mb, stage))
        rank, chunk = shape.rank_of(stage), shape.chunk_of(stage)
        op = {"F": F, "B": I if split else B, "W": W}[kind]
        orders[rank].append(op(mb, chunk))
    return Schedule.from_orders("random", orders, microbatches=m, chunks=chunks, placement=placement)


def test_random_user_schedules_become_grouped_safe():
    """By construction, not by luck of the built-in shapes: random valid compute orders, many of which
    lower() leaves deadlocking under grouped sends."""
    rng = random.Random(11)
    unsafe_before = 0
    for _ in range(150):
        eager = lower(_random_schedule(rng))
        validate(eager, CommSemantics.BUFFERED)
        try:
            validate(eager, CommSemantics.GROUPED)
        except DeadlockError:
            unsafe_before += 1
        grouped = relabel(eager)
        for semantics in CommSemantics:
            validate(grouped, semantics)
        _same_computation(eager, grouped)
    assert unsafe_before >= 40, "the random orders should exercise the hazard (56 of 150 with this seed)"


def test_an_invalid_compute_order_is_reported_not_reordered():
    """The pass needs a Program valid under buffered sends; otherwise the validator's error comes out."""
    bad = lower(Schedule.from_orders("cyclic", [[B(0), F(0)], [F(0), B(0)]], microbatches=1))
    with pytest.raises(ScheduleError, match="runs before F mb=0"):
        grouped_program(bad)


def test_cli_validates_and_lowers_grouped(tmp_path, capsys):
    assert main(["validate", "-s", "interleaved", "--pp", "4", "--mb", "8", "--semantics", "grouped"]) == 2
    assert "deadlock: rank" in capsys.readouterr().err
    assert main(["validate", "-s", "interleaved", "--pp", "4", "--mb", "8", "--semantics", "grouped",
                 "--p2p", "grouped"]) == 0
    assert "(grouped lowering) is valid" in capsys.readouterr().out
    text = tmp_path / "zbv.txt"
    assert main(["lower", "-s", "zb-v", "--pp", "2", "--mb", "4", "--p2p", "grouped", "-o", str(text)]) == 0
    validate(Program.from_text(text.read_text()), CommSemantics.GROUPED)
    eager_text = tmp_path / "eager.txt"
    assert main(["lower", "-s", "zb-v", "--pp", "2", "--mb", "4", "-o", str(eager_text)]) == 0
    capsys.readouterr()
    args = ["validate", "--program", str(eager_text), "--semantics", "grouped"]
    assert main(args) == 2
    assert main([*args, "--p2p", "grouped"]) == 0


def test_executor_refuses_an_unproven_program_on_nccl(monkeypatch, capsys):
    """Before any process group: the eager Program of interleaved on NCCL exits 2 naming the cycle; the
    grouped one (the NCCL default) is planned; the override lets the eager one through."""
    pytest.importorskip("torch")
    from executors import run
    from executors.runtime import RecvPolicy, RunConfig, plan, recv_policy_for
    from pipesim.topology import Topology

    cfg = RunConfig(schedule="interleaved", topology=Topology(pp=4), microbatches=8, p2p=P2PLowering.EAGER)
    with pytest.raises(PipesimError, match=r"refusing .*deadlock: rank .*a cycle back to rank"):
        plan(cfg, 4, nccl=True)
    validate(plan(RunConfig(schedule="interleaved", topology=Topology(pp=4), microbatches=8), 4, nccl=True),
             CommSemantics.GROUPED)
    unsafe = plan(replace(cfg, allow_unsafe_p2p=True), 4, nccl=True)
    assert unsafe == build_program("interleaved", 4, 8).program
    assert recv_policy_for(cfg, nccl=True) is RecvPolicy.GROUPED  # NCCL always issues groups
    assert recv_policy_for(replace(cfg, p2p=None), nccl=False) is RecvPolicy.EAGER
    assert recv_policy_for(replace(cfg, p2p=P2PLowering.GROUPED), nccl=False) is RecvPolicy.GROUPED

    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setattr(run, "_cuda", lambda: True)
    assert run.main(["interleaved", "--p2p", "eager", "--mb", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to run interleaved" in err and "--allow-unsafe-p2p" in err


def test_gpu_check_is_ready_but_needs_cuda(capsys):
    """experiments/gpu_check.py imports and explains itself anywhere; without CUDA it says so and exits 0."""
    import subprocess
    import sys
    from pathlib import Path

    torch = pytest.importorskip("torch")

    script = Path(__file__).resolve().parents[1] / "experiments" / "gpu_check.py"
    shown = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "--message-mib" in shown.stdout and "--hang-timeout" in shown.stdout
    if torch.cuda.is_available():
        return  # the real check is for a person at a GPU machine, not for CI
    from experiments import gpu_check

    assert gpu_check.main([]) == 0
    assert "no CUDA device" in capsys.readouterr().out
    outcome = gpu_check.Outcome("zb-v", "eager", "hang", None, None, 300.0, "no exit within 300 s")
    assert "zb-v" in gpu_check.table([outcome]) and "hang" in gpu_check.table([outcome])


def test_grouped_step_time_table():
    from experiments.grouped_step_time import rows

    table = {(name, pp, m): rest for name, pp, m, *rest in rows([(2, 4)], comm=0.0)}
    assert table[("interleaved", 2, 4)][1] == "hangs" and table[("interleaved", 2, 4)][3] == "reordered"
    assert table[("1f1b", 2, 4)][3] == "kept"
    assert all(buffered == pytest.approx(grouped) for buffered, _, grouped, _ in table.values())


@st.composite
def _moved_programs(draw):
    """A built-in schedule's Program with some transfers moved on their rank, as a hand-written Program may
    place them: a receive posted long before its use, a send held long after its producer."""
    name = draw(st.sampled_from(builtin_names()))
    pp = draw(st.integers(2, 4))
    multiple = ("interleaved", "interleaved-overlap", "looped-bfs", "dualpipe-v")
    m = pp * draw(st.integers(1, 2)) if name in multiple else draw(st.integers(1, 8))
    pp, m = load_schedule(name).limits.round_up(pp, m)
    ranks = [list(code) for code in build_program(name, pp, m).program.ranks]
    for _ in range(draw(st.integers(1, 8))):
        code = ranks[draw(st.integers(0, pp - 1))]
        transfers = [i for i, ins in enumerate(code) if ins.op.is_comm]
        if not transfers:
            continue
        where = draw(st.sampled_from(transfers))
        moved = code.pop(where)
        # A receive moves earlier (posted sooner), a send later (held back): both usually stay valid.
        to = draw(st.integers(0, where) if moved.op.is_recv else st.integers(where, len(code) - 1))
        code.insert(to, moved)
    shape = build_program(name, pp, m).program.shape
    return Program(name, shape, tuple(tuple(code) for code in ranks))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_moved_programs())
def test_any_buffered_valid_program_becomes_grouped_safe(program):
    """The claim of the module docstring, for Programs as well as schedules: whatever passes under buffered
    sends, its grouped lowering passes under grouped sends; whatever does not is reported, not reordered."""
    try:
        validate(program, CommSemantics.BUFFERED)
    except ScheduleError:
        with pytest.raises(ScheduleError):
            grouped_program(program)
        return
    grouped = grouped_program(program)
    validate(grouped, CommSemantics.GROUPED)
    for rank, (a, b) in enumerate(zip(program.ranks, grouped.ranks, strict=True)):
        assert Counter(a) == Counter(b), f"rank {rank} runs other instructions"
        assert [i for i in a if i.op.is_compute] == [i for i in b if i.op.is_compute]


def test_grouped_transport_maps_works_of_both_backends(monkeypatch):
    """batch_isend_irecv returns one work per operation in issue order on gloo, but one work for the whole
    coalesced group on NCCL: every operation of the group must get a work either way (NCCL's case cannot
    run on this machine, so the call is replaced by one that answers as NCCL does)."""
    import torch

    from executors import transport
    from executors.transport import P2P, GroupedTransport

    class Work:
        def __init__(self, name):
            self.name, self.waited = name, 0

        def wait(self):
            self.waited += 1

    ops = [P2P(seq, peer=1, tensor=torch.zeros(2), send=seq % 2 == 0) for seq in range(3)]
    for answer in ([Work("group")], [Work(f"op{i}") for i in range(3)]):
        monkeypatch.setattr(transport.dist, "batch_isend_irecv", lambda p2p_ops, answer=answer: list(answer))
        monkeypatch.setattr(transport.dist, "P2POp", lambda *args: args)
        grouped = GroupedTransport((2,), torch.device("cpu"))
        transfers = grouped.issue(ops)
        assert [t._work for t in transfers] == (answer * 3 if len(answer) == 1 else answer)
        assert grouped.finish_step() == 2  # the two sends


@pytest.mark.parametrize("name", builtin_names())
def test_reordered_programs_survive_one_stream_per_rank(name):
    """The argument's case 2 holds even if a group waits for all of its rank's earlier receives (one NCCL
    stream per rank, PyTorch's coalesced batch_isend_irecv over several peers): the reordered Program still
    completes, with and without transfer time."""
    for pp, m in ((2, 4), (4, 8), (8, 16)):
        program = relabel(build_program(name, pp, m).program)
        for costs in (CostModel(), CostModel(p2p_latency=0.3)):
            strict = grouped_makespan(program, costs, StreamScope.RANK)
            assert strict >= grouped_makespan(program, costs) - 1e-9
