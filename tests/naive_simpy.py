"""A deliberately naive SimPy model of a Program: the yardstick for pipesim's simulator.

Written independently of pipesim's engine, straight from the Program's instructions: one process per rank,
one ``simpy.Store`` per directed link for messages, one ``simpy.Resource`` per link so transfers
serialize, one ``timeout`` per compute instruction. The tests check pipesim's timelines equal its output on
every schedule; the benchmark times pipesim against it.
"""

from __future__ import annotations

import simpy

from pipesim.program.ir import Op, Program
from pipesim.sim.costs import CostModel


def naive_pair(forward, backward, op: Op) -> float:
    """An overlapped pair, straight from DeepSeek-V3 §3.2.1: all compute of both halves, slowed by the SMs
    the communication takes, plus each half's all-to-all that the other half's compute does not cover."""
    f_total, b_total = forward.forward, backward.duration(op)
    f_comm, b_comm = min(forward.a2a_forward, f_total), min(backward.a2a_backward, b_total)
    f_compute, b_compute = f_total - f_comm, b_total - b_comm
    hidden_f_comm_exposed = f_comm - b_compute if f_comm > b_compute else 0.0
    hidden_b_comm_exposed = b_comm - f_compute if b_comm > f_compute else 0.0
    slow = 1.0 + max(forward.overlap_slowdown, backward.overlap_slowdown)
    return (f_compute + b_compute) * slow + hidden_f_comm_exposed + hidden_b_comm_exposed


def naive_simulate(program: Program, costs: CostModel) -> list[list[tuple[float, float]]]:
    """(start, end) of every instruction, per rank, in program order. An overlapped pair (an F and the
    flagged B/I right after it) is one timeout, and both its rows span it."""
    shape = program.shape
    env = simpy.Environment()
    stores: dict[tuple[int, int], simpy.Store] = {}
    wires: dict[tuple[int, int], simpy.Resource] = {}
    times = [[(0.0, 0.0)] * len(code) for code in program.ranks]

    def channel(src: int, dst: int):
        if (src, dst) not in stores:
            stores[src, dst] = simpy.Store(env)
            wires[src, dst] = simpy.Resource(env, capacity=1)
        return stores[src, dst], wires[src, dst]

    def transfer(rank: int, index: int, boundary: int, dst: int):
        store, wire = channel(rank, dst)
        with wire.request() as granted:
            yield granted
            begin = env.now
            yield env.timeout(costs.transfer_time(boundary))
            times[rank][index] = (begin, env.now)
            yield store.put(env.now)

    def rank_process(rank: int):
        code = program.ranks[rank]
        for index, ins in enumerate(code):
            op = ins.op
            if ins.overlap:
                times[rank][index] = times[rank][index - 1]  # ran with its F
                continue
            if op is Op.SEND_F or op is Op.SEND_B:
                stage = shape.stage(rank, ins.chunk)
                boundary = stage if op is Op.SEND_F else stage - 1
                env.process(transfer(rank, index, boundary, ins.peer))
            elif op is Op.RECV_F or op is Op.RECV_B:
                store, _ = channel(ins.peer, rank)
                begin = env.now
                yield store.get()
                times[rank][index] = (begin, env.now)
            else:
                if op is Op.STEP:
                    duration = costs.optimizer_step
                elif index + 1 < len(code) and code[index + 1].overlap:
                    partner = code[index + 1]
                    duration = naive_pair(costs.chunk_costs(shape.stage(rank, ins.chunk), shape.chunks),
                                          costs.chunk_costs(shape.stage(rank, partner.chunk), shape.chunks),
                                          partner.op)
                else:
                    duration = costs.chunk_costs(shape.stage(rank, ins.chunk), shape.chunks).duration(op)
                begin = env.now
                yield env.timeout(duration)
                times[rank][index] = (begin, env.now)

    for rank in range(shape.pp):
        env.process(rank_process(rank))
    env.run()
    return times


# --- the whole job, naively: build the schedule, simulate it, summarise -------------------------------------

