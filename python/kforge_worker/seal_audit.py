"""At the end of a run, the files the clean reference process loaded its code from are the ones it found.

The import seal (import_seal.py) keeps code written while the candidate could run out of *this* reference process.
A file written then is older than the *next* run's seal, though, and every later reference process — whoever's
candidate it judges — would load it: a module's source, an extension, or the bytecode cache beside a source, which
Python runs instead of the source whenever its header holds the source's time and size (red team round 9: a
problem's helper module cached with its ReLU taken out, so the next run's reference, in both processes, had none).

``findings(seal)`` rereads, at the judge's end, every file the seal let in (and those of the modules the interpreter
imported before the seal existed) and the cache beside each source, and every cache of kforge_worker's own sources
(the worker imports checks this process never loads):
- a loaded file written since the seal: named (the next run loads it);
- a cache written since the seal is named and removed when a later import would run it (its header validates
  against the source) and its code is not the compilation of that source. Python writes an honest one (a module
  imported for the first time) with exactly that code, so a cache written by an honest run is left alone;
- an executable file this process has mapped (a shared library) that another file has replaced since.
Content, not names: whatever module or library was chosen, the next run meets only what its sources say.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
from typing import Any


def findings(seal: Any) -> list[str]:
    """Why the code the reference process loaded would not be the same for the next run (empty: it would be)."""
    out: list[str] = []
    let_in = dict(seal.let_in)
    for origin in let_in:
        if seal._new(origin):
            out.append(f"{origin}, loaded by the clean reference process, was written while the candidate could run: "
                       "every later run's reference process loads it")
    # a source written since is named above (or, for the harness's own, by the worker's fingerprint of its sources)
    for origin, cached in (_harness_modules() | let_in).items():
        if cached and not seal._new(origin) and seal._new(cached) and _runs_instead_of(cached, origin):
            removed = _remove(cached)
            out.append(f"{cached} was written while the candidate could run and holds code that is not the "
                       f"compilation of {os.path.basename(origin)}, which later processes would run in its place"
                       f"{' (removed)' if removed else ''}")
    out += _replaced_mappings()
    return out


def _harness_modules() -> dict[str, str | None]:
    """Every source of kforge_worker with the cache beside it, loaded here or not: the next run's worker imports the
    checks themselves from these (a forged one would blind them there), and this process is the only one the
    candidate cannot reach to read them after it."""
    root = os.path.dirname(os.path.abspath(__file__))
    out: dict[str, str | None] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                out[path] = importlib.util.cache_from_source(path)
    return out


def _runs_instead_of(cached: str, source: str) -> bool:
    """Whether a later import of ``source`` would run this cache (its header validates) and its code differs from
    the compilation of the source."""
    try:
        with open(cached, "rb") as f:
            data = f.read()
        with open(source, "rb") as f:
            text = f.read()
        st = os.stat(source)
    except OSError:
        return False
    if len(data) < 16 or data[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(data[4:8], "little")
    if flags & ~0b11:
        return False
    if flags == 0 and (int.from_bytes(data[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF
                       or int.from_bytes(data[12:16], "little") != st.st_size & 0xFFFFFFFF):
        return False  # stale: Python recompiles instead
    if flags & 0b10 and data[8:16] != importlib.util.source_hash(text):
        return False  # a checked hash that no longer matches: recompiled too
    try:
        code = marshal.loads(data[16:])
        expected = compile(text, source, "exec", dont_inherit=True)
    except (ValueError, EOFError, TypeError, SyntaxError):
        return False
    return code != expected


def _remove(path: str) -> bool:
    try:
        os.remove(path)
        return True
    except OSError:
        return False


def _replaced_mappings() -> list[str]:
    """Executable file mappings of this process whose file was unlinked since (``(deleted)``): a library replaced on
    disk (a new file renamed over it) after it was loaded, which every later process loads instead. Inode numbers
    are not compared: on an overlay file system the mapping's and the path's differ for an untouched file."""
    out: list[str] = []
    seen: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].rstrip("\n")
        if not path.startswith("/") or path.startswith(("/memfd:", "/dev/")) or not path.endswith(" (deleted)"):
            continue
        path = path.removesuffix(" (deleted)")
        if os.path.exists(path) and path not in seen:
            seen.add(path)
            out.append(f"{path}, mapped executable by the clean reference process, was replaced on disk after it "
                       "was loaded: every later run loads the new file")
    return out
