"""The simulator: a Program (for one or several training steps) under a cost model → the timeline.

Semantics (the executor's, docs/architecture.md): compute, REDUCE_GRAD and STEP occupy their rank; a send is
asynchronous — its transfer holds the directed link for ``p2p_latency + bytes/bandwidth`` and transfers on one
link serialize in the order they were issued; a receive posts the transfer, and the compute that consumes it
waits until the data has arrived. A RECV row spans from its post to the data's arrival. A REDUCE_GRAD occupies
its rank for the stage's ``reduce_grad`` and then hands ``reduce_grad_async`` to the rank's data-parallel
channel, where it runs beside the rank's later work (an asynchronous collective, as the executor launches it);
the chunks' reduces queue there in order, and STEP waits for the channel before it starts (before the
step-boundary barrier: a rank reaches it with its gradients reduced).

Two engines compute the same timeline (the tests prove them equal, float for float):

- :attr:`Engine.GRAPH` (the default): the longest path through the static dependency graph
  (:mod:`pipesim.sim.graph_engine`), compiled by numba for large Programs;
- :attr:`Engine.SIMPY`: the reference discrete-event model, one SimPy process per rank. A rank does not
  yield for every instruction: it runs ahead on its own clock through every instruction whose inputs are
  known and yields only to wait for a message its peer has not sent yet (the lookahead of conservative
  parallel discrete-event simulation). It is the engine to extend for effects a static graph cannot hold
  (bandwidth shared by concurrent transfers).

Several steps back to back (``steps=S``): each rank runs its program S times; the messages of step s follow
those of step s−1 on every link, and :class:`StepBoundary` says what separates the steps.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from pipesim.errors import DeadlockError, PipesimError
from pipesim.program.ir import OP_CODE, OP_ORDER, Op, Program
from pipesim.program.table import KIND_RECV, KIND_SEND, OP_NAMES, ProgramTable, repeat_rows, steps_table, table_of
from pipesim.program.validate import describe_deadlock, validate, validate_static
from pipesim.sim.costs import CostModel, pair_duration
from pipesim.sim.graph_engine import run_longest_path, worth_compiling
from pipesim.sim.memory import MemoryProfile, memory_profile
from pipesim.sim.metrics import Metrics, compute_metrics

if TYPE_CHECKING:
    import pandas as pd


class Engine(enum.Enum):
    """Which engine computes the timeline; all give the same one.

    AUTO: the compiled graph engine for large Programs (:func:`graph_engine.worth_compiling`) and once it is
    loaded in the process (sweeps), SimPy for small one-off runs, where numba's start-up would cost more
    than the whole simulation. Every cost model pipesim has today is a static graph; a model in which
    concurrent transfers share bandwidth would need the event-driven SimPy engine.
    """

    AUTO = "auto"
    GRAPH = "graph"
    SIMPY = "simpy"


class StepBoundary(enum.Enum):
    """What separates consecutive training steps (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", §4).

    SYNC: the optimizer step waits for an all-ranks synchronisation (the global gradient-norm / inf-nan check
    of mixed-precision training with clipping): every rank's STEP starts ``sync_latency`` after the last rank
    reaches it, so all ranks begin the next step together. POST_VALIDATION: zero-bubble's post-update
    validation: each rank updates speculatively and starts the next step as soon as its own STEP is done, the
    check running off the critical path (the rare rollback is not modelled).
    """

    SYNC = "sync"
    POST_VALIDATION = "post-validation"


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Start/end of every instruction of a Program under a cost model, and what follows from them.

    With ``steps > 1`` the table holds each rank's program ``steps`` times (column ``step``), and
    :attr:`step_times` / :attr:`step_time` give each step's duration and the steady-state one.
    """

    table: ProgramTable
    costs: CostModel
    start: np.ndarray
    end: np.ndarray
    durations: np.ndarray
    steps: int = 1
    boundary: StepBoundary | None = None
    # At each STEP row, how long its rank waited for its asynchronous gradient sync (reduce_grad_async) to
    # finish; None: no row had asynchronous work.
    waited: np.ndarray | None = None

    def gradient_sync_waits(self, step: int | None = None) -> tuple[float, ...] | None:
        """Seconds each rank waited at its STEP (of ``step``; None: the last) for its asynchronous gradient sync;
        None when no row had asynchronous work (then nobody waited)."""
        if self.waited is None:
            return None
        t = self.table
        rows = np.flatnonzero(t.op == OP_CODE[Op.STEP])
        rows = rows[t.step_of_rows[rows] == (self.steps - 1 if step is None else step)]
        return tuple(np.bincount(t.rank[rows], weights=self.waited[rows], minlength=len(t.rank_bounds)).tolist())

    def gradient_sync_wait(self, rank: int, step: int | None = None) -> float:
        """Seconds ``rank`` waited at its STEP (of ``step``; None: the last) for its asynchronous gradient sync."""
        waits = self.gradient_sync_waits(step)
        return 0.0 if waits is None else waits[rank]

    @property
    def program(self) -> Program:
        return self.table.program

    @cached_property
    def step_ends(self) -> np.ndarray:
        """When each step finished: the last rank's STEP end."""
        step_rows = self.table.op == OP_CODE[Op.STEP]
        ends = np.zeros(self.steps)
        np.maximum.at(ends, self.table.step_of_rows[step_rows], self.end[step_rows])
        return ends

    @cached_property
    def step_times(self) -> tuple[float, ...]:
        """Duration of each step, from the previous step's end (the first from time 0)."""
        return tuple(np.diff(self.step_ends, prepend=0.0).tolist())

    @property
    def step_time(self) -> float:
        """Steady-state step time: the last step's duration (simulate ≥ 3 steps for a steady state)."""
        return self.step_times[-1]

    @cached_property
    def metrics(self) -> Metrics:
        return compute_metrics(self.table, self.start, self.end)

    @cached_property
    def memory(self) -> MemoryProfile:
        return memory_profile(self.table, self.costs, self.start, self.end)

    @cached_property
    def timeline(self) -> pd.DataFrame:
        # pandas is imported here, not with the module: a `simulate --json` never builds a frame.
        from pipesim.io.timeline import Source, make_frame

        t = self.table
        bytes_moved = np.zeros(t.num_rows)
        comm = t.boundary_stage >= 0
        if comm.any():
            shape = t.program.shape
            sizes = np.array([self.costs.stage(shape.slice_of(s)).p2p_bytes for s in range(shape.num_stages)])
            bytes_moved[comm] = sizes[t.boundary_stage[comm]]
        return make_frame(
            {
                "step": t.step_of_rows,
                "rank": t.rank,
                "stage": t.stage,
                "chunk": t.chunk,
                "op": OP_NAMES[t.op],
                "microbatch": t.microbatch,
                "peer": t.peer,
                "seq": t.seq,
                "start": self.start,
                "end": self.end,
                "source": Source.PREDICTED.value,
                "bytes": bytes_moved,
            }
        )


_TIMED_OPS = (Op.F, Op.B, Op.I, Op.W, Op.REDUCE_GRAD)  # the ops whose duration is the stage's
_TIMED_CODES = [OP_CODE[op] for op in _TIMED_OPS]


def durations_of(table: ProgramTable, costs: CostModel) -> np.ndarray:
    """Duration of every row: compute and REDUCE_GRAD from the stage (1/v of the rank's share with v chunks),
    STEP constant, SEND the transfer; an overlapped pair's F the whole pair, its second half 0."""
    shape = table.program.shape
    num_stages = shape.num_stages
    per_stage = np.zeros((num_stages, len(OP_ORDER)))
    rows: dict[int, list[float]] = {}  # by StageCosts identity: most stages share one (CostModel.chunk_costs)
    for stage, stage_costs in enumerate(costs.shape_costs(shape)):  # a chunk of v: 1/v of the rank's share
        row = rows.get(id(stage_costs))
        if row is None:
            row = rows[id(stage_costs)] = [stage_costs.duration(op) for op in _TIMED_OPS]
        per_stage[stage, _TIMED_CODES] = row
    durations = np.zeros(table.num_rows)
    staged = table.stage >= 0
    durations[staged] = per_stage[table.stage[staged], table.op[staged]]
    durations[table.op == OP_CODE[Op.STEP]] = costs.optimizer_step
    sends = table.kind == KIND_SEND
    if sends.any():
        transfer = np.array(costs.shape_transfer_times(shape))
        durations[sends] = transfer[table.boundary_stage[sends]]
    durations[table.kind == KIND_RECV] = 0.0
    if table.has_pairs:
        _pair_durations(table, costs, durations)
    return durations


def async_tails_of(table: ProgramTable, costs: CostModel) -> np.ndarray | None:
    """Each row's work for its rank's asynchronous channel: a REDUCE_GRAD's stage ``reduce_grad_async`` (1/v of
    the rank's share with v chunks), 0 elsewhere; None when no stage has any (the common case: no arrays)."""
    reduces = table.op == OP_CODE[Op.REDUCE_GRAD]
    if not reduces.any():
        return None
    per_stage = np.array([c.reduce_grad_async for c in costs.shape_costs(table.program.shape)])
    if not per_stage.any():
        return None
    tails = np.zeros(table.num_rows)
    tails[reduces] = per_stage[table.stage[reduces]]
    return tails


def _pair_durations(table: ProgramTable, costs: CostModel, durations: np.ndarray) -> None:
    """An overlapped pair runs as one unit: its F row takes the pair's whole duration
    (:func:`~pipesim.sim.costs.pair_duration`) and its second half none; :func:`_pair_spans` then gives the
    second half the pair's span as well."""
    shape = table.program.shape
    tails = np.flatnonzero(table.overlap)
    heads = tails - 1
    chunked = costs.shape_costs(shape)
    # A pair's duration depends on (F's stage, B's stage, B's op) alone: one value per distinct triple
    # (a few per stage pair), spread over the pairs by one index, not a Python loop over every pair.
    stages, ops = shape.num_stages, len(OP_ORDER)
    keys = (table.stage[heads] * stages + table.stage[tails]) * ops + table.op[tails]
    distinct, where = np.unique(keys, return_inverse=True)
    values = np.array([
        pair_duration(chunked[key // ops // stages], chunked[key // ops % stages], OP_ORDER[key % ops])
        for key in distinct.tolist()
    ])
    durations[heads] = values[where]
    durations[tails] = 0.0


def _pair_spans(table: ProgramTable, start: np.ndarray, end: np.ndarray) -> None:
    """Both halves of a pair span the pair: the second half (0 long, run right after its F) starts with it."""
    if table.has_pairs:
        tails = np.flatnonzero(table.overlap)
        start[tails] = start[tails - 1]
        end[tails] = end[tails - 1]


def simulate(
    program: Program,
    costs: CostModel | None = None,
    *,
    check: bool = True,
    steps: int = 1,
    boundary: StepBoundary | None = None,
    sync_latency: float = 0.0,
    engine: Engine = Engine.AUTO,
) -> SimulationResult:
    """Simulate ``program`` under ``costs`` (unit costs by default). Validates first unless ``check=False``.

    Several steps: ``simulate(program, costs, steps=3, boundary=StepBoundary.POST_VALIDATION)`` runs each
    rank's program 3 times back to back (microbatch ids restart each step; the timeline's ``step`` column
    tells steps apart, ``seq`` restarts). ``boundary`` (:class:`StepBoundary`) says what separates steps;
    ``None`` means SYNC for several steps and, for one step, no synchronisation at all (the lone step as
    always simulated). Under SYNC, ``sync_latency`` is the time of the all-ranks synchronisation before
    STEP (a scalar all-reduce). The result's ``step_time`` is the last step's duration (the steady state,
    from about 3 steps on) and ``step_times`` every step's.

    ``engine`` picks the engine (:class:`Engine`); all give the same timeline. A Program that deadlocks
    raises :class:`DeadlockError` naming the cycle of waits.
    """
    costs = costs or CostModel()
    costs.check_pipeline(program.shape.num_slices)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise PipesimError(f"steps={steps!r} must be a positive integer")
    engine = Engine(engine)
    if boundary is None and steps > 1:
        boundary = StepBoundary.SYNC
    boundary = None if boundary is None else StepBoundary(boundary)
    if check:
        validate_static(program)  # deadlock freedom is proven by the run itself below
    table = steps_table(program, steps)
    # Each step's rows repeat the single step's, and a row's duration depends on the row alone (an overlapped
    # pair's second half sits right after its first, within one rank's step): time one step, repeat it.
    single = table_of(program)
    durations = repeat_rows(durations_of(single, costs), single, steps)
    tails = async_tails_of(single, costs)
    if tails is not None:
        tails = repeat_rows(tails, single, steps)
    drains = None if tails is None else table.op == OP_CODE[Op.STEP]
    waited = None if tails is None else np.zeros(table.num_rows)
    barrier = _barriers(table, boundary)
    num_barriers = steps if boundary is StepBoundary.SYNC else 0
    if engine is Engine.AUTO:
        engine = Engine.GRAPH if worth_compiling(table.num_rows) else Engine.SIMPY
    if engine is Engine.SIMPY:
        start, end, position = _run_simpy(table, durations, barrier, sync_latency, tails, waited)
    else:
        start, end, position = run_longest_path(
            table.kind,
            table.link,
            table.message,
            table.num_links,
            table.input_recv,
            durations,
            table.rank_bounds,
            barrier,
            num_barriers,
            sync_latency,
            partner_recv=table.partner_recv,
            tail=tails,
            drains=drains,
            waited=waited,
        )
    if any(p < stop for p, (_, stop) in zip(position, table.rank_bounds, strict=True)):
        if steps > 1:  # a Program that deadlocks does so in its first step: name that cycle
            validate(program)
        raise DeadlockError(describe_deadlock(table, position))
    _pair_spans(table, start, end)
    return SimulationResult(table, costs, start, end, durations, steps, boundary, waited)


def _barriers(table: ProgramTable, boundary: StepBoundary | None) -> np.ndarray:
    """Barrier index per row: under SYNC each STEP waits on its step's barrier; -1 elsewhere."""
    barrier = np.full(table.num_rows, -1, dtype=np.int64)
    if boundary is StepBoundary.SYNC:
        held = table.op == OP_CODE[Op.STEP]
        barrier[held] = table.step_of_rows[held]
    return barrier


def _run_simpy(table: ProgramTable, durations: np.ndarray, barrier_of: np.ndarray, sync_latency: float,
               tails: np.ndarray | None = None, waited: np.ndarray | None = None):
    """The reference engine; ``tails`` (:func:`async_tails_of`) go to each rank's channel, which STEP drains,
    and ``waited`` receives each STEP's wait for it."""
    import simpy  # the reference engine only: the graph engine, auto's choice for large Programs, needs none

    env = simpy.Environment()
    n = table.num_rows
    pp = len(table.rank_bounds)
    start = [0.0] * n
    end = [0.0] * n
    kinds = table.kind.tolist()
    links = table.link.tolist()
    messages = table.message.tolist()
    durs = durations.tolist()
    barriers = barrier_of.tolist()
    arrivals: list[list[float]] = [[] for _ in range(table.num_links)]  # per link, arrival time of message k
    link_free = [0.0] * table.num_links
    waiting: list[simpy.Event | None] = [None] * table.num_links  # the receiver blocked on each link
    wanted = [0] * table.num_links  # which message that receiver waits for
    input_recv = table.input_recv.tolist()
    partner_recv = table.partner_inputs.tolist()
    position = [stop for _, stop in table.rank_bounds]  # where each rank waits; its end once finished
    reached: dict[int, list[float]] = {}  # barrier → the clocks at which ranks reached it
    released: dict[int, simpy.Event] = {}

    tail_of = None if tails is None else tails.tolist()
    step_code = OP_CODE[Op.STEP]
    ops = table.op.tolist()

    def rank_process(rank: int, begin: int, stop: int):
        clock = 0.0
        channel_free = 0.0  # when this rank's asynchronous channel (gradient sync) is done with its queue
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
                if tail_of is not None and ops[row] == step_code and channel_free > clock:
                    waited[row] = channel_free - clock
                    clock = channel_free
                # A compute waits for its input; an overlapped pair's F also for its second half's.
                for source in (input_recv[row], partner_recv[row]):
                    if source < 0:
                        continue
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
                barrier = barriers[row]
                if barrier >= 0:  # every rank reaches its STEP before any runs it (StepBoundary.SYNC)
                    if clock > env.now:
                        yield env.timeout(clock - env.now)
                    clocks = reached.setdefault(barrier, [])
                    clocks.append(clock)
                    event = released.setdefault(barrier, env.event())
                    if len(clocks) == pp:
                        event.succeed()
                    else:
                        position[rank] = row
                        yield event
                        position[rank] = stop
                    latest = max(clocks) + sync_latency  # from the clocks, not env.now: the graph engine's sum
                    if latest > clock:
                        clock = latest
                start[row] = clock
                clock += durs[row]
                end[row] = clock
                if tail_of is not None and tail_of[row] > 0.0:
                    channel_free = max(channel_free, clock) + tail_of[row]
        if clock > env.now:
            yield env.timeout(clock - env.now)

    for rank, (begin, stop) in enumerate(table.rank_bounds):
        env.process(rank_process(rank, begin, stop))
    env.run()
    return np.asarray(start), np.asarray(end), position
