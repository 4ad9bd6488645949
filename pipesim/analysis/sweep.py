"""Sweeps: simulate a grid of configurations and collect their metrics in one DataFrame.

A Program is built (and validated) once per (schedule, pp, microbatches, chunks) and simulated under each
cost setting. Grid points a schedule rejects (interleaved with m not a multiple of p, chunks on 1F1B) are
skipped and counted, not fatal: a grid naturally contains them.

Where the points run (:func:`run_sweep`): in this process (``jobs=1``); over local worker processes
(``jobs=N``, 0 = every core), capped at the cores and at the work there is; or on an existing Dask
distributed cluster (``cluster="tcp://HOST:8786"``), which streams results back batch by batch. Every
point is simulated with the compiled graph engine, loaded once per process. SIGINT and SIGTERM stop a sweep
cleanly: workers are terminated (local) or their tasks cancelled (Dask), and :class:`SweepInterrupted`
carries the signal for the exit status.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import pandas as pd

from pipesim.errors import PipesimError, ScheduleError
from pipesim.program import fast_checks
from pipesim.program import table as program_table
from pipesim.program.build import build_program
from pipesim.program.loader import builtin_names, load_schedule
from pipesim.sim import graph_engine
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import Engine, simulate

RESULT_COLUMNS = [
    "schedule", "pp", "microbatches", "chunks", "forward", "backward", "backward_input", "backward_weight",
    "p2p_latency", "makespan", "ideal", "bubble_fraction", "bubble_overhead", "peak_activations_max",
    "peak_activations_min", "peak_rank",
]


@dataclass(frozen=True)
class SweepPoint:
    schedule: str
    pp: int
    microbatches: int
    chunks: int | None = None
    costs: CostModel = field(default_factory=CostModel)


@dataclass(frozen=True)
class SweepGrid:
    """Every combination of the listed values."""

    schedules: Sequence[str]
    pp: Sequence[int]
    microbatches: Sequence[int]
    chunks: Sequence[int | None] = (None,)
    forward: Sequence[float] = (1.0,)
    backward: Sequence[float] = (2.0,)
    p2p_latency: Sequence[float] = (0.0,)
    base: CostModel = field(default_factory=CostModel)
    # Split-backward schedules (zb-*) run I and W, not B: None keeps the base's value.
    backward_input: Sequence[float | None] = (None,)
    backward_weight: Sequence[float | None] = (None,)

    def points(self) -> list[SweepPoint]:
        points = []
        for schedule, pp, mb, chunks, f, b, lat, i, w in itertools.product(
            self.schedules, self.pp, self.microbatches, self.chunks, self.forward, self.backward, self.p2p_latency,
            self.backward_input, self.backward_weight,
        ):
            split = {k: v for k, v in (("backward_input", i), ("backward_weight", w)) if v is not None}
            default = replace(self.base.default, forward=f, backward=b, **split)
            points.append(SweepPoint(schedule, pp, mb, chunks, replace(self.base, default=default, p2p_latency=lat)))
        return points


def random_points(count: int = 1000, seed: int = 0) -> list[SweepPoint]:
    """Random configurations, the speed benchmark's: every fixed-order built-in schedule, pp in 2..32, microbatches
    in 1..256 raised or rounded down to what the schedule's ``LIMITS`` accept, backward cost 1–3. zb-auto is left
    out: it is synthesised per cost model, so a point would time the synthesis, not the whole-job path (it has
    its own benchmark)."""
    rng = random.Random(seed)
    sources = [load_schedule(name) for name in builtin_names()]
    sources = [source for source in sources if not source.build_options]
    points = []
    for _ in range(count):
        source = rng.choice(sources)
        limits = source.limits
        pp, mb = rng.randint(2, 32), rng.randint(1, 256)
        if limits.microbatches_multiple_of_pp:
            mb = max(pp, mb // pp * pp)
        pp, mb = limits.round_up(pp, mb)
        costs = CostModel(StageCosts(forward=1.0, backward=rng.choice([1.0, 2.0, 3.0])))
        points.append(SweepPoint(source.name, pp, mb, None, costs))
    return points


def simulate_point(point: SweepPoint) -> dict:
    # The simulation proves deadlock freedom itself (and names the cycle), so only static checks here.
    built = build_program(point.schedule, point.pp, point.microbatches, point.chunks, semantics=None)
    result = simulate(built.program, point.costs, check=False, engine=Engine.GRAPH)
    metrics = result.metrics
    shape = built.program.shape
    peaks = result.memory.peak_activations
    default: StageCosts = point.costs.default
    return {
        "schedule": built.name, "pp": shape.pp, "microbatches": shape.microbatches, "chunks": shape.chunks,
        "forward": default.forward, "backward": default.backward, "backward_input": default.backward_input,
        "backward_weight": default.backward_weight, "p2p_latency": point.costs.p2p_latency,
        "makespan": metrics.makespan, "ideal": metrics.ideal, "bubble_fraction": metrics.bubble_fraction,
        "bubble_overhead": metrics.bubble_overhead, "peak_activations_max": max(peaks),
        "peak_activations_min": min(peaks), "peak_rank": peaks.index(max(peaks)),
    }


def _try_point(point: SweepPoint) -> dict | str:
    """A row, or the reason the schedule rejected this point."""
    try:
        return simulate_point(point)
    except ScheduleError as err:
        return str(err)


def _run_batch(batch: tuple[int, list[SweepPoint]]) -> tuple[int, list[dict | str]]:
    """Simulate consecutive points (from ``start``) in a worker: one task per batch keeps overheads small."""
    start, points = batch
    warm_up()  # once per process; a no-op afterwards
    return start, [_try_point(point) for point in points]


def warm_up() -> None:
    """Load the compiled kernels (the table's columns, validation's yes/no pass, the graph engine) before
    simulating points."""
    program_table.warm_up()
    fast_checks.warm_up()
    graph_engine.warm_up()


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by a signal; ``signum`` gives the conventional exit status 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


@dataclass(frozen=True)
class SweepResult:
    frame: pd.DataFrame
    skipped: int
    first_skip_reason: str | None


def worker_count(jobs: int, work_items: int, cores: int | None = None) -> int:
    """Processes to start: ``jobs`` (0 = every core), never more than the cores or the work there is."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
        raise PipesimError(f"--jobs {jobs}: give 0 (every core) or a positive number of processes")
    cores = cores or os.cpu_count() or 1
    wanted = cores if jobs == 0 else jobs
    return max(1, min(wanted, cores, work_items))


