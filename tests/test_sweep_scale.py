"""Sweeps at scale: worker caps, clean stops on signals, a Dask cluster, and sizes refused up front."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from pipesim.analysis import sweep
from pipesim.analysis.sweep import SweepGrid, SweepPoint, run_sweep, worker_count
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.program.build import check_fits, estimated_instructions


def _grid() -> list[SweepPoint]:
    return SweepGrid(schedules=["gpipe", "1f1b", "interleaved", "zb-h1"], pp=[2, 4], microbatches=[4, 8],
                     backward=[1.0, 2.0]).points()


@pytest.mark.parametrize(("jobs", "work", "cores", "expected"),
                         [(100000, 10, 2, 2), (0, 1000, 16, 16), (0, 3, 16, 3), (1, 5, 2, 1), (4, 2, 8, 2)])
def test_workers_are_capped_at_cores_and_work(jobs, work, cores, expected):
    assert worker_count(jobs, work, cores) == expected


def test_negative_jobs_is_a_one_line_error(tmp_path, capsys):
    assert main(["sweep", "--jobs", "-1", "-q", "-o", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pipesim: error: --jobs -1") and "\n" not in err
    assert not (tmp_path / "r.csv").exists()
    with pytest.raises(PipesimError):
        run_sweep(_grid(), jobs=-3)


def test_huge_jobs_runs_with_what_is_there():
    points = _grid()[:6]
    assert run_sweep(points, jobs=100000).frame.equals(run_sweep(points).frame)


def test_dask_local_cluster_equals_serial():
    from dask.distributed import LocalCluster

    points = _grid()
    seen = []
    # ":0": a free port for the scheduler's HTTP server (None still takes 8787, which a parallel worker may hold)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        result = run_sweep(points, cluster=cluster.scheduler_address, progress=seen.append)
    serial = run_sweep(points)
    assert result.frame.equals(serial.frame)
    assert result.skipped == serial.skipped and sum(seen) == len(points)


def test_unreachable_cluster_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT_S", 1)  # a refused connection is retried until then
    assert main(["sweep", "-s", "1f1b", "--cluster", "tcp://127.0.0.1:9", "-q", "-o", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--cluster tcp://127.0.0.1:9" in err and "\n" not in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_a_parallel_sweep_cleanly(tmp_path, signum):
    out = tmp_path / "r.csv"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipesim.cli", "sweep", "-s", "gpipe,1f1b,zb-h1", "--pp", "2,3,4,5,6,7,8",
         "--mb", ",".join(str(m) for m in range(8, 200, 3)), "-B", "1,2,3,4", "--jobs", "2", "-q", "-o", str(out)],
        stderr=subprocess.PIPE, text=True, env=env,
    )
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    children: list[psutil.Process] = []
    while time.monotonic() < deadline and len(children) < 2:  # wait until the workers run
        children = parent.children(recursive=True)
        time.sleep(0.2)
    assert len(children) >= 2, "the sweep never started its workers"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum
    assert err.strip().count("\n") == 0 and "interrupted" in err
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"workers left behind: {alive}"
    assert not out.exists()


@pytest.mark.parametrize("command", ["simulate", "export", "lower", "validate"])
def test_absurd_sizes_are_refused_at_once(command, capsys):
    started = time.monotonic()
    assert main([command, "--pp", "99999999999999999999999", "--mb", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "instructions" in err and "GiB" in err and "\n" not in err
    assert time.monotonic() - started < 30  # refused before any work (generous: a loaded machine)


def test_fit_check_uses_the_estimate():
    rows = estimated_instructions(64, 8192, 1)
    assert 3_000_000 < rows < 3_300_000  # the real Program has 3,113,088
    check_fits(64, 8192, 1, available=1 << 34)
    with pytest.raises(PipesimError, match="GiB"):
        check_fits(4096, 1_000_000, 1, available=1 << 34)
