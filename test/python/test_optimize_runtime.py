"""The host-side helpers every emitted ModelNew carries (src/optimize/codegen/runtime.py.txt), on the CPU: the
ones only a CUDA run reaches otherwise (a CPU run takes the reference's forward before them)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
import torch.nn as nn

RUNTIME = Path(__file__).resolve().parents[2] / "src" / "optimize" / "codegen" / "runtime.py.txt"


@pytest.fixture(scope="module")
def runtime() -> dict:
    namespace = {"torch": torch, "nn": nn}
    exec(compile(RUNTIME.read_text(encoding="utf8"), str(RUNTIME), "exec"), namespace)  # noqa: S102
    return namespace


SHAPES = [(), (1,), (5,), (3, 1), (1, 4), (3, 4), (2, 3, 4), (2, 1, 4), (1, 3, 1), (6, 1, 1, 1)]


def test_broadcast_shapes_is_torchs(runtime):
    ours = runtime["_kf_broadcast_shapes"]
    for a, b in itertools.product(SHAPES, repeat=2):
        try:
            expected = list(torch.broadcast_shapes(a, b))
        except RuntimeError:
            with pytest.raises(RuntimeError, match="do not broadcast"):
                ours(torch.Size(a), torch.Size(b))
            continue
        assert ours(torch.Size(a), torch.Size(b)) == expected, (a, b)
        assert ours(list(a), torch.Size(b)) == expected, (a, b)  # a shape given as a list


def test_broadcast_of_tensors_is_torchs(runtime):
    tensors = [torch.empty(s) for s in [(2, 3, 4), (3, 1), (4,), ()]]
    for k in range(1, len(tensors) + 1):
        for group in itertools.permutations(tensors, k):
            assert runtime["_kf_broadcast"](group) == list(torch.broadcast_shapes(*(t.shape for t in group)))
