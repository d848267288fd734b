"""Harness integrity: what the candidate must not touch, observed from inside the worker process.

* `IntegritySnapshot` records the identity of every function the harness relies on (torch's compare,
  timing and random functions, torch.Tensor's methods, time.*, the worker's own modules), the module table
  and PyTorch's global precision flags before the candidate is imported, and diffs them after each stage.
  Class and module dictionaries are read raw (`vars`), so classmethod re-binding is not mistaken for a patch.
* `AuditMonitor` is a PEP 578 audit hook (it cannot be removed once added): while candidate code runs it
  records process spawns, ctypes loads, frame and gc walks, reads of /proc/self/{environ,fd,mem}, class
  patching — each attributed to the candidate only when the candidate's file is the calling frame (or on
  the stack for process spawns that do not come from torch's own extension builder).
* Thread and descriptor counts before/after; native threads by id from /proc/self/task (`native_threads`).

The snapshot is the process's fingerprint: besides the functions it holds the process-wide switches that
change how the *reference* runs (`_process_flags`: TF32/reduced-precision/cuDNN/SDPA backend switches,
default dtype and device, deterministic mode, thread counts), `os.environ`, the problem module's globals
(`module_fingerprint`: values, function code, the reference class's methods), the attribute *names* of
torch's classes (a method added to torch.Tensor, nn.Module or any torch.nn layer is a change too, not only
a replaced one) and nn.Module's global hook tables. It is taken once before the candidate is imported and
diffed after the import, after every check group and around timing: a few milliseconds each, never
inside a timed loop.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .. import compiler_cache
from .diffs import keyed_changes

try:
    import _thread
except ImportError:  # pragma: no cover
    _thread = None  # type: ignore[assignment]

def _bind_frame_hook_getter() -> Any:
    """torch._C._dynamo.eval_frame.get_eval_frame_callback, bound when this module is imported (before the
    candidate), so a stand-in put on the C module later cannot hide a hook. None where torch has no dynamo."""
    try:
        import torch

        return torch._C._dynamo.eval_frame.get_eval_frame_callback
    except Exception:  # noqa: BLE001
        return None


_frame_hook = _bind_frame_hook_getter()

# Functions the harness trusts, grouped by where they live. Attributes missing in a torch build are skipped.
_WATCHED_MODULES = (
    "torch",
    "torch.cuda",
    "torch.testing",
    "torch.nn.functional",
    "torch.random",
    "torch.backends.cuda",
    "torch.backends.cudnn",
    "torch.utils.cpp_extension",
    "torch.profiler",
    "torch.autograd.profiler",
    "time",
    "math",
    "os",
    "gc",
    "sys",
    "json",
    "json.encoder",
    "builtins",
    "threading",
    "inspect",
    "numpy",
    "numpy.testing",
    "random",
)
_WATCHED_CLASSES = (
    ("torch", "Tensor"),
    ("torch.cuda", "Event"),
    ("torch.cuda", "Stream"),
    ("torch.nn", "Module"),
    ("torch", "Generator"),
    ("json.encoder", "JSONEncoder"),  # the result line is serialised by it
    # dynamo's nn.Module construction wrapper (torch_compiler.prepare) calls it for every module built
    ("torch._dynamo.mutation_guard", "GenerationTracker"),
)
# The worker legitimately wraps these (compile capture); the extension wrapper below also does.
_EXEMPT = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load", "sys.stdout", "sys.stderr"}


# Switches that only say how something else is computed: changed under a declared --allow-tf32 they are the
# user's choice, not the candidate's (the pipeline sets the first two itself from the request).
_TF32_FLAGS = {"torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
               "torch.get_float32_matmul_precision()", "torch.backends.fp32_precision",
               "torch.backends.cuda.matmul.fp32_precision", "torch.backends.cudnn.fp32_precision",
               "torch.backends.cudnn.conv.fp32_precision", "torch.backends.cudnn.rnn.fp32_precision"}
_TF32_VALUES = {True, False, "high", "highest", "tf32", "ieee", "none"}
# Switches that move only the speed of the process that sets them, never a result's precision: a change is disclosed
# (`harness_integrity` warns), not failed — the static scan's rule for the same lines (static_scan.DISCLOSED_SWITCHES).
DISCLOSED_FLAGS = {"torch.backends.cudnn.benchmark"}
# Environment variables the harness sets itself, or torch sets on the harness's behalf when its instruments
# load (the profiler's CUPTI switches; inductor's cache directories, set when the dispatch-recording and
# FLOP-counting checks import torch's compile machinery). None of them changes how eager PyTorch computes.
_HARNESS_ENV = {"TORCH_EXTENSIONS_DIR", "DISABLE_CUPTI_LAZY_REINIT", "TEARDOWN_CUPTI", "CUDA_MODULE_LOADING",
                "KMP_DUPLICATE_LIB_OK", "TORCH_WARM_POOL"}
_HARNESS_ENV_PREFIXES = ("TORCHINDUCTOR_", "_TORCHINDUCTOR_", "TRITON_")
# Read only when an extension is built (torch.utils.cpp_extension, nvcc): which architectures, how many jobs, which
# compiler and toolkit. LLM answers commonly set them at import before load_inline; none changes how the reference
# (eager PyTorch, already built) computes or how fast. PATH is not among them: it picks every program started later.
_BUILD_ENV = {"TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "PYTORCH_ROCM_ARCH", "TORCH_XPU_ARCH_LIST", "CC", "CXX",
              "CUDA_HOME", "CUDA_PATH", "CUDNN_HOME", "CUDNN_PATH", "ROCM_HOME", "ROCM_PATH", "PYTORCH_NVCC",
              "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "TORCH_DONT_CHECK_COMPILER_ABI",
              "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES", "TORCH_NO_COMPILER_WRAPPER", "DISTUTILS_USE_SDK"}


def _probe(flags: dict[str, Any], key: str, read: Any) -> None:
    try:
        flags[key] = read()
    except Exception:  # noqa: BLE001 — switch absent in this build
        pass


def _process_flags() -> dict[str, Any]:
    """Every process-wide switch that changes how the reference computes or how fast it runs."""
    import torch

    flags: dict[str, Any] = {
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "torch.get_default_dtype()": str(torch.get_default_dtype()),
        "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled(),
        "torch.is_grad_enabled()": torch.is_grad_enabled(),
        "torch.get_num_threads()": torch.get_num_threads(),
    }
    _probe(flags, "torch.get_num_interop_threads()", torch.get_num_interop_threads)
    _probe(flags, "torch.is_deterministic_algorithms_warn_only_enabled()",
           torch.is_deterministic_algorithms_warn_only_enabled)
    _probe(flags, "torch.get_default_device()", lambda: str(torch.get_default_device()))
    _probe(flags, "torch.is_anomaly_enabled()", torch.is_anomaly_enabled)
    _probe(flags, "torch.is_inference_mode_enabled()", torch.is_inference_mode_enabled)
    backends = torch.backends
    matmul = backends.cuda.matmul
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
                 "allow_fp16_accumulation", "fp32_precision"):
        _probe(flags, f"torch.backends.cuda.matmul.{name}", lambda n=name: getattr(matmul, n))
    cudnn = backends.cudnn
    for name in ("allow_tf32", "enabled", "benchmark", "deterministic", "benchmark_limit", "fp32_precision"):
        _probe(flags, f"torch.backends.cudnn.{name}", lambda n=name: getattr(cudnn, n))
    for sub in ("conv", "rnn"):
        _probe(flags, f"torch.backends.cudnn.{sub}.fp32_precision", lambda s=sub: getattr(getattr(cudnn, s),
                                                                                           "fp32_precision"))
    _probe(flags, "torch.backends.fp32_precision", lambda: backends.fp32_precision)
    # SDPA backend enables: one disabled at import pushes the reference's attention onto a slower kernel.
    for name in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled"):
        fn = getattr(backends.cuda, name, None)
        if fn is not None:
            _probe(flags, f"torch.backends.cuda.{name}()", fn)
    _probe(flags, "torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()",
           backends.cuda.fp16_bf16_reduction_math_sdp_allowed)
    _probe(flags, "floating-point environment (denormals, rounding)", lambda: _float_environment(torch))
    _probe(flags, "this process's scheduling (lowest niceness, policies of its threads)", _own_scheduling)
    _probe(flags, "torch.backends.mkldnn.enabled", lambda: backends.mkldnn.enabled)
    _probe(flags, "torch.backends.opt_einsum.enabled", lambda: backends.opt_einsum.enabled)
    _probe(flags, "torch.backends.opt_einsum.strategy", lambda: backends.opt_einsum.strategy)
    # Autocast entered and never left (red team round 13, adv_autocast_left): every matmul of this thread — the
    # worker's copy of the reference among them, which `precision` takes PyTorch's own error from — then runs in
    # float16/bfloat16, so the candidate's lower precision is measured against a reference as imprecise as itself.
    for device in ("cpu", "cuda"):
        _probe(flags, f"torch.is_autocast_enabled({device!r})", lambda d=device: torch.is_autocast_enabled(d))
        _probe(flags, f"torch.get_autocast_dtype({device!r})", lambda d=device: str(torch.get_autocast_dtype(d)))
    _probe(flags, "torch.is_autocast_cache_enabled()", torch.is_autocast_cache_enabled)
    # Backends the reference's operators are routed through (nn.MultiheadAttention's fast path, the BLAS/LAPACK
    # library on CUDA): a switch flipped at import moves the worker's reference onto another kernel.
    _probe(flags, "torch.backends.mha.get_fastpath_enabled()", lambda: backends.mha.get_fastpath_enabled())
    _probe(flags, "torch.backends.cuda.preferred_blas_library()", lambda: str(backends.cuda.preferred_blas_library()))
    _probe(flags, "torch.backends.cuda.preferred_linalg_library()",
           lambda: str(backends.cuda.preferred_linalg_library()))
    try:
        flags["torch function modes"] = torch._C._len_torch_function_stack()
    except Exception:  # noqa: BLE001
        pass
    try:
        from torch.utils._python_dispatch import _len_torch_dispatch_stack

        flags["torch dispatch modes"] = _len_torch_dispatch_stack()
    except Exception:  # noqa: BLE001
        pass
    # nn.Module's process-wide hook tables: a global forward (pre-)hook runs inside the reference's forward.
    modules = sys.modules.get("torch.nn.modules.module")
    for name, table in sorted(vars(modules).items()) if modules is not None else ():
        if name.startswith("_global_") and isinstance(table, dict):
            flags[f"torch.nn.modules.module.{name}"] = len(table)
    # The collector set to keep what it frees (DEBUG_SAVEALL: gc.garbage then holds the harness's dropped frames and
    # tracebacks, no audit event), or a callback run inside the harness at every collection.
    import gc

    flags["gc.get_debug()"] = gc.get_debug()
    flags["len(gc.callbacks)"] = len(gc.callbacks)
    flags["sys.gettrace()"] = repr(sys.gettrace())
    flags["sys.getprofile()"] = repr(sys.getprofile())
    # ... and the ones threading gives every thread started later (the harness's caller_threads thread among them)
    _probe(flags, "threading.gettrace()", lambda: repr(threading.gettrace()))
    _probe(flags, "threading.getprofile()", lambda: repr(threading.getprofile()))
    # dynamo's frame-evaluation hook (a C setter, no audit event): whatever is installed is shown every Python
    # frame this thread enters, with its arguments — the reference's forward and the harness's own functions.
    # torch.compile installs it only for the span of a compiled call; between calls it is empty.
    if _frame_hook is not None:
        _probe(flags, "frame evaluation hook (torch._C._dynamo.eval_frame)", lambda: repr(_frame_hook()))
    from .. import frame_hook

    flags["frame evaluation hooks left by the candidate's code (taken away)"] = list(frame_hook.left)
    from . import context

    flags["autograd modes left changed by a candidate's forward (put back)"] = list(context.modes_left)
    flags["tensors re-typed by a candidate's forward (put back)"] = list(context.retyped)
    _resolve_fp32_precision(flags)
    return flags


def _own_scheduling() -> tuple[int, tuple[int, ...]]:
    """The worker's own threads' priority: the lowest niceness among them and their scheduling policies. The
    reference is timed in its own process at the priority it started with (interference.scheduling_change); a
    candidate that makes its own threads more urgent (niceness below the start's, a real-time policy: root may) is
    served first wherever the host runs anything else, and its timed calls look faster than they are."""
    from ..interference import scheduling

    threads = scheduling(os.getpid()).values()
    return (min((s[1] for s in threads), default=0), tuple(sorted({s[2] for s in threads if len(s) > 2})))


def _float_environment(torch: Any) -> tuple[float, ...]:
    """This thread's floating-point environment, read by computing with it rather than by asking an API: denormals
    flushed (torch.set_flush_denormal, or the MXCSR bits written from native code) turn 1e-40 into 0, and a rounding
    mode other than to-nearest (fesetround) moves 1 ± 2^-24 off 1. Both change every later float computation on
    the thread, the worker's copy of the reference's among them."""
    probe = torch.tensor([1e-40, 1.0, -1.0], dtype=torch.float32)
    probe[0:1].mul_(1.0)
    probe[1:].add_(torch.tensor([2.0 ** -24, -(2.0 ** -24)], dtype=torch.float32))
    return tuple(float(v) for v in probe.tolist()) + (sum([1.0, 2.0 ** -53]),)


def _resolve_fp32_precision(flags: dict[str, Any]) -> None:
    """'none' in the fp32_precision switches means "as the parent says" (generic -> cuda.matmul, cudnn ->
    cudnn.conv/rnn); torch turns 'none' into the explicit value when the legacy API is used, so compare the
    effective values, not the spelling."""
    root = "torch.backends.fp32_precision"
    parents = {"torch.backends.cuda.matmul.fp32_precision": root, "torch.backends.cudnn.fp32_precision": root,
               "torch.backends.cudnn.conv.fp32_precision": "torch.backends.cudnn.fp32_precision",
               "torch.backends.cudnn.rnn.fp32_precision": "torch.backends.cudnn.fp32_precision"}
    if flags.get(root) == "none":
        flags[root] = "ieee"
    for key in parents:  # parents come first in this order
        if flags.get(key) == "none":
            flags[key] = flags.get(parents[key], "ieee")


_precision_flags = _process_flags  # the older name


def _callables(obj: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        items = list(vars(obj).items())
    except TypeError:
        return out
    for name, value in items:
        if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
            out[name] = id(value)
    return out


def _torch_classes() -> list[tuple[str, type]]:
    """The classes whose attribute *names* are fingerprinted too: torch.Tensor, nn.Module and every
    nn.Module subclass torch.nn exports (the layers a reference is built from)."""
    import torch
    from torch import nn

    out: list[tuple[str, type]] = [("torch.Tensor", torch.Tensor), ("torch.nn.Module", nn.Module)]
    for name, value in sorted(vars(nn).items()):
        if isinstance(value, type) and issubclass(value, nn.Module) and value is not nn.Module:
            out.append((f"torch.nn.{name}", value))
    return out


def _value_print(value: Any) -> Any:
    """What identifies a global's value: simple values by repr, functions by identity and code, classes by
    identity and their own methods' identity and code, tensors by identity and version counter."""
    import torch

    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return ("value", repr(value)[:200])
    if isinstance(value, (tuple, list, frozenset, set, dict)) and len(value) <= 64:
        items = list(value.items()) if isinstance(value, dict) else list(value)
        flat = [x for kv in items for x in (kv if isinstance(value, dict) else (kv,))]
        if all(x is None or isinstance(x, (bool, int, float, str, bytes)) for x in flat):
            return ("value", id(value), repr(value)[:200])
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value._version)
    code = getattr(value, "__code__", None)
    if code is not None:
        return ("function", id(value), id(code), id(getattr(value, "__defaults__", None)),
                id(getattr(value, "__kwdefaults__", None)))
    if isinstance(value, type):
        members = []
        for attr, raw in sorted(vars(value).items()):
            if attr in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"):
                continue
            inner = getattr(raw, "__func__", raw)  # staticmethod/classmethod
            members.append((attr, id(raw), id(getattr(inner, "__code__", None))))
        return ("class", id(value), tuple(members))
    return ("object", id(value))


