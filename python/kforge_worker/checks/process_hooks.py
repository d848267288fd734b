"""Ways to change what the harness or the reference runs without replacing any function the snapshot watches.

- The import machinery: a finder on ``sys.meta_path`` (or a path hook) runs whenever the worker imports a module
  later — on its way out too, after the verdict is decided, where it can rewrite the result. One that is not an
  installed library's is taken out when it is seen, so it cannot run again.
- The operator dispatcher: a kernel registered over an ``aten`` operator (``torch.library``, or
  ``TORCH_LIBRARY_IMPL`` from an extension) runs inside the worker's copy of the reference, which the runtime
  checks compare with — make it agree with the candidate at shapes the trials never use and those checks are
  blind. A candidate's own operators (its own namespace) are not watched.
- Files: the harness's sources, the problem and the candidate file, and importable entries of every ``sys.path``
  directory (in the problem's and the candidate's own folders, those that were imported or shadow a module). The
  clean reference process imports from the same tree after the candidate's import, and every later run imports
  it too. Identity and change time (``st_ino``, ``st_ctime_ns``: a write or a rename sets it, and no
  call can set it back) rather than content, so a file written and restored is still seen.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

import torch

# Dispatch keys whose kernels compute values for dense CPU/CUDA tensors (or decide which kernel does). Meta and
# fake-tensor registrations, which torch adds lazily as its own modules load, never compute a value.
_COMPUTING_KEYS = ("CPU", "CUDA", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                   "CompositeExplicitAutogradNonFunctional", "Autograd[alias]", "AutogradCPU", "AutogradCUDA",
                   "AutogradOther", "ADInplaceOrView", "BackendSelect", "AutocastCPU", "AutocastCUDA",
                   "Python", "PythonDispatcher", "PreDispatch")
_IMPORTABLE = (".py", ".pth", ".pyc", ".so", ".pyd")
_HARNESS_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INSTALLED = tuple(dict.fromkeys(os.path.abspath(sysconfig.get_paths()[k]) + os.sep
                                 for k in ("stdlib", "platstdlib", "purelib", "platlib")))


def import_machinery() -> dict[str, tuple[Any, ...]]:
    return {"sys.meta_path": tuple(sys.meta_path), "sys.path_hooks": tuple(sys.path_hooks)}


def restore_import_machinery(before: dict[str, tuple[Any, ...]]) -> list[str]:
    """Takes out the finders and path hooks added since the snapshot whose code is not an installed library's
    (a library imported by the candidate may add its own: setuptools' distutils finder, six's importer) and
    names them. The candidate's folder joining sys.path is the harness's own doing; sys.path is not watched."""
    changes = []
    for name, entries in before.items():
        live = getattr(sys, name.split(".", 1)[1])
        foreign = [x for x in live if not any(x is e for e in entries) and not _installed(x)]
        if foreign:
            changes.append(f"{name} gained {', '.join(_name(x) for x in foreign[:3])} (taken out again)")
            live[:] = [x for x in live if not any(x is f for f in foreign)]
    return changes


def _installed(entry: Any) -> bool:
    """Whether the entry's code lives in the standard library or an installed package."""
    code = getattr(entry, "__code__", None)
    if code is not None:
        path = code.co_filename
    else:
        owner = entry if isinstance(entry, type) else type(entry)
        path = getattr(sys.modules.get(owner.__module__), "__file__", None) or ""
    return bool(path) and os.path.abspath(path).startswith(_INSTALLED)


def _name(entry: Any) -> str:
    return getattr(entry, "__qualname__", None) or type(entry).__qualname__


def dispatcher_fingerprint() -> dict[str, str]:
    """Each aten operator's dispatcher description, whole: comparing the raw text is cheap, and only an operator
    whose text changed is filtered to the computing keys (`_computing_kernels`)."""
    dump = torch._C._dispatch_dump
    return {op: dump(op) for op in torch._C._dispatch_get_all_op_names() if op.startswith("aten::")}


def _computing_kernels(dump: str) -> list[str]:
    return [line for line in dump.splitlines() if line.split(":", 1)[0].split(" (", 1)[0] in _COMPUTING_KEYS]


def dispatcher_changes(before: dict[str, str]) -> list[str]:
    now = dispatcher_fingerprint()
    changes = []
    for op, dump in before.items():
        after = now.get(op)
        if after is None or after == dump:
            continue
        kernels = _computing_kernels(dump)
        new = [line for line in _computing_kernels(after) if line not in kernels]
        if not new and len(_computing_kernels(after)) == len(kernels):
            continue
        where = new[0].split(": registered at ", 1)[-1].split(" :: ")[0] if new else "?"
        key = new[0].split(":", 1)[0] if new else "?"
        changes.append(f"a kernel was registered over {op} for {key} (at {where}): the worker's copy of the "
                       "reference would run it")
    return changes


