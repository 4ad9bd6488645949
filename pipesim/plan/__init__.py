"""``pipesim plan``: the parallel configuration that trains fastest within memory, found by simulating schedules.

Modules, one concern each: ``space`` (the candidates for a GPU count and global batch, and the refusals when
there are none), ``evaluate`` (the one narrow interface to the cost/memory model and the simulator: a
configuration → step time, tokens/s per GPU, MFU, peak GiB and its rank, bubble), ``bounds`` (cheap lower
bounds that prune before simulating), ``search`` (order, prune, simulate the survivors locally or on Dask),
``pareto`` (the non-dominated step time / peak memory points), ``launch`` (the executor's torchrun line and
Megatron-LM's flags for a configuration) and ``advice`` (the smallest change that makes something fit).
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    """``pipesim.plan`` is both this package and the API's :func:`pipesim.api.planning.plan`: once any module of the
    package is imported, Python binds the package to the name ``plan`` on ``pipesim``, which would hide the
    function. Calling the package calls the function, so ``pipesim.plan(...)`` works whichever was bound."""

    def __call__(self, *args, **kwargs):
        from pipesim.api.planning import plan

        return plan(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
