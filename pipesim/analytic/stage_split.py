"""How many transformer layers each pipeline stage holds: even, first/last-lighter, or an explicit list.

Without a request the layers split evenly, or, where the stages do not divide them, with one layer fewer on the
first and last stage where that balances (:func:`pipeline_split`, Megatron-LM's accounting of the embedding and
the loss as a layer each); a split neither gives is refused with one that works, as Megatron-Core refuses it.
Frameworks that split by a rule of their own (:class:`SplitPolicy`: torchtitan's effective layers, nanotron's
cost thresholds, DeepSpeed's balanced count) get that split instead, unasked
(:meth:`pipesim.analytic.frameworks.FrameworkKnobs.split_layers`).

Real runs balance the embedding (stage 0) and the LM head and loss (the last stage) by giving those stages
fewer layers: Megatron-LM's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``,
the zero-bubble experiments (Qi et al. 2024, §5: 22, 30, 46, 62 layers over 8, 8, 16, 32 stages, one layer
fewer on the first and last), and Llama 3 405B (126 layers; Llama Team 2024, §3.3.2: one layer fewer on the
first and last stage). Stages are numbered as in :class:`pipesim.program.ir.PipelineShape`: stage 0 takes the
tokens, stage ``pp·v − 1`` computes the loss, whatever rank (and chunk) each lands on.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from pipesim.errors import PipesimError


@dataclass(frozen=True)
class StageSplitRequest:
    """What the user asked for; :func:`resolve_stage_layers` turns it into one count per stage."""

    first: int | None = None  # layers on stage 0 (--first-stage-layers)
    last: int | None = None  # layers on the last stage (--last-stage-layers)
    explicit: tuple[int, ...] | None = None  # one count per stage (--stage-layers)
    # Megatron-LM's flags, which count per pipeline rank (over its chunks): --decoder-first-pipeline-num-layers,
    # --decoder-last-pipeline-num-layers, --account-for-embedding-in-pipeline-split, --account-for-loss-in-...
    first_rank: int | None = None
    last_rank: int | None = None
    embedding_as_layer: bool = False
    loss_as_layer: bool = False

    @property
    def per_rank(self) -> bool:
        """Whether Megatron-LM's per-rank split flags are given (:func:`megatron_rank_split`)."""
        return (self.first_rank is not None or self.last_rank is not None or self.embedding_as_layer
                or self.loss_as_layer)

    @property
    def is_default(self) -> bool:
        return self.first is None and self.last is None and self.explicit is None and not self.per_rank


@lru_cache(maxsize=1024)  # pure; the planner resolves the same splits tens of thousands of times
def resolve_stage_layers(layers: int, stages: int, request: StageSplitRequest = StageSplitRequest(),
                         model_name: str = "the model") -> tuple[int, ...]:
    """One layer count per stage, summing to ``layers``; a one-line error naming a split that works otherwise.
    Megatron-LM's per-rank flags (``request.per_rank``) need the stages' ranks: :func:`megatron_rank_split`."""
    if request.per_rank:
        raise PipesimError("Megatron-LM's per-rank split flags need the pipeline's ranks: megatron_rank_split")
    if request.explicit is not None:
        if request.first is not None or request.last is not None:
            raise PipesimError("--stage-layers lists every stage; drop --first-stage-layers/--last-stage-layers")
        counts = tuple(request.explicit)
        if len(counts) != stages:
            raise PipesimError(f"--stage-layers has {len(counts)} entries, but the pipeline has pp·v = {stages} "
                               f"stages; give one layer count per stage")
        if any(c < 0 for c in counts) or sum(counts) != layers:
            raise PipesimError(f"--stage-layers {','.join(map(str, counts))} sums to {sum(counts)}, but "
                               f"{model_name} has {layers} layers; the counts must be ≥ 0 and sum to {layers}")
        return counts
    if request.is_default:
        check_enough_layers(layers, stages, model_name)
        # Even where the stages divide the layers, else Megatron's lighter ends (as the planner splits them)
        split = pipeline_split(layers, stages)
        if split is None:
            raise PipesimError(_uneven_message(layers, stages, {}, model_name))
        return split
    fixed = {}
    if request.first is not None:
        fixed[0] = request.first
    if request.last is not None:
        fixed[stages - 1] = request.last
    if stages == 1 and fixed:
        raise PipesimError("--first-stage-layers/--last-stage-layers need more than one stage (pp·v > 1)")
    if any(v < 0 for v in fixed.values()):
        raise PipesimError("--first-stage-layers/--last-stage-layers must be ≥ 0")
    rest_layers = layers - sum(fixed.values())
    rest_stages = stages - len(fixed)
    if rest_stages == 0:
        if rest_layers != 0:
            raise PipesimError(f"--first-stage-layers {request.first} + --last-stage-layers {request.last} must "
                               f"equal the {layers} layers of {model_name} when the pipeline has 2 stages")
        return tuple(fixed[s] for s in range(stages))
    if rest_layers < rest_stages or rest_layers % rest_stages:
        raise PipesimError(_uneven_message(layers, stages, fixed, model_name))
    each = rest_layers // rest_stages
    return tuple(fixed.get(s, each) for s in range(stages))


