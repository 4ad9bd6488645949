"""What PyTorch's CUDA caching allocator reserves above the tensors' peak: the reserved peak beside the allocated one.

pipesim's memory model counts bytes held by tensors, what ``torch.cuda.max_memory_allocated()`` reports
(Megatron-LM's ``report_memory``, MLPerf's ``max_memory_usage``). Many frameworks print the other figure,
``torch.cuda.max_memory_reserved()``: everything the caching allocator has taken from the device, what
``nvidia-smi`` shows less the CUDA context and NCCL's buffers, and what an out-of-memory error is about
(torchtitan's ``memory:`` column is its ``max_reserved``). The allocator keeps freed blocks cached for reuse and
serves a request from a cached block only if one is large enough, splitting it; blocks freed between long-lived
ones leave holes too small for the next large request, which then takes fresh memory (PyTorch's CUDA semantics
notes, "Memory management"; Guo et al. 2024, GMLake, ASPLOS '24: "up to 30 % GPU memory fragmentation" under
recomputation, offloading and ZeRO). How much depends on the order and sizes of a step's allocations, which pipesim
does not trace tensor by tensor, so the gap is taken as a share of the allocated peak, measured on published runs:

``RESERVED_SHARE`` is the median of ``max reserved / max allocated − 1`` over the 27 pretraining runs whose logs
print both (:mod:`pipesim.validation.allocator_pairs`, ``python experiments/allocator_reserve.py``): +5.4 %,
10–90 % of runs +0.8 … +29 %. It is not fitted to a published-run row of the validation table; the two rows
that publish a reserved peak (torchtitan's Llama 3.1 8B) test it.

Bounded by the device: when ``cudaMalloc`` fails the allocator frees its unused cached blocks and tries again
(``release_cached_blocks``; the ``garbage_collection_threshold`` setting exists to avoid that expensive path),
so the reserved peak never passes the capacity; a run whose allocated peak fits is at most at the capacity.
"""

from __future__ import annotations

import enum

# Median over 27 runs of max_memory_reserved / max_memory_allocated − 1 (allocator_pairs.reserved_shares()),
# rounded; tests/test_allocator.py holds the two together.
RESERVED_SHARE = 0.054
# 10th and 90th percentile of the same 27 runs: how far one run's gap strays from the median.
RESERVED_SHARE_RANGE = (0.008, 0.29)


class MemoryMeasure(enum.Enum):
    """Which peak a framework reports: what tensors hold, or what the caching allocator holds."""

    ALLOCATED = "allocated"  # torch.cuda.max_memory_allocated()
    RESERVED = "reserved"  # torch.cuda.max_memory_reserved()


def reserved_peak(allocated: float, capacity: float, share: float = RESERVED_SHARE) -> float:
    """The caching allocator's reserved peak for an allocated peak of ``allocated`` on a device of ``capacity``
    (bytes or GiB alike): ``share`` more, but no more than the capacity (nor less than ``allocated``, which an
    allocated peak over the capacity, a run that does not fit, already is)."""
    return max(allocated, min(allocated * (1 + share), capacity))
