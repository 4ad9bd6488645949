"""Regenerate KNOWN_STEP_MISSES, KNOWN_MEMORY_MISSES and KNOWN_OVER_CAPACITY in tests/test_published_runs.py from
the current errors: ``python -m tests.update_misses`` from the checkout's root, after a cost-model change moves
published rows (the strict xfails then fail: a row that now passes, or one that now misses). Each kept row keeps
its reason after the refreshed percent (or GiB); a new miss gets "pipesim too fast/slow: <source module>", to be
edited by hand. Rows are predicted as the tests predict them (about a minute with the synthesis cache fresh)."""

import re
from pathlib import Path

import tests.test_published_runs as t
from pipesim.validation.sources import MEMORY_ONLY_RUNS, PUBLISHED_RUNS, module_of

PATH = Path(__file__).with_name("test_published_runs.py")


def reason_tail(old):
    return re.sub(r"^[+-]?\d+%,\s*", "", old) if old else None


def block(name, entries):
    lines = [f"{name}: dict[str, str] = {{"]
    current = None
    for mod, key, reason in entries:
        if mod != current:
            lines.append(f"    # {mod}")
            current = mod
        k = repr(key)
        if len(k) + 5 > 120:
            half = len(key) // 2
            cut = key.rfind(" ", 0, half + 20) or half
            k = f"({key[:cut]!r}\n     {key[cut:]!r})"
        r = repr(reason)
        if len(r) + 9 > 120:
            parts, rest = [], reason
            while len(rest) > 100:
                cut = rest.rfind(" ", 0, 100)
                parts.append(rest[:cut])
                rest = rest[cut:]
            parts.append(rest)
            r = "(" + "\n         ".join(repr(x) for x in parts) + ")"
        lines.append(f"    {k}:\n        {r},")
    lines.append("}")
    return "\n".join(lines)


def main():
    step, memory, over = [], [], []
    for run in PUBLISHED_RUNS + MEMORY_ONLY_RUNS:
        c = t.predict(run)
        key = t._key(run)
        mod = module_of(run)
        e = c.step_error
        if e is not None and abs(e) > 0.15:
            tail = reason_tail(t.KNOWN_STEP_MISSES.get(key)) or f"pipesim too {'fast' if e < 0 else 'slow'}: {mod}"
            step.append((mod, key, f"{e * 100:+.0f}%, {tail}"))
        beyond = c.report.memory.over_capacity_beyond_band
        if beyond:
            held = f"{beyond[0].total / 2**30:.0f} GiB of {c.report.memory.capacity_gib:g}"
            tail = (re.sub(r"^\d+ GiB of [\d.]+:\s*", "", t.KNOWN_OVER_CAPACITY[key]) if key in t.KNOWN_OVER_CAPACITY
                    else f"pipesim over the GPU: {mod}")
            over.append((mod, key, f"{held}: {tail}"))
        m = c.memory_error
        if m is not None and abs(m) > 0.15:
            tail = reason_tail(t.KNOWN_MEMORY_MISSES.get(key)) or f"pipesim too {'low' if m < 0 else 'high'}: {mod}"
            memory.append((mod, key, f"{m * 100:+.0f}%, {tail}"))
    def dedupe(entries):  # Qi et al.'s rows may share a key
        seen, out = set(), []
        for e in entries:
            if e[1] not in seen:
                seen.add(e[1])
                out.append(e)
        return out
    text = PATH.read_text(encoding="utf-8")
    for name, entries in (("KNOWN_STEP_MISSES", dedupe(step)), ("KNOWN_MEMORY_MISSES", dedupe(memory)),
                          ("KNOWN_OVER_CAPACITY", dedupe(over))):
        start = text.index(f"{name}: dict[str, str] = {{")
        end = text.index("\n}\n", start) + 2
        text = text[:start] + block(name, entries) + text[end:]
    PATH.write_text(text, encoding="utf-8")
    print(len(step), "step misses,", len(memory), "memory misses,", len(over), "over the GPU")


if __name__ == "__main__":
    main()
