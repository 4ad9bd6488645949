"""1F1B with every backward split into I (input gradient) then W (weight gradient), for executor tests."""

from pipesim.ir import F, I, Schedule, W


def build(pp: int, microbatches: int, chunks: int = 1) -> Schedule:
    orders = []
    for rank in range(pp):
        warmup = min(pp - rank - 1, microbatches)
        order = [F(mb) for mb in range(warmup)]
        for oldest in range(microbatches - warmup):
            order += [F(warmup + oldest), I(oldest)]
            if oldest % 2 == 1:  # defer some weight gradients, as zero-bubble schedules do
                order += [W(oldest - 1), W(oldest)]
        done = {w for o in order if o.op.value == "W" for w in [o.mb]}
        order += [I(mb) for mb in range(microbatches - warmup, microbatches)]
        order += [W(mb) for mb in range(microbatches) if mb not in done]
        orders.append(order)
    return Schedule.from_orders("split-1f1b", orders, microbatches=microbatches)
