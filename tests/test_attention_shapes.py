"""Fused attention at a layer's own shape: the sequence and head-size table, the grid of CTAs, chip files."""

import math
from dataclasses import replace

import pytest

from pipesim.analytic.attention_shapes import AttentionShapeRates, cta_imbalance
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import chip_from_dict
from pipesim.analytic.kernels import attention_core_times
from pipesim.analytic.layout import Layout
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.errors import PipesimError

H100 = CHIP_PRESETS["h100-sxm"]
TABLE = H100.attention_shape_rates


def test_factors_by_hand_from_the_published_rates():
    """Shah et al. 2024's FlashAttention-2 rates on H100, relative to the causal 16k, head-size-128 kernel."""
    assert TABLE.factors(16384, 128) == pytest.approx((1.0, 1.0))
    forward, backward = TABLE.factors(2048, 128)
    assert forward == pytest.approx(298 / 335)
    assert backward == pytest.approx((291 * 298 / 362) / (322 * 335 / 370))  # unmasked × the mask's share
    assert TABLE.factors(4096, 64)[0] == pytest.approx(284 / 335)
    # between measured points: linear in log₂ of the sequence and of the head size
    assert TABLE.factors(math.sqrt(2048 * 4096), 128)[0] == pytest.approx((298 + 319) / 2 / 335)
    assert TABLE.factors(4096, 90)[0] == pytest.approx((284 + (math.log2(90) - 6) * (319 - 284)) / 335)
    # held at the ends: no extrapolation beyond 512–16k tokens or head sizes 64–128
    assert TABLE.factors(256, 32) == TABLE.factors(512, 64)
    assert TABLE.factors(131072, 256) == pytest.approx((1.0, 1.0))


def test_a_measured_causal_backward_is_read_as_it_is_and_the_reference_stays_at_16k():
    """cuDNN's training benchmark on GB200 (NVIDIA/cudnn-frontend, cuDNN 9.22, head size 128) measures the causal
    backward and runs to 32k tokens: the factors read that backward, not the unmasked one times the mask's share,
    and stand against the 16k point even where the table goes further (its 32k rates are below its 16k ones)."""
    def grid(*rates):
        return ((128, tuple(zip((2048, 4096, 8192, 16384, 32768), rates, strict=True))),)
    table = AttentionShapeRates(forward_causal=grid(1097, 1408, 1574, 1708, 1622),
                                forward=grid(1433, 1599, 1771, 1697, 1634), backward=grid(1124, 1350, 1404, 1374, 1262),
                                backward_causal=grid(885, 1148, 1332, 1328, 1226))
    assert table.factors(16384, 128) == pytest.approx((1.0, 1.0))
    assert table.factors(4096, 128) == pytest.approx((1408 / 1708, 1148 / 1328))
    assert table.factors(32768, 128) == pytest.approx((1622 / 1708, 1226 / 1328))
    derived = replace(table, backward_causal=())  # without it: the unmasked backward times the mask's share
    assert derived.factors(4096, 128)[1] == pytest.approx((1350 * 1408 / 1599) / (1374 * 1708 / 1697))
    assert chip_from_dict({**{k: v for k, v in H100.to_dict().items() if v is not None},
                           "attention_shape_rates": table.to_dict()}, "gb200.yaml").attention_shape_rates == table


def test_without_a_backward_the_backward_scales_as_the_forward():
    table = AttentionShapeRates(forward_causal=((128, ((1024, 100.0), (4096, 200.0))),))
    assert table.factors(1024, 128) == pytest.approx((0.5, 0.5))


@pytest.mark.parametrize("tiles, pairs, sms, expected", [
    (32, 4, 132, 2.0),              # 128 CTAs each alone on an SM: the longest, 32 units, against 16 spread evenly
    (16, 1, 132, 16 / (136 / 132)),  # one (sequence, head): 16 CTAs, 136 units
    (4, 1, 3, 4 / (10 / 3)),        # 4,3,2 placed, then 1 joins the 2: the 4 ends last
    (4, 1, 2, 1.0),                 # 4 | 3, then 2 → 3's SM, 1 → 4's: 5 and 5
    (3, 2, 4, 1.0),                 # 3,3,2,2 | then the two 1s fill the 2s: every SM at 3
    (1, 1, 1, 1.0),
])
def test_cta_imbalance_by_hand(tiles, pairs, sms, expected):
    assert cta_imbalance(tiles, pairs, sms) == pytest.approx(expected)


def test_many_waves_cost_nothing_and_the_factor_never_falls_below_one():
    assert cta_imbalance(64, 64, 132) == 1.0  # 4,096 CTAs: past the simulated waves
    for tiles in (2, 8, 33, 128):
        for pairs in (1, 3, 16):
            assert cta_imbalance(tiles, pairs, 132) >= 1.0
    assert cta_imbalance(32, 64, 132) < 1.01  # just under the cut: the tail is already under 1 %
    with pytest.raises(PipesimError, match="must all be ≥ 1"):
        cta_imbalance(0, 4, 132)


def test_a_small_grid_doubles_a_layers_attention_by_hand():
    """Llama 3.2 1B (32 heads of 64) at tp 8, one 4,096-token sequence: 4 heads per rank, 32 query tiles each:
    128 CTAs on 132 SMs, twice the time of its work spread over the chip; the rate itself is FlashAttention-2's
    at 4k and head size 64, 284 of 335 TFLOP/s."""
    model = MODEL_PRESETS["llama3.2-1b"]
    assert model.heads == 32 and model.head_dim == 64 and model.micro_batch == 1
    model = replace(model, seq_len=4096)
    executed = 4 * 4096**2 * 4 * 64 / 2
    core = attention_core_times(model, Layout(tp=8), H100)
    assert core.forward == pytest.approx(2.0 * executed / (989.4e12 * 0.922 * 0.35 * 284 / 335))
    # without the table (a chip file that has none), only the grid penalty remains
    plain = attention_core_times(model, Layout(tp=8), replace(H100, attention_shape_rates=None))
    assert plain.forward == pytest.approx(2.0 * executed / (989.4e12 * 0.922 * 0.35))


