"""The reference's answer for one input set of the timing-like loop, held whole while the check budget allows, else as
its values at a random sample of positions (issue 17: a pool of large input sets, each with the reference's whole
answer beside it, was the checks' largest holding).

A sampled answer only decides when to look closer, never the verdict: a candidate's output that differs from it at a
sampled position, or whose error there is above the precision bound, is judged against the whole answer, made again
(get_inputs() under the set's seed, the reference run once more). What a sample misses is a wrong answer confined to
a small share of the output — which saves a timed call no measurable work; whatever skips work is wrong almost
everywhere it skipped, and the positions are drawn per run from the verifier's own random stream."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

from .context import detached_copy, tensors

SAMPLE_ELEMENTS = 1 << 20  # positions kept per output tensor (8 MB of float64 at most when compared)


class HeldAnswer:
    """``HeldAnswer.keep(out, sampled, rng, remake)``; ``whole`` is the answer when held whole, else None and
    ``sampled_pairs(out)`` gives the candidate's and the reference's values at the kept positions."""

    def __init__(self, whole: Any, positions: list[torch.Tensor | None], values: list[torch.Tensor],
                 shapes: list[tuple[tuple[int, ...], torch.dtype]], remake: Callable[[], Any]) -> None:
        self.whole = whole
        self._positions = positions  # per output tensor: flat indices, or None where the tensor is kept whole
        self._values = values
        self._shapes = shapes  # per output tensor: its shape and dtype
        self.remake = remake

    @classmethod
    def keep(cls, out: Any, sampled: bool, rng: random.Random, remake: Callable[[], Any]) -> HeldAnswer:
        if not sampled:
            return cls(detached_copy(out), [], [], [], remake)
        positions: list[torch.Tensor | None] = []
        values: list[torch.Tensor] = []
        shapes = []
        for t in tensors(out):
            flat = t.detach().reshape(-1)
            shapes.append((tuple(t.shape), t.dtype))
            if flat.numel() <= SAMPLE_ELEMENTS:
                positions.append(None)
                values.append(flat.clone())
                continue
            gen = torch.Generator(device=flat.device)
            gen.manual_seed(rng.getrandbits(63))
            index = torch.randint(0, flat.numel(), (SAMPLE_ELEMENTS,), generator=gen, device=flat.device)
            positions.append(index)
            values.append(flat[index].clone())
        return cls(None, positions, values, shapes, remake)

    def sampled_pairs(self, out: Any) -> tuple[list[torch.Tensor], list[torch.Tensor]] | None:
        """(the candidate's values, the reference's) at the kept positions; None where the candidate's outputs do
        not line up with the reference's (another count, shape or dtype: the whole answer decides)."""
        mine = tensors(out)
        if len(mine) != len(self._values):
            return None
        got = []
        for t, index, (shape, dtype) in zip(mine, self._positions, self._shapes):
            if tuple(t.shape) != shape or t.dtype != dtype or type(t) is not torch.Tensor:
                return None
            flat = t.detach().reshape(-1)
            got.append(flat.clone() if index is None else flat[index.to(flat.device)])
        return got, list(self._values)
