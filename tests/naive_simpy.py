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


def naive_simulate(program: Program, costs: CostModel) -> list[list[tuple[float, float]]]:
    """(start, end) of every instruction, per rank, in program order."""
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
        for index, ins in enumerate(program.ranks[rank]):
            op = ins.op
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
                else:
                    duration = costs.chunk_costs(shape.stage(rank, ins.chunk), shape.chunks).duration(op)
                begin = env.now
                yield env.timeout(duration)
                times[rank][index] = (begin, env.now)

    for rank in range(shape.pp):
        env.process(rank_process(rank))
    env.run()
    return times
