"""Megatron-Core's ``--pipeline-model-parallel-layout``: which layers each pipeline stage builds, as one string.

The string lists the pp·v virtual stages in order, split by ``|`` (stage i runs on pipeline rank i mod pp as its
chunk i div pp: pipesim's model slices in a looped placement). Each stage is a run of symbols: ``E`` the
embedding, ``t`` a decoder layer, ``m`` a multi-token-prediction layer, ``L`` the final norm, output layer and
loss. ``X*n`` repeats a symbol or a parenthesised group (``(tt|)*29`` is 29 stages of two layers), commas and
spaces are for reading, and a stage may be empty. DeepSeek-V3's recipe at pp 16, v 2: ``Et*3|(tt|)*29,m|L``
(Megatron-LM's ``docs/user-guide/features/pipeline_parallel_layout.md``; the grammar of
``PipelineParallelLayerLayout.from_str``).

pipesim reads it as what it already models: the decoder layers per slice (``Layout.stage_layers``), the slice
holding the multi-token-prediction modules (``Layout.mtp_stage``), and it refuses what it does not: the
embedding anywhere but the first slice's start, the loss anywhere but the last slice's end (where pipesim and
Megatron-Core's default put them), MTP layers split over several slices or placed before a decoder layer.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from pipesim.errors import PipesimError

FLAG = "--pipeline-model-parallel-layout"
_MAX_SYMBOLS = 100_000  # a layout longer than this is no model's (and would fill memory)


class LayoutSymbol(enum.Enum):
    """One item a stage builds, as Megatron-Core's ``LayerType`` spells it in the string."""

    EMBEDDING = "E"
    DECODER = "t"
    MTP = "m"
    LOSS = "L"


@dataclass(frozen=True)
class PipelineLayerLayout:
    """The virtual stages of a layout string, each the symbols it builds in order."""

    stages: tuple[tuple[LayoutSymbol, ...], ...]

    def count(self, symbol: LayoutSymbol) -> int:
        return sum(stage.count(symbol) for stage in self.stages)

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """Decoder layers per stage (pipesim's ``--stage-layers``)."""
        return tuple(stage.count(LayoutSymbol.DECODER) for stage in self.stages)

    @property
    def mtp_stage(self) -> int | None:
        """The stage holding the multi-token-prediction layers (None: there are none)."""
        holders = [i for i, stage in enumerate(self.stages) if LayoutSymbol.MTP in stage]
        return holders[0] if holders else None

    def chunks(self, pp: int) -> int:
        """Chunks per pipeline rank: the stages over ``pp``; a one-line error where pp does not divide them."""
        if len(self.stages) % pp:
            raise PipesimError(f"{FLAG} lists {len(self.stages)} stages, which --pp {pp} does not divide (the "
                               "string names pp·v stages); fix the layout or --pp")
        return len(self.stages) // pp

    def check(self, layers: int, mtp_layers: int, model_name: str) -> None:
        """Refuse a layout that does not build ``model_name``'s ``layers`` decoder layers and ``mtp_layers``
        multi-token-prediction layers where pipesim models them."""
        built = self.count(LayoutSymbol.DECODER)
        if built != layers:
            raise PipesimError(f"{FLAG} builds {built} decoder layers (t), but model {model_name} has {layers}; fix "
                               "the layout or the model")
        if self.count(LayoutSymbol.MTP) != mtp_layers:
            raise PipesimError(f"{FLAG} builds {self.count(LayoutSymbol.MTP)} multi-token-prediction layers (m), but "
                               f"model {model_name} has {mtp_layers} (--mtp-num-layers); make them agree")
        first, last = self.stages[0], self.stages[-1]
        if self.count(LayoutSymbol.EMBEDDING) != 1 or first[:1] != (LayoutSymbol.EMBEDDING,):
            raise PipesimError(f"{FLAG}: pipesim models the embedding (E) once, first on the first stage; move it "
                               "there")
        if self.count(LayoutSymbol.LOSS) != 1 or last[-1:] != (LayoutSymbol.LOSS,):
            raise PipesimError(f"{FLAG}: pipesim models the loss (L) once, last on the last stage; move it there")
        if mtp_layers:
            holders = [i for i, stage in enumerate(self.stages) if LayoutSymbol.MTP in stage]
            last_decoder = max(i for i, n in enumerate(self.stage_layers) if n) if layers else 0
            stage = self.stages[holders[0]]
            if len(holders) > 1 or (holders[0] == last_decoder and stage.index(LayoutSymbol.MTP) <
                                    len(stage) - 1 - stage[::-1].index(LayoutSymbol.DECODER)):
                raise PipesimError(f"{FLAG}: pipesim models the multi-token-prediction layers together, after the "
                                   "last decoder layer; put every m on one stage after it")
            if holders[0] < last_decoder:
                raise PipesimError(f"{FLAG}: the multi-token-prediction layers (m) come after the last decoder "
                                   "layer; move them to its stage or a later one")


