"""The reference's outputs a runtime check holds, sealed across the candidate's calls.

The runtime checks run the worker's copy of the reference in the candidate's process: a check computes the
reference's output, then calls the candidate, then compares. Whatever the check still holds of the reference's
answer while the candidate runs is reachable from candidate code (one frame walk) and writable in place: a
candidate that copies its own answer into it is compared with itself. So every output of a reference call made
through `context.run` is kept by weak reference, a keyed checksum of each still-held output is taken right before
each candidate call and again right after it, and a difference is the candidate's doing (nothing else runs in
between). A candidate call must also leave no code set to run after it returns (a profile function, a signal
handler, a torch mode: interference.hook_state), which would run where the check compares its answer with the
reference's. The verifier turns what was found into a failed `reference_outputs_sealed` check after each group.

The checksum is keyed by a secret drawn at import (before the candidate's) and computed on the tensor's device in
bounded chunks: no copy of a large output is kept, and a change that keeps the sum needs the key."""

from __future__ import annotations

import os
import weakref
from typing import Any

import torch

from ..compare import chunk_elements

_KEY = (int.from_bytes(os.urandom(4), "little") | 1, int.from_bytes(os.urandom(4), "little"))
_INTEGER_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

_references: weakref.WeakSet[Any] = weakref.WeakSet()
_held: list[weakref.ReferenceType[torch.Tensor]] = []
broken: list[str] = []  # what was found since the verifier last looked


def register_reference(model: Any) -> None:
    _references.add(model)


def is_reference(model: Any) -> bool:
    try:
        return model in _references
    except TypeError:
        return False


def hold(tensors: list[torch.Tensor]) -> None:
    """The outputs of a reference call, from now on sealed across candidate calls while someone holds them."""
    _held[:] = [w for w in _held if w() is not None]
    for t in tensors:
        try:
            _held.append(weakref.ref(t))
        except TypeError:
            continue


def checksums() -> list[tuple[weakref.ReferenceType[torch.Tensor], int | None]]:
    """A keyed checksum of every reference output still held (None when it cannot be read)."""
    out = []
    for w in _held:
        t = w()
        if t is not None:
            out.append((w, _checksum(t)))
    return out


def compare(before: list[tuple[weakref.ReferenceType[torch.Tensor], int | None]], what: str) -> None:
    for w, then in before:
        t = w()
        if t is None or then is None:
            continue
        if _checksum(t) != then:
            if len(broken) < 8:
                broken.append(f"a reference output {tuple(t.shape)} {str(t.dtype).replace('torch.', '')} held by "
                              f"the check was written during {what}")


def note(finding: str | None) -> None:
    """Something else a candidate call did to the check's side of the comparison (hook_change's words)."""
    if finding and len(broken) < 8:
        broken.append(finding)


def take_broken() -> list[str]:
    found = list(broken)
    broken.clear()
    return found


def _checksum(t: torch.Tensor, offset: int = 0) -> int | None:
    """``offset``: where ``t``'s first element sits in a larger flat tensor checksummed a part at a time (the parts'
    checksums then add up to the whole's, modulo 2**64)."""
    try:
        flat = t.detach().reshape(-1)
        view = _INTEGER_VIEW.get(flat.element_size())
        if view is None or flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1) if flat.is_complex() else flat
            view = _INTEGER_VIEW.get(flat.element_size())
            if view is None:
                return None
        bits = flat.contiguous().view(view) if flat.dtype != torch.bool else flat.to(torch.uint8)
        total = torch.zeros((), dtype=torch.int64, device=bits.device)  # int64 arithmetic wraps: a hash, not a sum
        step = chunk_elements(bits.numel())
        for start in range(0, bits.numel(), step):
            chunk = bits[start:start + step].to(torch.int64)
            index = torch.arange(offset + start, offset + start + chunk.numel(), device=chunk.device,
                                 dtype=torch.int64)
            total += (chunk * (index * _KEY[0] + _KEY[1])).sum()
        return int(total)
    except Exception:  # noqa: BLE001 — an output that cannot be read this way is not sealed
        return None
