"""Records the candidate's own ``load_inline``/``load`` calls: time, success, full compiler output.

torch runs ninja with the *process's* fd 1 (``stdout=1``) when verbose, so the compiler output never
passes through Python's sys.stdout: we redirect fds 1 and 2 into a file around each call. Exceptions
raised from inside a wrapped call are remembered so the pipeline can say compile_error (with the first
compiler diagnostics) instead of a Python traceback, whatever stage the call happened in.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import exception_chain, exception_headline
from .extension_patch import CppExtensionPatch

_LOG_LIMIT = 64_000
_DIAGNOSTIC = re.compile(r"(\berror\b|undefined reference|undefined symbol|cannot find -l)", re.IGNORECASE)
# Compiler command lines name flags such as -Werror; they are not diagnostics.
_COMMAND = re.compile(r"^\s*(\[\d+/\d+\]\s|FAILED:|(\S*/)?(c\+\+|g\+\+|gcc|clang\+\+|nvcc)\s)")
_GCC_SOURCE_LINE = re.compile(r"^\s*\d+\s*\|")


def extension_dir(cache_dir: str, candidate_source: bytes, torch_version: str, cuda_version: str | None) -> str:
    """Content-keyed TORCH_EXTENSIONS_DIR: same source and toolchain → same directory → no rebuild."""
    key = hashlib.sha256()
    for part in (candidate_source, torch_version.encode(), (cuda_version or "cpu").encode()):
        key.update(part)
        key.update(b"\0")
    return os.path.join(cache_dir, "torch_extensions", key.hexdigest()[:20])


@contextlib.contextmanager
def capture_fds() -> Iterator[Callable[[], str]]:
    """Sends fds 1 and 2 to a temporary file for the block; yields a function returning what was written."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    text = {"value": ""}
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield lambda: text["value"]
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sink.seek(0)
            text["value"] = sink.read().decode("utf-8", errors="replace")


def clip_log(log: str, limit: int = _LOG_LIMIT) -> str:
    """Keeps the head (command lines) and the tail (where builds fail) of a long log."""
    if len(log) <= limit:
        return log
    head = limit // 4
    return log[:head] + f"\n… [{len(log) - limit} characters cut] …\n" + log[-(limit - head) :]


def first_diagnostics(log: str, limit: int = 6) -> list[str]:
    """The compiler's first error lines (with gcc's source-line echo), paths cut to the file name."""
    out: list[str] = []
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if len(out) >= limit:
            break
        if not _DIAGNOSTIC.search(line) or _COMMAND.match(line) or "-Werror" in line:
            continue
        short = re.sub(r"(/[^\s:()]+/)([^/\s:()]+)", r"\2", line.strip())
        if short in out:
            continue
        out.append(short)
        if i + 1 < len(lines) and _GCC_SOURCE_LINE.match(lines[i + 1]) and len(out) < limit:
            out.append(lines[i + 1].rstrip())
    return out


@dataclass
class CompileCall:
    name: str
    seconds: float
    ok: bool
    log: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "seconds": self.seconds, "ok": self.ok, "log": self.log}


@dataclass
class CompileRecorder(CppExtensionPatch):
    """Wraps torch.utils.cpp_extension.load_inline/load while installed; restores them on uninstall."""

    on_start: Callable[[str], None] = lambda name: None
    on_end: Callable[[CompileCall], None] = lambda call: None
    calls: list[CompileCall] = field(default_factory=list)
    _failures: list[tuple[BaseException, CompileCall]] = field(default_factory=list)
    _originals: dict[str, Callable[..., Any]] = field(default_factory=dict)
    _depth: int = 0

    def _wrap(self, fn_name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._depth:  # a nested call (load_inline → load in some versions) is one build
                return original(*args, **kwargs)
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                bound = None
            if bound is not None and "verbose" in signature.parameters:
                bound.arguments["verbose"] = True  # ninja then writes the compiler output to fd 1
            name = str(bound.arguments.get("name", "?")) if bound is not None else "?"
            self.on_start(name)
            started = time.perf_counter()
            error: BaseException | None = None
            value: Any = None
            self._depth += 1
            try:
                with capture_fds() as captured:
                    try:
                        value = original(*bound.args, **bound.kwargs) if bound else original(*args, **kwargs)
                    except BaseException as exc:  # noqa: BLE001 — recorded, then re-raised unchanged
                        error = exc
            finally:
                self._depth -= 1
            log = captured()
            if log:
                sys.stderr.write(log if log.endswith("\n") else log + "\n")
            if error is not None:
                log = (log + "\n" if log else "") + exception_headline(error)
            call = CompileCall(f"{fn_name}:{name}", time.perf_counter() - started, error is None, clip_log(log))
            self.calls.append(call)
            self.on_end(call)
            if error is not None:
                self._failures.append((error, call))
                raise error
            return value

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__doc__ = original.__doc__
        return wrapper

    def failure_for(self, exc: BaseException) -> CompileCall | None:
        """The failed compile call this exception came from (directly or as its cause/context), if any."""
        for link in exception_chain(exc):
            for failed, call in self._failures:
                if failed is link:
                    return call
        return None

    def reason_for(self, call: CompileCall) -> str:
        """compile_error's reason: which build failed and the compiler's first diagnostics."""
        diagnostics = first_diagnostics(call.log)
        if not diagnostics:
            tail = [ln for ln in call.log.splitlines() if ln.strip()][-3:]
            diagnostics = tail or ["(no compiler output)"]
        # The first diagnostic leads: a one-line view (the terminal table) should show the cause itself.
        first, *rest = diagnostics
        return "\n".join([f"{first}  [{call.name} failed after {call.seconds:.1f}s]", *rest])
