"""``pipesim profile``: time this machine's kernels and collectives and write a measured chip file.

One concern per module: :mod:`.timing` (the clock: CUDA events or ``perf_counter``, warmup + median),
:mod:`.device` (what is measured on, and the provenance record), :mod:`.gemm`, :mod:`.attention`,
:mod:`.stream` (memory-bound kernels), :mod:`.collectives` (among the processes ``torchrun`` started),
:mod:`.host` (the host's time per kernel), :mod:`.spread` (the processes' speed spread), and the machine under
load: :mod:`.contention` (GEMMs beside all-reduces), :mod:`.p2p_sync` (synchronised pipeline sends) and
:mod:`.sustained` (a GEMM burn against its short run); :mod:`.compare` (a preset against a measurement),
:mod:`.chip_file` (the derived roofline fields and the YAML writer) and :mod:`.runner` (the order of it all,
with a progress bar). The tables' schema and the cost model's lookups live in :mod:`pipesim.analytic.measured`.
Launch several processes with ``torchrun --nproc-per-node N -m pipesim.profile ...`` to measure collectives.
"""
