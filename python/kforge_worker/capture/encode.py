"""JSON encoding of call arguments and tensor metadata in the shapes src/optimize/graph.ts declares.

Arguments become `Arg`s: graph values as {t:"node"}, parameters and buffers as {t:"param"}, Python
scalars as {t:"const"} with their Python type kept (2 vs 2.0), sequences as {t:"list"}, dicts as
{t:"dict"}, slices as {t:"slice"}. Anything else is a const of pytype "other" carrying its repr, so
encoding never fails.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

Arg = dict[str, Any]
NodeRef = Callable[[Any], "Arg | None"]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tensor_meta(shape: Any, dtype: torch.dtype, stride: Any) -> dict[str, Any]:
    return {"shape": [int(s) for s in shape], "dtype": dtype_name(dtype), "stride": [int(s) for s in stride]}


def meta_of_tensor(t: torch.Tensor) -> dict[str, Any]:
    stride = t.stride() if t.layout == torch.strided else [0] * t.dim()
    return tensor_meta(t.shape, t.dtype, stride)


def const(value: Any) -> Arg:
    """A Python value as a Scalar (graph.ts `Scalar`)."""
    if value is None:
        return {"t": "const", "pytype": "none", "value": None}
    if isinstance(value, bool):
        return {"t": "const", "pytype": "bool", "value": value}
    if isinstance(value, int):
        # beyond 2**53 a JSON number is a double to the TypeScript side (slice ends of sys.maxsize): the digits
        # travel as a string
        exact = abs(value) <= _JSON_EXACT_INT
        return {"t": "const", "pytype": "int", "value": int(value) if exact else str(int(value))}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"t": "const", "pytype": "float", "value": float(value)}
        special = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return {"t": "const", "pytype": "float", "value": None, "special": special}
    if isinstance(value, str):
        return {"t": "const", "pytype": "str", "value": value}
    if isinstance(value, torch.dtype):
        return {"t": "const", "pytype": "dtype", "value": dtype_name(value)}
    if isinstance(value, torch.device):
        return {"t": "const", "pytype": "device", "value": str(value)}
    if value is Ellipsis:
        return {"t": "const", "pytype": "ellipsis", "value": "..."}
    return {"t": "const", "pytype": "other", "value": repr(value)}


_JSON_EXACT_INT = 2**53 - 1


def is_const(arg: Arg | None, pytype: str | None = None) -> bool:
    return bool(arg) and arg.get("t") == "const" and (pytype is None or arg.get("pytype") == pytype)


def const_value(arg: Arg | None) -> Any:
    """The Python value of a const Arg (or a list of consts); None for anything else."""
    if not arg:
        return None
    if arg.get("t") == "const":
        special = arg.get("special")
        if arg.get("pytype") == "int" and isinstance(arg.get("value"), str):
            return int(arg["value"])
        return float(special) if special else arg.get("value")
    if arg.get("t") == "list":
        return [const_value(a) for a in arg["items"]]
    return None


def encode(value: Any, node_ref: NodeRef) -> Arg:
    """Encodes a call argument; node_ref turns graph values (fx nodes) into node/param Args."""
    ref = node_ref(value)
    if ref is not None:
        return ref
    if isinstance(value, (list, tuple)):  # torch.Size is a tuple
        kind = "list" if isinstance(value, list) else "tuple"
        return {"t": "list", "kind": kind, "items": [encode(v, node_ref) for v in value]}
    if isinstance(value, dict):
        keys, values = [encode(k, node_ref) for k in value], [encode(v, node_ref) for v in value.values()]
        return {"t": "dict", "keys": keys, "values": values}
    if isinstance(value, slice):
        return {
            "t": "slice",
            "start": encode(value.start, node_ref),
            "stop": encode(value.stop, node_ref),
            "step": encode(value.step, node_ref),
        }
    if isinstance(value, (torch.memory_format, torch.layout)):
        return {"t": "const", "pytype": "other", "value": str(value)}
    return const(value)


def encode_plain(value: Any) -> Arg:
    """Encodes a value that holds no graph references (module hyper-parameters, defaults)."""
    return encode(value, lambda _v: None)


def as_list(value: Any, n: int) -> Any:
    """An int or a 1-sequence broadcast to n ints (conv/pool configuration); other values unchanged."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return [value] * n
    if isinstance(value, (list, tuple)) and len(value) == 1 and n > 1:
        return [value[0]] * n
    if isinstance(value, tuple):
        return list(value)
    return value
