"""Published runs of one job on two networks (pipesim.validation.network_pairs): which rows pair, and the ratios."""

import pytest

from pipesim.analytic.layout import ElementwiseKernels, Recompute, ZeroStage
from pipesim.validation.network_pairs import network_gbps, network_pairs
from pipesim.validation.runs import PublishedRun
from pipesim.validation.sources import PUBLISHED_RUNS


def _run(gpus: int, gbps: float | None, tokens: float, **changed) -> PublishedRun:
    fields = dict(micro_batch=2, seq_len=4096, recompute=Recompute.NONE, zero=ZeroStage.PARAMETERS,
                  elementwise=ElementwiseKernels.EAGER, inter_node_gbps=gbps, tokens_per_gpu=tokens)
    fields.update(changed)
    batch = gpus * fields["micro_batch"]  # one microbatch a step
    return PublishedRun("A team, a table", "llama2-7b", "h100-sxm", gpus, batch, **fields)


def test_rows_pair_when_only_the_network_and_the_gpu_count_differ():
    thin, fast = _run(96, 100, 7500), _run(464, None, 7561)
    assert network_gbps(fast) == pytest.approx(400)  # the h100-sxm preset's 400 Gb/s a GPU
    (pair,) = network_pairs([fast, thin], shares=(0.0, 1.0))
    assert (pair.thin, pair.fast) == (thin, fast)
    assert pair.measured == pytest.approx(7561 / 7500)
    # the serialised share is the collectives' kernel work, which no network speeds up: with none of it beside
    # compute the faster network is worth little; the share beside compute holds SMs as long as the network takes
    assert abs(pair.predicted[0.0] - 1) < 0.05 and pair.predicted[0.0] != pair.predicted[1.0]
    # another micro-batch, another recomputation, or the same network: no pair
    assert network_pairs([thin, _run(464, None, 7561, micro_batch=1)]) == []
    assert network_pairs([thin, _run(464, None, 7561, recompute=Recompute.FULL)]) == []
    assert network_pairs([thin, _run(464, 100, 7561)]) == []


def test_the_published_pairs_are_the_blog_posts_h100_clusters():
    pairs = network_pairs(PUBLISHED_RUNS, shares=(0.5,))
    assert {p.thin.model for p in pairs} == {"llama2-7b", "llama2-13b", "llama2-34b", "llama2-70b"}
    assert all(p.thin.gpus == 96 and p.fast.gpus == 464 for p in pairs)
    # the same MFU on four times the network a node: within 7 % either way; pipesim within 5 % on average (the 70B's
    # slowdown on 464 GPUs is what it misses), where a serialised share of the whole collective was 13 % off. In
    # sample: these pairs are what the kernel-work mechanism was read from (comm.prefetched_overlap); the other
    # sources, left out, are its test (docs/validation-log.md)
    assert all(0.93 <= p.measured <= 1.02 for p in pairs)
    assert sum(p.predicted[0.5] - p.measured for p in pairs) / len(pairs) < 0.05
