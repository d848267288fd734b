"""The private protocol channel: WorkerMessages go to a dup of the original stdout, nothing else does.

Candidates print, compilers print, CUDA libraries print — all of it to fd 1. The CLI parses our stdout
line by line, so before any foreign code runs we keep a private duplicate of fd 1 for protocol messages
and point fd 1 (and ``sys.stdout``) at stderr, where everything else belongs.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any, TextIO


def json_safe(value: Any) -> Any:
    """Replaces NaN/Inf (not valid JSON, and the TS side uses z.number()) with null, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def encode_line(message: dict[str, Any]) -> str:
    """One protocol message as one line of strict JSON."""
    return json.dumps(json_safe(message), allow_nan=False, separators=(",", ":"), ensure_ascii=False)


class Channel:
    """Writes protocol messages, one JSON object per line, and remembers whether the result went out."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.result_sent = False
        # The request's per-run nonce, stamped on every message so the CLI can tell ours from forgeries.
        self.nonce: str | None = None

    def stamp(self, message: dict[str, Any]) -> dict[str, Any]:
        return message if self.nonce is None else {**message, "nonce": self.nonce}

    def send(self, message: dict[str, Any]) -> None:
        self._stream.write(encode_line(self.stamp(message)) + "\n")
        self._stream.flush()

    def progress(self, stage: str, detail: str, fraction: float | None = None) -> None:
        if fraction is not None:
            fraction = min(1.0, max(0.0, float(fraction)))
        self.send({"type": "progress", "stage": stage, "detail": detail, "fraction": fraction})

    def result(self, result: dict[str, Any]) -> None:
        """Sends the single ResultMessage; a second call is a worker bug and is refused."""
        if self.result_sent:
            raise RuntimeError("kforge_worker: result already sent")
        self.send({"type": "result", "result": result})
        self.result_sent = True


class NullChannel(Channel):
    """A channel that collects messages in memory (unit tests, in-process use)."""

    def __init__(self) -> None:
        super().__init__(stream=None)  # type: ignore[arg-type]
        self.messages: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        message = self.stamp(message)
        json.loads(encode_line(message))  # same strictness as the real channel
        self.messages.append(message)


def open_private_channel() -> Channel:
    """Keeps a private dup of fd 1 for the protocol and sends fd 1 and sys.stdout to stderr.

    The dup is non-inheritable (Python's default), so compiler subprocesses and anything the candidate
    spawns cannot write protocol lines.
    """
    sys.stdout.flush()
    private_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stream = os.fdopen(private_fd, "w", encoding="utf-8", buffering=1)
    return Channel(stream)
