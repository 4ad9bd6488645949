"""Transports: how one rank's point-to-point messages move. The interpreter decides *when* to issue them.

The seam between the interpreter's loop and a communication backend. A transport states its
:class:`RecvPolicy` (when the loop issues receives and sends) and implements :meth:`Transport.issue`
(start a batch of sends and receives, return one :class:`Transfer` per operation) and
:meth:`Transport.finish_step`. Backends here: :class:`EagerTransport` (gloo: one ``isend``/``irecv`` each),
:class:`GroupedTransport` (NCCL: a run of operations as one ``batch_isend_irecv`` group), and, in
``executors.emulation``, a wrapper that gives every transfer the cost file's link time. A CUDA-streams
backend (say, sends on a side stream with events) is one more subclass; the loop does not change.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist


class RecvPolicy(enum.Enum):
    """When point-to-point operations are issued.

    EAGER (gloo): all of a step's irecvs at its start, so data lands while the rank computes; gloo keeps
    a FIFO of pending receives per peer, which is exactly the validator's BUFFERED link model.
    AT_USE: each irecv and isend on its own, at its instruction.
    GROUPED (NCCL): each run of consecutive SEND/RECV instructions as one ``batch_isend_irecv`` group. NCCL
    runs a pair's operations in issue order on one stream and a large send waits for its receive, so
    ungrouped 1F1B can hang (rank 0 sends F while rank 1 sends B); a group posts its receives together
    with its sends, as Megatron's ``send_forward_recv_backward`` does. The validator's GROUPED semantics
    say which Programs are safe this way.
    """

    EAGER = "eager"
    AT_USE = "at-use"
    GROUPED = "grouped"


@dataclass(frozen=True)
class P2P:
    """One operation to issue: send ``tensor`` to, or receive into ``tensor`` from, global rank ``peer``.

    ``seq`` is the SEND/RECV instruction's index in this rank's program (emulation looks its cost up).
    """

    seq: int
    peer: int
    tensor: torch.Tensor
    send: bool


class Transfer:
    """A started operation; :meth:`wait` returns the tensor it carries once it has arrived (or left)."""

    def __init__(self, work: dist.Work, tensor: torch.Tensor):
        self._work, self.tensor = work, tensor

    @property
    def nbytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()

    def wait(self) -> torch.Tensor:
        self._work.wait()
        return self.tensor


class Transport(abc.ABC):
    """Moves activations and gradients of shape ``shape`` between pipeline ranks."""

    policy: RecvPolicy

    def __init__(self, shape: tuple[int, ...], device: torch.device, dtype: torch.dtype = torch.float32):
        self.shape, self.device, self.dtype = shape, device, dtype
        self._sends: list[Transfer] = []

    def receive_buffer(self) -> torch.Tensor:
        """An empty tensor a message lands in."""
        return torch.empty(self.shape, device=self.device, dtype=self.dtype)

    def issue(self, ops: Sequence[P2P]) -> list[Transfer]:
        """Start ``ops`` (one group where the backend groups); sends are waited at :meth:`finish_step`."""
        transfers = self._start(ops)
        self._sends += [t for op, t in zip(ops, transfers, strict=True) if op.send]
        return transfers

    @abc.abstractmethod
    def _start(self, ops: Sequence[P2P]) -> list[Transfer]:
        """Start the operations, in order, and return their transfers."""

    def close(self) -> None:  # noqa: B027 - most transports hold nothing; those that do override it
        """Release what the transport holds beyond a step (threads); the run is over."""

    def finish_step(self) -> int:
        """Wait until every send of the step has left; return how many there were."""
        sends, self._sends = self._sends, []
        for transfer in sends:
            transfer.wait()
        return len(sends)


class EagerTransport(Transport):
    """One ``isend``/``irecv`` per operation (gloo); EAGER posts a step's receives at its start."""

    def __init__(self, shape, device, dtype=torch.float32, policy: RecvPolicy = RecvPolicy.EAGER):
        super().__init__(shape, device, dtype)
        if policy is RecvPolicy.GROUPED:
            raise ValueError("EagerTransport issues operations one by one; use GroupedTransport")
        self.policy = policy

    def _start(self, ops: Sequence[P2P]) -> list[Transfer]:
        return [
            Transfer(
                dist.isend(op.tensor, dst=op.peer) if op.send else dist.irecv(op.tensor, src=op.peer), op.tensor
            )
            for op in ops
        ]


class GroupedTransport(Transport):
    """A run of consecutive SEND/RECV instructions as one ``batch_isend_irecv`` group (NCCL)."""

    policy = RecvPolicy.GROUPED

    def _start(self, ops: Sequence[P2P]) -> list[Transfer]:
        works = dist.batch_isend_irecv(
            [dist.P2POp(dist.isend if op.send else dist.irecv, op.tensor, op.peer) for op in ops]
        )
        # gloo returns one work per operation, in issue order; NCCL one work for the whole coalesced group.
        if len(works) == 1:
            works = works * len(ops)
        return [Transfer(work, op.tensor) for op, work in zip(ops, works, strict=True)]


def transport_for(policy: RecvPolicy, shape, device, dtype=torch.float32) -> Transport:
    """The plain (not emulated) transport that issues operations the way ``policy`` says."""
    if policy is RecvPolicy.GROUPED:
        return GroupedTransport(shape, device, dtype)
    return EagerTransport(shape, device, dtype, policy)
