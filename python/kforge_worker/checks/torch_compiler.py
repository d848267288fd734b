"""torch.compile inside a candidate, told apart from what the candidate does itself.

A candidate may compile its own code with torch.compile (dynamo + inductor): honest, and common in LLM answers.
What torch's compiler does on the candidate's behalf would otherwise read as the candidate's own tampering:

- dynamo wraps ``nn.Module.__init__``/``__setstate__`` the first time it compiles anything
  (``mutation_guard.install_generation_tagging_init``), and rebinds ``torch.jit.trace`` & co. and the optimizers'
  fused steps (``TorchPatcher.patch``). The harness installs that wrapper itself, before the
  fingerprint is taken, for every pair (``prepare``; torch itself may compile without any source saying so:
  flex_attention's eager path): the wrapper is then part
  of the baseline and watched like everything else — nothing is excused afterwards. The class whose methods the
  wrapper calls at every module construction (``GenerationTracker``) joins the watched classes.
- inductor runs the C++ compiler (and ``python -c`` probes) in subprocesses, as ``load_inline`` runs ninja. The
  audit hook excuses a process event only when the stack between it and the candidate's nearest frame is torch's
  compiler at work (``compiler_spawned``): a ``torch/_dynamo/convert_frame.py`` frame — dynamo converting a frame
  it was asked to compile — and nothing but torch's, triton's, the standard library's and the modules inductor
  generated in its cache directory (as it was when ``prepare`` ran) in between. A
  candidate calling inductor's helpers directly (``cpp_builder.run_compile_cmd``), or from code dynamo runs while
  tracing (an ``allow_in_graph`` function, a fake kernel), has its own frame, or no converting frame, in between.
- inductor's compile pools (threads, and on hosts with many cores a pool of worker processes that stays alive)
  would read as the candidate's threads and processes: the worker sets ``TORCHINDUCTOR_COMPILE_THREADS=1`` before
  torch is imported (``pipeline.evaluate``), so the compiler runs in the candidate's own thread. A candidate that
  raises it again gets the processes it asked for counted against it.
"""

from __future__ import annotations

import ast
import os
import sys
import sysconfig
from typing import Any

# The frame through which dynamo compiles a frame it was handed by torch.compile's frame-evaluation hook.
_CONVERTING = os.sep + os.path.join("_dynamo", "convert_frame.py")


def uses_torch_compiler(source: str) -> bool:
    """Whether the candidate's source reaches torch's compiler: `torch.compile`, `<module>.compile()`,
    `from torch import compile`, or anything of `torch._dynamo`/`torch._inductor`. `re.compile` does not count."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in ("_dynamo", "_inductor"):
                return True
            if node.attr == "compile" and not (isinstance(node.value, ast.Name) and node.value.id in ("re", "regex")):
                return True
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(("torch._dynamo", "torch._inductor")):
                return True
            if node.module == "torch" and any(a.name in ("compile", "_dynamo", "_inductor") for a in node.names):
                return True
        elif isinstance(node, ast.Import):
            if any(a.name.startswith(("torch._dynamo", "torch._inductor")) for a in node.names):
                return True
    return False


def prepare() -> bool:
    """Loads dynamo and installs its nn.Module construction wrapper now, as torch would at the first compile —
    before the fingerprint, so the baseline already has it. False when this torch has no dynamo."""
    try:
        import torch._dynamo  # noqa: F401
        from torch._dynamo.mutation_guard import install_generation_tagging_init
    except Exception:  # noqa: BLE001 — an old or trimmed torch: nothing to prepare
        return False
    install_generation_tagging_init()
    # torch's compile caches lock files with filelock, which on Python >= 3.12 adds an audit hook of its own when it
    # is first imported (its fork-safety hook): imported now, that hook predates the candidate, whose own audit
    # hooks are refused — imported inside the candidate's torch.compile it read as the candidate's (device run 156).
    try:
        import filelock  # noqa: F401
    except ImportError:
        pass
    # The first compile also wraps torch.jit.trace & co. and the optimizers' fused steps in dynamo's `disable`
    # (TorchPatcher.patch, once per process): done now, those rebindings are part of the baseline too.
    try:
        from torch._dynamo.eval_frame import TorchPatcher

        TorchPatcher.patch()
    except Exception:  # noqa: BLE001 — a torch without it rebinds nothing at the first compile
        pass
    global _CACHE_ROOT
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        _CACHE_ROOT = os.path.abspath(cache_dir()) + os.sep  # read now, before the candidate can move it
    except Exception:  # noqa: BLE001
        _CACHE_ROOT = None
    return True


# Inductor's cache directory as it was when the harness prepared the compiler (prepare): the modules inductor
# generates there run the C++ compiler when loaded. None: not prepared, nothing there is trusted.
_CACHE_ROOT: str | None = None


def trust_cache_root(directory: str) -> None:
    """The evaluation's private cache directory (compiler_cache.py), made after prepare and before the candidate:
    inductor's modules are generated there from now on, and nothing of the shared one is trusted."""
    global _CACHE_ROOT
    _CACHE_ROOT = os.path.abspath(directory) + os.sep


def _trusted_roots() -> tuple[str, ...]:
    roots = []
    for name in ("torch", "triton"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None) if module is not None else None
        if path:
            roots.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    if _CACHE_ROOT:
        roots.append(_CACHE_ROOT)
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.append(os.path.abspath(path) + os.sep)
    return tuple(roots)


def compiler_spawned(frame: Any, candidate_files: set[str]) -> bool:
    """Whether the event raised at `frame` comes from torch's compiler compiling the candidate's code: walking
    out from the event, a dynamo frame-converting frame is reached before any candidate frame, and every frame on
    the way is torch's, triton's or the standard library's (a helper module the candidate wrote elsewhere is none
    of them)."""
    roots = _trusted_roots()
    depth = 0
    while frame is not None and depth < 400:
        filename = os.path.abspath(frame.f_code.co_filename)
        if filename in candidate_files or not filename.startswith(roots):
            return False
        if filename.endswith(_CONVERTING) and "torch" + os.sep + "_dynamo" in filename:
            return True
        frame = frame.f_back
        depth += 1
    return False
