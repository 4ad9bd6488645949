"""The instruction IR: ops, instructions, stage placement, Schedule (compute order) and Program (lowered).

A *stage* is a contiguous slice of the model. With ``v`` chunks per rank there are ``pp·v`` stages, and a
:class:`Placement` maps (rank, chunk) to a stage. A :class:`Schedule` holds only what its author decides: the
order of compute instructions on each rank. :func:`pipesim.program.lowering.lower` derives the :class:`Program`, which
adds point-to-point communication, the data-parallel gradient reduction and the optimizer step.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, pairwise
from operator import attrgetter

import numpy as np

from pipesim.errors import ScheduleError


class Op(enum.Enum):
    """What an instruction does. Compute ops come from the schedule author; the rest from ``lower()``."""

    F = "F"  # forward of one microbatch through one chunk
    B = "B"  # full backward (input and weight gradients)
    I = "I"  # noqa: E741 — zero-bubble input-gradient backward, the name the paper uses
    W = "W"  # zero-bubble weight-gradient backward
    SEND_F = "SEND_F"  # send an activation to the next stage's rank
    RECV_F = "RECV_F"  # receive the previous stage's activation
    SEND_B = "SEND_B"  # send an input gradient to the previous stage's rank
    RECV_B = "RECV_B"  # receive the next stage's input gradient
    REDUCE_GRAD = "REDUCE_GRAD"  # data-parallel gradient sync of one chunk
    STEP = "STEP"  # optimizer step

    # Members are singletons, so identity hashing is exact, and C-level instead of Enum's Python __hash__:
    # sweeps hash ops millions of times (interned instructions, table lookups).
    __hash__ = object.__hash__

    @property
    def is_compute(self) -> bool:
        """Ops a schedule author writes (F, B, I, W): the rank computes on a microbatch."""
        return self in COMPUTE_OPS

    @property
    def code(self) -> int:
        """Position in :data:`OP_ORDER`: the op column of a Program and its table holds these."""
        return OP_CODE[self]

    @property
    def is_backward(self) -> bool:
        """Ops that produce the input gradient a previous stage waits for."""
        return self is Op.B or self is Op.I

    @property
    def is_send(self) -> bool:
        return self is Op.SEND_F or self is Op.SEND_B

    @property
    def is_recv(self) -> bool:
        return self is Op.RECV_F or self is Op.RECV_B

    @property
    def is_comm(self) -> bool:
        return self.is_send or self.is_recv


#: The one definition of the op classes; everything else derives from these.
COMPUTE_OPS = frozenset({Op.F, Op.B, Op.I, Op.W})
#: Compute ops after which a chunk's weight gradient is final for that microbatch (fused B, or the split W).
WEIGHT_GRAD_OPS = frozenset({Op.B, Op.W})
OP_ORDER = tuple(Op)
OP_CODE = {op: code for code, op in enumerate(OP_ORDER)}
COMPUTE_CODES = np.array(sorted(OP_CODE[op] for op in COMPUTE_OPS), dtype=np.int64)
#: ``IS_COMPUTE[op_codes]`` marks compute rows: one gather, where ``np.isin`` sorts (sweeps run it thousands of times).
IS_COMPUTE = np.isin(np.arange(len(OP_ORDER)), COMPUTE_CODES)

_FIELDS_BY_OP = {
    **{op: ("mb", "chunk") for op in COMPUTE_OPS},
    **{op: ("mb", "chunk", "peer") for op in (Op.SEND_F, Op.RECV_F, Op.SEND_B, Op.RECV_B)},
    Op.REDUCE_GRAD: ("chunk",),
    Op.STEP: (),
}


@dataclass(frozen=True, slots=True)
class Instruction:
    """One step of one rank's program. Fields that do not apply to the op are ``None``.

    The text form is ``OP key=value ...``: ``F mb=3 chunk=0``, ``SEND_F mb=3 chunk=0 peer=1``,
    ``REDUCE_GRAD chunk=0``, ``STEP``; :meth:`parse` reads it back.

    ``overlap`` marks the second half of an **overlapped forward-and-backward pair** (torch's
    ``OVERLAP_F_B``, DualPipe's overlapped chunks): a ``B`` or ``I`` that runs *together with* the ``F``
    right before it on its rank (of another microbatch or chunk). The pair is one unit of work: it starts
    when both halves' inputs are there, its receives are posted before it and its sends follow it, and it
    lasts as :meth:`pipesim.sim.costs.CostModel.pair_duration` says. Build one with :func:`overlap`; its
    text form is ``B mb=1 chunk=1 overlap=1`` (and a Program writes the pair on one line,
    ``OVERLAP_F_B(F mb=3 chunk=0; B mb=1 chunk=1)``).
    """

    op: Op
    mb: int | None = None
    chunk: int | None = None
    peer: int | None = None
    overlap: bool = False

    def __str__(self) -> str:
        parts = [self.op.value]
        parts.extend(f"{name}={getattr(self, name)}" for name in _FIELDS_BY_OP[self.op])
        if self.overlap:
            parts.append("overlap=1")
        return " ".join(parts)

    @classmethod
    def parse(cls, text: str) -> Instruction:
        """Read the text form back; raises ScheduleError naming the offending text."""
        tokens = text.split()
        if not tokens:
            raise ScheduleError("empty instruction: expected e.g. 'F mb=0 chunk=0'")
        try:
            op = Op(tokens[0])
        except ValueError:
            known = ", ".join(o.value for o in Op)
            raise ScheduleError(f"unknown op {tokens[0]!r} in {text!r}: use one of {known}") from None
        values: dict[str, int] = {}
        overlapped = False
        for token in tokens[1:]:
            key, sep, value = token.partition("=")
            if key == "overlap" and op in _OVERLAP_OPS and value in ("0", "1") and "overlap" not in values:
                values["overlap"] = 1  # only seen once; the flag itself is kept apart from the int fields
                overlapped = value == "1"
                continue
            if not sep or key not in _FIELDS_BY_OP[op] or key in values:
                expected = " ".join(f"{k}=<int>" for k in _FIELDS_BY_OP[op])
                raise ScheduleError(f"bad field {token!r} in {text!r}: {op.value} takes '{expected}'")
            try:
                values[key] = int(value)
            except ValueError:
                raise ScheduleError(f"field {key} in {text!r} is not an integer") from None
        missing = [k for k in _FIELDS_BY_OP[op] if k not in values]
        if missing:
            raise ScheduleError(f"instruction {text!r} lacks {', '.join(missing)}")
        values.pop("overlap", None)
        return cls(op, **values, overlap=overlapped)


#: Ops that may be the second half of an overlapped pair (the first half is always an F).
_OVERLAP_OPS = frozenset({Op.B, Op.I})
#: How a Program's text and torch's CSV name a pair: ``OVERLAP_F_B(F mb=3 chunk=0; B mb=1 chunk=1)``.
OVERLAP_NAME = "OVERLAP_F_B"


@lru_cache(maxsize=1 << 20)
def instruction(op: Op, mb: int | None = None, chunk: int | None = None, peer: int | None = None,
                overlap: bool = False) -> Instruction:
    """Interned constructor: schedules and lowering build millions of the same small values in sweeps."""
    return Instruction(op, mb, chunk, peer, bool(overlap))


def overlap(forward: Instruction, backward: Instruction) -> tuple[Instruction, Instruction]:
    """An overlapped pair: ``forward`` (an F) and ``backward`` (a B or I of another microbatch or chunk) run
    together. Returns the two instructions to put, in this order, into a rank's compute order
    (``order += overlap(F(3, 0), B(1, 1))``); the second carries :attr:`Instruction.overlap`."""
    if not isinstance(forward, Instruction) or forward.op is not Op.F or forward.overlap:
        raise ScheduleError(f"an overlapped pair starts with a plain F, not {forward}")
    if not isinstance(backward, Instruction) or backward.op not in _OVERLAP_OPS or backward.overlap:
        raise ScheduleError(f"an overlapped pair ends with a plain B or I, not {backward}")
    if (forward.mb, forward.chunk) == (backward.mb, backward.chunk):
        raise ScheduleError(f"{forward} cannot overlap {backward}: a backward needs its own forward done first")
    return forward, instruction(backward.op, backward.mb, backward.chunk, None, True)


def pair_text(forward: Instruction, backward: Instruction) -> str:
    """The one-line text of a pair, as a Program writes it."""
    plain = instruction(backward.op, backward.mb, backward.chunk)
    return f"{OVERLAP_NAME}({forward}; {plain})"


def parse_pair(text: str) -> tuple[Instruction, Instruction]:
    """Read :func:`pair_text` back (``OVERLAP_F_B(F mb=3 chunk=0; B mb=1 chunk=1)``)."""
    inner = text.strip()
    if not (inner.startswith(OVERLAP_NAME + "(") and inner.endswith(")")):
        raise ScheduleError(f"expected {OVERLAP_NAME}(F mb=.. chunk=..; B mb=.. chunk=..), got {text!r}")
    halves = inner[len(OVERLAP_NAME) + 1:-1].split(";")
    if len(halves) != 2:
        raise ScheduleError(f"{text!r}: an {OVERLAP_NAME} pair holds exactly two instructions, separated by ';'")
    return overlap(Instruction.parse(halves[0]), Instruction.parse(halves[1]))


def _check_ids(mb: object, chunk: object) -> None:
    """A schedule author's ids must be ints ≥ 0: the interned constructor would otherwise hand back ``F(0)``
    for ``F(0.0)`` or ``F(False)`` (equal keys), silently turning a wrong id into a right-looking one."""
    for name, value in (("microbatch", mb), ("chunk", chunk)):
        if type(value) is not int or value < 0:
            raise TypeError(f"{name} id {value!r} ({type(value).__name__}) must be an int ≥ 0")


def _interned(op: Op, name: str, doc: str):
    """The constructor ``name(mb, chunk=0)`` of ``op`` instructions, interned in its own (mb, chunk) table:
    schedule files call F/B/I/W about 7,000 times per sweep point, and a plain dict hit costs a third of a
    call through the shared ``instruction`` cache (whose key hashes the Op enum in Python). Ids are checked
    when a pair is first seen; a later hit with plain ints is the same, already checked, pair."""
    table: dict[tuple[int, int], Instruction] = {}

    def make(mb: int, chunk: int = 0) -> Instruction:
        if type(mb) is int and type(chunk) is int:
            made = table.get((mb, chunk))
            if made is not None:
                return made
        _check_ids(mb, chunk)
        made = table[mb, chunk] = instruction(op, mb, chunk)
        return made

    make.__name__ = make.__qualname__ = name
    make.__doc__ = doc
    return make


F = _interned(Op.F, "F", "Forward of microbatch ``mb`` through local chunk ``chunk``.")
B = _interned(Op.B, "B", "Full backward of microbatch ``mb`` through local chunk ``chunk``.")
I = _interned(Op.I, "I", "Input-gradient half of a split backward (zero-bubble schedules).")  # noqa: E741
W = _interned(Op.W, "W", "Weight-gradient half of a split backward (zero-bubble schedules).")


class Payload(enum.IntEnum):
    """What a point-to-point message carries (an integer so it can live in numpy columns)."""

    ACTIVATION = 0  # the output of the stage it leaves, for the next stage's F
    GRADIENT = 1  # the gradient of the input of the stage it leaves, for the previous stage's B/I


@dataclass(frozen=True, slots=True)
class Message:
    """The one identity of a message, used by lowering, the validator and the executor alike.

    A message is named by what it carries, its microbatch and the stage the tensor *leaves*: the sender's
    stage. A receiving stage s expects an activation leaving s−1 or a gradient leaving s+1.
    """

    payload: Payload
    mb: int
    stage: int

    @classmethod
    def sent(cls, op: Op, mb: int, sender_stage: int) -> Message:
        """The message a SEND_F/SEND_B of ``sender_stage`` carries."""
        return cls(Payload.GRADIENT if op is Op.SEND_B else Payload.ACTIVATION, mb, sender_stage)

    @classmethod
    def received(cls, gradient: bool, mb: int, receiver_stage: int) -> Message:
        """The message a receive (or the compute consuming it) on ``receiver_stage`` expects."""
        payload = Payload.GRADIENT if gradient else Payload.ACTIVATION
        return cls(payload, mb, leaving_stage(payload, receiver_stage))


def leaving_stage(payload, receiver_stage):
    """The stage a message leaves, from the stage that receives it (works on ints and numpy arrays)."""
    return receiver_stage + 1 - 2 * (payload == Payload.ACTIVATION)


class Placement(enum.Enum):
    """How stages map to ranks.

    LOOP: ``stage = chunk·pp + rank`` (Megatron interleaved; with one chunk, stage = rank).
    V: chunks zig-zag, ``stage = chunk·pp + rank`` for even chunks and ``(chunk+1)·pp − 1 − rank`` for odd
    ones, so with two chunks rank r holds stages r and 2·pp−1−r (ZB-V, DualPipe-V).
    DUAL: two pipelines over two copies of the model (bidirectional DualPipe, DeepSeek-V3 technical report
    §3.2.1): chunk 0 of rank r is stage r of the *down* pipeline (stages 0..pp−1, ranks 0→pp−1) and chunk 1
    is stage pp + (pp−1−r) of the *up* pipeline (stages pp..2pp−1, ranks pp−1→0), so the stage numbers are
    V's. Unlike V no data crosses from stage pp−1 to stage pp: the first half of the microbatch ids flows
    down, the second half up, and each microbatch passes only its own pipeline's stages. Stage pp+s is a
    copy of stage s (the same layers, model slice s).
    """

    LOOP = "loop"
    V = "v"
    DUAL = "dual"


@dataclass(frozen=True, slots=True)
class PipelineShape:
    """The dimensions every schedule and program shares: ranks, microbatches, chunks per rank, placement."""

    pp: int
    microbatches: int
    chunks: int = 1
    placement: Placement = Placement.LOOP

    def __post_init__(self) -> None:
        for name, value in (("pp", self.pp), ("microbatches", self.microbatches), ("chunks", self.chunks)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ScheduleError(f"{name}={value!r} must be a positive integer")
        if self.placement is Placement.DUAL and (self.chunks != 2 or self.microbatches % 2):
            raise ScheduleError(f"the dual placement holds two chunks per rank and an even number of microbatches "
                                f"(got chunks={self.chunks}, microbatches={self.microbatches})")

    @property
    def num_stages(self) -> int:
        return self.pp * self.chunks

    @property
    def pipelines(self) -> int:
        """Pipelines the stages form: 2 under DUAL (down and up, each over its own copy of the model), else 1."""
        return 2 if self.placement is Placement.DUAL else 1

    @property
    def stages_per_pipeline(self) -> int:
        return self.num_stages // self.pipelines

    @property
    def num_slices(self) -> int:
        """Distinct model slices, the stages a cost model describes: pp·v, or pp under DUAL (two copies)."""
        return self.stages_per_pipeline

    @property
    def chunk_share(self) -> int:
        """The v of the cost convention: how many of a rank's chunks one microbatch passes, each taking 1/v of
        the rank's share. Under DUAL a microbatch passes one of the two, which is a whole rank's share."""
        return self.chunks // self.pipelines

    # The stage arithmetic below works on ints and on numpy arrays alike (the validator passes columns).
    def slice_of(self, stage):
        """The model slice a stage runs (its cost-model stage): itself, or under DUAL stage mod pp."""
        return stage % self.stages_per_pipeline if self.pipelines > 1 else stage

    @property
    def microbatches_per_stage(self) -> int:
        """How many microbatches pass each stage: all of them, or half under DUAL."""
        return self.microbatches // self.pipelines

    def rank_slices(self, rank: int) -> tuple[int, ...]:
        """The model slices (cost-model stages) of ``rank``'s chunks, chunk 0 first."""
        return tuple(self.slice_of(self.stage(rank, c)) for c in range(self.chunks))

    @property
    def slices_by_rank(self) -> tuple[tuple[int, ...], ...]:
        """:meth:`rank_slices` of every rank, rank 0 first: made once per shape (the planner's cost models ask for
        it per candidate, tens of thousands of times over a few hundred shapes)."""
        return _slices_by_rank(self)

    def pipeline_of_stage(self, stage):
        return stage // self.stages_per_pipeline

    def pipeline_of_microbatch(self, mb):
        """Under DUAL the first half of the ids flows down (0), the second half up (1); else 0."""
        return mb // (self.microbatches // self.pipelines)

    def visits(self, mb, stage):
        """Whether microbatch ``mb`` passes ``stage``: always, except across DUAL's two pipelines."""
        return self.pipeline_of_microbatch(mb) == self.pipeline_of_stage(stage)

    def is_first_stage(self, stage):
        """A first stage of its pipeline: its F reads the input batch, not a neighbour's activation."""
        return stage % self.stages_per_pipeline == 0

    def is_last_stage(self, stage):
        """A last stage of its pipeline: it computes the loss, and its B/I needs no neighbour's gradient."""
        return stage % self.stages_per_pipeline == self.stages_per_pipeline - 1

    def stage(self, rank: int, chunk: int) -> int:
        """Global stage index of ``chunk`` on ``rank``."""
        if self.placement is not Placement.LOOP and chunk % 2 == 1:
            return (chunk + 1) * self.pp - 1 - rank
        return chunk * self.pp + rank

    def rank_of(self, stage: int) -> int:
        """The rank that holds ``stage``."""
        chunk, offset = divmod(stage, self.pp)
        if self.placement is not Placement.LOOP and chunk % 2 == 1:
            return self.pp - 1 - offset
        return offset

    def chunk_of(self, stage: int) -> int:
        """The local chunk index of ``stage`` on its rank."""
        return stage // self.pp


class Schedule:
    """A schedule as its author writes it: the compute order (F/B/I/W) of each rank.

    Held in one of two forms, whichever the author built, the other made on demand: per-rank
    :class:`Instruction` tuples (:meth:`from_orders`, ``Schedule(name, shape, orders)``) or columns
    (:meth:`from_blocks`: the building blocks of :mod:`pipesim.program.blocks` emit numpy columns, so a
    million-pass schedule is built and lowered without a million Python objects). :attr:`orders` and
    :attr:`columns` give either form; two schedules are equal when their name, shape and compute order are,
    whichever form built them. Immutable.
    """

    __slots__ = ("__dict__", "name", "shape")

    def __init__(self, name: str, shape: PipelineShape, orders=None, *, columns: ProgramColumns | None = None):
        if (orders is None) == (columns is None):
            raise TypeError("Schedule needs exactly one of orders (Instruction sequences) or columns")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "shape", shape)
        if orders is not None:
            self.__dict__["orders"] = tuple(tuple(order) for order in orders)
        else:
            self.__dict__["columns"] = columns

    @classmethod
    def from_orders(
        cls,
        name: str,
        orders: list[list[Instruction]],
        *,
        microbatches: int,
        chunks: int = 1,
        placement: Placement = Placement.LOOP,
    ) -> Schedule:
        shape = PipelineShape(len(orders), microbatches, chunks, placement)
        return cls(name, shape, tuple(tuple(rank_order) for rank_order in orders))

    @classmethod
    def from_blocks(
        cls,
        name: str,
        ranks: list[list],
        *,
        microbatches: int,
        chunks: int = 1,
        placement: Placement = Placement.LOOP,
    ) -> Schedule:
        """The schedule whose rank r runs the blocks of ``ranks[r]`` one after another.

        A block is a run of passes from :mod:`pipesim.program.blocks` (``forwards(range(m))``,
        ``alternate(...)``), or any object with integer columns ``op`` (:data:`OP_CODE` values),
        ``microbatch``, ``chunk`` and ``overlap`` (a bool column, or None); a single :class:`Instruction`
        (``F(3)``) is a block of one. Lowers to exactly the Program that the same passes written as
        Instruction lists lower to (a property test holds every built-in to it).
        """
        shape = PipelineShape(len(ranks), microbatches, chunks, placement)
        return cls(name, shape, columns=_columns_of_blocks(ranks))

    def __setattr__(self, key, value):
        raise AttributeError(f"Schedule is immutable (cannot set {key})")

    @property
    def orders(self) -> tuple[tuple[Instruction, ...], ...]:
        """Per-rank compute orders as (interned) Instructions; built from the columns on first use."""
        orders = self.__dict__.get("orders")
        if orders is None:
            orders = self.__dict__["orders"] = self.__dict__["columns"].instructions()
        return orders

    @property
    def columns(self) -> ProgramColumns:
        """The compute order as columns (``peer`` all -1), ranks concatenated; read from the orders on first use.

        Raises ScheduleError when an order holds something that is not an Instruction."""
        columns = self.__dict__.get("columns")
        if columns is None:
            columns = self.__dict__["columns"] = _columns_of_orders(self.__dict__["orders"])
        return columns

    @property
    def num_ranks(self) -> int:
        orders = self.__dict__.get("orders")
        return len(orders) if orders is not None else len(self.__dict__["columns"].rank_lengths)

    @property
    def held_as_columns(self) -> bool:
        """Whether the schedule was built as columns (its Instruction view not made yet)."""
        return "orders" not in self.__dict__

    @property
    def split_backward(self) -> bool:
        if self.held_as_columns:
            return bool(np.any(self.columns.op == OP_CODE[Op.W]))
        return any(ins.op is Op.W for order in self.orders for ins in order)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        if self.name != other.name or self.shape != other.shape:
            return False
        if not (self.held_as_columns or other.held_as_columns):
            return self.orders == other.orders
        return self.columns.equals(other.columns)

    def __hash__(self) -> int:
        return hash((self.name, self.shape, self.num_instructions))

    @property
    def num_instructions(self) -> int:
        """Compute instructions over all ranks."""
        orders = self.__dict__.get("orders")
        return sum(map(len, orders)) if orders is not None else self.columns.num_rows

    def __repr__(self) -> str:
        return f"Schedule(name={self.name!r}, shape={self.shape!r}, instructions={self.num_instructions})"

    def __getstate__(self):
        held = self.__dict__
        return (self.name, self.shape, held.get("orders") if "columns" not in held else None, held.get("columns"))

    def __setstate__(self, state) -> None:
        name, shape, orders, columns = state
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "shape", shape)
        if columns is not None:
            self.__dict__["columns"] = columns
        else:
            self.__dict__["orders"] = orders


