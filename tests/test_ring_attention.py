"""Ring attention's math in one process: cp ranks as threads joined by queues, against plain causal SDPA.

The threads run the same code as the executor (the autograd Function, forward and backward rings), only the
transport differs, so this pins the block masks of the load-balanced layout, the log-sum-exp merge and the
dK/dV ring exactly and cheaply.
"""

import queue
import threading

import pytest

torch = pytest.importorskip("torch")

from executors.ring_attention import Ring, local_positions, ring_attention, split_sequence  # noqa: E402

ATOL, RTOL = 1e-6, 1e-5


class _Done:
    def __init__(self, q: queue.Queue):
        self.q = q

    def wait(self):
        return self.q.get(timeout=30)


class ThreadRing(Ring):
    """Rank ``rank`` of ``len(inboxes)`` threads: ``start`` puts a copy into the next rank's inbox."""

    def __init__(self, rank: int, inboxes: list[queue.Queue]):
        self.rank, self.size, self.inboxes = rank, len(inboxes), inboxes
        self.hops = 0

    def start(self, tensor):
        self.hops += 1
        self.inboxes[(self.rank + 1) % self.size].put(tensor.detach().clone())
        return _Done(self.inboxes[self.rank])


def _run_ranks(cp, q, k, v, dout):
    """Each cp rank (a thread) attends its share and back-propagates its share of ``dout``."""
    inboxes = [queue.Queue() for _ in range(cp)]
    results, errors = [None] * cp, []

    def rank(r):
        try:
            ring = ThreadRing(r, inboxes)
            mine = [split_sequence(t, r, cp, dim=2).detach().requires_grad_() for t in (q, k, v)]
            out = ring_attention(*mine, ring)
            out.backward(split_sequence(dout, r, cp, dim=2))
            results[r] = (out.detach(), *(t.grad for t in mine), ring.hops)
        except BaseException as err:  # surface in the test thread
            errors.append(err)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(cp)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    return results


def _unsplit(parts, cp, seq):
    """Reassemble per-rank load-balanced shares into sequence order."""
    full = torch.empty(*parts[0].shape[:2], seq, parts[0].shape[-1], dtype=parts[0].dtype)
    for r, part in enumerate(parts):
        full[:, :, local_positions(r, cp, seq)] = part
    return full


@pytest.mark.parametrize("cp", [1, 2, 3, 4])
def test_ring_attention_matches_causal_sdpa(cp):
    gen = torch.Generator().manual_seed(cp)
    b, h, seq, d = 2, 3, 8 * cp, 8
    q, k, v, dout = (torch.randn(b, h, seq, d, generator=gen, dtype=torch.float64) for _ in range(4))
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = torch.nn.functional.scaled_dot_product_attention(*ref, is_causal=True)
    expected.backward(dout)
    results = _run_ranks(cp, q, k, v, dout)
    for i, name in enumerate(("out", "dq", "dk", "dv")):
        got = _unsplit([r[i] for r in results], cp, seq)
        want = expected.detach() if i == 0 else ref[i - 1].grad
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL, msg=lambda m, n=name: f"cp={cp} {n}: {m}")
    # Forward: cp−1 K/V hops; backward: cp−1 K/V hops and cp dK/dV hops (none at cp = 1).
    assert all(r[4] == (0 if cp == 1 else 3 * cp - 2) for r in results)


def test_load_balanced_positions():
    assert local_positions(0, 2, 8).tolist() == [0, 1, 6, 7]
    assert local_positions(1, 2, 8).tolist() == [2, 3, 4, 5]
    tokens = torch.arange(8)[None]
    assert split_sequence(tokens, 1, 2, dim=1).tolist() == [[2, 3, 4, 5]]
