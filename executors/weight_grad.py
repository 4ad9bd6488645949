"""Split backward that frees memory as designed: ``I`` keeps only what ``W`` needs.

Zero Bubble (Qi et al. 2024, §2) splits a layer's backward into B (input gradient) and W (weight gradient);
after B only W's operands stay alive — the inputs and output gradients of the weight GEMMs, M_W < M_B —
and the rest of the activations are freed. The published implementation (sail-sg/zero-bubble-pipeline-
parallelism, Megatron's ``WeightGradStore``) does it inside the linear layers' backward: in split mode the
weight-gradient GEMM is not run but queued with its operands, and the W pass later runs the queue.

Here the same idea with explicit objects instead of class-level globals: every GEMM with a weight goes
through :func:`linear`, which takes the :class:`WeightGradStore` of its stage (or None). The interpreter
runs ``I`` as an ordinary, graph-freeing ``autograd.backward`` inside :meth:`WeightGradStore.deferring`;
the weight GEMMs queue ``(weight, input, grad_output)`` and every other parameter (LayerNorm, embeddings:
cheap elementwise reductions) gets its gradient at once, as in the published implementation. ``W`` runs
:func:`apply_weight_grads` on the queue. The sum of the two is exactly the fused backward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class DeferredGrad:
    """One weight GEMM's gradient, not yet computed: ``weight.grad += grad_outputᵀ · input``."""

    weight: torch.Tensor
    inputs: torch.Tensor
    grad_output: torch.Tensor

    @property
    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """What it keeps alive until W: exactly the simulator's M_W."""
        return self.inputs, self.grad_output


class WeightGradStore:
    """Collects the weight GEMMs of one ``I`` (while :meth:`deferring`); they run later at ``W``.

    The flag is an attribute of this object, not thread-local: autograd may run a backward on its own
    device threads (CUDA), and they must see the mode the interpreter set before calling backward.
    """

    def __init__(self) -> None:
        self._collecting: list[DeferredGrad] | None = None

    @contextlib.contextmanager
    def deferring(self) -> Iterator[list[DeferredGrad]]:
        """Within the block, weight GEMMs queue into the yielded list instead of running."""
        collected: list[DeferredGrad] = []
        self._collecting = collected
        try:
            yield collected
        finally:
            self._collecting = None

    def offer(self, weight: torch.Tensor, inputs: torch.Tensor, grad_output: torch.Tensor) -> bool:
        """Queue the GEMM if deferring (True), else leave it to the caller (False)."""
        if self._collecting is None:
            return False
        self._collecting.append(DeferredGrad(weight, inputs, grad_output))
        return True


def weight_grad(inputs: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
    """``∂L/∂A`` of ``y = x Aᵀ``: ``Σ_rows grad_yᵀ x`` over every leading dimension."""
    return grad_output.reshape(-1, grad_output.shape[-1]).t() @ inputs.reshape(-1, inputs.shape[-1])


def apply_weight_grads(deferred: list[DeferredGrad]) -> None:
    """Run the queued GEMMs, accumulating into ``.grad`` as autograd would."""
    for item in deferred:
        grad = weight_grad(item.inputs, item.grad_output)
        if item.weight.grad is None:
            item.weight.grad = grad
        else:
            item.weight.grad += grad


def weight_grad_unless_deferred(store: WeightGradStore | None, weight: torch.Tensor, inputs: torch.Tensor,
                                grad_output: torch.Tensor) -> torch.Tensor | None:
    """The weight gradient of ``y = x Aᵀ``, or None when ``store`` is deferring and has queued it for W."""
    if store is not None and store.offer(weight, inputs, grad_output):
        return None
    return weight_grad(inputs, grad_output)


class _Linear(torch.autograd.Function):
    """``y = x Aᵀ`` whose weight gradient may be deferred to W; the input gradient is always computed."""

    @staticmethod
    def forward(ctx, inputs, weight, store):
        ctx.save_for_backward(inputs)
        # The parameter itself, not a saved copy: saved-tensor hooks may unpack a different tensor object,
        # and W must accumulate into the parameter's own .grad.
        ctx.weight, ctx.store = weight, store
        return F.linear(inputs, weight)

    @staticmethod
    def backward(ctx, grad_output):
        (inputs,) = ctx.saved_tensors
        weight = ctx.weight
        grad_input = grad_output @ weight if ctx.needs_input_grad[0] else None
        grad_weight = None
        if ctx.needs_input_grad[1]:
            grad_weight = weight_grad_unless_deferred(ctx.store, weight, inputs, grad_output)
        return grad_input, grad_weight, None


def linear(inputs: torch.Tensor, weight: torch.Tensor, store: WeightGradStore | None) -> torch.Tensor:
    """``F.linear`` without bias, whose weight gradient ``store`` may defer (None: never deferred)."""
    return _Linear.apply(inputs, weight, store)
