"""``pipesim frameworks``: the training frameworks ``--framework`` takes, and the flag defaults each one sets."""

from __future__ import annotations

import argparse

NAME = "frameworks"


def register(sub) -> None:
    parser = sub.add_parser(NAME, help="list the training frameworks --framework takes and what each sets",
                            description="List the training frameworks that simulate and plan take with "
                            "--framework, and the flag defaults each one's code decides (a flag given wins).")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.listings import frameworks

    table = frameworks()
    print(table.to_string(index=False))
    print("each column is the default of the simulate flag of that name (selective: what --recompute selective "
          "keeps; zero2_collectives: --zero-collectives under --zero 2; tp_shards_sequence: --tp > 1 implies "
          "--sequence-parallel; stage_split: how the layers split over the stages without --stage-layers or "
          "--first/last-stage-layers; grad_reduce: when the data-parallel gradient reduce runs without "
          "--overlap-grad-reduce or --no-overlap-grad-reduce, ddp-hooks beside the last backward under ZeRO 0–1, "
          "overlapped beside it with the parameter gather beside the first forward (--overlap-param-gather); "
          "distributed_optimizer: the optimizer state sharded over dp·cp > 1 without --zero or "
          "--distributed-optimizer; "
          "overlap_p2p: the built-in schedules whose pipeline sends overlap compute without --overlap-p2p or "
          "--no-overlap-p2p (the others block); pipeline_buffers: what its pipeline runtime keeps of the boundary "
          "tensors (torch for 1F1B and GPipe, torch-runtime for the rest); cp_kernels, cp_comm_type: the code "
          "that runs context parallelism and "
          "how its ranks exchange keys and values; fp8_linears: whose FP8 linears an --fp8 run trains with; fsdp2: "
          "whether its FSDP (--zero 2|3) is fully_shard, copying each gather out on the compute stream (--fsdp2); "
          "repeat_kv: the attention path on which it copies grouped K and V to every query head (--repeat-kv); "
          "precisions: the GEMM precisions its model code trains in; recomputes: the --recompute policies it offers, "
          "(all) where it recomputes every layer or none); "
          "megatron is pipesim's default; where each "
          "was read: pipesim/analytic/frameworks.py, docs/models.md")
    return 0
