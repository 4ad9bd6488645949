"""pipesim against published measured runs (experiments/published_runs.py): each row's signed error, and the
table's mean, for step time and for memory separately. Nothing is fitted per row. Rows known to miss the
15 % bar are strict xfails that name why, so the day they pass the test says so."""

import json

import pytest

from experiments.published_runs import PUBLISHED_RUNS, cli_args, predict
from pipesim.cli.main import main

KNOWN_STEP_MISSES = {
    # NeMo FP8 rows without tensor parallelism are predicted too fast (llama2-7b -14 %, these two -15 % and
    # -22 %) while the tp = 4 rows of the same table land within ±3 %. Those are right partly by compensation:
    # pipesim exposes every TP collective (~17 % of a layer there) and NeMo's recipes overlap them
    # (ub_tp_comm_overlap). Not FP8 itself: pipesim's FP8/BF16 speedup for torchtitan's Llama 3.1 8B setup
    # (1.22×) is at or below the one measured there (1.28×, benchmarks/llama3_h100_202412_torchtitan.md) —
    # the H100 compute of h = 4096-5120 layers is what is optimistic, by a cause not identified here.
    ("llama2-13b", "NVIDIA", 16, 1): "H100 tp=1 layers predicted too fast",
    ("llama3.1-8b", "NVIDIA", 8, 2): "H100 tp=1 + context parallel predicted too fast",
    # Llama 3 405B (BF16): the interleaving depth is not published (v = 2 assumed). The two 16M-token runs lose
    # only 7 % TFLOP/s when the microbatches per step halve (430 → 400), less than v = 2's bubble gives
    # (pipesim: -15 % and -4 %); a deeper v (4, 8) makes the two rows agree but at -18 to -26 %: a ~20 % loss
    # at this scale that pipesim does not model (stragglers, collectives over 8-16k GPUs) — not identified.
    # The 131k-token row also depends on how Meta counts attention FLOPs: at s = 131,072 the full s²
    # attention is 57 % of pipesim's count, and counting the causal half turns -21 % into +11 %.
    ("llama3.1-405b", "Llama", 8192, 1): "405B on 8192 H100: ~20 % scale loss not modelled; v unpublished",
    ("llama3.1-405b", "Llama", 16384, 16): "405B at 131k tokens: FLOP convention of the published TFLOP/s",
    # Qi et al.'s 14.6B over two nodes (pp 16, 1,024-token microbatches): pipesim's per-stage F/B/W are 4-5 %
    # below the paper's own per-pass profile (Table 9), and a 1F1B simulated *with that profile* is still
    # 7.6 % faster than the published 1F1B (4.5 % at pp 8): an overhead of the real pipeline that grows with
    # its depth, outside per-pass compute, not modelled. Interleaved with one layer per chunk (three times the
    # boundary crossings) adds to it.
    ("zb-14.6b", "Qi", 16, 48): "interleaved 1F1B, 14.6B over 2 nodes: per-pass -5 % and pipeline overhead",
    ("zb-14.6b", "Qi", 16, 64): "interleaved 1F1B, 14.6B over 2 nodes: per-pass -5 % and pipeline overhead",
}


def _miss(run):
    key = (run.model, run.source.split(" ")[0], run.gpus)
    if run.schedule == "interleaved" and run.source.startswith("Qi"):
        return KNOWN_STEP_MISSES.get((*key, run.microbatches))
    return KNOWN_STEP_MISSES.get((*key, run.cp))


def _id(run):
    return f"{run.source.split(' ')[0]}-{run.label.replace(' ', '_')}-{run.schedule}-{run.recompute.value}"


_COMPARISONS: dict[int, object] = {}


def _comparison(run):
    """Each row predicted once per process, on first use: a worker predicts only the rows it tests (the ZB-2p
    rows synthesise zb-auto for their costs, the slow part), the table test all of them."""
    if id(run) not in _COMPARISONS:
        _COMPARISONS[id(run)] = predict(run)
    return _COMPARISONS[id(run)]


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=_miss(r)))
                                 if _miss(r) else r for r in PUBLISHED_RUNS], ids=_id)
def test_step_time_within_15_percent(run):
    error = _comparison(run).step_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


@pytest.mark.parametrize("run", [r for r in PUBLISHED_RUNS if r.memory_gib is not None], ids=_id)
def test_memory_within_15_percent(run):
    error = _comparison(run).memory_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


def test_table_size_and_mean_errors():
    comparisons = [_comparison(run) for run in PUBLISHED_RUNS]
    steps = [abs(c.step_error) for c in comparisons]
    memory = [abs(c.memory_error) for c in comparisons if c.memory_error is not None]
    assert len(steps) >= 20 and len(memory) >= 20
    assert sum(steps) / len(steps) <= 0.08
    assert sum(memory) / len(memory) <= 0.08


@pytest.mark.parametrize("run", PUBLISHED_RUNS[::10], ids=_id)
def test_every_configuration_is_expressible_on_the_command_line(run, capsys):
    assert main([*cli_args(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    expected = _comparison(run).report
    assert report["step_time_s"] == pytest.approx(expected.step_time, rel=1e-9)
    assert report["memory"]["peak_gib"] == pytest.approx(expected.memory.peak.total / 2**30, rel=1e-9)
