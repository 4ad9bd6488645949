"""Does DeepSpeed's pipeline schedule cost time that Megatron-LM's 1F1B does not? (docs/validation-log.md, GLM-130B)

DeepSpeed's ``TrainSchedule`` (deepspeed/runtime/pipe/schedule.py) runs 1F1B as ``2(m + p − 1)`` ticks; even
stages run forwards on even ticks and backwards on odd ones, odd stages the other way round. A forward tick
receives its activation and then sends the previous backward's input gradient; a backward tick sends the
previous forward's activation and then receives its gradient. Every send and receive is blocking and paired
(the class's own notes): a send returns once its receive is posted. Megatron-LM posts each send with the
receive it pairs with (``send_forward_recv_backward``), and a send never waits for a later compute.

This script times both orders on one pipeline with a small event model: the same passes, DeepSpeed's
instruction order under rendezvous sends, and the same order with buffered sends (a send never waits; the
timing pipesim's simulator uses). Transfers take no time here: the question is whether the order and the
coupling cost time, not the bytes. ``python experiments/deepspeed_schedule.py`` (a few seconds; ``--fast``: 16
microbatches).
"""

from __future__ import annotations

import random

from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output


def deepspeed_order(stages: int, microbatches: int, stage: int) -> list[tuple[str, int]]:
    """One stage's instructions in TrainSchedule's order: F/B compute, SF/SB sends, RF/RB receives."""
    def forward_id(step: int) -> int:
        return (step if step % 2 == 0 else step - 1) // 2 - stage // 2

    def backward_id(step: int) -> int:
        if step % 2 == 0:
            return step // 2 - stages + (stage + 1) // 2
        return (step - 1) // 2 - stages + 1 + stage // 2

    order: list[tuple[str, int]] = []
    previous = -1
    for step in range(2 * (microbatches + stages - 1)):
        forward = step % 2 == stage % 2
        mb = forward_id(step) if forward else backward_id(step)
        valid, previous_valid = 0 <= mb < microbatches, 0 <= previous < microbatches
        if forward:
            order += [("RF", mb)] * (valid and stage > 0) + [("SB", previous)] * (previous_valid and stage > 0)
            order += [("F", mb)] * valid
        else:
            order += [("SF", previous)] * (previous_valid and stage < stages - 1)
            order += [("RB", mb)] * (valid and stage < stages - 1) + [("B", mb)] * valid
        previous = mb
    return order


def step_time(stages: int, microbatches: int, duration, rendezvous: bool) -> float:
    """Makespan of DeepSpeed's order; ``duration(stage, op, mb)`` gives each pass's seconds."""
    orders = [deepspeed_order(stages, microbatches, s) for s in range(stages)]
    position, clock = [0] * stages, [0.0] * stages
    sent: dict[tuple, float] = {}
    posted: dict[tuple, float] = {}
    moved = True
    while moved:
        moved = False
        for s in range(stages):
            while position[s] < len(orders[s]):
                op, mb = orders[s][position[s]]
                if op in ("F", "B"):
                    clock[s] += duration(s, op, mb)
                elif op in ("SF", "SB"):
                    peer = s + 1 if op == "SF" else s - 1
                    posted.setdefault((op, s, mb), clock[s])
                    if rendezvous:
                        if ("R" + op[1], peer, mb) not in posted:
                            break  # the receive is not posted yet: the send waits
                        clock[s] = max(clock[s], posted["R" + op[1], peer, mb])
                    sent[op, s, mb] = clock[s]
                else:
                    peer = s - 1 if op == "RF" else s + 1
                    posted.setdefault((op, s, mb), clock[s])
                    if ("S" + op[1], peer, mb) not in sent:
                        break
                    clock[s] = max(clock[s], sent["S" + op[1], peer, mb])
                position[s] += 1
                moved = True
    if position != [len(o) for o in orders]:
        raise RuntimeError("deadlock")
    return max(clock)


def main(argv: list[str] | None = None) -> int:
    args = parse_experiment_args(experiment_parser(__doc__, figures=False, fast_help="16 microbatches"), argv)
    record_output(args.out, "deepspeed_schedule.md")
    stages, forward, backward = 8, 1.0, 3.0  # GLM-130B's pipeline; backward = recompute + 2 × forward
    microbatches = 16 if args.fast else 176
    ideal = (microbatches + stages - 1) * (forward + backward)
    rng = random.Random(0)
    skew = [1 + 0.1 * rng.random() for _ in range(stages)]
    cases = {"uniform stages": lambda s, op, mb: forward if op == "F" else backward,
             "stages up to 10% apart": lambda s, op, mb: (forward if op == "F" else backward) * skew[s]}
    for sigma in (0.02, 0.05, 0.10):
        draws: dict[tuple, float] = {}
        jitter = random.Random(1)

        def jittered(s, op, mb, sigma=sigma, draws=draws, jitter=jitter):
            key = (s, op, mb)
            if key not in draws:
                draws[key] = (forward if op == "F" else backward) * max(0.5, jitter.gauss(1.0, sigma))
            return draws[key]
        cases[f"per-pass jitter sigma {sigma:.0%}"] = jittered
    print(f"p={stages} m={microbatches} backward/forward={backward / forward:g}; 1F1B's ideal {ideal:g} units")
    for name, duration in cases.items():
        blocking = step_time(stages, microbatches, duration, rendezvous=True)
        buffered = step_time(stages, microbatches, duration, rendezvous=False)
        print(f"  {name:28s} DeepSpeed blocking {blocking / ideal:.4f} × ideal, buffered {buffered / ideal:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
