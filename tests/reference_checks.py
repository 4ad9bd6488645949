"""The one comparison every executor equivalence test makes: losses, each step's gradients and the final
parameters of a run against the single-process reference, at fp32 tolerance."""

import torch

RTOL, ATOL = 1e-5, 1e-6


def assert_matches_reference(got, ref, where: str) -> None:
    torch.testing.assert_close(torch.tensor(got.losses), torch.tensor(ref.losses), rtol=RTOL, atol=ATOL,
                               msg=lambda m: f"{where} losses: {m}")
    for step, (grads, ref_grads) in enumerate(zip(got.full_grads, ref.grads, strict=True)):
        assert grads.keys() == ref_grads.keys(), where
        for name, expected in ref_grads.items():
            torch.testing.assert_close(grads[name], expected, rtol=RTOL, atol=ATOL,
                                       msg=lambda m, n=name, s=step: f"{where} step {s} grad {n}: {m}")
    for name, expected in ref.params.items():
        torch.testing.assert_close(got.full_params[name], expected, rtol=RTOL, atol=ATOL,
                                   msg=lambda m, n=name: f"{where} param {n} after 2 steps: {m}")
