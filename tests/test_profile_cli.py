"""pipesim profile's command line and its neighbours: bad input, chips, simulate/plan on a measured file,
the executor's model file, the preset comparison, and gpu_check without CUDA."""

from __future__ import annotations

import re

import pytest
import yaml

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import chip_from_dict
from pipesim.analytic.model_load import load_model
from pipesim.cli.main import main
from pipesim.profile.compare import preset_for, preset_gaps
from tests.test_profile_tables import chip_data


def _one_line_error(capsys, code: int, *needles: str) -> None:
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("pipesim: error:") and "\n" not in err, err
    assert all(n in err for n in needles), err


def test_bad_profile_input_is_refused_before_any_timing(tmp_path, capsys):
    out = tmp_path / "chip.yaml"
    _one_line_error(capsys, main(["profile", "-o", str(out), "--seq-len", "128"]), "give --model too")
    _one_line_error(capsys, main(["profile", "-o", str(out), "--model", "llama3.1-8b", "--tp", "3"]), "--tp 3")
    _one_line_error(capsys, main(["profile", "-o", str(tmp_path / "no" / "chip.yaml")]), "does not exist")
    _one_line_error(capsys, main(["profile", "-o", str(tmp_path / "chip.csv")]), ".yaml")
    _one_line_error(capsys, main(["profile", "-o", str(out), "--model", "nope"]), "--model")
    assert not out.exists()


def test_chips_lists_a_measured_file_with_provenance(tmp_path, capsys):
    path = tmp_path / "hand.yaml"
    path.write_text(yaml.safe_dump(chip_data()))
    assert main(["chips", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^hand\s+measured", out, re.M) and "measured hand: device hand-written" in out
    assert "GEMMs measured (2 shapes, fp32)" in out and "h100-sxm" in out


def test_chips_compares_a_measured_file_with_a_preset(tmp_path, capsys):
    path = tmp_path / "hand.yaml"
    path.write_text(yaml.safe_dump(chip_data()))
    assert main(["chips", str(path), "--compare", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    h100 = CHIP_PRESETS["h100-sxm"]
    line = next(li for li in out.splitlines() if li.strip().startswith("gemm_efficiency"))
    assert "hand against the h100-sxm preset" in out and f"{8 * 2.0e11 / h100.peak_flops:.4g}" in line
    # auto: the preset the measured device's name matches (a hand-written device matches none: it says so)
    assert main(["chips", str(path), "--compare", "auto"]) == 0
    assert "no preset matches device 'hand-written'; name one with --compare PRESET" in capsys.readouterr().out
    _one_line_error(capsys, main(["chips", str(path), "--compare", "h1000"]), "--compare 'h1000'", "auto")
    _one_line_error(capsys, main(["chips", "--compare", "h100-sxm"]), "needs a measured chip FILE")


def test_simulate_and_plan_read_a_measured_file(tmp_path, capsys):
    chip, model = tmp_path / "hand.yaml", tmp_path / "gpt.yaml"
    chip.write_text(yaml.safe_dump(chip_data()))
    assert main(["simulate", "-s", "1f1b", "--pp", "2", "--mb", "4", "--model", "llama3.1-8b",
                 "--hardware", str(chip)]) == 0
    out = capsys.readouterr().out
    assert "cost terms from hand's measured tables" in out and "GEMMs measured" in out
    # no burn and no collective beside GEMMs in this file: the defaults, and the report says which rule stands
    assert "GEMM and attention clock × 1 sustained_clock_ratio" in out
    assert f"overlapped collectives take {24 / 132:.3g} of the compute beside them (collective_ctas / sm_count)" in out
    assert "attention measured" in out and "pipeline P2P roofline" in out
    model.write_text(yaml.safe_dump({"name": "g", "layers": 4, "hidden": 64, "heads": 4, "ffn_hidden": 256,
                                     "vocab": 128, "seq_len": 32}))
    assert main(["plan", "--model", str(model), "--hardware", str(chip), "--gpus", "2", "--global-batch", "8",
                 "--schedules", "1f1b", "--quiet"]) == 0
    assert "1f1b" in capsys.readouterr().out


def test_executor_writes_its_gpt_as_a_model_file(tmp_path, capsys):
    from executors.run import main as run_main

    path = tmp_path / "gpt.yaml"
    assert run_main(["--print-model-file", str(path), "--hidden", "96", "--heads", "4", "--layers", "3",
                     "--seq-len", "24", "--vocab", "100", "--micro-batch-size", "2"]) == 0
    model = load_model(str(path))
    assert (model.hidden, model.heads, model.layers, model.seq_len, model.vocab, model.micro_batch) == \
        (96, 4, 3, 24, 100, 2)
    assert model.ffn_hidden == 4 * 96 and model.dtype_bytes == 4 and model.learned_positions
    assert not (model.dropout or model.bias or model.gated or model.tied_embeddings)


def test_preset_gaps_are_the_measurement_in_the_presets_terms():
    data = chip_data()
    data["measured"]["stream"] = [{"kernel": "copy", "bytes": 1, "bytes_per_s": 3.0e12},
                                  {"kernel": "add", "bytes": 1, "bytes_per_s": 2.0e12},
                                  {"kernel": "strided_glu", "bytes": 1, "bytes_per_s": 1.5e12}]
    h100 = CHIP_PRESETS["h100-sxm"]
    gaps = {g.constant: g for g in preset_gaps(chip_from_dict(data, "t"), h100)}
    assert gaps["gemm_efficiency"].measured == 8 * 2.0e11 / h100.peak_flops
    strided = gaps["strided_memory_efficiency"]
    assert (strided.preset, strided.measured) == (0.55, 1.5e12 / h100.hbm_bandwidth)
    assert "converting_memory_efficiency" not in gaps  # not measured: no gap
    assert gaps["memory_efficiency"].measured == 2.0e12 / h100.hbm_bandwidth
    assert gaps["memory_efficiency (copy)"].measured == 3.0e12 / h100.hbm_bandwidth
    bus = 1e9 * 2 * 1 / 2  # the all-reduce fit over 2 ranks as the ring's per-chip rate
    assert gaps["intra_node_bandwidth (all-reduce×2)"].measured == bus
    assert preset_for("NVIDIA H200") == "h200" and preset_for("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert preset_for("Tesla T4") is None
    # attention: the preset at the measured shapes (FlashAttention-2's H100 rates: 2k tokens, head size 128)
    data["measured"]["attention"] = [{"seq": 2048, "head_dim": 128, "forward_flops_per_s": 3.0e14,
                                      "backward_flops_per_s": 2.0e14}]
    gaps = {g.constant: g for g in preset_gaps(chip_from_dict(data, "t"), h100)}
    forward = gaps["attention_forward_efficiency"]
    assert forward.measured == 3.0e14 / h100.peak_flops and forward.preset == pytest.approx(0.35 * 298 / 335)


def test_gpu_check_without_cuda_says_so_and_profiles_nothing(monkeypatch, capsys):
    import torch

    from experiments import gpu_check
    from pipesim.analytic.measured_chips import measured_chip_files

    before = set(measured_chip_files())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([]) == 0
    out = capsys.readouterr().out
    assert "no CUDA device" in out and "nothing profiled" in out
    assert set(measured_chip_files()) == before
