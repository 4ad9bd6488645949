"""Where candidates are evaluated: this process, a local process pool, or a Dask distributed cluster.

One function, :func:`map_in_order`, maps a picklable top-level function over a batch and returns the results
in the batch's order, reporting progress per finished item. ``--cluster tcp://HOST:8786`` connects to a running
scheduler (``dask scheduler`` + ``dask worker`` on the cluster's machines; every worker needs pipesim
installed) through the sweep's :func:`pipesim.analysis.sweep.connect_dask`. The search maps batches itself
(not the sweep's grid runner) because it prunes between batches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pipesim.plan.evaluate import warm_engine


@dataclass
class Workers(AbstractContextManager):
    """A pool for the search's batches: ``jobs`` local processes (1 = in this process) or a Dask cluster."""

    jobs: int = 1
    cluster: str | None = None

    def __post_init__(self) -> None:
        self._pool: Executor | None = None
        self._client: Any = None
        if not (type(self.jobs) is int and self.jobs == 1):  # one process needs nothing of the sweep (nor pandas)
            from pipesim.analysis.sweep import worker_count

            self.jobs = worker_count(self.jobs, work_items=1 << 30)  # 0 = every core, capped at the cores

    def __enter__(self) -> Workers:
        if self.cluster:
            from pipesim.analysis.sweep import connect_dask

            self._client = connect_dask(self.cluster)
        elif self.jobs > 1:
            warm_engine()  # before forking: the workers inherit the loaded kernel
            self._pool = ProcessPoolExecutor(max_workers=self.jobs)
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        if self._client is not None:
            self._client.close()

    @property
    def width(self) -> int:
        """How many items run at once (sizes the batches between pruning rounds)."""
        if self._client is not None:
            return max(1, sum(self._client.nthreads().values()))
        return self.jobs

    def map_in_order(self, fn: Callable, items: Sequence, progress: Callable[[int], None] | None = None) -> list:
        if self._client is not None:
            futures = self._client.map(fn, items, pure=False)
            from distributed import as_completed as dask_completed

            for _ in dask_completed(futures):
                if progress:
                    progress(1)
            return self._client.gather(futures)
        if self._pool is None:
            out = []
            for item in items:
                out.append(fn(item))
                if progress:
                    progress(1)
            return out
        futures = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        results: list = [None] * len(items)
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            if progress:
                progress(1)
        return results
