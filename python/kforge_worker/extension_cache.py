"""Whether a candidate's extension folder holds what this suite's builds left there, checked before the candidate runs.

The extension cache (compile_capture.extension_dir) is keyed on a candidate's code and shared by every candidate of a
suite and every later run. A candidate's code can write into another's folder (truncate or replace a built ``.so``,
an object file, and put its mtime back): ninja then finds nothing to rebuild and the victim loads the writer's bytes
(adv_suite_extension_poison, bench/verify/NOTES.md). The CLI holds, in memory, what each build of the suite left
(``manifest``: sha256 of every file, from the prebuild's or the worker's own report) and the time the suite started;
before the import, ``guard`` finds the files nobody vouches for:

- a file whose bytes differ from what this suite's build of the same code left;
- a file the suite has no record of that changed after the suite started: its ctime, which ``utime`` cannot put back
  (builds of earlier runs, unchanged since, are trusted as before).

Any such file: the candidate builds in a fresh folder, and the worker says so (naming the files, not the candidate:
the writer is another candidate, or another run). Nothing here reads any candidate's code.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from typing import Any

# Build bookkeeping that only decides what ninja rebuilds (from files checked here) and torch's build lock.
_BOOKKEEPING = {".ninja_log", ".ninja_deps", "lock"}


def _files(ext_dir: str) -> dict[str, os.stat_result]:
    """Every entry under ext_dir but folders and bookkeeping, by path relative to it (lstat: links are not followed)."""
    found: dict[str, os.stat_result] = {}
    for root, dirs, names in os.walk(ext_dir):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            if name in _BOOKKEEPING:
                continue
            path = os.path.join(root, name)
            try:
                found[os.path.relpath(path, ext_dir)] = os.lstat(path)
            except OSError:
                continue  # gone meanwhile (a concurrent build's temporary file)
    return found


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest(ext_dir: str) -> dict[str, str]:
    """sha256 of every regular file the builds left under ext_dir (relative path → hex); {} when there is none."""
    out: dict[str, str] = {}
    for rel, st in sorted(_files(ext_dir).items()):
        if stat.S_ISREG(st.st_mode):
            try:
                out[rel] = _sha256(os.path.join(ext_dir, rel))
            except OSError:
                continue
    return out


def suspects(ext_dir: str, libraries: dict[str, str] | None, since_ms: float) -> list[str]:
    """The files under ext_dir this suite cannot vouch for, each with why (see the module's docstring)."""
    out: list[str] = []
    recorded = libraries or {}
    for rel, st in sorted(_files(ext_dir).items()):
        if not stat.S_ISREG(st.st_mode):
            out.append(f"{rel} (not a regular file)")
        elif rel in recorded:
            try:
                same = _sha256(os.path.join(ext_dir, rel)) == recorded[rel]
            except OSError:
                same = False
            if not same:
                out.append(f"{rel} (its bytes differ from what this suite's build left)")
        elif st.st_ctime_ns / 1e6 >= since_ms:
            out.append(f"{rel} (changed after the suite started, by no build it recorded)")
    return out


def guard(ext_dir: str, expectation: dict[str, Any] | None) -> tuple[str, list[str]]:
    """The folder to build and load the candidate's extensions in, and the suspect files found in ext_dir: ext_dir
    when there are none (or no expectation: a request from outside a suite), else a fresh folder beside it. The
    shared folder is left as it is: another kforge run may be building there."""
    if expectation is None or not os.path.isdir(ext_dir):
        return ext_dir, []
    found = suspects(ext_dir, expectation.get("libraries"), float(expectation["since"]))
    if not found:
        return ext_dir, []
    parent = os.path.dirname(ext_dir)
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{os.path.basename(ext_dir)}.fresh-", dir=parent), found


def evidence(ext_dir: str, fresh_dir: str, found: list[str]) -> str:
    """The warning's text: what was found, and that the candidate is not charged with it."""
    shown = "; ".join(found[:6]) + (f"; … {len(found) - 6} more" if len(found) > 6 else "")
    return (f"the extension cache this code's builds load from ({ext_dir}) held files this suite cannot vouch for: "
            f"{shown}. Another candidate's code or another run wrote there; this candidate built afresh in "
            f"{fresh_dir} and is not charged with it")
