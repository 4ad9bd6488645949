"""The torch side of pipesim: replay a lowered Program on torch.distributed (TP × CP × DP × PP), measured.

Modules, one concern each: ``parallel_context`` (process groups), ``collectives`` (differentiable
collectives), ``tp_layers`` (Megatron column/row linears), ``model`` (the GPT stage model and its
single-process reference), ``interpreter`` (one rank's Program, instruction by instruction), ``recorder``
(measured Timeline and saved-activation bytes), ``harness`` (in-process spawning for tests), ``run``
(the ``torchrun -m executors.run`` entry point).
"""
