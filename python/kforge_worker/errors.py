"""Short, useful failure reasons: the exception's message and the traceback's last relevant frames.

A reason is read by a person in a terminal table and by an LLM fixing its answer, so it must name the
cause and the candidate's own line, not torch's module plumbing or this worker's frames.
"""

from __future__ import annotations

import os
import traceback

_WORKER_DIR = os.path.dirname(os.path.abspath(__file__))
# nn.Module's call plumbing appears in every forward traceback and says nothing.
_NOISE = (os.path.join("torch", "nn", "modules", "module.py"),)
_MAX_MESSAGE_LINES = 4
# Advice torch appends to every CUDA error; it pushes the actual cause out of a short reason.
_BOILERPLATE = (
    "CUDA kernel errors might be asynchronously reported",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA`",
    "Search for `cuda",
)
_MAX_LINE = 300


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + "…"


def exception_headline(exc: BaseException) -> str:
    """``Type: message`` with the message cut to its first few non-empty lines."""
    name = type(exc).__name__
    if isinstance(exc, SyntaxError):
        where = f"{os.path.basename(exc.filename or '?')}, line {exc.lineno}"
        text = f"\n    {exc.text.strip()}" if exc.text else ""
        return f"{name}: {exc.msg} ({where}){text}"
    lines = [
        ln.rstrip() for ln in str(exc).splitlines() if ln.strip() and not ln.strip().startswith(_BOILERPLATE)
    ]
    if not lines:
        return name
    head = [_clip(ln) for ln in lines[:_MAX_MESSAGE_LINES]]
    more = " …" if len(lines) > _MAX_MESSAGE_LINES else ""
    return f"{name}: " + "\n".join(head) + more


def relevant_frames(exc: BaseException, limit: int = 4) -> list[traceback.FrameSummary]:
    """The innermost frames outside this worker and nn.Module's call plumbing."""
    frames = traceback.extract_tb(exc.__traceback__)
    kept = [
        f
        for f in frames
        if not os.path.abspath(f.filename).startswith(_WORKER_DIR + os.sep)
        and not any(f.filename.endswith(n) for n in _NOISE)
        and not f.filename.startswith("<frozen ")  # importlib's machinery around a module's exec
    ]
    return kept[-limit:]


def summarize_exception(exc: BaseException, limit: int = 4) -> str:
    """The message first, then ``file:line in function: code`` for the last relevant frames."""
    lines = [exception_headline(exc)]
    for frame in relevant_frames(exc, limit):
        code = f": {frame.line.strip()}" if frame.line else ""
        lines.append(_clip(f"  at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}{code}"))
    return "\n".join(lines)


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception and everything it was raised from or during, without cycles."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen
