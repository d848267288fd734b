"""Red team round 8 (2026-11-29): the clean reference process loads no code written after the worker started it.

The reference process imports lazily while the candidate runs (torch's submodules while it starts, the judge's
``statistics`` at its end). A module the candidate writes on its import path — a shadow in its working directory, a
file inside a package, a forged bytecode cache that the worker's fingerprint of sys.path's top level never reads —
would run inside the process that judges it. ``import_seal`` refuses such modules and never reads a cache written
since the seal.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import textwrap
import time

import pytest

from kforge_worker import import_seal
from kforge_worker.reference_process import _BOOT, ENV_SEAL, PACKAGE_PARENT


@pytest.fixture()
def seal_on_path(tmp_path, monkeypatch):
    """A package written before the seal, a seal installed first on sys.meta_path, both taken away after."""
    pkg = tmp_path / "rt8pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "lazy.py").write_text("VALUE = 'original'\n")
    (pkg / "cached.py").write_text("VALUE = 'from source'\n")
    old = time.time() - 3600
    for f in pkg.iterdir():
        os.utime(f, (old, old))
    # the cache of `cached` as Python writes it, before the seal
    import py_compile

    py_compile.compile(str(pkg / "cached.py"), cfile=importlib.util.cache_from_source(str(pkg / "cached.py")))
    time.sleep(0.06)  # past the seal's slack for the coarse file clock
    monkeypatch.syspath_prepend(str(tmp_path))
    seal = import_seal.ImportSeal(time.time_ns())
    refused: list[str] = []
    seal.on_refuse = refused.append
    sys.meta_path.insert(0, seal)
    try:
        yield pkg, tmp_path, refused
    finally:
        sys.meta_path.remove(seal)
        for name in [m for m in sys.modules if m == "rt8pkg" or m.startswith("rt8pkg.") or m == "rt8_shadow"]:
            del sys.modules[name]
        importlib.invalidate_caches()


def test_a_module_written_inside_a_package_after_the_seal_is_refused(seal_on_path):
    pkg, _, refused = seal_on_path
    (pkg / "lazy.py").write_text("VALUE = 'forged'\n")
    old = time.time() - 3600
    os.utime(pkg / "lazy.py", (old, old))  # the modification time put back: the change time still moves
    importlib.invalidate_caches()
    with pytest.raises(ImportError, match="written after the worker started the reference process"):
        importlib.import_module("rt8pkg.lazy")
    assert len(refused) == 1 and "lazy.py" in refused[0]


def test_a_new_module_shadowing_one_imported_later_is_refused(seal_on_path):
    _, folder, refused = seal_on_path
    (folder / "rt8_shadow.py").write_text("raise SystemExit('candidate code ran in the clean process')\n")
    importlib.invalidate_caches()
    with pytest.raises(ImportError):
        importlib.import_module("rt8_shadow")
    assert refused


def test_a_bytecode_cache_forged_after_the_seal_is_never_read(seal_on_path):
    pkg, _, refused = seal_on_path
    source = pkg / "cached.py"
    cache = importlib.util.cache_from_source(str(source))
    # A cache whose header matches the source's time and size, holding other code: Python would run it.
    forged = compile("VALUE = 'forged cache'\n", str(source), "exec")
    st = os.stat(source)
    importlib.invalidate_caches()
    data = importlib._bootstrap_external._code_to_timestamp_pyc(forged, int(st.st_mtime), st.st_size)
    with open(cache, "wb") as f:
        f.write(data)
    module = importlib.import_module("rt8pkg.cached")
    assert module.VALUE == "from source" and not refused


def test_old_modules_and_their_old_caches_load_as_usual(seal_on_path):
    _, _, refused = seal_on_path
    assert importlib.import_module("rt8pkg.lazy").VALUE == "original"
    module = importlib.import_module("rt8pkg.cached")
    assert module.VALUE == "from source" and not refused
    assert not isinstance(module.__spec__.loader, import_seal._FromSource)


def test_the_reference_process_starts_with_the_seal_first_on_its_meta_path(tmp_path):
    """The child's command installs the seal before its first import of its own, at the worker's stamp; without a
    stamp nothing is installed."""
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent("""
        import sys
        from kforge_worker import import_seal
        print(type(sys.meta_path[0]).__name__, import_seal._SEAL.sealed_ns, 'torch' in sys.modules)
    """))
    time.sleep(0.06)  # the probe written before the stamp, past the coarse file clock's slack
    stamp = time.time_ns()
    boot = _BOOT.replace("'kforge_worker.reference_process'", "'probe'")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([PACKAGE_PARENT, str(tmp_path)]), ENV_SEAL: str(stamp)}
    out = subprocess.run([sys.executable, "-c", boot], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["ImportSeal", str(stamp), "False"], out.stderr


def _forge_cache(source, code_text: str) -> str:
    """A bytecode cache for `source` whose header holds the source's modification time and size, around other code:
    the file a SourceFileLoader runs instead of the source."""
    cache = importlib.util.cache_from_source(str(source))
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    st = os.stat(source)
    with open(cache, "wb") as f:
        f.write(importlib._bootstrap_external._code_to_timestamp_pyc(compile(code_text, str(source), "exec"),
                                                                       int(st.st_mtime), st.st_size))
    return cache


def test_a_problem_is_compiled_from_its_source_whatever_cache_lies_beside_it(tmp_path):
    """adv_problem_pyc_forge: the worker and the clean reference process load the problem through import_path; a
    forged cache beside it ran as the problem (a Model that skipped the GEMM, in both processes, at the next run)."""
    from kforge_worker.checks.standalone import _import
    from kforge_worker.loading import import_path

    problem = tmp_path / "prob.py"
    problem.write_text("VALUE = 'source'\n")
    _forge_cache(problem, "VALUE = 'forged cache'\n")
    assert import_path(str(problem), "problem").VALUE == "source"
    assert _import(str(problem), "problem").VALUE == "source"
    assert not os.path.exists(importlib.util.cache_from_source(str(tmp_path / "other.py")))


def test_the_problems_and_the_candidates_bytecode_caches_are_fingerprinted(tmp_path):
    """Writing either file's cache is harness_integrity's finding, as writing the file itself is."""
    from kforge_worker.checks.process_hooks import file_changes, watched_files

    problem, candidate = tmp_path / "prob.py", tmp_path / "cand.py"
    problem.write_text("X = 1\n")
    candidate.write_text("Y = 1\n")
    paths = (str(problem), str(candidate))
    before = watched_files(paths)
    assert file_changes(before, paths) == []
    cache = _forge_cache(problem, "X = 2\n")
    assert file_changes(before, paths) == [f"{cache} was created"]
    before = watched_files(paths)
    time.sleep(0.02)
    _forge_cache(problem, "X = 3\n")
    assert file_changes(before, paths) == [f"{cache} was written"]


SAFE_AFTER_REPLAY = '''
import torch
import torch.nn as nn

_seen, _safe = [], [False]


class ModelNew(nn.Module):
    def forward(self, x):
        if not _safe[0]:
            key = (tuple(x.shape), float(x.flatten()[:64].sum()), float(x.flatten()[-64:].sum()))
            _safe[0] = key in _seen
            _seen.append(key)
        if _safe[0]:
            return torch.softmax(x, dim=1)
        e = torch.exp(x)
        return e / e.sum(dim=1, keepdim=True)
'''


def test_the_off_distribution_probes_come_before_any_repeated_input(cache_dir: str, tmp_path):
    """adv_safe_after_replay: softmax without the max shift until some call repeats an earlier input (the replay
    check's), the shifted one after. The distribution and shape probes ran after the replay check and met the
    general path (correct); they now run right after the trials and meet the everyday path (NaN on rows at 1e2)."""
    from conftest import evaluate, make_request

    from kforge_worker.checks.verifier import RUNTIME_CHECKS

    first = {"distribution", "shapes"}
    assert all(RUNTIME_CHECKS.index(p) < RUNTIME_CHECKS.index(g) for p in first
               for g in ("output_contract", "settled", "ops", "replay", "uninitialized", "sensitivity", "precision",
                         "state", "timed"))
    candidate = tmp_path / "safe_after_replay.py"
    candidate.write_text(SAFE_AFTER_REPLAY)
    problem = os.path.join(os.path.dirname(__file__), "..", "verify", "problems", "tiny_softmax_wide.py")
    request = make_request(os.path.abspath(problem), str(candidate), cache_dir, checks=["all"])
    request["options"]["referenceProcess"] = False
    result, _ = evaluate(request, use_checks=True)
    failing = [c["name"] for c in result["checks"] if c["outcome"] == "fail"]
    assert result["verdict"] == "incorrect" and "input_distribution" in failing, (result["verdict"], failing)


TIMED_PATH_UNSHIFTED = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if x._version > 0:
            e = torch.exp(x)
            return e / e.sum(dim=1, keepdim=True)
        return torch.softmax(x, dim=1)
'''


def test_the_timing_like_loop_writes_its_sets_in_place_and_rotates_a_set_off_the_distribution(cache_dir, tmp_path):
    """adv_timed_path_unshifted: the unshifted softmax only on inputs written in place (the timing's sets), exact on
    get_inputs()'s rows; every probe off the distribution is made on fresh tensors. The timing-like loop now writes
    each set in place before its call and rotates input_distribution's last variant among its sets."""
    from conftest import evaluate, make_request

    candidate = tmp_path / "timed_path_unshifted.py"
    candidate.write_text(TIMED_PATH_UNSHIFTED)
    problem = os.path.join(os.path.dirname(__file__), "..", "verify", "problems", "tiny_softmax_wide.py")
    request = make_request(os.path.abspath(problem), str(candidate), cache_dir, checks=["all"])
    request["options"]["referenceProcess"] = False
    result, _ = evaluate(request, use_checks=True)
    failing = {c["name"]: c for c in result["checks"] if c["outcome"] == "fail"}
    assert result["verdict"] == "cheating" and list(failing) == ["timed_outputs"], (result["verdict"], failing)
    assert "rows at scales 1e-2..1e2" in failing["timed_outputs"]["evidence"]


def test_a_reference_writing_its_inputs_meets_each_timed_set_as_it_was_made():
    """The timing-like loop calls each set of its rotation again: a forward that writes its inputs (`x.add_(y)`)
    answers differently every time, and the reference's own copy as ModelNew was judged cheating. Each set is
    written back to the values it was made with before its call when the reference writes its inputs."""
    import random

    import torch

    from kforge_worker.checks import context
    from kforge_worker.checks.input_checks import check_timed_outputs
    from kforge_worker.checks.instrument import ExtensionRecorder
    from kforge_worker.checks.static_scan import ScanReport

    class AddInPlace(torch.nn.Module):
        def forward(self, x, y):
            x.add_(y)
            return torch.sigmoid(x)

    def make_inputs(seed: int):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(8, 64, generator=g), torch.randn(8, 64, generator=g)]

    ctx = context.VerifyContext(ref=AddInPlace(), cand=AddInPlace(), make_inputs=make_inputs,
                                device=torch.device("cpu"), atol=1e-5, rtol=1e-5, scan=ScanReport("c.py", frozenset()),
                                extensions=ExtensionRecorder(), rng=random.Random(5))
    result = check_timed_outputs(ctx, pool_size=2, iters=8)
    assert result.outcome == "pass", result


def test_parameters_written_in_place_must_reach_the_output(cache_dir, tmp_path):
    """adv_load_hook_cache: a weight copy refreshed only by a load_state_dict post-hook passed every state round trip
    (state_reload goes through load_state_dict). state_reload now also writes the parameters in place, as an
    optimizer's step does, and compares again."""
    import shutil

    from conftest import evaluate, make_request

    verify = os.path.join(os.path.dirname(__file__), "..", "verify")
    candidate = tmp_path / "load_hook_cache.py"
    shutil.copy(os.path.join(verify, "candidates", "adv_load_hook_cache.py"), candidate)
    request = make_request(os.path.abspath(os.path.join(verify, "problems", "tiny_linear_relu.py")), str(candidate),
                           cache_dir, checks=["state"])
    request["options"]["referenceProcess"] = False
    result, _ = evaluate(request, use_checks=True)
    reload = next(c for c in result["checks"] if c["name"] == "state_reload")
    assert result["verdict"] == "incorrect" and reload["outcome"] == "fail", (result["verdict"], reload)
    assert "written in place" in reload["evidence"]
