"""A synchronous step runs at the pace of its slowest GPU: the expected slowdown over ``n`` GPUs of one SKU.

GPUs of one model and SKU do not run equally fast: manufacturing variation and each chip's power management
give each its own sustained clock. Sinha et al. 2022 ("Not All GPUs Are Created Equal: Characterizing
Variability in Large-Scale, Accelerator-Rich Systems", SC'22, arXiv 2208.11035) measured more than 90 % of the
GPUs of five clusters and found 8 % average performance variation between GPUs of the same SKU (up to 22 %),
whatever the application, cooling or vendor, with outliers 1.5× slower than the median GPU. Operators check
for it: Hugging Face's gpu-fryer (README) burns every GPU of a node with the same cuBLAS product because a
training job's speed is set by its slowest GPU, and flags any GPU more than 10 % (its default tolerance) below
the node's best.

A training step synchronises every GPU: a TP group waits for its slowest member at every collective, a
pipeline runs at the pace of its slowest stage, and the data-parallel sync waits for the slowest replica. So
the step runs at the slowest of its ``n`` GPUs. With each GPU's speed deviation drawn from a normal
distribution of relative spread ``σ`` (``ChipSpec.gpu_speed_spread``), the expected deviation of the slowest of
``n`` is ``σ · E[max of n standard normals]``; the chip's kernel rates are a typical GPU's (a single-GPU
benchmark), so one GPU pays nothing and the penalty grows like ``σ·√(2 ln n)``: about 1.4σ on 8 GPUs, 3σ on
512, 3.8σ on 8,192. Only the device's compute slows; communication and the host do not.

``σ`` is fitted to the published runs (pipesim.validation.constants), within the range the measurement makes
plausible: an 8 % spread, read as the gap between the fastest and the slowest of thousands of GPUs, is a σ of
about 1–2 % (the abstract's figures; the paper's exact definition of variation was not at hand).
"""

from __future__ import annotations

import functools
import math

import numpy as np

# The largest spread a chip may state: beyond it a measurement says the machine was too loaded to tell.
MAX_SPREAD = 0.2

# E[max] = ∫ x · n φ(x) Φ(x)ⁿ⁻¹ dx, on a grid wide and fine enough for n up to 10⁶ (the integrand's mass lies
# within ±6 of 0 there) to agree with the tabulated values to 10⁻⁴
_GRID = np.linspace(-9.0, 9.0, 7201)
_PDF = np.exp(-_GRID ** 2 / 2) / math.sqrt(2 * math.pi)
_CDF = 0.5 * (1 + np.array([math.erf(x / math.sqrt(2)) for x in _GRID]))


@functools.cache
def expected_max_standard_normal(n: int) -> float:
    """E[max of ``n`` independent standard normal draws]: 0 for one, 0.564 for two, 1.42 for eight."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    density = n * _PDF * _CDF ** (n - 1)
    return float(np.trapezoid(_GRID * density, _GRID))


def slowest_gpu_factor(gpus: int, spread: float) -> float:
    """How much longer a synchronous step's compute takes on ``gpus`` GPUs than on one typical GPU, when the
    GPUs' speeds spread by ``spread`` (relative standard deviation): ``1 + spread · E[max of gpus normals]``."""
    if spread == 0:
        return 1.0
    return 1.0 + spread * expected_max_standard_normal(gpus)
