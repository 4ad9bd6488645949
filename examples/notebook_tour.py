"""A notebook's tour of pipesim's Python API: abstract costs, a real model on a chip, memory over time, figures
on your own axes. Run it as a script (``python examples/notebook_tour.py --out figs``) or paste its cells.

Every number printed here is what the ``pipesim simulate`` command prints for the same arguments.
"""

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a script writes files; in a notebook leave the backend alone
import matplotlib.pyplot as plt

import pipesim

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", type=Path, default=None, help="folder for the figures (default: a temporary one)")
out = parser.parse_args().out or Path(tempfile.mkdtemp(prefix="pipesim-tour-"))
out.mkdir(parents=True, exist_ok=True)

# %% 1. Abstract costs: F=1, B=2 cost units per microbatch through one rank's share of the model.
one_f_one_b = pipesim.simulate("1f1b", pp=4, mb=8)
zero_bubble = pipesim.simulate("zb-h1", pp=4, mb=8, backward_input=1, backward_weight=1)
print(one_f_one_b)  # the same text as `pipesim simulate -s 1f1b --pp 4 --mb 8`
for result in (one_f_one_b, zero_bubble):
    m = result.metrics
    print(f"{result.built.name:<6} makespan {m.makespan:g} units, bubble {m.bubble_fraction:.3f}, "
          f"peak activations per rank {result.memory.peak_activations}")

# %% 2. The timeline is a DataFrame: one row per instruction.
frame = zero_bubble.timeline
print(frame[frame["op"].isin(["F", "I", "W"])].groupby(["rank", "op"])["end"].max().unstack())

# %% 3. Both schedules on one figure, on axes we made (shared x: pipesim keeps our limits and labels).
fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 4))
one_f_one_b.plot(ax=top)
zero_bubble.plot(ax=bottom)
top.set_ylabel("1f1b")
bottom.set_ylabel("zb-h1")
fig.savefig(out / "two_schedules.png", dpi=120)

# %% 4. Memory over time: a step function per rank; its maximum is the reported peak.
over_time = zero_bubble.memory.over_time
print(over_time.groupby("rank")["activations"].max().tolist())
zero_bubble.memory.plot(out / "zb_h1_memory.png")

# %% 5. A real model on a real chip: costs in seconds from FLOPs and bytes, memory in GiB.
llama = pipesim.simulate("interleaved", pp=4, mb=16, model="llama2-7b", hardware="h100-sxm", tp=2,
                         sequence_parallel=True, overlap_p2p=True)
report = llama.model_report
print(f"llama2-7b, tp2 pp4 v2: step {llama.step_time:.3f} s {llama.step_band.text()}, "
      f"MFU {report.mfu:.1%}, peak {report.memory.peak.total / 2**30:.1f} GiB on rank {report.memory.peak.rank}")
llama.memory.plot(out / "llama_memory.png")
print(f"figures in {out}")
