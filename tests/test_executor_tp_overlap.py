"""The executor's column-parallel linear overlaps its input gradient's collective with its weight gradient, as
Megatron-LM and Transformer Engine do and as pipesim's cost model takes by default (``--overlap-tp-dgrad``):
the collective is started before the weight GEMM and waited for after it; a split backward's ``I`` queues the
weight GEMM instead. Under sequence parallelism it keeps its input sharded and gathers it again in the
backward, started before the input-gradient GEMM and waited for after it (``--column-input regather``). The
numbers themselves are checked against a single-process reference by the distributed tests
(tests/test_executor_equivalence.py, tp 2 in both modes, fused and split backward)."""

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
        log.append(f"all_gather async={async_op}")
        return _Work(log) if async_op else None

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
    inside = []  # the weight gradient's own products are not logged as the input gradient's

    def logged_weight_grad(inputs, grad_output):
        log.append("weight_grad")
        inside.append(True)
        try:
            return real(inputs, grad_output)
        finally:
            inside.pop()

    monkeypatch.setattr(W, "weight_grad", logged_weight_grad)
    real_matmul = torch.Tensor.__matmul__

    def logged_matmul(a, b):
        if not inside:
            log.append("matmul")
        return real_matmul(a, b)

    monkeypatch.setattr(torch.Tensor, "__matmul__", logged_matmul)
    return log


def _backward(log):
    """The events after the forward's blocking all-gather (sequence parallelism) or from the start."""
    start = log.index("all_gather async=False") + 1 if "all_gather async=False" in log else 0
    return log[start:]


def test_sequence_parallel_backward_gathers_the_input_again_beside_the_input_gradient(two_ranks):
    layer = tp_layers.ColumnParallelLinear(torch.randn(8, 6), group=None, mode=TPMode.REDUCE_SCATTER)
    x = torch.randn(4, 1, 6, requires_grad=True)
    layer(x).sum().backward()
    assert _backward(two_ranks) == ["all_gather async=True", "matmul", "wait",  # the gather beside the dgrad GEMM
                                    "reduce_scatter async=True", "weight_grad", "wait"]  # the RS beside the wgrad
    assert layer.weight.grad is not None and x.grad.shape == x.shape


def test_all_reduce_mode_keeps_its_whole_input(two_ranks):
    layer = tp_layers.ColumnParallelLinear(torch.randn(8, 6), group=None, mode=TPMode.ALL_REDUCE)
    x = torch.randn(4, 1, 6, requires_grad=True)
    layer(x).sum().backward()
    assert _backward(two_ranks) == ["matmul", "all_reduce async=True", "weight_grad", "wait"]
    assert layer.weight.grad is not None and x.grad.shape == x.shape


def test_split_backward_queues_the_weight_gradient_and_only_waits(two_ranks):
    layer = tp_layers.ColumnParallelLinear(torch.randn(8, 6), group=None, mode=TPMode.REDUCE_SCATTER)
    layer.weight_grad_store = store = WeightGradStore()
    x = torch.randn(4, 1, 6, requires_grad=True)
    with store.deferring() as queued:
        layer(x).sum().backward()
    assert _backward(two_ranks) == ["all_gather async=True", "matmul", "wait", "reduce_scatter async=True", "wait"]
    assert len(queued) == 1 and layer.weight.grad is None


def test_the_kept_input_is_the_shard(two_ranks):
    """Under sequence parallelism the forward keeps 1/tp of the gathered input for the backward."""
    layer = tp_layers.ColumnParallelLinear(torch.randn(8, 6), group=None, mode=TPMode.REDUCE_SCATTER)
    x = torch.randn(4, 1, 6, requires_grad=True)
    out = layer(x)
    (kept,) = out.grad_fn.saved_tensors
    assert kept.shape == x.shape and out.shape[0] == 2 * x.shape[0]