def test_presets_carry_the_table_where_the_kernel_was_measured():
    for name in ("h100-sxm", "h100-96gb-hbm2e", "h200", "h800"):
        assert CHIP_PRESETS[name].attention_shape_rates == TABLE
    ampere = CHIP_PRESETS["a100-80gb"].attention_shape_rates  # Dao 2023 Fig. 4: forward + backward only
    assert ampere is not None and not ampere.backward
    for name in ("a100-40gb", "a800-80gb"):
        assert CHIP_PRESETS[name].attention_shape_rates == ampere
    # at the reference shape the factors are 1; at 2k tokens and head size 128 the measured 155 of 189
    assert ampere.factors(16384, 128) == pytest.approx((1.0, 1.0))
    assert ampere.factors(2048, 128) == pytest.approx((155 / 189, 155 / 189))
    for name in ("b200", "mi300x"):
        assert CHIP_PRESETS[name].attention_shape_rates is None


def test_chip_file_round_trip_and_one_line_errors():
    written_out = {k: v for k, v in H100.to_dict().items() if v is not None}  # what a chip file holds
    assert chip_from_dict(written_out, "h100.yaml").attention_shape_rates == TABLE
    base = {k: v for k, v in written_out.items() if k != "attention_shape_rates"}
    chip = chip_from_dict({**base, "attention_shape_rates": {"forward_causal": {"128": {"1024": 150, 8192: "300"}}}},
                          "c.yaml")
    assert chip.attention_shape_rates.factors(1024, 128) == pytest.approx((0.5, 0.5))
    # a chip file's own FlashAttention v1 ratio, read where it runs --attention flash1
    chip = chip_from_dict({**base, "attention_shape_rates": {"forward_causal": {128: {1024: 150}},
                                                             "flash1_slowdown": {128: {1024: 3.0}}}}, "c.yaml")
    from pipesim.analytic.attention_shapes import flash1_slowdown
    assert flash1_slowdown(8192, 128, chip.attention_shape_rates) == 3.0
    assert chip_from_dict({**base, **chip.to_dict()}, "c.yaml").attention_shape_rates == chip.attention_shape_rates
    good = {128: {1024: 1.0}}
    for bad, words in [([1], "must map forward_causal"),
                       ({"forward": good}, "must map forward_causal"),
                       ({"forward_causal": good, "sideways": good}, "unknown key"),
                       ({"forward_causal": good, "forward": good}, "give both forward and backward"),
                       ({"forward_causal": {128: {1024: 0}}}, "rates > 0"),
                       ({"forward_causal": {128: [1, 2]}}, "integer head sizes"),
                       ({"forward_causal": {}}, "has no head sizes"),
                       ({"forward_causal": good, "flash1_slowdown": {128: {1024: 0.5}}}, "must be ≥ 1")]:
        with pytest.raises(PipesimError, match=words) as err:
            chip_from_dict({**base, "attention_shape_rates": bad}, "c.yaml")
        assert "c.yaml" in str(err.value) and "\n" not in str(err.value)


def test_the_summary_states_the_shape_factor_it_applied(capsys):
    """``simulate`` names the efficiencies' reference shape and what the table scaled them by at this run's: on an
    A100 at 2k tokens of head size 128, Dao 2023's 155 of 189; with cp 2 the ring step's 1k keys; none on a chip
    without a table. The JSON carries the same pair."""
    import json

    from pipesim.cli.main import main

    base = ["simulate", "--model", "llama2-7b", "--pp", "1", "--mb", "2", "--seq-len", "2048"]
    assert main([*base, "--hardware", "a100-80gb", "--dp", "8"]) in (0, None)
    assert "attention 0.71/0.57 at 16k tokens, ×0.82/×0.82 at 2048 tokens of head 128" in capsys.readouterr().out
    assert main([*base, "--hardware", "a100-80gb", "--dp", "4", "--cp", "2"]) in (0, None)
    assert f"×{133 / 189:.2f}/×{133 / 189:.2f} at 1024 tokens" in capsys.readouterr().out
    assert main([*base, "--hardware", "b200", "--dp", "8"]) in (0, None)
    out = capsys.readouterr().out
    assert "attention 0.55/0.45," in out and "at 16k tokens" not in out
    # FlashAttention v1 names its ratio below FlashAttention-2 at the shape: on an A100 Dao 2023's 155 over 69 at
    # 2k tokens; on a B200, which measures none, the H100's 265 over 108
    assert main([*base, "--hardware", "a100-80gb", "--dp", "8", "--attention", "flash1"]) in (0, None)
    assert "×0.82/×0.82 at 2048 tokens of head 128, flash1 ÷2.25," in capsys.readouterr().out
    assert main([*base, "--hardware", "b200", "--dp", "8", "--attention", "flash1"]) in (0, None)
    assert "attention 0.55/0.45, flash1 ÷2.45," in capsys.readouterr().out
    assert main([*base, "--hardware", "a100-80gb", "--dp", "8", "--json"]) in (0, None)
    factors = json.loads(capsys.readouterr().out)["model_report"]["attention_shape_factors"]
    assert factors == pytest.approx([155 / 189, 155 / 189])
