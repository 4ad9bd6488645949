"""Where candidates are evaluated: this process, a local process pool, or a Dask distributed cluster.

One function, :func:`map_in_order`, maps a picklable top-level function over a batch and returns the results
in the batch's order, reporting progress per finished item. ``--cluster tcp://HOST:8786`` connects a
``distributed.Client`` to a running scheduler (``dask scheduler`` + ``dask worker`` on the cluster's machines;
every worker needs pipesim installed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pipesim.errors import PipesimError


@dataclass
class Workers(AbstractContextManager):
    """A pool for the search's batches: ``jobs`` local processes (1 = in this process) or a Dask cluster."""

    jobs: int = 1
    cluster: str | None = None

    def __post_init__(self) -> None:
        self._pool: Executor | None = None
        self._client: Any = None
        if self.jobs == 0:
            self.jobs = os.cpu_count() or 1

    def __enter__(self) -> Workers:
        if self.cluster:
            self._client = _dask_client(self.cluster)
        elif self.jobs > 1:
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


def _dask_client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise PipesimError(f"--cluster {address} needs Dask: pip install 'pipesim[cluster]'") from None
    if not address.startswith(("tcp://", "tls://", "inproc://", "ws://", "wss://")):
        raise PipesimError(f"--cluster {address}: give the scheduler's address, e.g. tcp://HOST:8786")
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError) as err:
        raise PipesimError(f"--cluster {address}: cannot reach the Dask scheduler ({err}); start one with "
                           "'dask scheduler' and 'dask worker ADDRESS', or drop --cluster to run locally") from None
