"""Collective shares of the intra-node link: the table, the fit, the interpolation, chip files."""

import math

import pytest

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import chip_from_dict
from pipesim.analytic.collective_shares import CollectiveShares
from pipesim.analytic.measured import CollectiveOp
from pipesim.errors import PipesimError
from pipesim.validation.collective_shares import fit_share, fitted_shares, load_table

AR, AG, RS = CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER


def test_the_table_row_by_hand():
    """The 8-GPU all-reduce of 2 GiB: XLA's throughput 230 GB/s of the buffer (nccl-tests' algbw) is a bus
    bandwidth of 2·7/8 of it, 402 GB/s: 0.89 of NVLink's 450 (the fit over 16 MiB–2 GiB, 0.90)."""
    row = next(r for r in load_table() if r.op is AR and r.ranks == 8 and r.nbytes == 2**31)
    assert row.nbytes / row.seconds == pytest.approx(229.8e9, rel=1e-3)
    assert row.bus_bytes / row.seconds == pytest.approx(402.1e9, rel=1e-3)
    assert len(load_table()) == 4 * 3 * 22  # four collectives, groups of 2, 4 and 8, 1 KiB to 2 GiB


def test_fit_recovers_a_known_line():
    """Times made from ``fixed + bus bytes / (share · 450 GB/s)`` give back the share and the constant."""
    from pipesim.validation.collective_shares import MeasuredCollective

    rows = [MeasuredCollective(RS, 4, 2**k, 60e-6 + 0.75 * 2**k / (0.61 * 450e9)) for k in range(24, 32)]
    fit = fit_share(rows, RS, 4, 450e9)
    assert fit.share == pytest.approx(0.61) and fit.fixed_s == pytest.approx(60e-6) and fit.rows == 8


def test_b200_preset_carries_its_table_s_fit():
    """The sm_100 entries of the same file, of NVLink 5's 900 GB/s: an 8-GPU all-reduce 0.69."""
    assert CHIP_PRESETS["b200"].nvlink_collective_shares == fitted_shares("b200")
    assert fitted_shares("b200").share(AR, 8) == 0.69
    assert len(load_table("xla_b200_collectives.csv")) == 4 * 3 * 22


def test_nvl72_presets_carry_their_racks_tables_by_hand():
    """GB200 and GB300 take their NVL72 racks' own tables (groups of 4 to 72 GPUs), not the HGX B200 board's: one
    row by hand (a 72-GPU all-gather of 32 GiB), then the fits the presets carry; an all-reduce over 16 GPUs or more
    reaches about the whole link, where the B200 board's over 8 reaches 0.69; a pair, which the racks' tables do not
    measure, takes the board's pair (on both measured boards well under a four); B300 (an HGX board) keeps the
    B200's.
    The row: 18 GiB gathered over 72 GPUs at 674.2 GB/s of the buffer, a bus bandwidth of 71/72 of it, 664.9 GB/s,
    0.739 of NVLink 5's 900."""
    rows = load_table("xla_gb200_collectives.csv")
    row = next(r for r in rows if r.op is AG and r.ranks == 72 and r.nbytes == 18 * 2**30)
    assert row.nbytes / row.seconds == pytest.approx(674.23e9)
    assert row.bus_bytes / row.seconds == pytest.approx(664.9e9, rel=1e-3)
    board = fitted_shares("b200")
    for chip, table in (("gb200", "xla_gb200_collectives.csv"), ("gb300", "xla_gb300_collectives.csv")):
        shares, preset = fitted_shares(chip), CHIP_PRESETS[chip].nvlink_collective_shares
        for op in (AR, AG, RS, CollectiveOp.ALL_TO_ALL):
            assert preset.points(op) == ((2, board.share(op, 2)), *shares.points(op))
        assert sorted({r.ranks for r in load_table(table)}) == [4, 8, 16, 18, 32, 36, 64, 72]
        assert shares.share(AR, 8) == 0.94 and 0.99 <= shares.share(AR, 32) <= 1.05
        assert 0.7 <= shares.share(AG, 72) <= 0.75
        assert shares.share(RS, 4) > fitted_shares("b200").share(RS, 4)
    assert CHIP_PRESETS["b300"].nvlink_collective_shares == fitted_shares("b200")