# Module dunders that change what reading the module's attributes answers (PEP 562): a `__getattr__` added to the
# problem answers the harness's `getattr(problem, "KFORGE_ATOL", None)`.
_MODULE_HOOKS = frozenset({"__getattr__", "__dir__"})

# The prefix of the problem attributes the harness itself reads (KFORGE_ATOL, KFORGE_SKIP_FP64…): always readable.
_HARNESS_READ_PREFIX = "KFORGE_"


def module_fingerprint(module: ModuleType) -> dict[str, Any]:
    """The problem module's globals (dunders aside) -> what identifies each value (`_value_print`)."""
    out: dict[str, Any] = {}
    for name, value in list(vars(module).items()):
        if name.startswith("__") and name.endswith("__") and name not in _MODULE_HOOKS:
            continue
        try:
            out[name] = _value_print(value)
        except Exception:  # noqa: BLE001 — an exotic global: identity only
            out[name] = ("object", id(value))
    return out


# Builtins through which code reads globals by a name it computes: a module whose code calls one of them can
# read any global, so every global added to it counts.
_NAME_READERS = frozenset({"globals", "vars", "eval", "exec", "locals", "__dict__"})


def _codes_of(value: Any, module_name: str, seen: set[int]) -> list[Any]:
    """The code objects whose global lookups resolve in the module called `module_name`, reachable from one of
    its globals: functions (through `__wrapped__`, which torch.compile's and functools' wrappers keep),
    the methods, properties and nested classes of classes defined there, and every code nested in those."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    out: list[Any] = []
    inner = getattr(value, "__func__", None)  # staticmethod, classmethod, bound method
    if inner is not None:
        out += _codes_of(inner, module_name, seen)
    if isinstance(value, property):
        for accessor in (value.fget, value.fset, value.fdel):
            if accessor is not None:
                out += _codes_of(accessor, module_name, seen)
    code = getattr(value, "__code__", None) if type(value).__name__ == "function" else None
    if code is not None and getattr(value, "__module__", None) == module_name:
        out.append(code)
    wrapped = getattr(value, "__wrapped__", None) if code is not None else None
    if wrapped is not None:
        out += _codes_of(wrapped, module_name, seen)
    if isinstance(value, type) and getattr(value, "__module__", None) == module_name:
        for member in list(vars(value).values()):
            out += _codes_of(member, module_name, seen)
    return out


def problem_readable_names(module: ModuleType) -> frozenset[str] | None:
    """Every name the module's own code can look up as a global (each code's `co_names`, nested codes included,
    and every builtin name, which a global added would shadow); None when its code reads globals by computed
    names (`globals()`, `eval`…): then any name is readable."""
    import builtins

    read: set[str] = set()
    seen: set[int] = set()
    stack = [c for value in list(vars(module).values()) for c in _codes_of(value, module.__name__, seen)]
    while stack:
        code = stack.pop()
        read.update(code.co_names)
        stack += [c for c in code.co_consts if type(c) is type(code)]
    if read & _NAME_READERS:
        return None
    return frozenset(read | set(vars(builtins)) | _MODULE_HOOKS)


def _explain_global(prefix: str, name: str, before: Any, after: Any) -> str:
    if before[0] != after[0]:
        return f"{prefix}.{name} was rebound (a {before[0]} before, a {after[0]} now)"
    kind = before[0]
    if kind == "value":
        return f"{prefix}.{name} changed from {before[-1]} to {after[-1]}"
    if kind == "tensor":
        return (f"{prefix}.{name} (a tensor) was " + ("replaced" if before[1] != after[1] else
                                                      f"written in place (version {before[2]} -> {after[2]})"))
    if kind == "function":
        if before[1] != after[1]:
            return f"{prefix}.{name} was replaced by another function"
        if before[2] != after[2]:
            return f"{prefix}.{name}.__code__ was replaced"
        return f"{prefix}.{name}'s default arguments were replaced"
    if kind == "class":
        if before[1] != after[1]:
            return f"{prefix}.{name} was replaced by another class"
        old, new = {m[0]: m for m in before[2]}, {m[0]: m for m in after[2]}
        changed = sorted(a for a in old.keys() & new.keys() if old[a] != new[a])
        added, removed = sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys())
        parts = [f"{prefix}.{name}.{a} was replaced" for a in changed]
        parts += [f"{prefix}.{name}.{a} was added" for a in added] + [f"{prefix}.{name}.{a} was deleted" for a in removed]
        return "; ".join(parts) or f"{prefix}.{name} changed"
    return f"{prefix}.{name} was rebound to another object"


@dataclass
class IntegritySnapshot:
    functions: dict[str, tuple[Any, int]] = field(default_factory=dict)  # qualified name -> (object, id)
    modules: dict[str, int] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)
    environ: dict[str, str] = field(default_factory=dict)
    class_names: dict[str, frozenset[str]] = field(default_factory=dict)  # torch class -> its own attribute names
    problem: ModuleType | None = None
    problem_globals: dict[str, Any] = field(default_factory=dict)
    harness_globals: dict[str, Any] = field(default_factory=dict)  # the worker's own module state (harness_globals.py)
    tf32_declared: bool = False  # --allow-tf32: the TF32 switches are the user's to set
    disclosed: list[str] = field(default_factory=list)  # DISCLOSED_FLAGS changes the last diff() saw
    imports: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # finders and path hooks (process_hooks.py)
    dispatcher: dict[str, str] = field(default_factory=dict)  # aten kernels by dispatch key
    wiring: dict[str, Any] = field(default_factory=dict)  # torch's module-valued globals, code objects (torch_wiring.py)
    files: dict[str, Any] = field(default_factory=dict)  # harness sources, problem/candidate, importable entries
    file_paths: tuple[str, ...] = ()

    @classmethod
    def take(cls, extra_modules: tuple[str, ...] = (), problem: ModuleType | None = None,
             allow_tf32: bool = False, files: tuple[str, ...] = ()) -> IntegritySnapshot:
        """files: the problem's and the candidate's paths (watched with the harness's sources)."""
        from .harness_globals import harness_fingerprint, import_harness
        from .process_hooks import dispatcher_fingerprint, import_machinery, watched_files

        import_harness()  # lazily imported harness modules join the snapshot too
        snap = cls(problem=problem, tf32_declared=allow_tf32, file_paths=files)
        snap.imports = import_machinery()
        snap.dispatcher = dispatcher_fingerprint()
        snap.files = watched_files(files)
        snap.harness_globals = harness_fingerprint()
        snap.environ = dict(os.environ)
        if problem is not None:
            snap.problem_globals = module_fingerprint(problem)
        names = list(_WATCHED_MODULES) + [m for m in sys.modules if m.startswith("kforge_worker")] + list(extra_modules)
        for mod_name in names:
            module = sys.modules.get(mod_name)
            if module is None:
                continue
            for attr, _ in _callables(module).items():
                value = vars(module)[attr]
                snap.functions[f"{mod_name}.{attr}"] = (value, id(value))
            # classes defined in the worker's own modules (Channel.send, CudaClock.time_ms, ...)
            if mod_name.startswith("kforge_worker"):
                for attr, value in list(vars(module).items()):
                    if isinstance(value, type) and value.__module__ == mod_name:
                        for meth, _ in _callables(value).items():
                            raw = vars(value)[meth]
                            snap.functions[f"{mod_name}.{attr}.{meth}"] = (raw, id(raw))
        for mod_name, cls_name in _WATCHED_CLASSES:
            module = sys.modules.get(mod_name)
            owner = getattr(module, cls_name, None) if module else None
            if owner is None:
                continue
            for meth in _callables(owner):
                raw = vars(owner)[meth]
                snap.functions[f"{mod_name}.{cls_name}.{meth}"] = (raw, id(raw))
        for qual, owner in _torch_classes():
            snap.class_names[qual] = frozenset(vars(owner))
            if qual.startswith("torch.nn.") and qual != "torch.nn.Module":
                for meth in _callables(owner):  # a layer's forward replaced: the reference runs it
                    raw = vars(owner)[meth]
                    snap.functions[f"{qual}.{meth}"] = (raw, id(raw))
        snap.modules = {name: id(mod) for name, mod in list(sys.modules.items()) if mod is not None}
        snap.flags = _process_flags()
        from .torch_wiring import wiring

        snap.wiring = wiring({qual: value for qual, (value, _) in snap.functions.items()})
        return snap

    def diff(self, thorough: bool = True) -> list[str]:
        """What changed since the snapshot: replaced functions, replaced or removed modules, flipped flags.
        thorough: also the operator dispatcher and the files (~0.1 s; after the import, the last check group and
        the timing, not after every group). A finder or path hook the candidate added is taken out at once."""
        from .process_hooks import dispatcher_changes, file_changes, restore_import_machinery

        problems: list[str] = restore_import_machinery(self.imports) if self.imports else []
        if thorough and self.dispatcher:
            problems += dispatcher_changes(self.dispatcher)
        if thorough and self.files:
            problems += file_changes(self.files, self.file_paths)
        current_modules = dict(sys.modules)
        for qual, (value, ident) in self.functions.items():
            if qual in _EXEMPT:
                continue
            owner_name, _, attr = qual.rpartition(".")
            owner = _resolve(owner_name, current_modules)
            if owner is None:
                continue
            try:
                now = vars(owner).get(attr, _MISSING)
            except TypeError:
                continue
            if now is _MISSING:
                problems.append(f"{qual} was deleted")
            elif now is not value and not torch_own_wrapper(now, value):
                problems.append(f"{qual} was replaced by {_describe(now)}")
        for name, ident in self.modules.items():
            module = current_modules.get(name)
            if module is None:
                if name in current_modules or not name.startswith(("kforge_candidate", "__mp_main__")):
                    if _important_module(name):
                        problems.append(f"sys.modules[{name!r}] was removed")
            elif id(module) != ident and _important_module(name):
                problems.append(f"sys.modules[{name!r}] was replaced by {_describe(module)}")
        now_flags = _process_flags()
        self.disclosed = []
        for key, before in self.flags.items():
            after = now_flags.get(key)
            if after != before:
                if self.tf32_declared and key in _TF32_FLAGS and after in _TF32_VALUES:
                    continue
                if key in DISCLOSED_FLAGS and isinstance(after, bool):
                    self.disclosed.append(f"{key} changed from {before!r} to {after!r}")
                    continue
                problems.append(f"{key} changed from {before!r} to {after!r}")
        problems += self._environ_changes()
        problems += self._class_additions()
        if self.wiring:
            from .torch_wiring import wiring_changes

            problems += wiring_changes(self.wiring)
        if self.harness_globals:
            from .harness_globals import harness_changes

            problems += harness_changes(self.harness_globals)
        if self.problem is not None:
            now_globals = module_fingerprint(self.problem)
            # A global added that none of the problem's code can read is no change to what the reference
            # computes: torch.compile installs its compiled graphs and imports as new globals of the module
            # whose frame it compiled (`__compiled_fn_7_…`, `__import_torch_dot__dynamo_dot_utils`), at a
            # recompile as late as a check's call. A name the reference's code reads, or a builtin it might
            # read, stays a change (a shadowing `len`, a guarded lookup that now finds something).
            readable = problem_readable_names(self.problem)
            now_globals = {k: v for k, v in now_globals.items() if k in self.problem_globals or readable is None
                           or k in readable or k.startswith(_HARNESS_READ_PREFIX)}
            problems += keyed_changes(self.problem_globals, now_globals,
                                      lambda name, _: f"problem.{name} was added",
                                      lambda name, _: f"problem.{name} was deleted",
                                      lambda name, was, now: _explain_global("problem", name, was, now))
        return problems

    def restore(self) -> None:
        """Puts every watched function back as it was and takes out foreign import finders: the last thing done
        before the result line is serialised, so a replaced json.dumps, isinstance or channel method (named in
        the result as a change) cannot rewrite the result on its way out."""
        from .process_hooks import restore_import_machinery

        if self.imports:
            restore_import_machinery(self.imports)
        current_modules = dict(sys.modules)
        for qual, (value, _) in self.functions.items():
            if qual in _EXEMPT:
                continue
            owner_name, _, attr = qual.rpartition(".")
            owner = _resolve(owner_name, current_modules)
            try:
                now = vars(owner).get(attr, _MISSING) if owner is not None else value
                if now is not value and not torch_own_wrapper(now, value):
                    setattr(owner, attr, value)
            except (TypeError, AttributeError):
                continue  # a built-in type's attribute: it cannot have been replaced either

    def _environ_changes(self) -> list[str]:
        return keyed_changes(self.environ, dict(os.environ),
                             lambda key, value: f"os.environ[{key!r}] was set to {value[:80]!r}",
                             lambda key, _: f"os.environ[{key!r}] was removed",
                             lambda key, was, now: f"os.environ[{key!r}] changed from {was[:80]!r} to {now[:80]!r}",
                             skip=lambda key: key in _HARNESS_ENV or key in _BUILD_ENV
                             or key.startswith(_HARNESS_ENV_PREFIXES))

    def _class_additions(self) -> list[str]:
        out = []
        for qual, owner in _torch_classes():
            before = self.class_names.get(qual)
            if before is None:
                continue
            added = sorted(set(vars(owner)) - before)
            if added:
                out.append(f"{qual} gained {', '.join(added[:4])}" + (f" (+{len(added) - 4} more)" if len(added) > 4
                                                                      else "") + " (added to torch's class)")
        return out


_MISSING = object()


def torch_own_wrapper(now: Any, original: Any) -> bool:
    """torch wraps some functions lazily on first use (dynamo's import wraps torch.manual_seed in its `disable`):
    allowed when the new function's code lives in torch's own package, it names the original as the function it
    wraps, and it closes over the original itself — a wrapper of torch's around the very function it replaces.
    (`__wrapped__` alone is an attribute anyone can set on a wrapper of something else.)"""
    import torch

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    code = getattr(now, "__code__", None)
    if code is None or not os.path.abspath(code.co_filename).startswith(torch_dir + os.sep):
        return False
    if getattr(now, "__wrapped__", None) is not original:
        return False
    # The globals it runs with are those of the torch module its code is from (a function built from torch's
    # code object with a dict of one's own would resolve its names, builtins included, wherever that dict says).
    scope = getattr(now, "__globals__", None)
    home = sys.modules.get(scope.get("__name__", "")) if isinstance(scope, dict) else None
    if home is None or vars(home) is not scope or \
            os.path.abspath(getattr(home, "__file__", None) or "") != os.path.abspath(code.co_filename):
        return False
    for cell in getattr(now, "__closure__", None) or ():
        try:
            if cell.cell_contents is original:
                return True
        except ValueError:  # an empty cell
            continue
    return False


def _important_module(name: str) -> bool:
    root = name.split(".")[0]
    return root in {"torch", "time", "math", "os", "sys", "gc", "json", "builtins", "numpy", "threading",
                    "inspect", "random", "kforge_worker", "importlib", "subprocess", "ctypes"}


def _resolve(qual: str, modules: dict[str, ModuleType]) -> Any:
    if qual in modules:
        return modules[qual]
    head, _, tail = qual.rpartition(".")
    owner = modules.get(head)
    return getattr(owner, tail, None) if owner is not None else None


def _describe(value: Any) -> str:
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", None) or type(value).__name__
    code = getattr(value, "__code__", None)
    where = f" ({os.path.basename(code.co_filename)}:{code.co_firstlineno})" if code is not None else ""
    return f"{module}.{name}{where}" if module else f"{name}{where}"


# ---------------------------------------------------------------------------------------------- audit
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec",
                   "os.spawn", "pty.spawn", "os.kill", "os.killpg"}
