"""``python -m kforge_worker --build FILE --cache-dir DIR``: compiles an emitted ModelNew's extension into the
content-keyed extension folder the eval worker will look in (compile_capture.extension_dir), so a suite's
compiles can run in parallel on the CPU cores before the GPU verifies and times each file. Prints one JSON
line: {"ok": bool, "seconds": float, "error": str | null, "libraries": {relative path: sha256} | null}.

A suite passes ``--source-stdin`` (the code as the CLI read it, built in the file's place, as the worker judges it)
and ``--since MS`` (when the suite started): a folder holding files changed since by no build the suite recorded is
not built on (extension_cache.py); the worker then builds afresh and says so. ``libraries`` is what the build left,
which the CLI holds for the worker to check before its import.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def build(path: str, cache_dir: str, given: str | None = None, since_ms: float | None = None) -> dict:
    import torch

    from .compile_capture import extension_dir
    from .environment import ensure_tools_on_path
    from .extension_cache import manifest, suspects
    from .loading import import_path

    ensure_tools_on_path()  # the worker's ninja: another one writes another build log and the worker rebuilds

    if given is None:
        with open(path, "rb") as f:
            source = f.read()
    else:
        source = given.encode("utf-8")
    ext_dir = extension_dir(cache_dir, source, torch.__version__, torch.version.cuda)
    if since_ms is not None and (found := suspects(ext_dir, None, since_ms)):
        return {"ok": False, "seconds": 0.0, "libraries": None,
                "error": f"its extension folder was changed during this suite ({found[0]}): not built on"}
    os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir
    start = time.perf_counter()
    try:
        module = import_path(path, "candidate", given)
        # _kf_build_all builds every extension of the file (generated regions and recipes); older files: _kf_ext.
        build_all = getattr(module, "_kf_build_all", None) or getattr(module, "_kf_ext", None)
        if build_all is not None:
            build_all()
        return {"ok": True, "seconds": time.perf_counter() - start, "error": None, "libraries": manifest(ext_dir)}
    except Exception as exc:  # noqa: BLE001 — reported; the eval that follows gives the full verdict
        lines = str(exc).strip().splitlines()
        return {"ok": False, "seconds": time.perf_counter() - start, "libraries": manifest(ext_dir),
                "error": f"{type(exc).__name__}: {' | '.join(lines[-4:])}"[:600]}


def _exit_on_terminate(signum: int, _frame: object) -> None:
    # Unwinds through torch's build, whose `finally` removes the build folder's lock: killed outright, the lock
    # stays, and every later build of the same file waits on it for ever.
    raise SystemExit(128 + signum)


def main(path: str, cache_dir: str, source_stdin: bool = False, since_ms: float | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_terminate)
    given = sys.stdin.read() if source_stdin else None
    real_stdout = os.dup(1)
    os.dup2(2, 1)  # compiler chatter to stderr; the JSON line alone on stdout
    try:
        result = build(path, cache_dir, given, since_ms)
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
        os.close(real_stdout)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0
