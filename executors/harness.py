"""In-process launcher for tests: spawn a gloo world on 127.0.0.1, run a function on every rank, collect.

A rank that raises terminates the others and the parent raises with that rank's message, so a test can
never hang on a half-dead world.

Ranks start from a forkserver that has imported torch and the executor once (``_PRELOAD``), not as fresh
``spawn`` interpreters: importing them is about 1.5 CPU-seconds a process, which an eight-process world paid
eight times per world (most of a small world's cost). The server is a clean process of its own, started on
first use, that has run nothing but those imports (no torch thread pool, no CUDA context), so forking it is
safe where forking the caller (a test process with threads) would not be. A forked rank inherits the
server's environment and working directory, not the caller's; each rank takes the caller's, as spawn did.
"""

from __future__ import annotations

import os
import pickle
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from executors.launch import PORT_ATTEMPTS, free_port, port_taken

_TIMEOUT = timedelta(seconds=60)


#: What the forkserver imports before forking ranks; ``__main__`` is the caller's script, when it is one (an
#: experiment whose rank function lives in the script, as spawn would import it). ``torch._dynamo``: every
#: ``torch.optim`` optimizer imports it on construction (its ``_disable_dynamo`` wrapper), about 1.1 CPU-s a rank.
_PRELOAD = ["__main__", "executors.runtime", "torch._dynamo"]


def _worker(rank: int, world_size: int, port: int, fn, args, queue, environ: dict, cwd: str, group: bool) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if not group:  # what torchrun tells each process it starts (fn initialises the group from it)
        sizes = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": world_size, "LOCAL_WORLD_SIZE": world_size}
        os.environ.update({name: str(value) for name, value in sizes.items()})
    try:
        # One thread per rank, as torchrun does: N ranks on a few cores must not oversubscribe them.
        torch.set_num_threads(1)
        if group:
            dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=_TIMEOUT)
        value = fn(rank, world_size, *args)
        # Plain pickle bytes: torch's queue reducers would share tensors by fd, gone once we exit.
        queue.put((rank, True, pickle.dumps(value)))
        if group:
            dist.barrier()
            dist.destroy_process_group()
    except BaseException as err:  # report every failure to the parent, then die
        queue.put((rank, False, f"{type(err).__name__}: {err}\n{traceback.format_exc()}"))
        raise


def spawn(fn, world_size: int, *args, timeout: float = 240.0, process_group: bool = True) -> list:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` gloo processes; return the values by rank.

    With ``process_group=False`` no group is initialised for ``fn``: each rank gets torchrun's environment
    (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``PORT``) instead, for an entry point that
    initialises and destroys its own group (``executors.run.main``).

    ``fn`` must be importable (module level): each rank unpickles it by name. The
    rendezvous port is free when chosen, but another process (a parallel test's world, an ephemeral gloo
    connection) can bind it before rank 0 does; then nothing has run yet, and the world starts again on a
    fresh port.
    """
    for attempt in range(PORT_ATTEMPTS):
        try:
            return _spawn_once(fn, world_size, args, timeout, free_port(), process_group)
        except RuntimeError as err:
            if not port_taken(str(err)) or attempt == PORT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _spawn_once(fn, world_size: int, args: tuple, timeout: float, port: int, group: bool) -> list:
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)  # takes effect when the server starts (the first world)
    queue = ctx.SimpleQueue()
    here = (dict(os.environ), os.getcwd(), group)
    procs = [
        ctx.Process(target=_worker, args=(r, world_size, port, fn, args, queue, *here), daemon=True)
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    results: dict[int, object] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world_size:
            if not queue.empty():
                rank, ok, value = queue.get()
                if not ok:
                    raise RuntimeError(f"rank {rank} failed: {value}")
                results[rank] = pickle.loads(value)
                continue
            dead = [i for i, p in enumerate(procs) if p.exitcode not in (None, 0) and i not in results]
            if dead and queue.empty():
                raise RuntimeError(f"rank {dead[0]} exited with code {procs[dead[0]].exitcode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"world of {world_size} did not finish within {timeout:.0f} s")
            time.sleep(0.01)
        for p in procs:
            p.join(timeout=30)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
    return [results[r] for r in range(world_size)]