def watched_files(paths: tuple[str, ...] = ()) -> dict[str, tuple[int, int, int] | None]:
    """(inode, change time, size) of the harness's sources, the given files and their bytecode caches, and every
    importable entry of every sys.path directory (a new module there shadows one imported later, a new .pth runs at the next start)."""
    out: dict[str, tuple[int, int, int] | None] = {}
    for root, dirs, files in os.walk(_HARNESS_ROOT):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                out[os.path.join(root, name)] = _stat(os.path.join(root, name))
    for path in paths:
        out[os.path.abspath(path)] = _stat(path)
        # and the bytecode cache Python would keep for it: nothing of kforge's writes one (loading.SourceOnlyLoader),
        # and one with the source's time and size in its header stood in for the source until round 8
        cache = _cache_of(path)
        if cache is not None:
            out[cache] = _stat(cache)
    # the problem's and the candidate's folders join sys.path when they are imported (sibling imports); and the
    # folders site reads at every start, on sys.path or not: a user site folder that does not exist yet is on no
    # sys.path, but a .pth created there runs in every later process of this user — the next evaluation's clean
    # reference process included (red team round 16, adv_user_site_startup)
    for entry in dict.fromkeys(list(sys.path) + [os.path.dirname(os.path.abspath(p)) for p in paths]
                               + _startup_folders()):
        directory = os.path.abspath(entry or os.getcwd())
        if not os.path.isdir(directory) or directory.startswith(_HARNESS_ROOT + os.sep):
            continue
        try:
            with os.scandir(directory) as it:
                names = [e.name for e in it if e.name.endswith(_IMPORTABLE) or _package(e)]
        except OSError:
            continue
        for name in names:
            out[os.path.join(directory, name)] = _stat(os.path.join(directory, name))
    out.update(_path_programs())
    return out


# Programs a build runs by name from PATH: torch's extension builder (ninja, the C++ compiler, nvcc), inductor's C++
# compiles (g++, or $CXX) — in the clean reference process too, for a reference that torch.compiles — and what the
# compilers run in turn (as, ld, ptxas).
_PROGRAMS = ("g++", "gcc", "c++", "cc", "clang", "clang++", "ninja", "nvcc", "ptxas", "as", "ld")


def _path_programs() -> dict[str, tuple[int, int, int] | None]:
    """Every PATH folder (its own change time: a program added, removed or replaced there moves it, and it cannot be
    set back — a script shadowing the compiler and removed again still shows), keyed with a trailing separator, and
    the file each of _PROGRAMS resolves to (inode, change time, size: one rewritten in place). Red team round 16,
    adv_path_compiler_shadow: a `g++` put ahead of the real one compiled a sleep into the kernel inductor built for
    the clean reference process (correct at 12.7x)."""
    import shutil

    out: dict[str, tuple[int, int, int] | None] = {}
    for folder in dict.fromkeys(os.environ.get("PATH", "").split(os.pathsep)):
        if not folder:
            continue
        try:
            st = os.stat(folder)
        except OSError:
            continue
        out[os.path.abspath(folder) + os.sep] = (st.st_ino, st.st_ctime_ns, 0)
    for name in _PROGRAMS:
        found = shutil.which(name)
        if found:
            real = os.path.realpath(found)
            out[real] = _stat(real)
    return out


def _startup_folders() -> list[str]:
    """The site-packages folders site processes at an interpreter's start (.pth files, sitecustomize,
    usercustomize), the user's whether it exists or not."""
    import site

    folders: list[str] = []
    for get in (getattr(site, "getsitepackages", None), getattr(site, "getusersitepackages", None)):
        try:
            found = get() if get is not None else []
        except Exception:  # noqa: BLE001 — an embedded or trimmed site module: sys.path stands alone
            continue
        folders.extend([found] if isinstance(found, str) else list(found))
    return folders


def _cache_of(path: str) -> str | None:
    import importlib.util

    try:
        return importlib.util.cache_from_source(os.path.abspath(path))
    except (ValueError, NotImplementedError):
        return None


def _package(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir() and not entry.name.startswith((".", "__pycache__"))
    except OSError:
        return False


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if os.path.isdir(path):  # a package: its own change time moves whenever Python caches bytecode inside it
        return st.st_ino, 0, 0
    return st.st_ino, st.st_ctime_ns, st.st_size


def file_changes(before: dict[str, tuple[int, int, int] | None], paths: tuple[str, ...] = ()) -> list[str]:
    from .diffs import keyed_changes

    own = {os.path.dirname(os.path.abspath(p)) for p in paths}
    named = {os.path.abspath(p) for p in paths}
    return keyed_changes(before, watched_files(paths), lambda path, _: f"{path} was created",
                         lambda path, _: f"{path} was removed", lambda path, _a, _b: (
                             f"{path} (a PATH folder) changed: a program was added, removed or replaced there"
                             if path.endswith(os.sep) else f"{path} was written"),
                         skip=lambda path: _unused_neighbour(path, own, named))


def _unused_neighbour(path: str, own: set[str], named: set[str]) -> bool:
    """A file beside the problem or the candidate that nothing imported and that shadows no module. Those folders
    are often shared: a suite's other candidates, or the files kforge optimize writes for other problems while this
    one is judged, change there all the time. Such a file is only a way in once it is imported (then it is in
    sys.modules) or when its name would take the place of a module the worker or the reference imports later."""
    folder = os.path.dirname(path)
    if folder not in own or path in named or path.endswith(".pth"):
        return False
    name = os.path.basename(path).split(".", 1)[0]
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None)
        if where and (os.path.abspath(where) == path or os.path.abspath(where).startswith(path + os.sep)):
            return False
    if name in sys.stdlib_module_names or any(m.split(".", 1)[0] == name for m in list(sys.modules)):
        return False
    import importlib.machinery

    elsewhere = [e for e in sys.path if os.path.abspath(e or os.getcwd()) not in own]
    try:
        return importlib.machinery.PathFinder.find_spec(name, elsewhere) is None
    except (ImportError, ValueError):
        return False
