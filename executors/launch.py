"""Launching torchrun worlds from tests and experiments on one machine (no torch import here).

The rendezvous port is free when chosen, but another process (a parallel test's world, an ephemeral gloo
connection) can bind it before torchrun's store does; then nothing has run yet, and the world is started
again on a fresh port. Every launcher in the suite shares this, so a busy machine fails none of them.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

PORT_ATTEMPTS = 3


def free_port() -> int:
    """A TCP port on the loopback interface that nothing holds at this moment."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_taken(output: str) -> bool:
    """Whether a launch failed because its rendezvous port was taken before it bound it (so nothing ran)."""
    return "EADDRINUSE" in output


def run_torchrun(args: Sequence[str], *, cwd: str | Path, env: Mapping[str, str], timeout: float,
                 attempts: int = PORT_ATTEMPTS) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --master-port P <args>``, its output captured; launched again on a
    fresh port when the first could not bind its rendezvous. The last attempt's result is returned whatever
    it is, so a world that fails for any other reason fails as it did."""
    for attempt in range(attempts):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--master-port", str(free_port()), *args]
        proc = subprocess.run(cmd, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout)
        if proc.returncode == 0 or not port_taken(proc.stdout + proc.stderr) or attempt == attempts - 1:
            return proc
    raise AssertionError("unreachable")  # pragma: no cover