@lru_cache(maxsize=256)
def megatron_rank_split(layers: int, slices_by_rank: tuple[tuple[int, ...], ...], request: StageSplitRequest,
                        model_name: str = "the model") -> tuple[int, ...]:
    """One layer count per model slice from Megatron-LM's split flags, which count per pipeline rank, each rank's
    count then split evenly over its ``v`` chunks (Megatron-Core's ``get_num_layers_to_build``;
    ``slices_by_rank``: each rank's slices, chunk 0 first, as :attr:`PipelineShape.slices_by_rank`).

    - ``first_rank``/``last_rank`` (``--decoder-first/last-pipeline-num-layers``): rank 0's (the last rank's)
      layers over all its chunks, each a multiple of v; the other ranks split the rest evenly.
    - ``embedding_as_layer``/``loss_as_layer`` (``--account-for-embedding/loss-in-pipeline-split``): the embedding
      and the loss count as a layer each, the ``layers + 1 (+ 1)`` split evenly over the ``pp·v`` slices, and the
      first (last) slice gives its one to the embedding (the loss).

    Megatron-LM refuses both kinds together, a count its ranks or chunks do not divide, and so does this, in one
    line with the fix."""
    pp, chunks = len(slices_by_rank), len(slices_by_rank[0])
    slices = pp * chunks
    if request.explicit is not None or request.first is not None or request.last is not None:
        raise PipesimError("--stage-layers/--first-stage-layers/--last-stage-layers count model slices, Megatron-LM's "
                           "--decoder-first/last-pipeline-num-layers and --account-for-* count pipeline ranks; "
                           "keep one kind")
    by_rank = (request.first_rank is not None or request.last_rank is not None)
    if by_rank and (request.embedding_as_layer or request.loss_as_layer):
        raise PipesimError("--decoder-first/last-pipeline-num-layers and --account-for-*-in-pipeline-split are two "
                           "ways to lighten the ends (Megatron-LM refuses both together); keep one")
    counts = [0] * slices
    if by_rank:
        ends = {0: ("--decoder-first-pipeline-num-layers", request.first_rank),
                pp - 1: ("--decoder-last-pipeline-num-layers", request.last_rank)}
        fixed = {rank: value for rank, (_, value) in ends.items() if value is not None}
        if pp == 1:
            raise PipesimError("--decoder-first/last-pipeline-num-layers need more than one pipeline rank (--pp > 1)")
        for flag, value in ends.values():
            if value is not None and (value <= 0 or value % chunks):
                raise PipesimError(f"{flag} {value}: give a positive multiple of the {chunks} chunks per rank "
                                   "(each chunk takes an equal share, as in Megatron-LM)")
        rest_layers, rest_ranks = layers - sum(fixed.values()), pp - len(fixed)
        uneven = (rest_layers != 0 if rest_ranks == 0
                  else rest_layers <= 0 or rest_layers % (rest_ranks * chunks) != 0)
        if uneven:
            raise PipesimError(f"{model_name}: the {rest_layers} layers left beside the first/last rank's do not "
                               f"split evenly over the other {rest_ranks} ranks × {chunks} chunks; change "
                               "--decoder-first/last-pipeline-num-layers")
        per_rank = [fixed.get(rank, rest_layers // max(1, rest_ranks)) for rank in range(pp)]
    else:
        total = layers + request.embedding_as_layer + request.loss_as_layer
        if total % slices:
            raise PipesimError(f"{model_name}: {layers} layers with the embedding and loss counted as the "
                               f"--account-for-* flags ask ({total}) do not split evenly over pp·v = {slices} "
                               f"model chunks, which Megatron-LM refuses; change --pp or the virtual stages, or "
                               f"give --stage-layers")
        per_rank = [total // pp] * pp
    for rank, rank_slices in enumerate(slices_by_rank):
        for s in rank_slices:
            counts[s] = per_rank[rank] // chunks
    counts[0] -= request.embedding_as_layer
    counts[-1] -= request.loss_as_layer
    if min(counts) < 0:
        raise PipesimError(f"{model_name}: a model chunk of no layers cannot also give one to the embedding or the "
                           "loss; use fewer virtual stages")
    return tuple(counts)


def chunks_of_layers_per_chunk(layers: int, pp: int, layers_per_chunk: int, embedding_as_layer: bool = False,
                               loss_as_layer: bool = False) -> int:
    """Megatron-LM's ``--num-layers-per-virtual-pipeline-stage N`` as chunks per rank (``v``): each rank's share of
    the layers (the embedding and the loss counted as a layer each where the ``--account-for-*`` flags ask) over
    ``N`` (``megatron/training/arguments.py``); a one-line error where they do not divide, as Megatron-LM's."""
    total = layers + embedding_as_layer + loss_as_layer
    if total % pp or (total // pp) % layers_per_chunk:
        raise PipesimError(f"--num-layers-per-virtual-pipeline-stage {layers_per_chunk}: the {total} layers over "
                           f"--pp {pp} ranks ({total / pp:g} each) are not a multiple of it; give one that divides "
                           "each rank's layers, or --num-virtual-stages-per-pipeline-rank")
    return total // pp // layers_per_chunk


def check_enough_layers(layers: int, stages: int, model_name: str = "the model") -> None:
    """Refuse, in one line, more stages than layers for a split nobody asked for. Where the layers would fill
    every stage but the two ends, say so: the embedding and the loss as stages of their own is how Llama 3.1 405B
    ran pp 16 × v 8 over its 126 layers (Llama Team 2024 §3.3.2; Megatron-LM's
    ``--decoder-first/last-pipeline-num-layers 0``)."""
    if layers < stages:
        ends = (" or --first-stage-layers 0 --last-stage-layers 0 (the embedding and the loss as stages of their "
                "own, as Llama 3.1 405B ran pp 16 × v 8)," if stages > 2 and layers >= stages - 2 else "")
        raise PipesimError(f"{model_name} has {layers} layers, fewer than the pp·v = {stages} stages; use pp·v ≤ "
                           f"{layers},{ends} or --stage-layers with empty stages, if that is meant")


def pipeline_split(layers: int, slices: int) -> tuple[int, ...] | None:
    """The layers of each of ``slices`` model slices as a planner splits them, stage 0 first, or None where no
    split works: even where ``slices`` divides ``layers``; else Megatron-LM's balance that counts the embedding
    and the loss as a layer each (``--account-for-embedding-in-pipeline-split
    --account-for-loss-in-pipeline-split``): one layer fewer on the first and on the last slice, where ``slices``
    divides ``layers + 2``. Llama 3.1 405B's 126 layers over 8 slices: 15, 16 × 6, 15 (Llama Team 2024 §3.3.2),
    over 64: 1, 2 × 62, 1 (MLPerf's NeMo configs, ``ASYM_PP_EMBED``/``ASYM_PP_LOSS``)."""
    if layers % slices == 0:
        return (layers // slices,) * slices
    per, rest = divmod(layers + 2, slices)
    if rest or slices < 3 or per < 2:
        return None
    return (per - 1,) + (per,) * (slices - 2) + (per - 1,)


def head_balanced_split(layers: int, slices: int, layer_cost: float, head_cost: float,
                        least: int = 0, chunks: int = 1) -> tuple[int, ...] | None:
    """The layers of each of ``slices`` model slices with the ends chosen so that the busiest pipeline rank, the LM
    head (``head_cost``, in the units of ``layer_cost``) counted on the last, is as light as Megatron-Core lets a
    split be, or None where no such split leaves the busiest rank lighter than the default one
    (:func:`pipeline_split`) by more than a hundredth of a layer, or there is none. The ``slices / chunks`` ranks
    hold their slices in a loop (slice ``s`` on rank ``s mod ranks``, the interleaved schedule's placement), and two
    kinds of split are weighed, ``least`` or more layers on each end:

    - whole chunks (:func:`_whole_chunk_splits`): any number of layers on the first and on the last *rank*, each a
      multiple of its ``chunks`` and split evenly over them, the ranks between even
      (``--decoder-first-pipeline-num-layers`` and ``--decoder-last-pipeline-num-layers``, which count a rank's
      layers over its chunks: Megatron-Core's ``get_num_layers_to_build``);
    - with more than one chunk a rank, the end *slices* alone (the same with one chunk a unit): any number on the
      first and on the last slice, every slice between even (``--pipeline-model-parallel-layout``,
      :func:`pipesim.analytic.pipeline_layout.layout_string`), finer where whole chunks move too much at once.

    A large vocabulary makes the last stage the pipeline's slowest: each microbatch waits on it, so the whole
    pipeline runs at its pace (Yeung et al. 2024, "Balancing Pipeline Parallelism with Vocabulary Parallelism":
    a 4B model at pp 8 from 47.5 % MFU at a 32k vocabulary to 17.3 % at 256k, and back to 38 % with layers moved
    off the last stage). Of equally light splits, the one with the fewest ranks that busy (each is a rank the
    others wait on), then the lighter first rank, which holds the most microbatches in flight under 1F1B, then whole
    chunks (the simpler flags). The costs are a proxy (FLOPs, say): the planner simulates what this proposes
    beside the default split."""
    default = pipeline_split(layers, slices)
    if slices < 2 or slices % chunks or default is None or layers < slices:
        return None
    ranks = slices // chunks

    def key(split: tuple[int, ...]) -> tuple[float, int, float]:
        loads = [sum(split[r::ranks]) * layer_cost for r in range(ranks)]
        loads[-1] += head_cost
        top = max(loads)
        return top, sum(c >= top - 1e-9 * layer_cost for c in loads), loads[0]

    best, best_key = None, key(default)
    default_top = best_key[0]
    candidates = _whole_chunk_splits(layers, ranks, chunks, least)
    if chunks > 1:
        # each slice a unit of its own: the end slices alone, every slice between even
        candidates = itertools.chain(candidates, _whole_chunk_splits(layers, slices, 1, least))
    for split in candidates:
        split_key = key(split)
        if split_key < best_key:
            best, best_key = split, split_key
    if best is None or default_top - best_key[0] <= 0.01 * layer_cost:
        return None
    return best


def _whole_chunk_splits(layers: int, ranks: int, chunks: int, least: int) -> Iterator[tuple[int, ...]]:
    """Every split of ``layers`` over ``ranks × chunks`` slices placed in a loop that Megatron-LM's per-rank flags
    give: the first and last rank's layers a multiple of ``chunks`` (the first at least ``max(1, least)`` a chunk,
    the last ``least``), the ranks between even and each a multiple of ``chunks``, every rank's count split evenly
    over its chunks. With ``chunks`` 1 and every slice a "rank", the end slices alone, every slice between even."""
    for last in range(least * chunks, layers // ranks + 1, chunks):
        for first in range(max(1, least) * chunks, layers - last + 1, chunks):
            middle_layers = layers - first - last
            if ranks == 2:
                if middle_layers:
                    continue
                per_rank = (first, last)
            elif middle_layers < (ranks - 2) * chunks or middle_layers % ((ranks - 2) * chunks):
                continue
            else:
                per_rank = (first,) + (middle_layers // (ranks - 2),) * (ranks - 2) + (last,)
            yield tuple(per_rank[s % ranks] // chunks for s in range(ranks * chunks))


class SplitPolicy(enum.Enum):
    """How a framework splits the layers over its pipeline stages when the user names no split (the knob
    :attr:`~pipesim.analytic.frameworks.FrameworkKnobs.stage_split`): each is read from the framework's code."""

    # Even, or one layer fewer on the first and last stage (pipeline_split); anything else refused, as
    # Megatron-Core refuses a layer count its stages do not divide unless the ends are set by hand.
    EVEN_OR_LIGHTER_ENDS = "even-or-lighter-ends"
    # torchtitan: the embedding and the norm + head count as a layer each; the effective layers split evenly, the
    # remainder to the first stages (effective_layer_split).
    EFFECTIVE_LAYERS = "effective-layers"
    # nanotron: blocks go to a rank until their cumulative cost passes its share of the total (cost_threshold_split).
    COST_THRESHOLDS = "cost-thresholds"
    # DeepSpeed's PipelineModule, partition_method "type:transformer" (Megatron-DeepSpeed's GPTModelPipe): the
    # transformer layers balanced by count, the remainder to the first stages (balanced_count_split).
    BALANCED_COUNT = "balanced-count"


def effective_layer_split(layers: int, stages: int, input_weight: int = 1, output_weight: int = 1) -> tuple[int, ...]:
    """torchtitan's default split (``pipeline_parallel.py``, ``_generate_llm_fqn_per_model_part``, since February
    2025): the embedding counts as ``input_weight`` layers (``pipeline_parallel_first_stage_less_layers``, default 1)
    and the final norm and head as ``output_weight`` (``..._last_stage_less_layers``, 1); ``layers + input_weight +
    output_weight`` effective layers split evenly over the stages, one more on each of the first ``remainder``
    stages; the first stage gives ``input_weight`` of its share to the embedding, the last ``output_weight`` to
    the head. So even a divisible count is not split evenly: Llama 3.1 8B's 32 layers over 4 stages are 8, 9, 8, 7.
    torchtitan refuses a split whose smallest share is below a weight, and so does this."""
    if stages == 1:
        return (layers,)
    effective = layers + input_weight + output_weight
    per, extra = divmod(effective, stages)
    if per == 0 or max(input_weight, output_weight) > per:
        raise PipesimError(f"{layers} layers over {stages} stages: torchtitan counts the embedding and the head as a "
                           f"layer each and needs every stage at least one ({effective} effective layers over "
                           f"{stages} stages); use fewer stages or --stage-layers")
    shares = [per + (1 if s < extra else 0) for s in range(stages)]
    shares[0] -= input_weight
    shares[-1] -= output_weight
    counts, left = [], layers
    for share in shares:  # torchtitan hands out layers while any are left: the last stage takes what remains
        counts.append(min(share, left))
        left -= counts[-1]
    counts[-1] += left
    return tuple(counts)


def cost_threshold_split(layers: int, stages: int, layer_cost: float,
                         head_cost: float) -> tuple[tuple[int, ...], int]:
    """nanotron's split (``models/base.py``, ``build_model``): the pipeline blocks in order (the embedding and the
    final norm at no cost, each decoder layer ``layer_cost``, the LM head ``head_cost``, then the logits' FP32
    cast and the loss at no cost) go to rank r until their cumulative cost passes ``(r + 1)/stages`` of the
    total; the block that passes it stays on rank r, and the next goes to rank r + 1 whatever it costs. So the
    last stage, which holds the head, may get fewer layers than the others, or none (Llama 3.2 3B's 28 layers over
    8: 4 on each of the first seven, the head alone on the last); and a head that passes the second-last share
    leaves the cast and the loss to the last stage, one that passes the third-last the cast to the second-last
    and the loss to the last (Llama 3.2 1B's 16 layers over 8: 3,2,3,2,3,2,1 and the head, then 0).

    Returns the layers per stage and the stages after the head's (:attr:`~.layout.Layout.stages_after_head`).
    Refused where the head would sit further back: the ranks after the loss's would hold no block at all, which
    nanotron cannot run."""
    total = layers * layer_cost + head_cost
    thresholds = [total * (rank + 1) / stages for rank in range(stages)]
    counts = [0] * stages
    rank, cumulative = 0, 0.0
    for _ in range(layers):
        cumulative += layer_cost
        counts[rank] += 1
        if cumulative > thresholds[rank] and rank < stages - 1:
            rank += 1
    after = stages - 1 - rank  # the final norm and the head follow the last layer onto this rank
    if after > 2:
        empty = f"stage {stages - 1}" if rank + 3 == stages - 1 else f"stages {rank + 3}–{stages - 1}"
        raise PipesimError(f"{layers} layers over {stages} stages: nanotron's cost balance puts the LM head on "
                           f"stage {rank}, and {empty} would hold nothing (nanotron cannot run it); use fewer "
                           "stages or --stage-layers")
    return tuple(counts), after


def balanced_count_split(layers: int, stages: int) -> tuple[int, ...]:
    """DeepSpeed's ``PipelineModule`` with ``partition_method="type:transformer"`` (Megatron-DeepSpeed's
    ``GPTModelPipe``): ``partition_balanced`` over weights 1 for the transformer layers and 0 for every other module
    minimises the spread of the stages' layer counts (DeepSpeed ≥ 0.12.5, its dynamic programme); among the
    splits that do, it takes the one with the remainder on the first stages (28 over 8: 4 × 4, then 3 × 4).
    Earlier releases searched the heaviest stage by bisection and filled stages greedily from the first, which can
    leave the last stages lighter still: give ``--stage-layers`` for a run of that code."""
    per, extra = divmod(layers, stages)
    return tuple(per + (1 if s < extra else 0) for s in range(stages))


def _uneven_message(layers: int, stages: int, fixed: dict[int, int], model_name: str) -> str:
    if fixed:
        what = f"the {layers - sum(fixed.values())} layers left do not split evenly over the other " \
               f"{stages - len(fixed)} stages"
    else:
        what = f"{layers} layers do not split evenly over pp·v = {stages} stages"
    return f"{model_name}: {what}; {suggest_split(layers, stages)}"


def suggest_split(layers: int, stages: int) -> str:
    """A first/last-lighter split that works (Megatron-LM's balance), or else an explicit near-even list."""
    options = []
    if stages > 2:
        for first in range(layers // stages, -1, -1):
            middle, rem = divmod(layers - 2 * first, stages - 2)
            if rem == 0 and middle >= first:
                options.append(f"--first-stage-layers {first} --last-stage-layers {first} ({middle} on each "
                               f"other stage)")
                break
    base, extra = divmod(layers, stages)
    near = [base + 1] * extra + [base] * (stages - extra)
    options.append(f"--stage-layers {','.join(map(str, near))}")
    return "use " + " or ".join(options)


def uniform_item_split(layers: int, stages: int) -> tuple[int, ...]:
    """Layers per stage when a framework splits its list of modules ``[embedding, layers…, final norm, head]``
    into equal counts of items, the remainder to the first stages (DeepSpeed's ``PipelineModule`` with
    ``partition_method="uniform"``, Aleph Alpha's scaling framework's default): the first stage gives one item
    to the embedding and the last two to the final norm and the head."""
    items = layers + 3
    counts = [items // stages + (1 if s < items % stages else 0) for s in range(stages)]
    counts[0] -= 1
    counts[-1] -= 2
    if min(counts) < 0:
        raise PipesimError(f"{layers} layers over {stages} stages leave a stage fewer items than its embedding "
                           f"or head; use fewer stages")
    return tuple(counts)