def run_sweep(
    points: Iterable[SweepPoint],
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    cluster: str | None = None,
) -> SweepResult:
    """Simulate every point; ``progress(n)`` after each n points. See the module docstring for where."""
    points = list(points)
    if not points:
        raise PipesimError("the sweep grid is empty; give at least one value for every axis")
    workers = worker_count(jobs, len(points))
    report = progress or (lambda n: None)
    if cluster is None:
        warm_up()  # before forking: workers inherit the loaded kernels
    if cluster is not None:
        outcomes = _collect(_on_dask(points, cluster), len(points), report)
    elif workers == 1:
        outcomes = []
        for point in points:
            outcomes.append(_try_point(point))
            report(1)
    else:
        outcomes = _collect(_on_processes(points, workers), len(points), report)
    rows = [o for o in outcomes if isinstance(o, dict)]
    reasons = [o for o in outcomes if isinstance(o, str)]
    if not rows:
        raise PipesimError(f"every point of the sweep was rejected, e.g.: {reasons[0]}")
    return SweepResult(pd.DataFrame(rows, columns=RESULT_COLUMNS), len(reasons), reasons[0] if reasons else None)


def _batches(points: list[SweepPoint], parts: int) -> list[tuple[int, list[SweepPoint]]]:
    size = max(1, min(64, len(points) // max(1, parts)))
    return [(start, points[start : start + size]) for start in range(0, len(points), size)]


def _collect(results: Iterator[tuple[int, list]], total: int, report: Callable[[int], None]) -> list:
    """Place each batch's outcomes at its points' positions (batches arrive in any order)."""
    outcomes: list = [None] * total
    for start, batch in results:
        outcomes[start : start + len(batch)] = batch
        report(len(batch))
    return outcomes


def _ignore_interrupts() -> None:
    """Workers leave SIGINT/SIGTERM to the parent, which stops them: no tracebacks from every worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _on_processes(points: list[SweepPoint], workers: int) -> Iterator[tuple[int, list]]:
    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    pool = context.Pool(workers, initializer=_ignore_interrupts)
    try:
        yield from pool.imap_unordered(_run_batch, _batches(points, workers * 8))
        pool.close()
    except BaseException:
        pool.terminate()  # a signal or an error: stop the workers now, leave none behind
        raise
    finally:
        pool.join()


#: How long a Dask client keeps retrying an unreachable scheduler before the one-line refusal (tests shorten it).
CONNECT_TIMEOUT_S = 10


def connect_dask(address: str):
    """A ``dask.distributed.Client`` on the scheduler at ``address``, or one line saying why not (also used by
    ``pipesim plan --cluster``)."""
    try:
        from dask.distributed import Client
    except ImportError:  # pragma: no cover - a dependency, but a stripped install says what to add
        raise PipesimError("--cluster needs dask.distributed: pip install 'dask[distributed]'") from None
    try:
        return Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError, ValueError) as err:
        raise PipesimError(
            f"--cluster {address}: cannot reach a Dask scheduler there ({type(err).__name__}: {err}); start one "
            "with 'dask scheduler' and workers with 'dask worker ADDRESS'"
        ) from None


def _on_dask(points: list[SweepPoint], address: str) -> Iterator[tuple[int, list]]:
    from dask.distributed import as_completed

    client = connect_dask(address)
    futures = []
    try:
        workers = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
        futures = client.map(_run_batch, _batches(points, workers * 8), pure=False)
        for future in as_completed(futures):
            yield future.result()
    finally:
        if futures:
            client.cancel(futures)
        client.close()


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM (and SIGINT) into :class:`SweepInterrupted` while a sweep runs, then restore handlers."""

    def interrupt(signum, frame):
        raise SweepInterrupted(signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