_CALLER_EVENTS = {
    "sys._getframe": "tamper",
    "sys._current_frames": "tamper",
    "gc.get_objects": "tamper",
    "gc.get_referrers": "tamper",
    "gc.get_referents": "tamper",
    "sys.settrace": "tamper",
    "sys.setprofile": "tamper",
    "object.__setattr__": "tamper",
    "object.__delattr__": "tamper",
    "ctypes.dlopen": "evasion",
    "ctypes.dlsym": "evasion",
    "ctypes.cdata": "evasion",
    "os.putenv": "tamper",
    "os.unsetenv": "tamper",
    "socket.connect": "evasion",
    "socket.__new__": "evasion",
    "compile": "evasion",
    "exec": "evasion",
}
# Code objects made at run time (a code object names the file its frames will claim): _new_code
_CODE_EVENTS = {"code.__new__", "marshal.loads"}
# Attribute reads that hand out a frame (raised as object.__getattr__): a frame's f_back chain leads to the
# harness's own frames and their locals (the evaluation's context, the timing loop's objects).
_FRAME_GETTERS = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
# Walks that hand the caller the harness's own objects (its frames' locals, the live result, the channel):
# refused, not only recorded — recording is undone by a candidate that then rewrites what was recorded.
_WALK_EVENTS = {"sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents"}
# Standard-library modules whose functions return the caller's frame (logging.currentframe,
# inspect.currentframe/stack, traceback.walk_stack): called by the candidate directly, the frame is its own
# and f_back is one attribute away from the harness's.
_FRAME_HELPER_MODULES = ("inspect", "logging", "traceback")
_SENSITIVE_PATHS = ("/proc/self/environ", "/proc/self/fd", "/proc/self/mem", "/proc/self/maps", "/dev/fd",
                    "/proc/self/task", "/dev/stdout", "/proc/" + str(os.getpid()))


