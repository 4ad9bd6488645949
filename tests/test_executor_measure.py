"""What the executor measures: a Timeline holding exactly the Program, in order and causally consistent, and
per-rank activation memory in the ratio the simulator predicts (1F1B, and zero-bubble's split backward).

Only what is deterministic is asserted: which instructions, in which order, and that no data arrives before
it was sent. How much of a step the instructions cover depends on the machine's load (the interpreter's gaps
between instructions); ``experiments/bench_executor_vs_torch.py`` reports that overhead instead."""

import pytest

pytest.importorskip("torch")

from executors.harness import spawn
from executors.model import ModelConfig, layers_of_stage
from executors.runtime import RunConfig, plan, run_configs
from pipesim.sim.costs import CostModel
from pipesim.sim.simulator import simulate
from pipesim.topology import Topology

pytestmark = pytest.mark.distributed


def test_timeline_is_the_program_in_order_and_causal():
    configs = [
        RunConfig(schedule=s, topology=Topology(pp=2), microbatches=4, steps=2)
        for s in ("gpipe", "1f1b", "interleaved")
    ]
    results = spawn(run_configs, 2, configs)[0]
    for cfg, result in zip(configs, results, strict=True):
        program = plan(cfg, 2)
        frame = result.timeline
        assert set(frame["source"]) == {"measured"}
        for step in range(cfg.steps):
            for rank, code in enumerate(program.ranks):
                rows = frame[(frame["step"] == step) & (frame["rank"] == rank)].sort_values("start")
                # Sorted by start time they are in program order: seq 0, 1, 2, ... and the same instructions.
                assert list(rows["seq"]) == list(range(len(code))), (cfg.schedule, step, rank)
                expected = [
                    (
                        i.op.value,
                        -1 if i.mb is None else i.mb,
                        -1 if i.chunk is None else i.chunk,
                        -1 if i.peer is None else i.peer,
                    )
                    for i in code
                ]
                got = list(zip(rows["op"], rows["microbatch"], rows["chunk"], rows["peer"], strict=True))
                assert got == expected, (cfg.schedule, step, rank)
                assert (rows["end"] >= rows["start"]).all()
                assert (rows["start"].to_numpy()[1:] >= rows["end"].to_numpy()[:-1] - 1e-9).all()
            _assert_messages_arrive_after_sent(frame[frame["step"] == step], cfg.schedule)
        # Steps do not overlap on a rank: the optimizer step ends before the next step's first instruction.
        for rank in range(2):
            by_step = frame[frame["rank"] == rank].groupby("step")
            assert (by_step["start"].min().to_numpy()[1:] >= by_step["end"].max().to_numpy()[:-1] - 1e-9).all()


def _assert_messages_arrive_after_sent(frame, schedule: str) -> None:
    """The k-th receive on link a→b completes no earlier than the k-th send on it starts (one host's
    CLOCK_MONOTONIC is every rank's clock, so the comparison across processes is exact)."""
    sends = frame[frame["op"].isin(["SEND_F", "SEND_B"])].sort_values(["rank", "peer", "seq"])
    recvs = frame[frame["op"].isin(["RECV_F", "RECV_B"])].sort_values(["peer", "rank", "seq"])
    assert len(sends) == len(recvs) > 0, schedule
    sends = sends.assign(k=sends.groupby(["rank", "peer"]).cumcount())
    recvs = recvs.assign(k=recvs.groupby(["peer", "rank"]).cumcount())
    pairs = recvs.merge(sends, left_on=["peer", "rank", "k"], right_on=["rank", "peer", "k"],
                        suffixes=("_recv", "_send"))
    assert len(pairs) == len(recvs), schedule
    assert (pairs["op_recv"].str[-1] == pairs["op_send"].str[-1]).all(), schedule  # RECV_F ↔ SEND_F
    late = pairs[pairs["end_recv"] < pairs["start_send"] - 1e-9]
    assert late.empty, f"{schedule}: data received before it was sent:\n{late}"


