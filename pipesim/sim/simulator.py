"""The discrete-event simulator: SimPy processes, one per rank, walking the rank's Program.

Semantics (the executor's, docs/architecture.md): compute, REDUCE_GRAD and STEP occupy their rank; a send is
asynchronous — its transfer holds the directed link for ``p2p_latency + bytes/bandwidth`` and transfers on one
link serialize in the order they were issued; a receive posts the transfer, and the compute that consumes it
waits until the data has arrived. A RECV row spans from its post to the data's arrival.

Speed: a rank does not yield to SimPy for every instruction. It runs ahead on its own clock through every
instruction whose inputs are already known (compute on data already sent, sends, posts) and yields only
to wait for a message its peer has not sent yet — the lookahead of conservative parallel discrete-event
simulation. Since a transfer's start is ``max(issue time, link free time)`` and a link's sends are issued
by one rank in program order, this equals a per-instruction model with a FIFO resource per link; the tests
check it against exactly such a naive model on every schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import simpy

from pipesim.errors import DeadlockError
from pipesim.io.timeline import Source, make_frame
from pipesim.program.ir import Op, Program
from pipesim.program.table import KIND_RECV, KIND_SEND, OP_CODE, OP_NAMES, OP_ORDER, ProgramTable, table_of
from pipesim.program.validate import describe_deadlock, validate_static
from pipesim.sim.costs import CostModel
from pipesim.sim.memory import MemoryProfile, memory_profile
from pipesim.sim.metrics import Metrics, compute_metrics


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Start/end of every instruction of a Program under a cost model, and what follows from them."""

    table: ProgramTable
    costs: CostModel
    start: np.ndarray
    end: np.ndarray
    durations: np.ndarray

    @property
    def program(self) -> Program:
        return self.table.program

    @cached_property
    def metrics(self) -> Metrics:
        return compute_metrics(self.table, self.start, self.end)

    @cached_property
    def memory(self) -> MemoryProfile:
        return memory_profile(self.table, self.costs, self.start, self.end)

    @cached_property
    def timeline(self) -> pd.DataFrame:
        t = self.table
        bytes_moved = np.zeros(t.num_rows)
        comm = t.boundary_stage >= 0
        if comm.any():
            sizes = np.array([self.costs.stage(s).p2p_bytes for s in range(t.program.shape.num_stages)])
            bytes_moved[comm] = sizes[t.boundary_stage[comm]]
        return make_frame({
            "step": np.zeros(t.num_rows, dtype=np.int64), "rank": t.rank, "stage": t.stage, "chunk": t.chunk,
            "op": OP_NAMES[t.op], "microbatch": t.microbatch, "peer": t.peer, "seq": t.seq,
            "start": self.start, "end": self.end, "source": Source.PREDICTED.value, "bytes": bytes_moved,
        })


def durations_of(table: ProgramTable, costs: CostModel) -> np.ndarray:
    """Duration of every row: compute and REDUCE_GRAD from the stage (1/v of the rank's share with v chunks),
    STEP constant, SEND the transfer."""
    shape = table.program.shape
    num_stages = shape.num_stages
    per_stage = np.zeros((num_stages, len(OP_ORDER)))
    for stage in range(num_stages):
        stage_costs = costs.chunk_costs(stage, shape.chunks)  # a chunk of v takes 1/v of the rank's share
        for op in (Op.F, Op.B, Op.I, Op.W, Op.REDUCE_GRAD):
            per_stage[stage, OP_CODE[op]] = stage_costs.duration(op)
    durations = np.zeros(table.num_rows)
    staged = table.stage >= 0
    durations[staged] = per_stage[table.stage[staged], table.op[staged]]
    durations[table.op == OP_CODE[Op.STEP]] = costs.optimizer_step
    sends = table.kind == KIND_SEND
    if sends.any():
        transfer = np.array([costs.transfer_time(s) for s in range(num_stages)])
        durations[sends] = transfer[table.boundary_stage[sends]]
    durations[table.kind == KIND_RECV] = 0.0
    return durations


def simulate(program: Program, costs: CostModel | None = None, *, check: bool = True) -> SimulationResult:
    """Simulate ``program`` under ``costs`` (unit costs by default). Validates first unless ``check=False``."""
    costs = costs or CostModel()
    costs.check_pipeline(program.shape.num_stages)
    if check:
        validate_static(program)  # deadlock freedom is proven by the run itself below
    table = table_of(program)
    durations = durations_of(table, costs)
    start, end = _run_simpy(table, durations)
    return SimulationResult(table, costs, start, end, durations)


def _run_simpy(table: ProgramTable, durations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    env = simpy.Environment()
    n = table.num_rows
    start = [0.0] * n
    end = [0.0] * n
    kinds = table.kind.tolist()
    links = table.link.tolist()
    messages = table.message.tolist()
    durs = durations.tolist()
    arrivals: list[list[float]] = [[] for _ in range(table.num_links)]  # per link, arrival time of message k
    link_free = [0.0] * table.num_links
    waiting: list[simpy.Event | None] = [None] * table.num_links  # the receiver blocked on each link
    wanted = [0] * table.num_links  # which message that receiver waits for
    input_recv = table.input_recv.tolist()
    position = [stop for _, stop in table.rank_bounds]  # where each rank waits; its end once finished

    def rank_process(rank: int, begin: int, stop: int):
        clock = 0.0
        for row in range(begin, stop):
            kind = kinds[row]
            if kind == KIND_RECV:
                start[row] = end[row] = clock  # posting costs nothing; end becomes the arrival once known
            elif kind == KIND_SEND:
                link = links[row]
                transfer_start = clock if clock > link_free[link] else link_free[link]
                arrival = transfer_start + durs[row]
                link_free[link] = arrival
                start[row] = transfer_start
                end[row] = arrival
                arrivals[link].append(arrival)
                event = waiting[link]
                if event is not None and len(arrivals[link]) > wanted[link]:
                    waiting[link] = None
                    event.succeed(arrival)
            else:
                source = input_recv[row]
                if source >= 0:
                    link = links[source]
                    queue = arrivals[link]
                    index = messages[source]
                    if index >= len(queue):
                        # Not sent yet: let simulated time catch up, then wait for the sender.
                        if clock > env.now:
                            yield env.timeout(clock - env.now)
                        if index >= len(queue):
                            position[rank] = row
                            wanted[link] = index
                            event = waiting[link] = env.event()
                            yield event
                            position[rank] = stop
                    arrival = queue[index]
                    if arrival > end[source]:
                        end[source] = arrival
                    if arrival > clock:
                        clock = arrival
                start[row] = clock
                clock += durs[row]
                end[row] = clock
        if clock > env.now:
            yield env.timeout(clock - env.now)

    for rank, (begin, stop) in enumerate(table.rank_bounds):
        env.process(rank_process(rank, begin, stop))
    env.run()
    if any(p < stop for p, (_, stop) in zip(position, table.rank_bounds, strict=True)):
        raise DeadlockError(describe_deadlock(table, position))
    return np.asarray(start), np.asarray(end)
