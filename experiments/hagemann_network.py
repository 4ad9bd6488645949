"""What Hagemann et al.'s own layouts say about their cluster's network: the source's rows predicted with the
inter-node bandwidth the ``a100-80gb`` preset assumes (eight 200 Gb/s HDR NICs a node, 25 GB/s a GPU) and with
a half, a quarter and an eighth of it (four, two and one NIC a node).

The paper names the link (200 Gb/s HDR InfiniBand), not how many a node has, so the source infers the standard
DGX A100's eight (``pipesim/validation/sources/hagemann2023.py``). Its rows miss more as the data-parallel
sync grows: the 256-GPU sheet most, and within it the layouts with the least pipelining. This prints, for each
assumption, the source's mean error, bias and worst row, by GPU count and by pipeline depth. It is an
observation, not a fit: choosing the NIC count from these rows would tune the source to itself, so the preset
and the source keep eight, and docs/validation-log.md reports what the rows say.

Run: ``python experiments/hagemann_network.py``.
"""

from __future__ import annotations

from dataclasses import replace
from statistics import mean

from pipesim.analytic.chip_load import load_chip
from pipesim.validation.runs import predict
from pipesim.validation.sources import runs_by_source

NIC_FRACTIONS = (1, 2, 4, 8)  # the preset's inter-node bandwidth divided by these


def errors_by(runs, chip, key) -> dict:
    """Mean signed step-time error of ``runs`` on ``chip``, grouped by ``key(run)``."""
    groups: dict = {}
    for run in runs:
        groups.setdefault(key(run), []).append(predict(run, chip=chip).step_error)
    return {k: mean(v) for k, v in sorted(groups.items())}


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False,
                                                   fast_help="the 32- and 64-GPU sheets only"), argv)
    record_output(args.out, "hagemann_network.txt")
    runs = runs_by_source()["hagemann2023"]
    if args.fast:
        runs = [run for run in runs if run.gpus <= 64]
    base = load_chip("a100-80gb")
    print(f"{len(runs)} rows of Hagemann et al. 2023 (A100 80GB), the inter-node bandwidth a GPU reaches:")
    for fraction in NIC_FRACTIONS:
        chip = replace(base, inter_node_bandwidth=base.inter_node_bandwidth / fraction)
        errors = [predict(run, chip=chip).step_error for run in runs]
        by_gpus = errors_by(runs, chip, lambda run: run.gpus)
        by_pp = errors_by(runs, chip, lambda run: run.pp)
        print(f"  {chip.inter_node_bandwidth / 1e9:5.2f} GB/s ({8 // fraction} NIC{'s' if fraction < 8 else ''} a "
              f"node): mean |e| {mean(abs(e) for e in errors):.1%}, bias {mean(errors):+.1%}, worst "
              f"{max(errors, key=abs):+.1%}; by GPUs " + ", ".join(f"{g}: {e:+.1%}" for g, e in by_gpus.items())
              + "; by pp " + ", ".join(f"{p}: {e:+.1%}" for p, e in by_pp.items()))


if __name__ == "__main__":
    main()
