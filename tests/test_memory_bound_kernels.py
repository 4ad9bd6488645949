"""The unvectorised kernels' shares of HBM (pipesim.validation.memory_bound_kernels): each preset's value is the
mean of its chip's measured cases of that kind in Liger-Kernel's published table, and the table's controls,
contiguous kernels of one dtype, stream near memory_efficiency, which the shares are the exception to."""

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.validation.memory_bound_kernels import (
    FAMILIES,
    FIELDS,
    StreamKind,
    case_shares,
    derived_shares,
)


def test_presets_are_the_measured_shares():
    derived = derived_shares()
    for (chip, kind), share in derived.items():
        if kind is StreamKind.VECTORISED:
            continue
        for preset in FAMILIES[chip]:
            assert getattr(CHIP_PRESETS[preset], FIELDS[kind]) == share, (preset, kind)
    # the H100's shares are the fields' defaults, which chips without a case of their own take
    assert derived[("h100-sxm", StreamKind.STRIDED)] == 0.55
    assert derived[("h100-sxm", StreamKind.CONVERTING)] == 0.70
    assert derived[("a100-80gb", StreamKind.CONVERTING)] == 0.55
    b200 = CHIP_PRESETS["b200"]
    assert (b200.strided_memory_efficiency, b200.converting_memory_efficiency) == (0.55, 0.70)


def test_each_case_by_hand():
    """Two cases recomputed from the table's rows: the strided SwiGLU on H100 and the RMSNorm chain on A100."""
    shares = {(c.chip, c.op.label): c.share for c in case_shares()}
    # torch silu(gate)·up over torch.chunk: 8,192 tokens × 16,384 more inner elements, 10 bytes each, in 0.745 ms
    swiglu = 8192 * 16384 * 10 / ((1.4953 - 0.7503) * 1e-3) / 3.35e12
    assert shares[("h100-sxm", "torch silu(gate) * up over torch.chunk")] == pytest.approx(swiglu)
    assert swiglu == pytest.approx(0.538, abs=0.001)
    # Hugging Face's RMSNorm, 38 bytes an element, 2,048 rows × 16,384 more columns, in 0.9335 ms, of 2,039 GB/s
    norm = 2048 * 16384 * 38 / ((1.9191 - 0.9856) * 1e-3) / 2.039e12
    assert shares[("a100-80gb", "Hugging Face LlamaRMSNorm (eager)")] == pytest.approx(norm)


def test_the_controls_stream_near_memory_efficiency_and_faster_than_the_exceptions():
    cases = case_shares()
    for chip in ("h100-sxm", "a100-80gb"):
        controls = [c.share for c in cases if c.chip == chip and c.op.kind is StreamKind.VECTORISED]
        slow = [c.share for c in cases if c.chip == chip and c.op.kind is not StreamKind.VECTORISED]
        assert controls and slow and min(controls) > max(slow)
    h100 = [c.share for c in cases if c.chip == "h100-sxm" and c.op.kind is StreamKind.VECTORISED]
    assert all(abs(share - CHIP_PRESETS["h100-sxm"].memory_efficiency) < 0.05 for share in h100)