@pytest.mark.parametrize("pp", [2, 4])  # pp=4 shows the whole p − r pattern; 2 the smallest
def test_1f1b_activation_memory_matches_simulator(pp):
    cfg = RunConfig(
        schedule="1f1b",
        topology=Topology(pp=pp),
        microbatches=2 * pp,
        steps=1,
        model=ModelConfig(layers=2 * pp, vocab=16),
    )
    result = spawn(run_configs, pp, [cfg])[0][0]
    predicted = simulate(plan(cfg, pp)).memory.peak_activations  # 1F1B: rank r holds p − r microbatches
    assert predicted == tuple(float(pp - r) for r in range(pp))
    peaks, unit = result.peak_activation_bytes, result.bytes_per_forward
    assert [max(b for _, b in curve) for curve in result.memory_curves] == peaks
    for rank in range(pp):
        # In units of one microbatch of this rank's stage, the count is the simulator's.
        assert peaks[rank] / unit[rank] == pytest.approx(predicted[rank], rel=0.05), (rank, peaks, unit)
        # In raw bytes the ratio to rank 0 holds up to the heavier first/last stages (embedding, logits).
        assert peaks[rank] / peaks[0] == pytest.approx(predicted[rank] / predicted[0], rel=0.15), (
            rank,
            peaks,
        )


def test_split_backward_memory_follows_the_simulators_peaks():
    """Zero-bubble memory as designed: I frees all but the weight GEMMs' operands (M_W), W frees those.

    Per stage, one forward's saved bytes (M_B) and what its I keeps for W (M_W) are measured; the simulator,
    given those two numbers, predicts every rank's peak from the schedule alone — the executor's peaks must
    follow within 10%.
    """
    pp, m = 3, 6
    configs = [
        RunConfig(schedule=s, topology=Topology(pp=pp), microbatches=m, steps=1,
                  model=ModelConfig(layers=2 * pp, vocab=16))
        for s in ("zb-h1", "zb-v")
    ]
    results = spawn(run_configs, pp, configs)[0]
    for cfg, result in zip(configs, results, strict=True):
        program = plan(cfg, pp)
        per_stage = result.saved_bytes_by_stage
        assert sorted(per_stage) == list(range(program.shape.num_stages)), cfg.schedule
        mcfg, last = cfg.model, program.shape.num_stages - 1
        sbh = mcfg.seq_len * mcfg.micro_batch_size * mcfg.hidden
        for stage, (m_b, m_w) in per_stage.items():
            # I kept exactly the weight GEMMs' operands, fp32: per block the inputs of qkv, proj, fc1, fc2
            # (1 + 1 + 1 + 4)·sbh and their output gradients (3 + 1 + 4 + 1)·sbh; the LM head's input and
            # logits gradient on the last stage. Nothing else of the forward survives I.
            blocks = len(layers_of_stage(mcfg, stage, last + 1))
            head = sbh + mcfg.seq_len * mcfg.micro_batch_size * mcfg.vocab if stage == last else 0
            assert m_w == 4 * (16 * sbh * blocks + head), (cfg.schedule, stage, m_b, m_w)
            assert m_w < m_b, (cfg.schedule, stage, m_b, m_w)
        # Costs describe a rank's share of the model: a measured chunk's bytes × v (the simulator gives each
        # chunk 1/v of it back).
        v = program.shape.chunks
        overrides = {
            stage: {"activation": 1.0, "weight_grad_activation": m_w / m_b, "activation_bytes": v * float(m_b)}
            for stage, (m_b, m_w) in per_stage.items()
        }
        predicted = simulate(program, CostModel(overrides=overrides)).memory.peak_bytes
        measured = result.peak_activation_bytes
        for rank in range(pp):
            assert measured[rank] == pytest.approx(predicted[rank], rel=0.10), (cfg.schedule, rank, measured,
                                                                              predicted)
