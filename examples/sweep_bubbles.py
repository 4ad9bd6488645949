"""A sweep from Python: the bubble of GPipe, 1F1B and interleaved 1F1B over pipeline depth and microbatches,
checked against the closed forms, as a pandas table.

``python examples/sweep_bubbles.py``; ``pipesim sweep`` writes the same rows to a file.
"""

import pipesim

frame = pipesim.sweep(["gpipe", "1f1b", "interleaved"], pp=[2, 4, 8], mb=[8, 16, 32])
frame["closed_form"] = (frame["pp"] - 1) / (frame["microbatches"] + frame["pp"] - 1)
plain = frame[frame["schedule"] != "interleaved"]
worst = (plain["bubble_fraction"] - plain["closed_form"]).abs().max()
print(f"GPipe and 1F1B against (p-1)/(m+p-1): largest difference {worst:.2e} over {len(plain)} rows")
table = frame.pivot_table(index=["pp", "microbatches"], columns="schedule", values="bubble_fraction")
print(table.round(4).to_string())
