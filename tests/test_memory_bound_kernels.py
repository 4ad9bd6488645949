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


@pytest.mark.parametrize(("tokens", "forward_ms", "full_ms"), [
    (4096, 20.912, 55.967), (8192, 37.972, 111.455), (16384, 76.391, 220.784), (32768, 151.914, 452.471)])
def test_the_a100_lm_head_is_ligers_measured_torch_head(tokens, forward_ms, full_ms):
    """A kernel-level check of the head's GEMMs and loss, not fitted: Liger-Kernel's table times PyTorch's LM head
    (``nn.Linear`` 4,096 → 128,256 in BF16, then ``nn.CrossEntropyLoss`` on the BF16 logits: a log-softmax reading
    them three times and writing once, its backward reading two tensors and writing one beside the NLL's zeroed
    gradient) on an A100-SXM4-80GB (``fused_linear_cross_entropy``, provider ``huggingface``, November 2024).
    pipesim's GEMMs (the A100 preset's roofline with its tile and kernel overheads) and those bytes at the
    streaming rate give the forward within 7 % (−6 % at 4,096 tokens, +3 % at the rest) and the forward with its
    backward within 3 %."""
    from pipesim.analytic.kernels import gemm_time
    from pipesim.analytic.layout import Precision

    a100, bf16, vocab, hidden = CHIP_PRESETS["a100-80gb"], Precision.BF16, 128256, 4096
    logits = tokens * vocab
    forward = gemm_time(tokens, vocab, hidden, a100, bf16) + 8 * logits / a100.stream_bandwidth
    backward = (gemm_time(tokens, hidden, vocab, a100, bf16) + gemm_time(hidden, vocab, tokens, a100, bf16)
                + 8 * logits / a100.stream_bandwidth)
    assert forward * 1e3 == pytest.approx(forward_ms, rel=0.07)
    assert (forward + backward) * 1e3 == pytest.approx(full_ms, rel=0.03)


def test_the_report_says_the_shares_a_layout_runs_at(capsys):
    """simulate's efficiency line names the unvectorised shares where the layout runs such work, and only then."""
    from pipesim.cli.main import main

    common = ["--pp", "1", "--mb", "2", "--seq-len", "1024"]
    assert main(["simulate", "--model", "llama3.2-1b", *common, "--framework", "nanotron"]) == 0
    assert "HBM 0.9 (strided 0.55)," in capsys.readouterr().out  # its activation over gate_up_proj's halves
    assert main(["simulate", "--model", "llama3.1-8b", *common, "--framework", "torchtitan",
                 "--hardware", "a100-80gb"]) == 0
    assert "HBM 0.9 (strided 0.55, FP32 chains 0.55)," in capsys.readouterr().out  # eager copies, norms and RoPE
    assert main(["simulate", "--model", "gpt3-175b", "--pp", "4", "--mb", "4", "--tp", "8"]) == 0
    assert "HBM 0.9, " in capsys.readouterr().out  # GELU and fused kernels: nothing unvectorised
