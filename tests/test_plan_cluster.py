"""``pipesim plan --cluster``: the same search on a Dask distributed scheduler gives the same answer."""

from __future__ import annotations

import os
from pathlib import Path

from distributed import LocalCluster

from pipesim.analysis import sweep
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.cli.main import main
from pipesim.plan.search import run_plan
from pipesim.plan.space import PlanRequest
from pipesim.plan.workers import Workers

ROOT = Path(__file__).resolve().parents[1]


def test_cluster_search_equals_local(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    request = PlanRequest(MODEL_PRESETS["gpt3-2.7b"], CHIP_PRESETS["a100-80gb"], gpus=16, global_batch=32,
                          schedules=("1f1b", "zb-v"), micro_batch_sizes=(1, 2))
    local = run_plan(request, top=3)
    # ":0": a free port for the scheduler's HTTP server (None still takes 8787, which a parallel worker may hold)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    with cluster, Workers(cluster=cluster.scheduler_address) as workers:
        assert workers.width == 2
        remote = run_plan(request, top=3, workers=workers)
    assert [o.candidate for o in remote.fitting()[:3]] == [o.candidate for o in local.fitting()[:3]]
    assert [o.evaluation for o in remote.pareto()] == [o.evaluation for o in local.pareto()]


def test_unreachable_cluster_is_one_line(monkeypatch, capsys):
    # The client retries a refused connection until its timeout, then refuses the same way: a second, not ten.
    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT_S", 1)
    argv = ["plan", "-q", "--model", "gpt3-2.7b", "--gpus", "8", "--global-batch", "8", "--cluster",
            "tcp://127.0.0.1:9"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pipesim: error: --cluster tcp://127.0.0.1:9: cannot reach a Dask scheduler")
    assert err.count("\n") == 1
