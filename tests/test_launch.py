"""executors.launch: a torchrun world whose rendezvous port was taken before it bound it is launched again on a
fresh port; any other failure is returned as it was, once."""

from __future__ import annotations

import subprocess

import executors.launch as launch


def _fake_runs(monkeypatch, outcomes):
    """subprocess.run replaced by one that answers with ``outcomes`` in turn and records each command."""
    calls = []

    def fake(cmd, **kwargs):
        calls.append(cmd)
        code, err = outcomes[len(calls) - 1]
        return subprocess.CompletedProcess(cmd, code, "", err)

    monkeypatch.setattr(launch.subprocess, "run", fake)
    return calls


def _port(cmd):
    return cmd[cmd.index("--master-port") + 1]


def test_a_taken_port_is_tried_again_on_a_fresh_one(monkeypatch):
    ports = iter(["29601", "29602"])
    monkeypatch.setattr(launch, "free_port", lambda: next(ports))
    calls = _fake_runs(monkeypatch, [(1, "DistNetworkError: ... EADDRINUSE, message: address already in use"),
                                     (0, "")])
    result = launch.run_torchrun(["--nproc-per-node", "2", "-m", "executors.run"], cwd=".", env={}, timeout=5)
    assert result.returncode == 0 and [_port(c) for c in calls] == ["29601", "29602"]
    assert calls[0][-4:] == ["--nproc-per-node", "2", "-m", "executors.run"]


def test_any_other_failure_is_returned_at_once_and_a_port_race_at_most_three_times(monkeypatch):
    calls = _fake_runs(monkeypatch, [(1, "rank 1 (pp rank 1) failed at B mb=1 chunk=0")])
    assert launch.run_torchrun([], cwd=".", env={}, timeout=5).returncode == 1 and len(calls) == 1
    calls = _fake_runs(monkeypatch, [(1, "EADDRINUSE")] * 5)
    result = launch.run_torchrun([], cwd=".", env={}, timeout=5)
    assert result.returncode == 1 and len(calls) == launch.PORT_ATTEMPTS == 3
