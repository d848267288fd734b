"""A prebuild terminated mid-build (kforge stops builds it no longer needs) leaves no lock in the content-keyed
build folder: a lock left behind would make every later build of the same file wait on it for ever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import CANDIDATES, PYTHON_DIR


def _locks(root: Path) -> list[Path]:
    return list(root.rglob("lock"))


def test_terminated_build_releases_its_lock(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kforge_worker", "--build", str(CANDIDATES / "add_cpp_ok.py"), "--cache-dir", str(cache)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not _locks(cache) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _locks(cache), "the build never took its folder's lock (finished or failed before it could be stopped)"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert _locks(cache) == [], "the lock stayed behind"
