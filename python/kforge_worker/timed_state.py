"""The model state the timed loop leaves behind (check ``timed_state``).

The sampled comparisons read outputs only. A forward's side effects — BatchNorm's running statistics in training
mode — are right in the verify stage (``state_buffers``) and can be skipped once timed: every timed output is still
right (a training-mode BatchNorm normalises by the batch's statistics), and the work saved is never compared. Both
sides see the same inputs in the same order, one call each per pair, from the trials on (the checks in between
restore what they change), so after the timing the candidate's buffers must be the reference's, within the
trials' tolerance. Compared by name; buffers the reference does not have (a candidate's own caches) are not.
"""

from __future__ import annotations

from typing import Any


def timed_state_check(reference_buffers: dict[str, Any], candidate: Any, atol: float, rtol: float) -> dict[str, Any]:
    from .compare import count_not_close

    import torch

    own = dict(candidate.named_buffers())
    shared = [name for name, ref in reference_buffers.items()
              if isinstance(ref, torch.Tensor) and name in own and own[name].shape == ref.shape]
    if not shared:
        return _check("skip", "the reference has no buffers the candidate shares by name and shape")
    drifted = []
    for name in shared:
        ref, cand = reference_buffers[name], own[name].detach()
        if ref.dtype != cand.dtype:
            drifted.append(f"{name} is {cand.dtype}, not {ref.dtype}")
            continue
        bad, _ = count_not_close(cand.to(ref.device), ref, atol, rtol)
        if bad:
            drifted.append(f"{name}: {bad} of {ref.numel()} elements differ from the reference's")
    if drifted:
        return _check("fail", "after the timed calls (the same inputs on both sides, one call each per pair) the "
                              "candidate's state is not the reference's: " + "; ".join(drifted[:4])
                      + " — a side effect skipped while timed")
    return _check("pass", f"after the timed calls the candidate's buffers match the reference's ({len(shared)} "
                          f"compared: {', '.join(shared[:4])})")


def _check(outcome: str, evidence: str) -> dict[str, Any]:
    return {"name": "timed_state", "outcome": outcome, "failVerdict": "cheating", "evidence": evidence}