def test_mi300x_preset_carries_its_table_s_fit():
    """The gfx942 entries (RCCL over Infinity Fabric, 448 GB/s one way over seven links): a pair of GPUs has one
    64 GB/s link, 0.14 of the seven at most, and reaches 0.11; all eight GPUs 0.68–0.71."""
    shares = fitted_shares("mi300x")
    assert CHIP_PRESETS["mi300x"].nvlink_collective_shares == shares
    assert shares.share(AR, 2) == 0.11 < 64 / 448 and shares.share(AG, 8) == 0.71
    assert len(load_table("xla_mi300x_collectives.csv")) == 4 * 3 * 21  # 1 KiB to 1 GiB


def test_hopper_presets_carry_the_fit_and_ampere_its_small_groups():
    shares = fitted_shares()
    for name in ("h100-sxm", "h100-96gb-hbm2e", "h200", "h800"):  # the H800: the same NVSwitch, fewer links
        assert CHIP_PRESETS[name].nvlink_collective_shares == shares
    assert shares.share(AR, 8) == 0.90 and shares.share(AG, 8) == 0.79 and shares.share(RS, 2) == 0.46
    assert shares.share(CollectiveOp.ALL_TO_ALL, 8) == 0.76
    # Ampere: the H100's shares but for the 8-GPU all-reduce, its own nccl-tests ring (NVSwitch 2 has no SHARP)
    for name in ("a100-80gb", "a100-40gb", "a800-80gb"):
        ampere = CHIP_PRESETS[name].nvlink_collective_shares
        assert ampere.share(AR, 8) == CHIP_PRESETS[name].collective_efficiency == 0.80
        assert ampere.share(AR, 2) == shares.share(AR, 2) and ampere.share(AR, 4) == shares.share(AR, 4)
        for op in (AG, RS, CollectiveOp.ALL_TO_ALL):
            assert ampere.points(op) == shares.points(op)


def test_share_interpolates_in_log2_of_the_ranks_and_holds_at_the_ends():
    shares = CHIP_PRESETS["h100-sxm"].nvlink_collective_shares
    # 3 ranks: log2(3) = 1.585 lies 0.585 of the way from 2 to 4 ranks: 0.56 + 0.585 · (0.68 − 0.56)
    assert shares.share(AR, 3) == pytest.approx(0.56 + (math.log2(3) - 1) * 0.12)
    assert shares.share(AR, 16) == 0.90 and shares.share(RS, 1) == 0.46


def test_chip_file_round_trip_and_one_line_errors():
    h100 = CHIP_PRESETS["h100-sxm"]
    written_out = {k: v for k, v in h100.to_dict().items() if v is not None}  # what a chip file holds
    again = chip_from_dict(written_out, "h100.yaml")
    assert again.nvlink_collective_shares == h100.nvlink_collective_shares
    base = {k: v for k, v in written_out.items() if k != "nvlink_collective_shares"}
    written = {"all_reduce": {"2": 0.5, "8": "0.9"}, "all_gather": {4: 0.7}, "reduce_scatter": {8: 0.7}}
    chip = chip_from_dict({**base, "nvlink_collective_shares": written}, "c.yaml")
    assert chip.nvlink_collective_shares.share(AR, 4) == pytest.approx(0.7)  # midway in log2 between 2 and 8
    for bad, words in [({"all_reduce": {2: 0.5}}, "all_gather must be a non-empty"),
                       ({**written, "broadcast": {2: 1.0}}, "unknown collective"),
                       ({**written, "all_reduce": {1: 0.5}}, "ranks must be ≥ 2"),
                       ({**written, "all_reduce": {2: 3.0}}, r"share in \(0, 2\]"),
                       ({**written, "all_reduce": {"two": 0.5}}, "integer ranks"),
                       ([0.9], "must map each of")]:
        with pytest.raises(PipesimError, match=words) as err:
            chip_from_dict({**base, "nvlink_collective_shares": bad}, "c.yaml")
        assert "c.yaml" in str(err.value) and "\n" not in str(err.value)


def test_shares_need_every_collective_but_the_all_to_all():
    with pytest.raises(PipesimError, match="reduce_scatter has no points"):
        CollectiveShares(all_reduce=((8, 0.9),), all_gather=((8, 0.8),), reduce_scatter=())
    shares = CollectiveShares(all_reduce=((8, 0.9),), all_gather=((8, 0.8),), reduce_scatter=((8, 0.7),))
    assert shares.share(CollectiveOp.ALL_TO_ALL, 8) == 1.0  # no points: the whole link, as before tables
    with pytest.raises(PipesimError, match="lists a group size twice"):
        CollectiveShares(all_reduce=((8, 0.9), (8, 0.8)), all_gather=((8, 0.8),), reduce_scatter=((8, 0.7),))
    assert "all_to_all" not in shares.to_dict()
