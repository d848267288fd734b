"""Instruments the candidate runs under: extension call counting, the aten op record, memory poisoning.

* `ExtensionRecorder` wraps `torch.utils.cpp_extension.load_inline`/`load` (on top of whatever wrapper the
  worker installed) so every module they return is a counting proxy: we know which compiled functions the
  forward really called, which raised, and which builds failed while the candidate carried on.
* `OpRecorder` is a TorchDispatchMode that records every ATen op (also ops an extension's C++ calls through
  the dispatcher, e.g. at::mm) and every custom op registered through torch.ops.
* `poisoned_allocations()` makes torch.empty & co. return NaN-filled memory while the candidate runs and, on
  CUDA, fills freed blocks of the caching allocator with NaN first, so output that was never written (or a
  block that still holds the reference's result) shows up as NaN instead of passing.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..extension_patch import CppExtensionPatch


@dataclass
class ExtensionLoad:
    name: str
    ok: bool
    error: str | None
    has_cuda: bool
    functions: list[str]


class _ExtensionProxy(types.ModuleType):
    """Stands in for a compiled extension module; counts calls of its functions."""

    def __init__(self, module: Any, recorder: ExtensionRecorder, name: str) -> None:
        super().__init__(getattr(module, "__name__", name), getattr(module, "__doc__", None))
        object.__setattr__(self, "_kforge_module", module)
        object.__setattr__(self, "_kforge_recorder", recorder)
        object.__setattr__(self, "_kforge_name", name)
        object.__setattr__(self, "_kforge_cache", {})

    def __getattr__(self, attr: str) -> Any:
        module = object.__getattribute__(self, "_kforge_module")
        value = getattr(module, attr)
        if attr.startswith("__") or not callable(value):
            return value
        cache = object.__getattribute__(self, "_kforge_cache")
        if attr not in cache:
            recorder = object.__getattribute__(self, "_kforge_recorder")
            qual = f"{object.__getattribute__(self, '_kforge_name')}.{attr}"

            @functools.wraps(value)
            def counted(*args: Any, **kwargs: Any) -> Any:
                recorder.calls[qual] += 1
                try:
                    return value(*args, **kwargs)
                except BaseException:
                    recorder.raised[qual] += 1
                    raise

            cache[attr] = counted
        return cache[attr]

    def __dir__(self) -> list[str]:
        return dir(object.__getattribute__(self, "_kforge_module"))


@dataclass
class ExtensionRecorder(CppExtensionPatch):
    loads: list[ExtensionLoad] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    raised: Counter = field(default_factory=Counter)
    _originals: dict[str, Any] = field(default_factory=dict)

    def _wrap(self, fn_name: str, original: Any) -> Any:
        recorder = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = str(kwargs.get("name", args[0] if args else "?"))
            has_cuda = bool(kwargs.get("cuda_sources") or (len(args) > 2 and args[2]))
            if fn_name == "load":
                sources = kwargs.get("sources", args[1] if len(args) > 1 else [])
                has_cuda = any(str(s).endswith((".cu", ".cuh")) for s in (sources or []))
            functions = kwargs.get("functions") or []
            if isinstance(functions, dict):
                functions = list(functions)
            elif isinstance(functions, str):
                functions = [functions]
            try:
                module = original(*args, **kwargs)
            except BaseException as exc:
                recorder.loads.append(ExtensionLoad(name, False, f"{type(exc).__name__}: {exc}"[:300], has_cuda,
                                                    list(functions)))
                raise
            recorder.loads.append(ExtensionLoad(name, True, None, has_cuda, list(functions)))
            if module is None or not isinstance(module, types.ModuleType):
                return module  # is_python_module=False: ops are reached through torch.ops (OpRecorder sees them)
            return _ExtensionProxy(module, recorder, name)

        return wrapper

    def total_calls(self) -> int:
        return sum(self.calls.values())


try:
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover — very old torch
    TorchDispatchMode = object  # type: ignore[assignment,misc]

_BASE_NAMESPACES = {"aten", "prim", "prims", "_c10d_functional", "profiler", "c10d"}


class OpRecorder(TorchDispatchMode):  # type: ignore[misc]
    """Records the ATen (and custom) ops executed inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        try:
            name = func.name()  # 'aten::mm' (older torch: 'aten::mm.default')
        except Exception:  # noqa: BLE001
            name = str(func)
        self.ops[name.split(".")[0] if "::" in name else name] += 1
        return func(*args, **(kwargs or {}))

    def custom_ops(self) -> Counter:
        return Counter({k: v for k, v in self.ops.items() if k.split("::")[0] not in _BASE_NAMESPACES})


def _poison_fill(t: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.fill_(True)
        elif t.numel():
            t.fill_(-0x5A5A if t.dtype.is_signed else 0x5A)
    return t


def poison_cuda_cache(sizes: list[int], device: torch.device, copies: int = 3) -> None:
    """Fills freed caching-allocator blocks with NaN: allocate blocks of the sizes the op is likely to ask
    for, fill them, free them. The next allocation of that size reuses one of them."""
    blocks = []
    try:
        for nbytes in sizes:
            for _ in range(copies):
                blocks.append(torch.full((max(1, nbytes // 4),), float("nan"), dtype=torch.float32, device=device))
    except torch.cuda.OutOfMemoryError:
        pass
    del blocks


_INHERITED = object()


@contextlib.contextmanager
def poisoned_allocations(device: torch.device, sizes: list[int]) -> Iterator[None]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        poison_cuda_cache(sizes, device)
    patched: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def poisoned(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            return _poison_fill(out) if isinstance(out, torch.Tensor) else out

        # An inherited method (Tensor.new_empty lives on TensorBase) is shadowed, then the shadow removed:
        # restoring it by assignment would leave a new attribute on torch.Tensor.
        own = name in vars(owner)
        patched.append((owner, name, original if own else _INHERITED))
        setattr(owner, name, poisoned)

    for name in ("empty", "empty_like", "empty_strided"):
        patch(torch, name)
    for name in ("new_empty", "new_empty_strided"):
        patch(torch.Tensor, name)
    try:
        yield
    finally:
        for owner, name, original in reversed(patched):
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
