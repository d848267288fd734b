"""Harness integrity: what the candidate must not touch, observed from inside the worker process.

* `IntegritySnapshot` records the identity of every function the harness relies on (torch's compare,
  timing and random functions, torch.Tensor's methods, time.*, the worker's own modules), the module table
  and PyTorch's global precision flags before the candidate is imported, and diffs them after each stage.
  Class and module dictionaries are read raw (`vars`), so classmethod re-binding is not mistaken for a patch.
* `AuditMonitor` is a PEP 578 audit hook (it cannot be removed once added): while candidate code runs it
  records process spawns, ctypes loads, frame and gc walks, reads of /proc/self/{environ,fd,mem}, class
  patching — each attributed to the candidate only when the candidate's file is the calling frame (or on
  the stack for process spawns that do not come from torch's own extension builder).
* Thread and descriptor counts before/after.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

try:
    import _thread
except ImportError:  # pragma: no cover
    _thread = None  # type: ignore[assignment]

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
)
# The worker legitimately wraps these (compile capture); the extension wrapper below also does.
_EXEMPT = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load", "sys.stdout", "sys.stderr"}


def _precision_flags() -> dict[str, Any]:
    import torch

    flags: dict[str, Any] = {
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "torch.get_default_dtype()": str(torch.get_default_dtype()),
        "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled(),
        "torch.is_grad_enabled()": torch.is_grad_enabled(),
        "torch.get_num_threads()": torch.get_num_threads(),
    }
    matmul = torch.backends.cuda.matmul
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        try:
            flags[f"torch.backends.cuda.matmul.{name}"] = getattr(matmul, name)
        except Exception:  # noqa: BLE001 — flag absent in this build
            pass
    cudnn = torch.backends.cudnn
    for name in ("allow_tf32", "enabled", "benchmark", "deterministic"):
        try:
            flags[f"torch.backends.cudnn.{name}"] = getattr(cudnn, name)
        except Exception:  # noqa: BLE001
            pass
    try:
        flags["torch function modes"] = torch._C._len_torch_function_stack()
    except Exception:  # noqa: BLE001
        pass
    try:
        from torch.utils._python_dispatch import _len_torch_dispatch_stack

        flags["torch dispatch modes"] = _len_torch_dispatch_stack()
    except Exception:  # noqa: BLE001
        pass
    flags["sys.gettrace()"] = repr(sys.gettrace())
    flags["sys.getprofile()"] = repr(sys.getprofile())
    return flags


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


@dataclass
class IntegritySnapshot:
    functions: dict[str, tuple[Any, int]] = field(default_factory=dict)  # qualified name -> (object, id)
    modules: dict[str, int] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def take(cls, extra_modules: tuple[str, ...] = ()) -> IntegritySnapshot:
        snap = cls()
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
        snap.modules = {name: id(mod) for name, mod in list(sys.modules.items()) if mod is not None}
        snap.flags = _precision_flags()
        return snap

    def diff(self) -> list[str]:
        """What changed since the snapshot: replaced functions, replaced or removed modules, flipped flags."""
        problems: list[str] = []
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
            elif now is not value and not _torch_own_wrapper(now, value):
                problems.append(f"{qual} was replaced by {_describe(now)}")
        for name, ident in self.modules.items():
            module = current_modules.get(name)
            if module is None:
                if name in current_modules or not name.startswith(("kforge_candidate", "__mp_main__")):
                    if _important_module(name):
                        problems.append(f"sys.modules[{name!r}] was removed")
            elif id(module) != ident and _important_module(name):
                problems.append(f"sys.modules[{name!r}] was replaced by {_describe(module)}")
        now_flags = _precision_flags()
        for key, before in self.flags.items():
            after = now_flags.get(key)
            if after != before:
                problems.append(f"{key} changed from {before!r} to {after!r}")
        return problems


_MISSING = object()


def _torch_own_wrapper(now: Any, original: Any) -> bool:
    """torch wraps some functions lazily on first use (e.g. dynamo's disable wrapper around manual_seed):
    allowed when the new function's code lives in torch's own package and it wraps the original."""
    import torch

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    code = getattr(now, "__code__", None)
    if code is None or not os.path.abspath(code.co_filename).startswith(torch_dir + os.sep):
        return False
    seen = 0
    probe = now
    while probe is not None and seen < 8:
        if probe is original:
            return True
        probe = getattr(probe, "__wrapped__", None)
        seen += 1
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
_SENSITIVE_PATHS = ("/proc/self/environ", "/proc/self/fd", "/proc/self/mem", "/proc/self/maps", "/dev/fd",
                    "/proc/self/task", "/dev/stdout", "/proc/" + str(os.getpid()))


@dataclass
class AuditEvent:
    kind: str  # tamper | evasion | thread
    event: str
    where: str
    detail: str

    def render(self) -> str:
        return f"{self.where}: {self.event} {self.detail}".strip()


class AuditMonitor:
    """Records sensitive events raised while candidate code is on the stack. One per process."""

    _instance: AuditMonitor | None = None

    def __init__(self) -> None:
        self.candidate_files: set[str] = set()
        self.events: list[AuditEvent] = []
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
        if not self.active or getattr(self._busy, "on", False):
            return
        if event not in _CALLER_EVENTS and event not in _PROCESS_EVENTS and event not in ("open", "os.listdir",
                                                                                            "os.scandir"):
            if not (event.startswith("os.exec") or event.startswith("os.spawn")):
                return
        self._busy.on = True
        try:
            self._classify(event, args)
        except Exception:  # noqa: BLE001 — the hook must never break the candidate or the harness
            pass
        finally:
            self._busy.on = False

    def _caller(self) -> tuple[str | None, bool, bool]:
        """(nearest candidate frame as file:line, whether the candidate made the call itself, torch builder)."""
        frame = sys._getframe(3)  # 0 _caller, 1 _classify, 2 _hook, 3 whoever raised the event
        probe = frame
        while probe is not None and os.sep + "ctypes" + os.sep in probe.f_code.co_filename:
            probe = probe.f_back  # ctypes.CDLL(...) raises from inside the ctypes package
        immediate = probe is not None and os.path.abspath(probe.f_code.co_filename) in self.candidate_files
        where: str | None = None
        builder = False
        depth = 0
        while frame is not None and depth < 80:
            filename = frame.f_code.co_filename
            if filename.endswith("cpp_extension.py"):
                builder = True
            if where is None and os.path.abspath(filename) in self.candidate_files:
                where = f"{os.path.basename(filename)}:{frame.f_lineno}"
            frame = frame.f_back
            depth += 1
        return where, immediate, builder

    def _classify(self, event: str, args: tuple) -> None:
        if event in ("open", "os.listdir", "os.scandir"):
            path = str(args[0]) if args else ""
            if not any(path.startswith(p) for p in _SENSITIVE_PATHS):
                return
            where, _, builder = self._caller()
            if where and not builder:
                self.events.append(AuditEvent("tamper", event, where, path))
            return
        where, immediate, builder = self._caller()
        if where is None or builder:
            return
        if event in _PROCESS_EVENTS or event.startswith(("os.exec", "os.spawn")):
            self.events.append(AuditEvent("evasion", event, where, _short(args)))
            return
        if not immediate:
            return  # torch, warnings, dataclasses... walk frames and compile code on the candidate's behalf
        if event == "exec":
            code = args[0] if args else None
            if not str(getattr(code, "co_filename", "")).startswith("<"):
                return  # executing a module being imported, not a string
        if event == "compile" and len(args) > 1 and not str(args[1]).startswith("<"):
            return
        if event in ("object.__setattr__", "object.__delattr__"):
            target = args[0] if args else None
            owner = target.__name__ if isinstance(target, ModuleType) else getattr(target, "__module__", "")
            if not isinstance(target, (type, ModuleType)) or not _important_module(str(owner)):
                return  # the candidate's own classes may set their own attributes
        self.events.append(AuditEvent(_CALLER_EVENTS[event], event, where, _short(args)))


def _short(args: tuple) -> str:
    text = ", ".join(repr(a) for a in args)
    return text if len(text) <= 100 else text[:97] + "..."


# ---------------------------------------------------------------------------------------- threads, fds
@dataclass
class ThreadCount:
    python: int
    native: int
    names: list[str]

    @classmethod
    def now(cls) -> ThreadCount:
        python = _thread._count() if _thread is not None and hasattr(_thread, "_count") else threading.active_count() - 1
        try:
            native = len(os.listdir("/proc/self/task"))
        except OSError:
            native = -1
        names = sorted(t.name for t in threading.enumerate())
        return cls(python, native, names)


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
