"""The flag a user probably meant, for an unrecognised or ambiguous one: the words other tools use for a setting
pipesim spells otherwise (``--chip`` for ``--hardware``, ``--micro-batches`` for ``--mb``), else the command's
closest flag by spelling. Said in the one-line error, never acted on: a guess that ran would be a success that did
not do what was asked."""

from __future__ import annotations

import argparse
import difflib

# Other tools' and papers' words for settings pipesim names otherwise, to the pipesim flag (a command that lacks
# the flag gets no hint from here)
SYNONYMS: dict[str, str] = {
    **dict.fromkeys(("--chip", "--gpu", "--gpu-type", "--device", "--accelerator", "--hw"), "--hardware"),
    **dict.fromkeys(("--microbatches", "--micro-batches", "--num-microbatches", "--num-micro-batches",
                     "--gradient-accumulation-steps", "--grad-accum", "--grad-accumulation-steps"), "--mb"),
    **dict.fromkeys(("--tensor-parallel", "--tensor-parallel-size", "--tp-size"), "--tp"),
    **dict.fromkeys(("--pipeline-parallel", "--pipeline-parallel-size", "--pp-size"), "--pp"),
    **dict.fromkeys(("--data-parallel", "--data-parallel-size", "--dp-size"), "--dp"),
    **dict.fromkeys(("--context-parallel", "--context-parallel-degree", "--cp-size"), "--cp"),
    **dict.fromkeys(("--expert-parallel", "--expert-parallel-size", "--ep-size"), "--ep"),
    **dict.fromkeys(("--seqlen", "--sequence-length", "--max-seq-len", "--max-seq-length"), "--seq-len"),
    **dict.fromkeys(("--num-gpus", "--world-size", "--n-gpus", "--ngpus"), "--gpus"),
    **dict.fromkeys(("--virtual-stages", "--vpp", "--virtual-pipeline-size"), "--chunks"),
    # plan's --global-batch (simulate takes Megatron-LM's --global-batch-size too)
    **dict.fromkeys(("--batch-size", "--gbs", "--global-batch-size"), "--global-batch"),
    **dict.fromkeys(("--mbs", "--micro-batch"), "--micro-batch-size"),
    **dict.fromkeys(("--activation-checkpointing", "--gradient-checkpointing", "--checkpoint-activations"),
                    "--recompute"),
}


def flags_of(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option string ``parser`` takes."""
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--")]


def suggestion(flag: str, known: list[str]) -> str | None:
    """The flag ``flag`` (as typed, ``--name`` or ``--name=value``) probably meant among ``known``, or None."""
    name = flag.split("=", 1)[0]
    if not name.startswith("--"):
        return None
    meant = SYNONYMS.get(name)
    if meant is not None and meant in known:
        return meant
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
    return close[0] if close else None


def hint_text(words: list[str], known: list[str]) -> str:
    """`` (did you mean --hardware for --chip?)`` for the unrecognised ``words`` that have a likely meaning."""
    guesses = [(word.split("=", 1)[0], meant) for word in words if (meant := suggestion(word, known)) is not None]
    if not guesses:
        return ""
    said = ", ".join(f"{meant} for {word}" for word, meant in dict(guesses).items())
    return f" (did you mean {said}?)"


def subcommand_parser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    """The parser of the command ``name`` inside ``parser``'s subcommands, or None."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return None
