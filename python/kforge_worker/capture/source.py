"""The problem file split for the emitter, with Python's ast: prelude, Model's methods, the forward's
parameter list. Text is taken verbatim from the file (decorators and indentation kept)."""

from __future__ import annotations

import ast
import re
from typing import Any

_API = ("get_inputs", "get_init_inputs")


def _span(node: ast.stmt) -> tuple[int, int]:
    """1-based first and last line of a statement, decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return first, node.end_lineno or node.lineno


def _text(lines: list[str], node: ast.stmt) -> str:
    first, last = _span(node)
    return "".join(lines[first - 1 : last]).rstrip("\n")


def _parameter_text(def_text: str) -> str:
    """What stands between the def's parentheses, as written (strings and nested brackets skipped)."""
    start = def_text.find("(", re.search(r"\bdef\b", def_text).end())
    depth, i, quote, comments = 0, start, "", []
    while i < len(def_text):
        ch = def_text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif def_text.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch in "'\"":
            quote = def_text[i : i + 3] if def_text[i : i + 3] in ('"""', "'''") else ch
            i += len(quote) - 1
        elif ch == "#":  # a comment inside the list is dropped, the rest joined on one line
            end = def_text.find("\n", i)
            comments.append((i, end if end >= 0 else len(def_text)))
            i = def_text.find("\n", i) - 1 if "\n" in def_text[i:] else len(def_text)
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                text = "".join(c for j, c in enumerate(def_text[: i]) if j > start and not any(a <= j < b for a, b in comments))
                return " ".join(text.split()).rstrip(",").strip()
        i += 1
    return ""


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def split_source(text: str) -> dict[str, Any]:
    """graph.ts `source`; SyntaxError propagates (a bad problem file)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    removed: list[tuple[int, int]] = []
    out: dict[str, Any] = {"prelude": "", "init": "", "forward": "", "methods": [], "signature": "", "bases": ""}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            removed.append(_span(node))
            # ModelNew derives from what Model derives from (`class Model(Base)`: Base's __init__ and methods)
            out["bases"] = ", ".join(
                [ast.get_source_segment(text, b) or "" for b in node.bases]
                + [f"{k.arg}={ast.get_source_segment(text, k.value)}" if k.arg else f"**{ast.get_source_segment(text, k.value)}"
                   for k in node.keywords]
            )
            for item in node.body:
                if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    # A class attribute (ResNet's `expansion = 4`, a nested helper class) that __init__ or
                    # forward reads through self: ModelNew needs it too. The class docstring is not needed.
                    if not _is_docstring(item):
                        out["methods"].append(_text(lines, item))
                    continue
                if item.name == "__init__":
                    out["init"] = _text(lines, item)
                elif item.name == "forward":
                    out["forward"] = _text(lines, item)
                    out["signature"] = _parameter_text(out["forward"])
                else:
                    out["methods"].append(_text(lines, item))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _API:
            removed.append(_span(node))
    kept = [line for i, line in enumerate(lines, 1) if not any(a <= i <= b for a, b in removed)]
    out["prelude"] = re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip("\n") + "\n"
    return out
