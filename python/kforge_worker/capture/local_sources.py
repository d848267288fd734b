"""The files a capture depended on beyond Python's installation and kforge's worker: the problem file and any
module it imported from elsewhere (a helper beside it). The CLI keeps a capture while these are unchanged."""

from __future__ import annotations

import os
import site
import sys
import sysconfig


def _installed_roots() -> list[str]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # kforge_worker
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if isinstance(user_site, str):
        roots.add(user_site)
    return sorted(os.path.realpath(r) + os.sep for r in roots if r)


def _local_modules(roots: list[str]) -> dict[str, str]:
    """sys.modules' names whose source file lies outside the installed roots, with that file."""
    found: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py") or not os.path.isabs(path):
            continue  # torch's _classes and _ops name a bare "_classes.py": no file
        real = os.path.realpath(path)
        if os.path.isfile(real) and not any(real.startswith(root) for root in roots):
            found[name] = real
    return found


def local_sources(problem_path: str) -> list[str]:
    """Absolute paths: the problem file first, then every imported module's source outside the installed roots."""
    problem = os.path.realpath(problem_path)
    found = set(_local_modules(_installed_roots()).values()) - {problem}
    return [problem, *sorted(found)]


def forget_local_modules(keep: set[str]) -> None:
    """Drops the modules earlier problems brought in from outside the installed roots (any not in ``keep``, the
    names loaded before the first problem), so the next problem imports its own helpers afresh and its
    local_sources are its own (a batch captures problems one after another)."""
    for name in _local_modules(_installed_roots()):
        if name not in keep:
            del sys.modules[name]
