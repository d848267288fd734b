"""The tensors handed to a candidate, and those it hands back, keep their class.

A forward may re-type a tensor object it is given (`x.__class__ = Sub`, a torch.Tensor subclass with
`__torch_function__`): values, storage and strides stay as they were, so no value comparison sees it, but every
torch operation the caller later makes on that object runs the candidate's code. The timing refills its rotating
input sets in place between calls (`copy_`), outside the timed region: a re-typed set computes the next answer
right there, and the timed call only hands it back (red team round 14, adv_input_class_precompute: 59× on
cpu_linear). The harness's comparisons on such an object (`torch.equal`) could be answered by it too.

The same holds for what the candidate returned: a caller that keeps earlier results (the checks' timing-like loop
holds its outputs to find a buffer handed out twice) asks them where they live; an output re-typed during a later
call answered with a subclass's untyped_storage() that raised, and a ring of kept buffers went unseen (red team
round 14, adv_output_ring_retype).

So the class of every tensor handed over is taken before the call and put back right after it, before any
harness operation on the object; the inputs and outputs of earlier calls (`HandedOver`, held weakly) get theirs back
after each later call — a set of inputs the caller writes again later (a rotating timing set) is one of them; the
caller is told which ones were changed."""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

# object's own __class__ setter, bound before any candidate exists: a subclass may define `__class__` as a property
# whose setter refuses, so `value.__class__ = cls` could run the candidate's code instead of putting the class back.
_set_class = object.__dict__["__class__"].__set__


def _slots(values: Any) -> list[Any]:
    """The tensors among `values` (a list of inputs; lists and tuples among them walked one level)."""
    out: list[Any] = []
    for value in values:
        if type(value) in (list, tuple):
            out.extend(value)
        else:
            out.append(value)
    return out


def classes_of(values: Any) -> list[type]:
    return [type(v) for v in _slots(values)]


def put_back(values: Any, classes: list[type]) -> list[int]:
    """Every tensor whose class is no longer the one in `classes` gets it back; their positions (among the
    walked values), empty when none changed. Only `type()` is read before the class is put back: nothing is
    called on the object while it may still carry the candidate's class."""
    import torch

    changed: list[int] = []
    for i, (value, cls) in enumerate(zip(_slots(values), classes)):
        if type(value) is cls or not issubclass(cls, torch.Tensor):
            continue
        changed.append(i)
        try:
            _set_class(value, cls)
        except TypeError:  # a class the layout cannot take back; named all the same
            pass
    return changed


class HandedOver:
    """The tensors earlier candidate calls were handed or returned, held weakly with the class each had then (the
    last `limit`): `put_back` after every later call gives a re-typed one its class back, and says how many were."""

    def __init__(self, limit: int = 128) -> None:
        self.items: deque[tuple[Any, type]] = deque(maxlen=limit)

    def add(self, values: list[Any]) -> None:
        for t in _slots(values):
            try:
                self.items.append((weakref.ref(t), type(t)))
            except TypeError:  # not weakly referable: nothing to hold
                pass

    def put_back(self) -> int:
        changed = 0
        for ref, cls in self.items:
            value = ref()
            if value is None or type(value) is cls:
                continue
            changed += 1
            try:
                _set_class(value, cls)
            except TypeError:
                pass
        return changed
