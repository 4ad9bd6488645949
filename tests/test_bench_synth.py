"""Synthesis speed (pytest-benchmark; skipped in the normal run): pp = 8, m = 64 on the paper's 6.2B costs at
the ZB-2p limit, heuristic alone and with local search. ``python -m pytest tests/test_bench_synth.py
--benchmark-only``."""

import pytest

from pipesim.synth.paper import PAPER_ROWS
from pipesim.synth.search import Method, synthesize


@pytest.mark.parametrize("method", [Method.GREEDY, Method.LOCAL], ids=lambda m: m.value)
def test_bench_synthesize_pp8_m64(benchmark, method):
    problem = PAPER_ROWS[5].problem(2)  # 6.2B, p = 8, m = 64, limit 2p·M_B
    result = benchmark.pedantic(synthesize, args=(problem, method), rounds=3, iterations=1)
    assert result.evaluation.feasible
