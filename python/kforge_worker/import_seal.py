"""The clean reference process loads no code written after the worker started it.

The worker starts the reference process before it imports the candidate and stamps the time in its environment
(``KFORGE_IMPORT_SEAL_NS``). The candidate can still write files: a module shadowing one the reference process imports
later (its working directory is on its sys.path under ``python -m``), a file inside a package (the worker's
fingerprint reads only the top level of each sys.path entry), or a bytecode cache (``__pycache__/*.pyc``, read
whenever its header matches the source's time and size: a forged one runs whatever it holds). The reference process
imports lazily while the candidate runs — torch's own submodules while it is still starting, the judge's
``statistics`` at its end — so any of those files would run inside the process that judges the candidate.

``install()`` puts a finder first on ``sys.meta_path``, before anything else is imported. It asks the other finders
for each import as Python would, then vets the file the spec names: a module whose source, extension or sourceless
bytecode changed (change time) at or after the seal is refused (``ImportError``) and recorded in ``REFUSED``; a
bytecode cache written since the seal is never read — the module is compiled from its own, older, source. A file's
change time cannot be set back from user space (``os.utime`` moves it to now), so no ordering trick hides a write.
The judge fails the run on a refusal (reference_process.serve).

At the end of the run ``seal_audit`` asks whether any file it let in was written afterwards (the next run's reference
process would load it: a forged cache beside an old source is older than the next seal).

Not covered: code loaded outside the import system (``ctypes``, ``torch.ops.load_library``, ``exec`` of a file),
which the reference process does not do for a problem that does not do it itself; files written before the worker
started the reference process (another candidate's, in a suite: the worker's fingerprint of its sys.path catches the
writer at its top level).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

ENV = "KFORGE_IMPORT_SEAL_NS"
# File times come from the kernel's coarse clock (a tick behind the one the seal was read from): a file written this
# long before the seal may read as written after it. Its only effect on an honest run is a module compiled from
# source (a bytecode cache the worker wrote as both processes started cold) or, for a source file edited in that
# instant before the run, a refusal.
SLACK_NS = 50_000_000

REFUSED: list[str] = []


class _FromSource(importlib.machinery.SourceFileLoader):
    """A source module whose bytecode cache is newer than the seal: compiled from its source, the cache unread."""

    def get_code(self, fullname: str) -> Any:
        return self.source_to_code(self.get_data(self.path), self.path)


class ImportSeal:
    def __init__(self, sealed_ns: int, on_refuse: Callable[[str], None] | None = None) -> None:
        self.sealed_ns = sealed_ns
        self.on_refuse = on_refuse
        self._local = threading.local()
        # (file the module was loaded from, the bytecode cache beside it) of every import let in: what the next run's
        # reference process loads again, audited at the end (seal_audit.py)
        self.let_in: dict[str, str | None] = {}

    def _new(self, path: str | None) -> bool:
        if not path:
            return False
        try:
            st = os.stat(path)
        except OSError:
            return False
        return max(st.st_ctime_ns, st.st_mtime_ns) >= self.sealed_ns - SLACK_NS

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if getattr(self._local, "busy", False):
            return None
        self._local.busy = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
        finally:
            self._local.busy = False
        if spec is None:
            return None
        origin = spec.origin if spec.has_location else None
        if self._new(origin):
            why = (f"{origin} (module {name}) was written after the worker started the reference process, while the "
                   "candidate could run: the reference process refused to import it")
            REFUSED.append(why)
            if self.on_refuse is not None:
                self.on_refuse(why)
            raise ImportError(why, name=name)
        if isinstance(spec.loader, importlib.machinery.SourceFileLoader) and self._new(spec.cached):
            spec.loader = _FromSource(spec.loader.name, spec.loader.path)
        if origin:
            self.let_in[origin] = spec.cached if isinstance(spec.loader, importlib.machinery.SourceFileLoader) else None
        return spec


_SEAL: ImportSeal | None = None


def install(sealed_ns: int | None = None) -> ImportSeal | None:
    """The seal first on sys.meta_path, at the worker's stamp (the environment's), or None without one."""
    global _SEAL
    if sealed_ns is None:
        try:
            sealed_ns = int(os.environ.get(ENV, ""))
        except ValueError:
            return None
    if _SEAL is None:
        _SEAL = ImportSeal(sealed_ns)
        _SEAL.let_in.update(loaded_before())
        sys.meta_path.insert(0, _SEAL)
    return _SEAL


def loaded_before() -> dict[str, str | None]:
    """(file, cache) of the modules already imported: at install, those the interpreter imports at its start
    (encodings, what a site-packages .pth imports), which every later Python process runs before anything of its
    own — the next reference process before its seal."""
    out: dict[str, str | None] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.isabs(path):
            cached = getattr(module, "__cached__", None)
            out[path] = cached if isinstance(cached, str) else None
    return out


def report_to(on_refuse: Callable[[str], None]) -> None:
    """Every refusal so far and every later one to ``on_refuse`` (the judge's failure)."""
    for why in REFUSED:
        on_refuse(why)
    if _SEAL is not None:
        _SEAL.on_refuse = on_refuse