def _columns_of_orders(orders) -> ProgramColumns:
    """Per-rank Instruction orders as columns. Schedules repeat a few distinct (interned) Instructions many
    times: the fields of each distinct object are read once and spread by identity, instead of three attribute
    reads per instruction."""
    lengths = np.fromiter(map(len, orders), dtype=np.int64, count=len(orders))
    flat = list(chain.from_iterable(orders))
    n = len(flat)
    ids = np.fromiter(map(id, flat), dtype=np.int64, count=n)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    distinct = [flat[i] for i in first.tolist()]
    try:
        op = np.fromiter(map(OP_CODE.__getitem__, map(attrgetter("op"), distinct)), np.int64, len(distinct))[inverse]
        mb = np.fromiter(map(attrgetter("mb"), distinct), dtype=np.int64, count=len(distinct))[inverse]
        chunk = np.fromiter(map(attrgetter("chunk"), distinct), dtype=np.int64, count=len(distinct))[inverse]
        tail = np.fromiter(map(attrgetter("overlap"), distinct), dtype=bool, count=len(distinct))[inverse]
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError):  # None fields, not Instructions
        return ProgramColumns.of_instructions(orders)
    return ProgramColumns(op, mb, chunk, np.full(n, -1, dtype=np.int64), lengths, tail if tail.any() else None)


