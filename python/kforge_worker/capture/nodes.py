"""Graph nodes in graph.ts's shape: raw call, canonical op, normalised fn, output metadata, flags."""

from __future__ import annotations

from typing import Any, Callable

import torch.nn as nn

from .encode import Arg, encode
from .flags import node_flags
from .model_info import AttrMatcher
from .normalize import ParamRef
from .ops import OpSpec
from .signatures import SIGNATURES, Bound


class ArgEncoder:
    """Encodes call arguments: graph values via `ref`, ParamRefs as params, and scalar constants that the
    call passed (not defaults) with the model attribute they equal."""

    def __init__(self, ref: Callable[[Any], Arg | None], matcher: AttrMatcher) -> None:
        self._ref = ref
        self._matcher = matcher
        #: The module paths whose forward makes the call being encoded (AttrMatcher.match); None: unknown.
        self.scope: set[str] | None = None

    def _node_ref(self, value: Any) -> Arg | None:
        if isinstance(value, ParamRef):
            return {"t": "param", "path": value.path}
        return self._ref(value)

    def __call__(self, value: Any, explicit: bool = True) -> Arg:
        arg = encode(value, self._node_ref)
        if explicit:
            self._attach_attrs(arg, value)
        return arg

    def _attach_attrs(self, arg: Arg, value: Any) -> None:
        if arg.get("t") == "const" and arg["pytype"] in ("int", "float"):
            path = self._matcher.match(value, self.scope)
            if path is not None:
                arg["attr"] = path
        elif arg.get("t") == "list":
            for item, v in zip(arg["items"], value):
                self._attach_attrs(item, v)


def encode_fn(spec: OpSpec, bound: Bound | None, enc: ArgEncoder) -> dict[str, Arg] | None:
    if bound is None:
        return None
    sig = SIGNATURES.get(spec.signature)
    fn = {
        name: enc(value, explicit)
        for name, (value, explicit) in bound.items()
        if sig is None or sig.reported(name) or name not in sig.names
    }
    # A module's int or float hyper-parameter still holding the module's value (no fix-up replaced it) names its
    # attribute.
    for name, (path, value) in getattr(bound, "module_attrs", {}).items():
        arg = fn.get(name)
        if arg is not None and arg.get("t") == "const" and arg.get("pytype") in ("int", "float") and arg.get("value") == value:
            arg["attr"] = path
    return fn


def make_node(
    *,
    node_id: str,
    kind: str,
    target: str,
    args: Any,
    kwargs: dict[str, Any],
    spec: OpSpec,
    bound: Bound | None,
    out: dict[str, Any],
    enc: ArgEncoder,
    module: nn.Module | None = None,
    method: str | None = None,
) -> dict[str, Any]:
    return {
        "id": node_id,
        "kind": kind,
        "target": target,
        "args": [enc(a) for a in args],
        "kwargs": {k: enc(v) for k, v in kwargs.items()},
        "op": spec.op,
        "fn": encode_fn(spec, bound, enc),
        "out": out,
        **node_flags(spec, bound, module, method),
    }


def value_out(pytype: str) -> dict[str, Any]:
    return {"t": "value", "pytype": pytype}
