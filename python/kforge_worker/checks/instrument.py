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
import sys
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
try:
    from torch._ops import HigherOrderOperator as _HigherOrderOperator
except ImportError:  # pragma: no cover — very old torch
    _HigherOrderOperator = ()  # type: ignore[assignment,misc]

# torch's own namespaces: an op there is never the candidate's compiled code (`custom_ops`). "higher_order" is how
# the recorder names a higher-order operator (flex_attention, cond, ...); "inductor" holds the helpers that
# torch.compile's generated code calls.
_BASE_NAMESPACES = {"aten", "prim", "prims", "_c10d_functional", "profiler", "c10d", "higher_order", "inductor"}


# Where torch compiles a wrapper of its own HOP at every eager call: (module, function, the wrapper's name).
_OWN_COMPILE_SITES = (("torch.nn.attention.flex_attention", "flex_attention", "_flex_attention_hop_wrapper"),
                      ("torch._higher_order_ops.cond", "cond", "_cond_op_wrapper"))


@functools.cache
def _torch_own_compiles() -> frozenset:
    """The code objects of the wrappers torch compiles around its own HOPs when they are called eagerly (by
    identity: a candidate's function cannot be one of them, whatever it names itself)."""
    import importlib

    found: set = set()
    for module_name, function, wrapper in _OWN_COMPILE_SITES:
        try:
            stack = [getattr(importlib.import_module(module_name), function).__code__]
        except (ImportError, AttributeError):
            continue
        while stack:
            code = stack.pop()
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    if const.co_name == wrapper:
                        found.add(const)
                    stack.append(const)
    return frozenset(found)


def _frame_being_compiled() -> types.CodeType | None:
    """The code dynamo is deciding whether to compile, read from its convert-frame callback's `frame` (the
    caller of `ignore_compile_internals`, a few frames up); None anywhere else or where torch lays it out otherwise
    (then the recorder is the plain mode it always was)."""
    f = sys._getframe(2)
    for _ in range(6):
        if f is None:
            return None
        if f.f_code.co_name == "__call__" and f.f_code.co_filename.endswith("convert_frame.py"):
            code = getattr(f.f_locals.get("frame"), "f_code", None)
            return code if isinstance(code, types.CodeType) else None
        f = f.f_back
    return None


def _force_eager() -> Any:
    """A context in which torch.compile'd functions run eagerly (torch >= 2.6's `set_stance("force_eager")`); a
    no-op context on an older torch."""
    set_stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    if set_stance is None:
        return contextlib.nullcontext()
    try:
        return set_stance("force_eager")
    except Exception:  # noqa: BLE001 — a torch whose stances differ: the recorder as it was
        return contextlib.nullcontext()


class OpRecorder(TorchDispatchMode):  # type: ignore[misc]
    """Records the ATen (and custom) ops executed inside the block.

    Two things let it watch a forward whose torch call compiles by itself — eager `flex_attention` and `torch.cond`
    compile a wrapper of their higher-order operator (HOP) with dynamo, fullgraph, at every call:
    * `ignore_compile_internals`, for those wrappers alone (`_torch_own_compiles`): dynamo otherwise refuses to compile
      while a dispatch mode is on the stack ("non-infra torch dispatch mode present"), and with fullgraph=True that
      refusal raises (cond's tolerates it) and leaves the frames marked skipped, so every later plain call of the
      same code fails too. Dynamo compiles the wrapper with the recorder off (torch's own eager backend) and runs it with the recorder
      on. Everything else — a candidate's own `torch.compile` included — still runs eagerly under the recorder, as
      before: the record holds the ops of the eager forward, never only the outside of an inductor kernel.
    * `supports_higher_order_operators`: a HOP that reaches the recorder is recorded as `higher_order::<name>` and
      run through its dense kernel (CompositeExplicitAutograd, what eager execution of the HOP runs) with the
      recorder on, so the ATen ops inside it are recorded as if the forward had called them (cond: the branch its
      predicate picks, as its dense kernel does, which refuses any mode). A HOP without a dense kernel, or whose
      kernel refuses the recorder, raises: its work is never run unrecorded.
    """

    supports_higher_order_operators = True

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter = Counter()
        self._stances: list[Any] = []

    # Inside the block every torch.compile directive runs its function eagerly (`force_eager`, where this torch has
    # it): a candidate's `torch.compile(..., fullgraph=True)` would otherwise raise — dynamo refuses to compile under a
    # dispatch mode, and fullgraph turns the refusal into an error (an honest answer judged `runtime_error`). Without
    # fullgraph the refusal already fell back to eager; the record is the eager forward's either way.
    def __enter__(self) -> OpRecorder:
        stance = _force_eager()
        stance.__enter__()
        self._stances.append(stance)
        try:
            return super().__enter__()
        except BaseException:
            self._stances.pop().__exit__(None, None, None)
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            self._stances.pop().__exit__(None, None, None)

    def ignore_compile_internals(self) -> bool:  # torch calls it on the instance (an instance method on purpose)
        return _frame_being_compiled() in _torch_own_compiles()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if isinstance(func, _HigherOrderOperator):
            return self._higher_order(func, args, kwargs or {})
        try:
            name = func.name()  # 'aten::mm' (older torch: 'aten::mm.default')
        except Exception:  # noqa: BLE001
            name = str(func)
        self.ops[name.split(".")[0] if "::" in name else name] += 1
        if "::" in name and name.split("::")[0] not in _BASE_NAMESPACES:
            return self._custom(func, args, kwargs or {})
        return func(*args, **(kwargs or {}))

    def _custom(self, func: Any, args: Any, kwargs: dict) -> Any:
        """An operator outside torch's namespaces (a candidate's torch.library op, an extension's TORCH_LIBRARY op):
        its kernel runs with the recorder on, so what the kernel itself dispatches (a PyTorch GEMM inside the op's
        body, at::mm from its C++) is recorded as the forward's, as it would be had the forward called it. torch pops
        the recorder before handing an op to it, so `func(*args)` would run the whole body unrecorded — a pure-PyTorch
        answer wrapped in an op of its own read as "no library op ran, a compiled kernel was called". The kernel is
        reached by redispatch below the Python key (the one the recorder sits on: calling the op again with the
        recorder pushed would come straight back here), for the backend of its tensor arguments (the CPU slot when it
        has none, where the dispatcher falls back on a composite kernel)."""
        from torch.utils._pytree import tree_leaves

        below = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)
        keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
        for leaf in tree_leaves((args, kwargs)):
            if isinstance(leaf, torch.Tensor):  # a tensor always has a backend key below Python
                keys = torch._C._dispatch_keys(leaf) & below
                break
        with self:  # torch popped the recorder to call this; the op's body is the forward's code
            return func.redispatch(keys, *args, **kwargs)

    def _higher_order(self, func: Any, args: Any, kwargs: dict) -> Any:
        self.ops[f"higher_order::{func.name()}"] += 1
        if func.name() == "cond" and not kwargs and len(args) == 4:
            # cond's dense kernel refuses any mode on the stack; it calls the branch the predicate picks, as here
            pred, true_fn, false_fn, operands = args
            with self:
                return (true_fn if pred else false_fn)(*operands)
        dense = func.py_kernels.get(torch._C.DispatchKey.CompositeExplicitAutograd)
        if dense is None:
            raise NotImplementedError(f"the op recorder cannot run the higher-order operator {func.name()} (it has "
                                      "no CompositeExplicitAutograd kernel)")
        with self:  # torch popped the recorder to call this; its dense kernel's ops are the forward's ops
            return dense(*args, **kwargs)

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