def _columns_of_blocks(ranks) -> ProgramColumns:
    """Concatenate each rank's blocks (column runs or single Instructions) into one set of columns."""
    ops, mbs, chunks, tails = [], [], [], []
    lengths = np.zeros(len(ranks), dtype=np.int64)
    for rank, blocks in enumerate(ranks):
        for block in blocks:
            if isinstance(block, Instruction):
                if not block.op.is_compute:
                    raise ScheduleError(f"rank {rank} lists {block}: a schedule holds only F, B, I, W; communication, "
                                        "REDUCE_GRAD and STEP are derived by lower()")
                try:
                    _check_ids(block.mb, block.chunk)
                except TypeError as err:
                    raise ScheduleError(f"rank {rank} lists {block!r}: {err}") from None
                ops.append(np.array([OP_CODE[block.op]], dtype=np.int64))
                mbs.append(np.array([block.mb], dtype=np.int64))
                chunks.append(np.array([block.chunk], dtype=np.int64))
                tails.append(np.array([block.overlap]))
            else:
                try:
                    ops.append(np.asarray(block.op, dtype=np.int64))
                    mbs.append(np.asarray(block.microbatch, dtype=np.int64))
                    chunks.append(np.asarray(block.chunk, dtype=np.int64))
                    tail = block.overlap
                except AttributeError:
                    raise ScheduleError(
                        f"rank {rank} lists {block!r}: a block is a run of passes (pipesim.program.blocks) or an "
                        "Instruction such as F(0)") from None
                tails.append(np.zeros(len(ops[-1]), dtype=bool) if tail is None else np.asarray(tail, dtype=bool))
                if not len(ops[-1]) == len(mbs[-1]) == len(chunks[-1]) == len(tails[-1]):
                    raise ScheduleError(f"rank {rank}: a block's columns differ in length ({block!r})")
            lengths[rank] += len(ops[-1])
    if not ops:
        empty = np.zeros(0, dtype=np.int64)
        return ProgramColumns(empty, empty, empty, empty, lengths, None)
    tail, op = np.concatenate(tails), np.concatenate(ops)
    if op.min() < 0 or op.max() >= len(OP_ORDER) or not IS_COMPUTE[op].all():
        raise ScheduleError("a block holds an op code that is not F, B, I or W; communication, REDUCE_GRAD and "
                            "STEP are derived by lower()")
    return ProgramColumns(op, np.concatenate(mbs), np.concatenate(chunks),
                          np.full(len(tail), -1, dtype=np.int64), lengths, tail if tail.any() else None)


