"""Development loader for the linear_bn_softmax recipe.

Renders kernels/linear_bn_softmax/model_new.py the way `kforge emit` does (src/optimize/emit.ts:
each "@@KFORGE_SOURCE:<file>@@" literal becomes a raw triple-quoted string of <file> with the recipe's
local #include lines inlined, each file once per placeholder; a line "@@KFORGE_PYTHON:<file>@@" becomes the
recipe's Python file <file>, its own placeholders resolved) and imports the result. The device script
prefers the committed generated file and uses this only when that is absent.
"""

import importlib.util
import json
import os
import re
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RECIPE_DIR = os.path.join(REPO, "kernels", "linear_bn_softmax")
GENERATED = os.path.join(REPO, "generated", "linear_bn_softmax", "model_new.py")

_PLACEHOLDER = re.compile(r"([\"'])@@KFORGE_SOURCE:([A-Za-z0-9_.\-/]+)@@\1")
_PYTHON_PLACEHOLDER = re.compile(r"^([\"'])@@KFORGE_PYTHON:([A-Za-z0-9_.\-/]+)@@\1[ \t]*$", re.M)
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.M)


def expand_source(directory, name, seen=None):
    seen = set() if seen is None else seen
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"recipe source not found: {path}")
    seen.add(name)
    with open(path, encoding="utf8") as f:
        text = f.read()

    def inline(match):
        included = match.group(1)
        if included in seen:
            return f"// (already inlined: {included})"
        body = expand_source(directory, included, seen).rstrip()
        return f"// ---- begin {included} ----\n{body}\n// ---- end {included} ----"

    return _LOCAL_INCLUDE.sub(inline, text)


def _with_sources(recipe_dir, text):
    def literal(match):
        name = match.group(2)
        source = expand_source(recipe_dir, name)
        if '"""' in source or source.endswith("\\"):
            raise ValueError(f"{name} cannot be embedded as a raw Python string")
        return 'r"""\n' + source + '"""'

    return _PLACEHOLDER.sub(literal, text)


def render(recipe_dir=RECIPE_DIR):
    with open(os.path.join(recipe_dir, "recipe.json"), encoding="utf8") as f:
        recipe = json.load(f)
    with open(os.path.join(recipe_dir, recipe["template"]), encoding="utf8") as f:
        template = f.read()

    def python(match):
        with open(os.path.join(recipe_dir, match.group(2)), encoding="utf8") as f:
            return _with_sources(recipe_dir, f.read()).rstrip()

    body = _PYTHON_PLACEHOLDER.sub(python, _with_sources(recipe_dir, template))
    if "@@KFORGE_" in body:
        raise ValueError("unresolved placeholder")
    return f"# Rendered by bench/linear_bn/dev_loader.py from {recipe_dir} (development copy).\n" + body


def import_path(path, module_name="kforge_linear_bn_softmax_model"):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_model_new_module(prefer_generated=True):
    """The generated ModelNew module if committed, else a fresh rendering of the recipe."""
    if prefer_generated and os.path.exists(GENERATED):
        return import_path(GENERATED), GENERATED
    out_dir = tempfile.mkdtemp(prefix="lbs_dev_")
    path = os.path.join(out_dir, "model_new.py")
    with open(path, "w", encoding="utf8") as f:
        f.write(render())
    return import_path(path), path
