"""Kernels written as plain Python over numpy arrays, compiled by numba when that pays off.

pipesim's hot loops (the graph engine, the Program table's link numbering, validation's yes/no pass) are
each one plain function. Importing numba and loading a cached compilation costs ~0.5–1 s once per process,
so a kernel is compiled for large Programs (from :data:`COMPILE_THRESHOLD` rows) and for sweeps, which load
the compiler up front (:func:`warm_up` of each kernel's module); small one-shot runs use their numpy or
SimPy paths. The uncompiled function stays callable: tests hold both forms to the same results.
"""

from __future__ import annotations

from collections.abc import Callable

#: Rows from which a one-shot run compiles a kernel (importing numba costs ~0.5 s once).
COMPILE_THRESHOLD = 200_000


class Kernel:
    """One plain-Python kernel and, once asked for, its numba-compiled form (``cache=True``)."""

    def __init__(self, function: Callable) -> None:
        self.function = function
        self._compiled: Callable | None = None

    @property
    def loaded(self) -> bool:
        return self._compiled is not None

    def compiled(self) -> Callable | None:
        """The compiled kernel (compiled once, then read from numba's cache), or None without numba."""
        if self._compiled is None:
            try:
                import numba
            except ImportError:  # numba is a dependency, but a stripped install still runs, only slower
                return None
            self._compiled = numba.njit(cache=True, nogil=True)(self.function)
        return self._compiled

    def worth_compiling(self, rows: int) -> bool:
        """Whether the compiled form is the fast choice for ``rows`` rows: always once it is loaded in this
        process, else from :data:`COMPILE_THRESHOLD` rows."""
        return self.loaded or rows >= COMPILE_THRESHOLD