def naive_orders(schedule: str, pp: int, microbatches: int, chunks: int = 1) -> list[list[tuple[str, int, int]]]:
    """Per-rank compute order as (op, microbatch, chunk), written from the papers, not from pipesim's files.

    1F1B (Narayanan et al. 2021 §2.2.1): p−r−1 warm-up forwards, then one forward / one backward, then the
    rest of the backwards. Interleaved (§2.2.2): the same over v·m virtual microbatches, forwards visiting the
    chunks in groups of p microbatches and backwards the chunks in reverse, warm-up 2(p−r−1) + (v−1)p.
    """
    if schedule == "1f1b":
        chunks, total = 1, microbatches
    elif schedule == "interleaved":
        total = microbatches * chunks
    else:
        raise ValueError(f"the naive model knows 1f1b and interleaved, not {schedule}")

    def virtual(k: int, backward: bool) -> tuple[str, int, int]:
        group, within = divmod(k, pp * chunks)
        chunk = within // pp
        return ("B" if backward else "F", group * pp + within % pp, chunks - 1 - chunk if backward else chunk)

    orders = []
    for rank in range(pp):
        warmup = min(pp - rank - 1 if chunks == 1 else 2 * (pp - rank - 1) + (chunks - 1) * pp, total)
        order = [virtual(k, False) for k in range(warmup)]
        for k in range(total - warmup):
            order += [virtual(warmup + k, False), virtual(k, True)]
        order += [virtual(k, True) for k in range(total - warmup, total)]
        orders.append(order)
    return orders


def naive_whole_job(schedule: str, pp: int, microbatches: int, chunks: int, costs: CostModel) -> str:
    """Build ``schedule`` and simulate it with one SimPy process per rank, one Store per link and one timeout
    per compute op; return the JSON summary (makespan, bubble, busy and peak activations per rank)."""
    import json

    env = simpy.Environment()
    num_stages = pp * chunks
    links: dict[tuple[int, int], simpy.FilterStore] = {}
    wires: dict[tuple[int, int], simpy.Resource] = {}
    busy = [0.0] * pp
    held = [0.0] * pp
    peak = [0.0] * pp
    finish = [0.0] * pp

    def link(src: int, dst: int):
        if (src, dst) not in links:
            links[src, dst] = simpy.FilterStore(env)
            wires[src, dst] = simpy.Resource(env, capacity=1)
        return links[src, dst], wires[src, dst]

    def send(src: int, dst: int, message, boundary: int):
        store, wire = link(src, dst)
        with wire.request() as granted:
            yield granted
            yield env.timeout(costs.transfer_time(boundary))
            yield store.put(message)

    def rank_process(rank: int, order):
        last_grad = {chunk: max(i for i, (op, _, c) in enumerate(order) if c == chunk and op == "B")
                     for chunk in range(chunks)}
        for index, (op, mb, chunk) in enumerate(order):
            stage = chunk * pp + rank
            stage_costs = costs.chunk_costs(stage, chunks)  # a chunk of v takes 1/v of the rank's share
            if op == "F":
                if stage > 0:
                    store, _ = link((stage - 1) % pp, rank)
                    yield store.get(lambda m, key=("F", mb, stage - 1): m == key)
                begin = env.now
                yield env.timeout(stage_costs.forward)
                held[rank] += stage_costs.activation
                peak[rank] = max(peak[rank], held[rank])
                if stage < num_stages - 1:
                    env.process(send(rank, (stage + 1) % pp, ("F", mb, stage), stage))
            else:
                if stage < num_stages - 1:
                    store, _ = link((stage + 1) % pp, rank)
                    yield store.get(lambda m, key=("B", mb, stage + 1): m == key)
                begin = env.now
                yield env.timeout(stage_costs.backward)
                held[rank] -= stage_costs.activation
                if stage > 0:
                    env.process(send(rank, (stage - 1) % pp, ("B", mb, stage), stage - 1))
            busy[rank] += env.now - begin
            if op == "B" and last_grad[chunk] == index:
                yield env.timeout(stage_costs.reduce_grad)
        yield env.timeout(costs.optimizer_step)
        finish[rank] = env.now

    for rank, order in enumerate(naive_orders(schedule, pp, microbatches, chunks)):
        env.process(rank_process(rank, order))
    env.run()
    makespan = max(finish)
    return json.dumps({
        "schedule": schedule, "pp": pp, "microbatches": microbatches, "chunks": chunks, "makespan": makespan,
        "bubble_fraction": 1 - sum(busy) / (pp * makespan), "busy": busy, "peak_activations": peak,
    })
