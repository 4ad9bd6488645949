"""``pipesim profile -o chip.yaml``: time this machine's GEMMs, attention, memory-bound kernels and (under
torchrun) collectives, and write a measured chip file that ``--hardware`` reads (:mod:`pipesim.profile`)."""

from __future__ import annotations

import argparse
import sys

from pipesim.cli.arg_types import non_negative_float, output_file, positive_int, positive_int_list

NAME = "profile"


def _default(cuda: bool, quick: bool) -> str:
    from pipesim.profile.sustained import default_seconds

    return f"{default_seconds(cuda, quick):g}"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="measure this machine's kernels and collectives into a chip file",
                       description="Time GEMMs (a standard grid, plus a model's exact shapes), fused attention, "
                       "memory-bound kernels and, when launched with torchrun --nproc-per-node N -m "
                       "pipesim.profile, collectives among the N processes; write a chip file with the measured "
                       "tables and provenance (--hardware FILE reads it).")
    p.add_argument("-o", "--output", required=True, type=output_file(".yaml", ".yml", what="chip file"),
                   metavar="FILE.yaml", help="the chip file to write")
    p.add_argument("--quick", action="store_true", help="a small grid and few repeats (under a minute on a "
                   "2-core CPU)")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="CPU threads per process (torch.set_num_threads), as the executor will run; default: "
                   "torch's own (the cores); ignored on CUDA")
    p.add_argument("--model", metavar="NAME|FILE", default=None,
                   help="also time this model's exact GEMM and attention shapes (a preset or a model file)")
    p.add_argument("--tp", type=positive_int_list, default=[1], metavar="N[,N...]",
                   help="tensor-parallel degrees whose per-rank shapes are timed (default 1)")
    p.add_argument("--micro-batch-size", type=positive_int, default=None, help="sequences per microbatch "
                   "(default: the model's)")
    p.add_argument("--seq-len", type=positive_int, default=None, help="sequence length (default: the model's)")
    p.add_argument("--sustain-seconds", type=non_negative_float, default=None, metavar="S",
                   help="burn a large GEMM on every process at once for S seconds, last, and write the rate it "
                   "settles at over a short run's as sustained_clock_ratio, which scales the GEMM and attention "
                   f"tables (default: {_default(True, False)} on a GPU, {_default(False, False)} on a CPU; --quick "
                   f"{_default(True, True)} and {_default(False, True)}; 0: no burn, the short runs' rates stand)")
    p.add_argument("--name", default=None, help="the chip's name in reports (default: the device's, -measured)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.errors import PipesimError
    from pipesim.profile.runner import ProfileRequest, check_request, run_profile

    model = None
    if args.model is not None:
        from pipesim.analytic.model_load import load_model

        model = load_model(args.model, args.seq_len).with_shape(args.seq_len, args.micro_batch_size)
    elif args.seq_len or args.micro_batch_size:
        raise PipesimError("--seq-len and --micro-batch-size shape a model's GEMMs; give --model too")
    request = ProfileRequest(str(args.output), args.quick, args.threads, model, tuple(args.tp), args.name,
                             tuple(sys.argv[2:] if sys.argv[1:2] == ["profile"] else sys.argv[1:]),
                             not args.no_progress, args.sustain_seconds)
    check_request(request)
    result = run_profile(request)
    if result.device.rank != 0:
        return 0
    d, m = result.data, result.data["measured"]
    print(f"profiled {d['provenance']['device']} ({result.device.kind.value}"
          + (f", {result.device.threads} thread(s)/process" if result.device.threads else "")
          + f", {result.device.world_size} process(es)): {len(m['gemm'])} GEMMs, {len(m['attention'])} attention "
          f"points, {len(m['stream'])} stream kernels, {len(m['collectives'])} collective fits")
    print(f"best GEMM {d['peak_flops'] / 1e9:.1f} GFLOP/s ({m['dtype']}), best stream "
          f"{d['hbm_bandwidth'] / 1e9:.2f} GB/s, element-wise {d['memory_efficiency']:.2f} of it")
    if "sustained_clock_ratio" in d:
        print(f"sustained GEMM rate {d['sustained_clock_ratio']:.3f} of a short run's (sustained_clock_ratio)")
    if "collective_sm_share" in d:
        print(f"a collective beside GEMMs takes {d['collective_sm_share']:.3f} of their rate (collective_sm_share)")
    for row in m["collectives"]:
        print(f"  {row['op']:<15} {row['ranks']} ranks: latency {row['latency_s'] * 1e6:.1f} µs, "
              f"{row['bandwidth'] / 1e9:.2f} GB/s")
    for note in m.get("notes", []):
        if note.startswith(("one process", "not measured", "no FP8", "torch ", "compute capability")):
            print(f"  note: {note}")
    print(f"wrote {result.path}")
    return 0