@dataclass(frozen=True, eq=False)
class ProgramColumns:
    """A Program as columns, ranks concatenated in order: one entry per instruction.

    ``op`` holds :data:`OP_CODE` values; ``microbatch``, ``chunk`` and ``peer`` hold -1 where the field does not
    apply to the op (``Instruction``'s ``None``). ``rank_lengths[r]`` is the length of rank r's program.
    ``overlap`` (bool, or None when the Program has no overlapped pair) marks the second half of each pair
    (:attr:`Instruction.overlap`); every pass that reorders rows carries it along.
    """

    op: np.ndarray
    microbatch: np.ndarray
    chunk: np.ndarray
    peer: np.ndarray
    rank_lengths: np.ndarray
    overlap: np.ndarray | None = None

    @property
    def num_rows(self) -> int:
        return len(self.op)

    @property
    def overlap_mask(self) -> np.ndarray:
        """``overlap`` as a bool array of every row (all False without pairs)."""
        if self.overlap is None:
            return np.zeros(len(self.op), dtype=bool)
        return np.asarray(self.overlap, dtype=bool)

    @property
    def has_pairs(self) -> bool:
        return self.overlap is not None and bool(np.any(self.overlap))

    def equals(self, other: ProgramColumns) -> bool:
        return all(np.array_equal(getattr(self, f), getattr(other, f))
                   for f in ("rank_lengths", "op", "microbatch", "chunk", "peer")) and np.array_equal(
            self.overlap_mask, other.overlap_mask)

    @classmethod
    def of_instructions(cls, ranks) -> ProgramColumns:
        """Flatten per-rank Instruction sequences (the slow path: one Python step per instruction)."""
        flat = [ins for code in ranks for ins in code]
        n = len(flat)
        try:
            op = np.fromiter((OP_CODE[ins.op] for ins in flat), dtype=np.int64, count=n)
            fields = [np.fromiter((-1 if v is None else v for v in (getattr(ins, name) for ins in flat)),
                                  dtype=np.int64, count=n) for name in ("mb", "chunk", "peer")]
            overlapped = np.fromiter((ins.overlap for ins in flat), dtype=bool, count=n)
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as err:
            raise ScheduleError(f"a program holds something that is not a valid Instruction ({err})") from None
        lengths = np.fromiter((len(code) for code in ranks), dtype=np.int64, count=len(ranks))
        return cls(op, *fields, lengths, overlapped if overlapped.any() else None)

    def instructions(self) -> tuple[tuple[Instruction, ...], ...]:
        """Per-rank Instruction tuples (interned), built on demand: text form, error messages, executors."""
        ops = [OP_ORDER[c] for c in self.op.tolist()]
        mbs, chunks, peers = (
            [None if v < 0 else v for v in column.tolist()] for column in (self.microbatch, self.chunk, self.peer)
        )
        everything = list(map(instruction, ops, mbs, chunks, peers, self.overlap_mask.tolist()))
        bounds = np.concatenate(([0], np.cumsum(self.rank_lengths))).tolist()
        return tuple(tuple(everything[b:e]) for b, e in pairwise(bounds))


