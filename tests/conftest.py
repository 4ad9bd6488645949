"""Shared fixtures (built-in schedule programs) and the order the suite runs in."""

from __future__ import annotations

import functools

import pytest

from pipesim.program.build import build_program

# Modules whose tests take longest (spawned gloo worlds, torchrun launches, scripts run end to end), longest
# first, from `pytest -n 2 -m distributed --durations=0` and the fast tier's `--durations=0`, summed per module,
# on the 2-core machine (after the forkserver harness). They run before everything else so that no long module
# is left for the end while the other xdist worker idles (--dist loadfile, pyproject.toml); the many short
# modules after them fill the gaps.
# Only the order changes, never what runs; a module's tests stay together (module-scoped fixtures stay warm),
# and a module missing here simply runs after these in collection order.
LONGEST_FIRST = (
    "test_plan_launch.py",  # two torchrun launches of four processes
    "test_executor_equivalence.py",
    "test_executor_emulation.py",  # emulated costs are real sleeps, and a torchrun launch
    "test_executor_failures.py",  # three torchrun launches
    "test_profile_closed_loop.py",
    "test_executor_cp.py",
    "test_experiments.py",
    "test_torch_runtime.py",
    "test_executor_measure.py",
    "test_readme_chain.py",
    "test_bad_hangs.py",  # user code looping until its timeouts, in real processes
    "test_executor_grouped.py",
    "test_executor_moe.py",
    "test_dualpipe.py",  # one four-process world, the rest process-free
    "test_examples.py",
    "test_published_runs.py",
    "test_plan.py",
    "test_plan_cluster.py",
    "test_validate.py",
    "test_sweep_scale.py",
    "test_engines.py",
    "test_grouped.py",
    "test_compiled_program_kernels.py",
    "test_synth_executor.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: keeps each module's own order


@pytest.fixture(scope="session", autouse=True)
def _own_synthesis_store(tmp_path_factory):
    """The on-disk store of synthesised orders (pipesim/synth/store.py) in a folder of this session's own, so a
    developer's cache never answers a test (subprocesses inherit the variable)."""
    from pipesim.synth.store import CACHE_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("pipesim-cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _each_synthesis_problem_solved_once():
    """zb-auto's order is a pure function of its problem (a work budget, not a clock, bounds the search), and
    many tests build it for the same costs through different paths (the Program cache is keyed by more than
    the problem: semantics, P2P lowering). Each distinct problem is synthesised once per test process.

    Installed after collection, so the synthesis tests that import ``synthesize`` by name (test_synth's
    reproducibility check among them) still call the real search every time.

    A problem the published-runs table synthesises is read from the committed cache (tests/synth_cache.py:
    used only while fresh, re-evaluated, re-synthesised and compared by tests/test_synth_cache.py), not
    searched again in every run."""
    from pipesim.synth import search
    from tests.synth_cache import CachedOrders

    solve = search.synthesize
    solved: dict = {}
    cached = CachedOrders()

    @functools.wraps(solve)
    def once(problem, method=search.Method.LOCAL, **options):
        key = (problem, method, tuple(sorted(options.items())))
        if key not in solved:
            hit = cached.result(problem) if method is search.Method.LOCAL and not options else None
            solved[key] = hit if hit is not None else solve(problem, method, **options)
        return solved[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search, "synthesize", once)
        yield


@pytest.fixture
def program_of():
    def make(name: str, pp: int, mb: int, chunks: int | None = None):
        return build_program(name, pp, mb, chunks).program

    return make
