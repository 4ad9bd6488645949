"""A synthesised order runs for real: the executor (gloo, two processes) computes the same losses, gradients
and parameters as the single-process reference, for zb-auto on one chunk and in V placement, read back from the
PyTorch action CSV that ``pipesim synthesize`` writes."""

import pytest
import torch

from executors.harness import spawn
from executors.runtime import RunConfig, plan, reference_run, run_configs
from executors.tp_layers import TPMode
from pipesim.cli.main import main
from pipesim.errors import PipesimError
from pipesim.topology import Topology

pytestmark = pytest.mark.distributed
RTOL, ATOL = 1e-5, 1e-6


def test_synthesised_orders_match_single_process(tmp_path):
    topology = Topology(pp=2)
    configs = []
    for chunks in (1, 2):
        order = tmp_path / f"order_v{chunks}.csv"
        assert main(["synthesize", "--pp", "2", "--mb", "4", "--chunks", str(chunks), "--memory-limit", str(2 * chunks),
                     "--backward-weight", "0.5", "--comm", "0.1", "-o", str(order)]) == 0
        configs.append(RunConfig(schedule=str(order), topology=topology, microbatches=4, chunks=chunks, steps=2,
                                 tp_mode=TPMode.REDUCE_SCATTER, capture=True))
    results = spawn(run_configs, topology.world_size, configs)[0]
    for cfg, got in zip(configs, results, strict=True):
        ref = reference_run(cfg)
        torch.testing.assert_close(torch.tensor(got.losses), torch.tensor(ref.losses), rtol=RTOL, atol=ATOL)
        for grads, ref_grads in zip(got.full_grads, ref.grads, strict=True):
            assert grads.keys() == ref_grads.keys()
            for name, expected in ref_grads.items():
                torch.testing.assert_close(grads[name], expected, rtol=RTOL, atol=ATOL)
        for name, expected in ref.params.items():
            torch.testing.assert_close(got.full_params[name], expected, rtol=RTOL, atol=ATOL)


def test_executor_synthesises_zb_auto_for_the_given_costs(tmp_path):
    """--costs reaches zb-auto's synthesis: every rank plans the order `pipesim synthesize` writes for those
    costs, not the unit-cost one (#23); a fixed-order schedule refuses --costs."""
    from executors.run import config_from_args, parser
    from pipesim.cli.main import main
    from pipesim.io.program_text import read_program_file

    costs = tmp_path / "costs.json"
    costs.write_text('{"default": {"forward": 1, "backward": 5, "backward_input": 4, "backward_weight": 1}}')
    order = tmp_path / "order.txt"
    assert main(["synthesize", "--pp", "2", "--mb", "6", "--costs", str(costs), "-o", str(order)]) == 0
    expected = read_program_file(order).ranks
    with_costs = plan(config_from_args(parser().parse_args(["zb-auto", "--mb", "6", "--costs", str(costs)]), 2), 2)
    assert with_costs.ranks == expected
    unit = plan(config_from_args(parser().parse_args(["zb-auto", "--mb", "6"]), 2), 2)
    assert unit.ranks != expected  # these costs give another order than unit costs
    assert plan(config_from_args(parser().parse_args([str(order)]), 2), 2).ranks == expected
    with pytest.raises(PipesimError, match="--costs is for schedules that synthesise"):
        plan(config_from_args(parser().parse_args(["1f1b", "--costs", str(costs)]), 2), 2)
