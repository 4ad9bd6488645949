"""The executor's column-parallel linear overlaps its input gradient's collective with its weight gradient, as
Megatron-LM and Transformer Engine do and as pipesim's cost model takes by default (``--overlap-tp-dgrad``):
the collective is started before the weight GEMM and waited for after it; a split backward's ``I`` queues the
weight GEMM instead. The numbers themselves are checked against a single-process reference by the distributed
tests (tests/test_executor_equivalence.py, tp 2 in both modes, fused and split backward)."""

import pytest
import torch

from executors import collectives as C
from executors import tp_layers
from executors import weight_grad as W
from executors.config import TPMode
from executors.weight_grad import WeightGradStore


class _Work:
    def __init__(self, log):
        self.log = log

    def wait(self):
        self.log.append("wait")


@pytest.fixture
def two_ranks(monkeypatch):
    """A stand-in group of two ranks: each collective logs itself and leaves its output as it is."""
    log = []
    dist = C.dist
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)

    def all_gather(out, x, group=None, async_op=False):
        out.copy_(torch.cat([x, x]))
        log.append("all_gather")

    def reduce_scatter(out, x, group=None, async_op=False):
        out.copy_(x[: out.shape[0]])
        log.append(f"reduce_scatter async={async_op}")
        return _Work(log)

    def all_reduce(x, group=None, async_op=False):
        log.append(f"all_reduce async={async_op}")
        return _Work(log)

    monkeypatch.setattr(dist, "all_gather_single", all_gather)
    monkeypatch.setattr(dist, "reduce_scatter_single", reduce_scatter)
    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    real = W.weight_grad

    def logged_weight_grad(inputs, grad_output):
        log.append("weight_grad")
        return real(inputs, grad_output)

    monkeypatch.setattr(W, "weight_grad", logged_weight_grad)
    return log


@pytest.mark.parametrize(("mode", "collective"), [(TPMode.REDUCE_SCATTER, "reduce_scatter async=True"),
                                                   (TPMode.ALL_REDUCE, "all_reduce async=True")])
def test_input_gradient_collective_runs_beside_the_weight_gradient(two_ranks, mode, collective):
    layer = tp_layers.ColumnParallelLinear(torch.randn(8, 6), group=None, mode=mode)
    x = torch.randn(4, 1, 6, requires_grad=True)
    layer(x).sum().backward()
    backward = [e for e in two_ranks if e != "all_gather"]
    assert backward == [collective, "weight_grad", "wait"]
    assert layer.weight.grad is not None and x.grad.shape == x.shape


def test_split_backward_queues_the_weight_gradient_and_only_waits(two_ranks):
    layer = tp_layers.ColumnParallelLinear(torch.randn(8, 6), group=None, mode=TPMode.REDUCE_SCATTER)
    layer.weight_grad_store = store = WeightGradStore()
    x = torch.randn(4, 1, 6, requires_grad=True)
    with store.deferring() as queued:
        layer(x).sum().backward()
    assert [e for e in two_ranks if e != "all_gather"] == ["reduce_scatter async=True", "wait"]
    assert len(queued) == 1 and layer.weight.grad is None