_READ_EVENTS = ("open", "os.listdir", "os.scandir")
# Events naming paths that are checked against the private compiler caches of other processes (compiler_cache.py):
# reading, listing, entering, writing, linking or renaming into one.
_PATH_EVENTS = _READ_EVENTS + ("os.chdir", "os.symlink", "os.link", "os.rename", "os.mkdir", "os.remove",
                               "os.rmdir", "os.truncate", "os.utime", "os.chmod")


def _other_process(path: str) -> bool:
    """Whether a path, symlinks resolved, lies under another process's /proc entry (its memory, maps, descriptors,
    environment, threads). The clean reference process is the worker's child, so under Yama's default ptrace scope the
    candidate's code could read its memory (/proc/<pid>/mem) — the reference's outputs included (red team round 15,
    adv_read_reference_memory). The worker's own threads' entries are its own."""
    if not path or path.isdigit():  # a descriptor number (os.fdopen's event), not a path
        return False
    try:
        real = os.path.realpath(path)  # relative to the working directory too (a chdir into /proc/<pid>)
    except (OSError, ValueError):
        real = path
    parts = real.split("/")
    if len(parts) < 3 or parts[1] != "proc" or not parts[2].isdigit():
        return False
    pid = int(parts[2])
    if pid == os.getpid():
        return False  # the worker's own entries: _SENSITIVE_PATHS' rules, as before
    try:
        return str(pid) not in os.listdir(f"/proc/{os.getpid()}/task")
    except OSError:
        return True