_TOKEN = re.compile(r"\s*(?:(?P<symbol>[EtmL])|(?P<open>\()|(?P<close>\))|(?P<bar>\|)|(?P<star>\*\s*(?P<n>\d+))"
                    r"|(?P<comma>,))")


def parse_pipeline_layout(text: str) -> PipelineLayerLayout:
    """The stages a ``--pipeline-model-parallel-layout`` string names; a one-line error for one that does not
    parse (an unknown symbol, an unbalanced parenthesis, a repeat without an item)."""
    items = _expand(text)
    stages: list[tuple[LayoutSymbol, ...]] = [()]
    for item in items:
        if item == "|":
            stages.append(())
        else:
            stages[-1] = (*stages[-1], LayoutSymbol(item))
    return PipelineLayerLayout(tuple(stages))


def _expand(text: str) -> list[str]:
    """The string's symbols and stage bars with every repeat written out."""
    stack: list[list[str]] = [[]]
    last: list[str] | None = None  # the item a following "*n" repeats
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:
            raise PipesimError(f"{FLAG} {text!r}: cannot read {stripped[position:].lstrip()[:1]!r} (symbols E, t, "
                               "m, L; | between stages; X*n or (...)*n to repeat)")
        position = match.end()
        if match["symbol"] or match["bar"]:
            last = [match["symbol"] or "|"]
            stack[-1].extend(last)
        elif match["open"]:
            stack.append([])
            last = None
        elif match["close"]:
            if len(stack) == 1:
                raise PipesimError(f"{FLAG} {text!r}: a ')' without its '('")
            last = stack.pop()
            stack[-1].extend(last)
        elif match["star"]:
            if last is None:
                raise PipesimError(f"{FLAG} {text!r}: '*{match['n']}' repeats nothing; put it after a symbol or a "
                                   "(group)")
            times = int(match["n"])
            if len(stack[-1]) + len(last) * (times - 1) > _MAX_SYMBOLS:
                raise PipesimError(f"{FLAG} {text!r}: more than {_MAX_SYMBOLS:,} items; no model has that many")
            if times == 0:
                del stack[-1][len(stack[-1]) - len(last):]
            else:
                stack[-1].extend(last * (times - 1))
            last = None
        else:  # a comma: for reading
            last = None
    if len(stack) > 1:
        raise PipesimError(f"{FLAG} {text!r}: a '(' without its ')'")
    if not stack[0]:
        raise PipesimError(f"{FLAG} is empty; give the stages, e.g. 'Et*3|(tt|)*29,m|L'")
    return stack[0]


def layout_string(stage_layers: tuple[int, ...], mtp_layers: int = 0) -> str:
    """The ``--pipeline-model-parallel-layout`` string of a split of decoder layers over the pp·v stages (slices in
    order), the embedding first and the loss last, as pipesim models them, and ``mtp_layers`` multi-token-prediction
    layers on the last stage before the loss: each run of equal middle stages one repeated group, as Megatron-LM's
    documentation writes DeepSeek-V3's (``Et*3|(t*2|)*14tL`` for 3, 2 × 14, 1). Megatron-Core unrolls ``(...)*n``
    and then ``x*n`` (``PipelineParallelLayerLayout.parse_str_to_list``); :func:`parse_pipeline_layout` reads the
    string back to ``stage_layers``."""
    if not stage_layers:
        raise PipesimError(f"{FLAG}: a layout needs at least one stage")

    def stage(layers: int, symbol: str = "t") -> str:
        return symbol * min(layers, 1) + (f"*{layers}" if layers > 1 else "")

    loss = f"{stage(mtp_layers, 'm')}L"
    if len(stage_layers) == 1:
        return f"E{stage(stage_layers[0])}{loss}"
    middle, runs = stage_layers[1:-1], []
    start = 0
    while start < len(middle):  # runs of equal stages, each written once and repeated
        end = start
        while end < len(middle) and middle[end] == middle[start]:
            end += 1
        runs.append(f"{stage(middle[start])}|" if end - start == 1 else f"({stage(middle[start])}|)*{end - start}")
        start = end
    return f"E{stage(stage_layers[0])}|{''.join(runs)}{stage(stage_layers[-1])}{loss}"
