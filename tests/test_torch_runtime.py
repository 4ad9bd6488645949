"""pipesim's orders train in PyTorch's own pipelining runtime with pipesim's numbers.

Every built-in schedule (zb-auto synthesised for non-uniform costs, with one chunk and with the V placement) is
exported as a PyTorch action CSV, loaded by ``torch.distributed.pipelining.schedules._PipelineScheduleRuntime``
(``_load_csv``, in both of its formats) around the executor's GPT stages, and trained for two optimizer steps on
gloo; losses, each step's gradients and the parameters after the steps must equal the single-process reference
and (at pp = 2) pipesim's own executor running the same CSV. One spawned world per pipeline size runs everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from executors.harness import spawn  # noqa: E402 — only after torch is known present
from executors.model import ModelConfig  # noqa: E402
from executors.runtime import ReferenceResult, RunConfig, reference_run  # noqa: E402
from executors.torch_runtime import TorchRunConfig, main, plan, run_orders  # noqa: E402
from pipesim.errors import PipesimError, ScheduleError  # noqa: E402
from pipesim.io.torch_csv import CsvFormat, export_rows, rows_to_text  # noqa: E402
from pipesim.io.torch_runtime_rules import check_torch_runtime_order  # noqa: E402
from pipesim.program.build import build_program  # noqa: E402
from pipesim.program.loader import builtin_names  # noqa: E402
from pipesim.sim.costs import CostModel, StageCosts  # noqa: E402
from pipesim.topology import Topology  # noqa: E402
from tests.reference_checks import assert_matches_reference  # noqa: E402

# Stage 1 forwards three times slower: zb-auto's order for these costs differs from its unit-cost one (checked).
SKEWED = CostModel(default=StageCosts(), overrides={1: {"forward": 3.0}})
# (label, schedule, chunks, costs): every built-in (zb-auto for the skewed costs), and zb-auto's V placement.
# dualpipe's two model copies have no torch action CSV (export refuses it: tests/test_dualpipe.py).
ORDERS = [(n, n, None, SKEWED if n == "zb-auto" else None) for n in builtin_names() if n != "dualpipe"] + [
    ("zb-auto-v", "zb-auto", 2, SKEWED)]
# At pp = 4 the orders whose links carry two kinds of message (loop v = 2, V), against the reference only: the
# executor comparison is made at pp = 2; kept few, for the suite's time.
PP4_ORDERS = ["interleaved", "zb-v", "dualpipe-v", "zb-auto-v"]
# (pp, microbatches, layers): the layers cover pp·v stages with at least one block each.
WORLDS = {2: (2, 4, 4), 4: (4, 8, 8)}


def _program(schedule, pp, mb, chunks, costs):
    return build_program(schedule, pp, mb, chunks, costs=costs).program


def _write(directory: Path, label: str, pp: int, fmt: CsvFormat) -> str:
    _, schedule, chunks, costs = next(o for o in ORDERS if o[0] == label)
    _, mb, _ = WORLDS[pp]
    path = directory / f"{label}-pp{pp}-{fmt.value}.csv"
    path.write_text(rows_to_text(export_rows(_program(schedule, pp, mb, chunks, costs), fmt)))
    return str(path)


def _cases(pp: int) -> list[tuple[str, CsvFormat]]:
    labels = [o[0] for o in ORDERS] if pp == 2 else PP4_ORDERS
    formats = list(CsvFormat) if pp == 2 else [CsvFormat.COMPUTE_ONLY]  # what torchtitan loads, at pp = 4
    return [(label, fmt) for label in labels for fmt in formats]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Per pipeline size, on first use: {case: torch runtime result} and {label: pipesim executor result}."""
    cache: dict = {}

    def of(pp: int):
        if pp not in cache:
            directory = tmp_path_factory.mktemp(f"orders-pp{pp}")
            _, mb, layers = WORLDS[pp]
            model = ModelConfig(layers=layers)
            cases = _cases(pp)
            paths = {case: _write(directory, case[0], pp, case[1]) for case in cases}
            torch_cfgs = [TorchRunConfig(paths[c], c[1], model, steps=2, capture=True) for c in cases]
            labels = sorted({label for label, _ in cases}) if pp == 2 else []
            # pipesim's executor runs the very same file (compute-only: its comms are derived from it anyway).
            executor_cfgs = [RunConfig(schedule=paths[(label, CsvFormat.COMPUTE_ONLY)], topology=Topology(pp=pp),
                                       microbatches=None, steps=2, model=model, capture=True) for label in labels]
            torch_results, executor_results = spawn(run_orders, pp, torch_cfgs, executor_cfgs)[0]
            reference = reference_run(RunConfig(topology=Topology(pp=pp), microbatches=mb, steps=2, model=model))
            cache[pp] = (dict(zip(cases, torch_results, strict=True)),
                         dict(zip(labels, executor_results, strict=True)), reference)
        return cache[pp]

    return of


ALL_CASES = [(pp, label, fmt) for pp in WORLDS for label, fmt in _cases(pp)]


@pytest.mark.distributed
@pytest.mark.parametrize(("pp", "label", "fmt"), ALL_CASES,
                         ids=[f"pp{pp}-{label}-{fmt.value}" for pp, label, fmt in ALL_CASES])
def test_torch_runtime_trains_like_the_reference_and_the_executor(world, pp, label, fmt):
    torch_results, executor_results, reference = world(pp)
    got = torch_results[(label, fmt)]
    where = f"torch runtime pp={pp} {label} {fmt.value}"
    assert_matches_reference(got, reference, f"{where} vs single process")
    if pp == 2:
        executor = executor_results[label]
        assert_matches_reference(got, ReferenceResult(executor.losses, executor.full_grads, executor.full_params),
                                 f"{where} vs pipesim's executor")
    assert len(got.losses) == 2 and got.losses[0] != got.losses[1]  # two real steps: the weights moved