class WalkRefused(RuntimeError):
    """Raised into the candidate's code by the audit hook when it walks frames or the collector's objects."""


@dataclass
class AuditEvent:
    kind: str  # tamper | evasion | thread
    event: str
    where: str
    detail: str

    def render(self) -> str:
        return f"{self.where}: {self.event} {self.detail}".strip()


# Where a copy of every recorded audit event goes as it is recorded: set by the pipeline (before the snapshot) to
# the clean reference process's note channel. The record below lives in the candidate's process, where a class
# found among object's subclasses leads to it; the copy outside cannot be taken back (pipeline._audit_reconciled).
_AUDIT_SINK: Any = None


class _Record(list):
    """The audit record: an event appended here is also sent out of the process (`_AUDIT_SINK`)."""

    def append(self, event: Any) -> None:
        super().append(event)
        sink = _AUDIT_SINK
        if sink is not None:
            try:
                sink(event.render())
            except Exception:  # noqa: BLE001, S110 — the local record stands; a lost copy is not the candidate's
                pass


class AuditMonitor:
    """Records sensitive events raised while candidate code is on the stack. One per process."""

    _instance: AuditMonitor | None = None

    def __init__(self) -> None:
        self.candidate_files: set[str] = set()
        self.events: list[AuditEvent] = _Record()
        self.active = False
        self._busy = threading.local()
        self._own_thread = threading.get_ident()

    @classmethod
    def install(cls) -> AuditMonitor:
        if cls._instance is None:
            cls._instance = cls()
            sys.addaudithook(cls._instance._hook)
        return cls._instance

    def watch(self, path: str) -> None:
        self.candidate_files.add(os.path.abspath(path))

    def _hook(self, event: str, args: tuple) -> None:
        if event == "sys.addaudithook":
            self._refuse_hook()
        frame_getter = event == "object.__getattr__" and len(args) > 1 and args[1] in _FRAME_GETTERS
        walk = event in _WALK_EVENTS or frame_getter or event in _CODE_EVENTS  # code: refused after the verdict too
        if not (self.active or walk) or getattr(self._busy, "on", False):
            return
        if event not in _CALLER_EVENTS and event not in _PROCESS_EVENTS and event not in _CODE_EVENTS and \
                event not in _PATH_EVENTS:
            if not (frame_getter or event.startswith("os.exec") or event.startswith("os.spawn")):
                return
        self._busy.on = True
        refuse = False
        try:
            refuse = self._classify(event, args, walk)
        except Exception:  # noqa: BLE001 — the hook must never break the candidate or the harness
            pass
        finally:
            self._busy.on = False
        if refuse:
            raise WalkRefused(f"kforge: {event} refused: the candidate's code may not reach the harness's objects")

    def _refuse_hook(self) -> None:
        """Another audit hook would run on every later event — after the verdict too, when nothing checks what
        it does (the result is still a dict then). Only the candidate adds one while the harness runs: it is
        refused (a RuntimeError from an existing hook stops the new one being added) and recorded."""
        if not self.candidate_files or getattr(self._busy, "on", False):
            return
        where = None
        self._busy.on = True
        try:
            frame = sys._getframe(2)
        finally:
            self._busy.on = False
        while frame is not None and where is None:
            if os.path.abspath(frame.f_code.co_filename) in self.candidate_files:
                where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
            frame = frame.f_back
        if where is None:
            return
        self.events.append(AuditEvent("tamper", "sys.addaudithook", where, "an audit hook of its own (refused)"))
        raise RuntimeError("kforge: audit hooks cannot be added while a candidate is judged")

    def _caller(self, process: bool = False) -> tuple[str | None, bool, bool]:
        """(nearest candidate frame as file:line, whether the candidate made the call itself, torch builder).
        process: the event starts or signals a process (torch.compile's compiler may be the one starting it).
        A frame-returning helper of the standard library called by the candidate itself counts as its own call."""
        frame = sys._getframe(3)  # 0 _caller, 1 _classify, 2 _hook, 3 whoever raised the event
        probe = frame
        while probe is not None and os.sep + "ctypes" + os.sep in probe.f_code.co_filename:
            probe = probe.f_back  # ctypes.CDLL(...) raises from inside the ctypes package
        immediate = probe is not None and os.path.abspath(probe.f_code.co_filename) in self.candidate_files
        if not immediate and probe is not None and probe.f_back is not None and _frame_helper(probe):
            immediate = os.path.abspath(probe.f_back.f_code.co_filename) in self.candidate_files
        where: str | None = None
        builder = False
        depth = 0
        if process:
            from .torch_compiler import compiler_spawned

            # torch.compile's inductor running the C++ compiler for the candidate's code, as load_inline runs ninja;
            # dynamo making the code objects of the frames it converts
            builder = compiler_spawned(frame, self.candidate_files)
        builder_file = _cpp_extension_file()
        while frame is not None and depth < 80:
            filename = frame.f_code.co_filename
            if filename == builder_file:  # torch's own file, by path (not any file of that name)
                builder = True
            if where is None and os.path.abspath(filename) in self.candidate_files:
                where = f"{os.path.basename(filename)}:{frame.f_lineno}"
            frame = frame.f_back
            depth += 1
        return where, immediate, builder

    def _new_code(self, event: str, args: tuple, where: str, immediate: bool) -> bool:
        """A code object made at run time while the candidate's code is on the stack (`code.replace`,
        `types.CodeType`, `marshal.loads`), outside torch's compiler converting a frame. A code object names its
        own file, and the audit tells the candidate's frames from torch's, the standard library's and the
        harness's by that name: code claiming another file would make a frame walk, a process start or a gc
        walk pass for someone else's. Refused when the candidate makes it itself, or when the new code names a
        real file that is not the candidate's."""
        filename = str(args[1]) if event == "code.__new__" and len(args) > 1 else ""
        foreign = bool(filename) and not filename.startswith("<") and os.path.abspath(filename) not in \
            self.candidate_files
        if not (immediate or foreign):
            return False
        named = f" naming {os.path.basename(filename)}" if filename else ""
        self.events.append(AuditEvent("tamper", event, where, f"a code object made at run time{named}: its frames "
                                      "could pass for another file's (refused)"))
        return True

    def _classify(self, event: str, args: tuple, walk: bool = False) -> bool:
        """Records the event when it is the candidate's; returns whether it must be refused: a walk over frames or
        the collector's objects made by the candidate itself — refused while the harness runs and after, when
        the verdict is decided and nothing would record it."""
        if walk and not self.active:
            where, immediate, builder = self._caller()
            return bool(where and immediate and not builder)
        if event in _PATH_EVENTS:
            paths = [os.fsdecode(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
            path = paths[0] if paths else (str(args[0]) if args else "")
            sensitive = event in _READ_EVENTS and (any(path.startswith(p) for p in _SENSITIVE_PATHS) or
                                                   _other_process(path))
            foreign = [p for p in paths if compiler_cache.is_foreign(p)]
            if not sensitive and not foreign:
                return False
            where, _, builder = self._caller()
            if where and not builder:
                self.events.append(AuditEvent("tamper", event, where, path if not foreign else (
                    f"{foreign[0]} (a private compiler cache of another process: the clean reference process "
                    "loads the code compiled there)")))
            return False
        process = event in _PROCESS_EVENTS or event.startswith(("os.exec", "os.spawn"))
        where, immediate, builder = self._caller(process or event in _CODE_EVENTS)
        if where is None or builder:
            return False
        if event in _CODE_EVENTS:
            return self._new_code(event, args, where, immediate)
        if event in _PROCESS_EVENTS or event.startswith(("os.exec", "os.spawn")):
            self.events.append(AuditEvent("evasion", event, where, _short(args)))
            return False
        if not immediate:
            return False  # torch, warnings, dataclasses... walk frames and compile code on the candidate's behalf
        if event == "object.__getattr__":
            self.events.append(AuditEvent("tamper", "frame access", where, f".{args[1]} (a stack frame: its f_back "
                                          "chain reaches the harness's frames and locals; refused)"))
            return True
        if event == "exec":
            code = args[0] if args else None
            if not str(getattr(code, "co_filename", "")).startswith("<"):
                return False  # executing a module being imported, not a string
        if event == "compile" and len(args) > 1 and not str(args[1]).startswith("<"):
            if os.path.abspath(str(args[1])) in self.candidate_files:
                return False
            self.events.append(AuditEvent("tamper", event, where, f"code compiled under another file's name "
                                          f"({os.path.basename(str(args[1]))}): its frames would pass for that "
                                          "file's (refused)"))
            return True
        if event in ("object.__setattr__", "object.__delattr__"):
            target = args[0] if args else None
            owner = target.__name__ if isinstance(target, ModuleType) else getattr(target, "__module__", "")
            if not isinstance(target, (type, ModuleType)) or not _important_module(str(owner)):
                return False  # the candidate's own classes may set their own attributes
        detail = _short(args) + (" (refused)" if walk else "")
        self.events.append(AuditEvent(_CALLER_EVENTS[event], event, where, detail))
        return walk


def _cpp_extension_file() -> str | None:
    module = sys.modules.get("torch.utils.cpp_extension")
    path = getattr(module, "__file__", None) if module is not None else None
    return path and os.path.abspath(path)


def _frame_helper(frame: Any) -> bool:
    """Whether `frame` runs in a standard-library module whose functions hand back stack frames."""
    return frame.f_globals.get("__name__", "") in _FRAME_HELPER_MODULES


def _short(args: tuple) -> str:
    text = ", ".join(repr(a) for a in args)
    return text if len(text) <= 100 else text[:97] + "..."


# ---------------------------------------------------------------------------------------- threads, fds
@dataclass
class ThreadCount:
    python: int
    native: int
    names: list[str]
    idents: frozenset[int] = frozenset()  # the threads' idents (a name can be copied, an ident is the thread's)

    @classmethod
    def now(cls) -> ThreadCount:
        python = _thread._count() if _thread is not None and hasattr(_thread, "_count") else threading.active_count() - 1
        try:
            native = len(os.listdir("/proc/self/task"))
        except OSError:
            native = -1
        threads = threading.enumerate()
        return cls(python, native, sorted(t.name for t in threads), frozenset(t.ident for t in threads))


def native_threads() -> set[int]:
    """The ids of every OS thread of this process (/proc/self/task): Python's, torch's pools, and any a
    native extension started, which Python's threading never sees. Empty where /proc is absent."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def thread_name(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def lingering_threads(before: set[int], timeout: float = 0.25) -> dict[int, str]:
    """Threads that did not exist in `before` and are still running after up to `timeout` seconds:
    threads that were joined take a few milliseconds to leave /proc (and an OpenMP team started by a
    short-lived worker thread leaves with it), so only what stays is reported, with its name."""
    import time

    deadline = time.perf_counter() + timeout
    while True:
        extra = native_threads() - before if before else set()
        if not extra or time.perf_counter() >= deadline:
            return {tid: thread_name(tid) for tid in sorted(extra)}
        time.sleep(0.005)


def open_descriptors() -> dict[int, bool]:
    """fd -> inheritable, for every open descriptor of this process."""
    out: dict[int, bool] = {}
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        return out
    for fd in fds:
        try:
            out[fd] = os.get_inheritable(fd)
        except OSError:
            continue
    return out