class Program:
    """Per-rank instruction programs, ready to simulate or execute. Round-trips through :meth:`to_text`.

    Held as columns (:class:`ProgramColumns`): lowering writes them directly, and the simulator, validator and
    metrics read them. ``Program(name, shape, ranks)`` with per-rank Instruction sequences still works (hand
    edits, other lowering passes, program text); :attr:`ranks` gives the Instruction view on demand, built once.
    Immutable, like the frozen dataclass it replaces.
    """

    __slots__ = ("__dict__", "name", "shape")

    def __init__(self, name: str, shape: PipelineShape, ranks=None, *, columns: ProgramColumns | None = None):
        if (ranks is None) == (columns is None):
            raise TypeError("Program needs exactly one of ranks (Instruction sequences) or columns")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "shape", shape)
        if ranks is not None:
            self.__dict__["ranks"] = tuple(tuple(code) for code in ranks)
        else:
            self.__dict__["columns"] = columns

    def __setattr__(self, key, value):
        raise AttributeError(f"Program is immutable (cannot set {key})")

    @property
    def columns(self) -> ProgramColumns:
        cols = self.__dict__.get("columns")
        if cols is None:
            cols = self.__dict__["columns"] = ProgramColumns.of_instructions(self.__dict__["ranks"])
        return cols

    @property
    def ranks(self) -> tuple[tuple[Instruction, ...], ...]:
        ranks = self.__dict__.get("ranks")
        if ranks is None:
            ranks = self.__dict__["ranks"] = self.__dict__["columns"].instructions()
        return ranks

    @property
    def num_instructions(self) -> int:
        ranks = self.__dict__.get("ranks")
        return sum(len(r) for r in ranks) if ranks is not None else self.columns.num_rows

    @property
    def num_ranks(self) -> int:
        ranks = self.__dict__.get("ranks")
        return len(ranks) if ranks is not None else len(self.columns.rank_lengths)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return self.name == other.name and self.shape == other.shape and self.columns.equals(other.columns)

    def __hash__(self) -> int:
        return hash((self.name, self.shape, self.num_instructions))

    def __repr__(self) -> str:
        return f"Program(name={self.name!r}, shape={self.shape!r}, instructions={self.num_instructions})"

    def __getstate__(self):
        return (self.name, self.shape, self.columns)  # compact: the Instruction view and caches are rebuilt

    def __setstate__(self, state) -> None:
        name, shape, columns = state
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "shape", shape)
        self.__dict__["columns"] = columns

    def to_text(self) -> str:
        s = self.shape
        lines = [
            "# pipesim program v1",
            f"name: {self.name}",
            f"pp: {s.pp}",
            f"microbatches: {s.microbatches}",
            f"chunks: {s.chunks}",
            f"placement: {s.placement.value}",
        ]
        for rank, instructions in enumerate(self.ranks):
            lines.append(f"rank {rank}:")
            for index, ins in enumerate(instructions):
                after = instructions[index + 1] if index + 1 < len(instructions) else None
                if ins.overlap and index > 0 and instructions[index - 1].op is Op.F:
                    continue  # written with its F, on the pair's line
                if after is not None and after.overlap and ins.op is Op.F:
                    lines.append(f"  {pair_text(ins, after)}")
                else:
                    lines.append(f"  {ins}")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_text(cls, text: str) -> Program:
        """Parse :meth:`to_text` output; errors name the line."""
        header: dict[str, str] = {}
        ranks: list[list[Instruction]] = []
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                if line.startswith("rank ") and line.endswith(":"):
                    if int(line[5:-1]) != len(ranks):
                        raise ScheduleError(f"expected 'rank {len(ranks)}:'")
                    ranks.append([])
                elif ranks and line.startswith(OVERLAP_NAME):
                    ranks[-1].extend(parse_pair(line))
                elif ranks:
                    ranks[-1].append(Instruction.parse(line))
                else:
                    key, sep, value = line.partition(":")
                    if not sep:
                        raise ScheduleError("expected 'key: value' header or 'rank N:'")
                    header[key.strip()] = value.strip()
            except (ScheduleError, ValueError) as err:
                raise ScheduleError(f"program text line {lineno} ({line!r}): {err}") from None
        try:
            shape = PipelineShape(
                pp=int(header["pp"]),
                microbatches=int(header["microbatches"]),
                chunks=int(header.get("chunks", "1")),
                placement=Placement(header.get("placement", "loop")),
            )
        except (KeyError, ValueError) as err:
            raise ScheduleError(f"program text header is incomplete or malformed ({err})") from None
        if len(ranks) != shape.pp:
            raise ScheduleError(f"program text has {len(ranks)} rank sections but pp: {shape.pp}")
        return cls(header.get("name", "program"), shape, ranks)


@lru_cache(maxsize=4096)
def _slices_by_rank(shape: PipelineShape) -> tuple[tuple[int, ...], ...]:
    return tuple(shape.rank_slices(rank) for rank in range(shape.pp))