def test_zb_auto_orders_depend_on_the_costs():
    """The zb-auto orders above are synthesised for the skewed costs, not the unit ones."""
    for chunks in (1, 2):
        skewed = export_rows(_program("zb-auto", 2, 4, chunks, SKEWED))
        unit = export_rows(_program("zb-auto", 2, 4, chunks, None))
        assert skewed != unit


def test_compute_only_refuses_communication_cells():
    rows = export_rows(_program("1f1b", 2, 4, None, None), CsvFormat.COMPUTE_COMMS)
    with pytest.raises(ScheduleError, match=r"holds 0SEND_F0, a communication cell; torch's compute_only format"):
        check_torch_runtime_order(rows, CsvFormat.COMPUTE_ONLY)
    check_torch_runtime_order(rows, CsvFormat.COMPUTE_COMMS)


def test_compute_comms_needs_every_reduce_grad():
    rows = export_rows(_program("zb-v", 2, 4, None, None), CsvFormat.COMPUTE_COMMS)
    rows[1] = [cell for cell in rows[1] if cell != "2REDUCE_GRAD"]
    with pytest.raises(ScheduleError, match=r"rank 1 \(row 2\) has no 2REDUCE_GRAD; .* gradients microbatches× "
                                            r"too large"):
        check_torch_runtime_order(rows, CsvFormat.COMPUTE_COMMS)


def test_plan_refuses_before_any_process_group(tmp_path):
    path = tmp_path / "order.csv"
    path.write_text(rows_to_text(export_rows(_program("1f1b", 4, 8, None, None))))
    with pytest.raises(PipesimError, match=r"has 4 pipeline ranks \(rows\), but 2 processes were started; launch "
                                           r"torchrun --nproc-per-node 4"):
        plan(TorchRunConfig(str(path)), 2)
    with pytest.raises(PipesimError, match=r"is compute_only, but --format compute_comms was asked"):
        plan(TorchRunConfig(str(path), CsvFormat.COMPUTE_COMMS), 4)
    with pytest.raises(PipesimError, match=r"--layers 2 leaves pipeline rank 2 without a transformer block"):
        plan(TorchRunConfig(str(path), model=ModelConfig(layers=2)), 4)
    assert plan(TorchRunConfig(str(path)), 4).program.shape.pp == 4


def test_cli_bad_input_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main([str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("executors.torch_runtime: error: torch CSV") and "does not exist" in err
    assert "\n" not in err
    assert main(["x.csv", "--steps", "0"]) == 2
    assert "\n" not in capsys.readouterr().err.strip()


@pytest.mark.parametrize(("schedule", "pp"), [("zb-v", 2), ("dualpipe-v", 4), ("interleaved", 4), ("1f1b", 4)])
def test_pipesim_placement_is_torchs_for_the_named_style(schedule, pp):
    """The stage→rank map of pipesim's order is the one torch generates for the style that the torchtitan
    schedule name of the export note selects (V for ZBVZeroBubble, loop for the others)."""
    from torch.distributed.pipelining._utils import generate_stage_to_rank_mapping

    from pipesim.io.torch_runtime_rules import torchtitan_schedule_name

    shape = _program(schedule, pp, 2 * pp, None, None).shape
    style = "v" if torchtitan_schedule_name(shape) == "ZBVZeroBubble" else "loop"
    assert generate_stage_to_rank_mapping(pp, shape.num_stages, style) == {
        s: shape.rank_of(s) for s in range(shape.num_stages)}


@pytest.mark.distributed
def test_torchrun_entry_trains_an_exported_order(tmp_path):
    """What a user runs: pipesim export, then torchrun -m executors.torch_runtime; its losses are the reference's."""
    import os
    import subprocess
    import sys

    from executors.harness import free_port

    root = Path(__file__).resolve().parents[1]
    path = tmp_path / "order.csv"
    path.write_text(rows_to_text(export_rows(_program("zb-v", 2, 4, None, None))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(free_port()), "-m", "executors.torch_runtime", str(path), "--steps", "2"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = [float(line.split()[-1]) for line in proc.stdout.splitlines() if line.startswith("step ")]
    reference = reference_run(RunConfig(topology=Topology(pp=2), microbatches=4, steps=2)).losses
    assert printed == pytest.approx(reference, abs=1e-5)
    assert "_PipelineScheduleRuntime (compute_only), pp 2, 4 microbatches, 2 stage(s)/rank, v placement" in proc.stdout


@pytest.mark.distributed
def test_torch_runtime_trains_interleaved_where_pp_does_not_divide_the_microbatches(tmp_path):
    """Three microbatches on two ranks: the chunks visited in Megatron-Core's larger group of 3, PyTorch's own
    ScheduleInterleaved1F1B's order for m = 3 too (tests/test_torch_orders.py). Exported and loaded by
    ``_PipelineScheduleRuntime``, it trains as the single process does."""
    model = ModelConfig(layers=4)
    path = tmp_path / "interleaved-m3.csv"
    path.write_text(rows_to_text(export_rows(_program("interleaved", 2, 3, 2, None), CsvFormat.COMPUTE_ONLY)))
    cfg = TorchRunConfig(str(path), CsvFormat.COMPUTE_ONLY, model, steps=2, capture=True)
    (got,), _ = spawn(run_orders, 2, [cfg])[0]
    reference = reference_run(RunConfig(topology=Topology(pp=2), microbatches=3, steps=2, model=model))
    assert_matches_reference(got, reference, "torch runtime, interleaved m=3 pp=2")
    assert len(got.losses) == 2 and got.losses[0] != got.losses[1]
