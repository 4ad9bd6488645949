"""The torch side of pipesim: replay a lowered Program on torch.distributed (TP × CP × DP × PP), measured.

Modules, one concern each: ``parallel_context`` (process groups), ``collectives`` (differentiable
collectives), ``tp_layers`` (Megatron column/row linears), ``weight_grad`` (split backward's deferred weight
GEMMs), ``model`` (the GPT stage model and its single-process reference), ``moe`` / ``moe_dispatch`` /
``moe_compute`` (mixture-of-experts layers, their all-to-all dispatch, expert gradient sync), ``interpreter``
(one rank's Program, instruction by instruction), ``compute`` (what a compute instruction does: autograd) and
``transport`` (how messages move: gloo eager, NCCL grouped) — the interpreter's two seams —,
``emulation`` (both seams at a costs file's durations), ``recorder`` (measured Timeline and saved-activation
bytes), ``harness`` (in-process spawning for tests), ``run`` (the ``torchrun -m executors.run`` entry point),
``torch_runtime`` (an order's CSV trained by PyTorch's own ``_PipelineScheduleRuntime`` around the same stage
modules; ``torchrun -m executors.torch_runtime``).
"""
