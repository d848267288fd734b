"""Imports problems and candidates from file paths as fresh, uniquely named modules.

KernelBench files are plain scripts, not packages: each gets its own module name (so two candidates
that both define ModelNew never collide) and is registered in sys.modules while it executes (so
dataclasses, pickling and ``inspect.getsource`` inside the file work). Any file suffix is accepted:
the CLI may hand us a transcript's extracted block under a temporary name.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.util
import itertools
import os
import sys
from types import ModuleType
from typing import Any

PROBLEM_API = ("Model", "get_inputs", "get_init_inputs")
_counter = itertools.count()


class LoadError(Exception):
    """A file that cannot serve its role; the message is the one-line reason."""


def has_code(source: str) -> bool:
    """False for empty files and files with only comments, docstrings or ``pass`` (the no_code verdict).

    Unparsable text counts as code: it is an import_error with the parser's message, not no_code.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True
    for node in tree.body:
        if isinstance(node, ast.Pass):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        return True
    return False


def read_source(path: str, role: str) -> str:
    if not os.path.isfile(path):
        raise LoadError(f"{role} file not found: {path}")
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the file it loads from its source every time: the bytecode cache beside it
    (``__pycache__/<name>.<tag>.pyc``) is neither read nor written. A SourceFileLoader runs that cache instead of
    the source whenever its header holds the source's modification time and size, and anyone who can write the
    folder can write such a header around other code (red team round 8: a candidate forged its problem's cache,
    and the next evaluation's worker and clean reference process both ran a Model that skipped the GEMM)."""

    def get_code(self, fullname: str) -> Any:
        return self.source_to_code(self.get_data(self.path), self.path)


class GivenSourceLoader(SourceOnlyLoader):
    """Compiles the text it was given under the file's path (``__file__``, tracebacks and ``inspect`` name the file;
    sibling files resolve from its folder), never what the file holds now: the CLI read the candidate's code when the
    suite was set up, and an earlier candidate of the same suite could have rewritten the file since (red team
    round 15, adv_suite_sibling_rewrite)."""

    def __init__(self, fullname: str, path: str, source: str) -> None:
        super().__init__(fullname, path)
        self._source = source

    def get_data(self, path: str) -> bytes:
        if os.path.abspath(path) == os.path.abspath(self.path):
            return self._source.encode("utf-8")
        return super().get_data(path)


def import_path(path: str, role: str, source: str | None = None) -> ModuleType:
    """Executes the file as a new module, compiled from its source (SourceOnlyLoader) — ``source`` when given, the
    text to judge in the file's place (GivenSourceLoader); exceptions from its top-level code propagate unchanged."""
    path = os.path.abspath(path)
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    name = f"kforge_{role}_{digest}_{next(_counter)}"
    loader = SourceOnlyLoader(name, path) if source is None else GivenSourceLoader(name, path, source)
    spec = importlib.util.spec_from_loader(name, loader, origin=path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    sys.modules[name] = module
    # Sibling imports (a helper next to the file) work as they would when running the file directly.
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.append(folder)
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def missing_names(module: ModuleType, names: tuple[str, ...]) -> list[str]:
    return [n for n in names if not hasattr(module, n)]


def check_problem(module: ModuleType, path: str) -> None:
    missing = missing_names(module, PROBLEM_API)
    if missing:
        raise LoadError(
            f"problem {os.path.basename(path)} defines no {', '.join(missing)} "
            "(a KernelBench problem needs class Model, get_inputs() and get_init_inputs())"
        )
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, name)):
            raise LoadError(f"problem {os.path.basename(path)}: {name} is not callable")


def check_candidate(module: ModuleType, path: str) -> None:
    if hasattr(module, "ModelNew"):
        if not isinstance(module.ModelNew, type):
            raise LoadError(f"candidate {os.path.basename(path)}: ModelNew is not a class")
        return
    classes = sorted(
        n for n, v in vars(module).items() if isinstance(v, type) and v.__module__ == module.__name__
    )
    found = f" (it defines: {', '.join(classes)})" if classes else " (it defines no classes)"
    raise LoadError(f"candidate {os.path.basename(path)} defines no ModelNew{found}")
