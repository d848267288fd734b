"""Red team round 9 (2026-11-29): code the clean reference process loaded is the same for the next run, and the
timing's own calls meet values off the benchmark's distribution.

The import seal keeps files written while the candidate runs out of this run's reference process; a file written
then is older than the next run's seal, and every later reference process would load it (a forged bytecode cache
beside an old source above all: Python runs it instead of the source). ``seal_audit.findings`` rereads, at the
judge's end, every file the seal let in and the cache beside each source.

A path taken only once timed, keyed on anything the timing-like loop of the checks does not reproduce (a count of
calls that loop uses up), met only get_inputs() values in the real timing. The reference process now rewrites about
one set in five with values off the distribution (the kind input_distribution judged), and every such pair is
compared, in the judge and in the worker, for rows far off.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import py_compile
import random
import subprocess
import sys
import time

import pytest
import torch

from kforge_worker import import_seal, seal_audit
from kforge_worker.compare import compare_timed
from kforge_worker.judge import Judge, JudgeChannel, summarize
from kforge_worker.off_distribution import variant
from kforge_worker.reference_process import _BOOT, ENV_SEAL, PACKAGE_PARENT, Exporter
from kforge_worker.timed_inputs import VARY_EVERY, FreshInputPool, OutputSampler


@pytest.fixture()
def sealed_package(tmp_path, monkeypatch):
    """A package written (and its module cached) before the seal, imported through it; taken away after."""
    pkg = tmp_path / "rt9pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("def activate(x):\n    return max(x, 0)\n")
    (pkg / "fresh.py").write_text("VALUE = 1\n")
    old = time.time() - 3600
    for f in pkg.iterdir():
        os.utime(f, (old, old))
    py_compile.compile(str(pkg / "helper.py"), cfile=importlib.util.cache_from_source(str(pkg / "helper.py")))
    time.sleep(0.06)  # past the seal's slack for the coarse file clock
    monkeypatch.syspath_prepend(str(tmp_path))
    seal = import_seal.ImportSeal(time.time_ns())
    sys.meta_path.insert(0, seal)
    try:
        importlib.import_module("rt9pkg.helper")
        yield pkg, seal
    finally:
        sys.meta_path.remove(seal)
        for name in [m for m in sys.modules if m == "rt9pkg" or m.startswith("rt9pkg.")]:
            del sys.modules[name]
        importlib.invalidate_caches()


def _forge(source, text: str) -> str:
    cache = importlib.util.cache_from_source(str(source))
    st = os.stat(source)
    with open(cache, "wb") as f:
        f.write(importlib._bootstrap_external._code_to_timestamp_pyc(compile(text, str(source), "exec"),
                                                                       int(st.st_mtime), st.st_size))
    return cache


def test_nothing_written_since_the_seal_is_nothing_found(sealed_package):
    _, seal = sealed_package
    assert str(next(iter(seal.let_in))).endswith(("__init__.py", "helper.py"))
    assert seal_audit.findings(seal) == []


def test_a_cache_forged_beside_a_loaded_module_is_found_and_removed(sealed_package):
    pkg, seal = sealed_package
    cache = _forge(pkg / "helper.py", "def activate(x):\n    return x\n")
    found = seal_audit.findings(seal)
    assert len(found) == 1 and "not the compilation of helper.py" in found[0] and "(removed)" in found[0]
    assert not os.path.exists(cache)


def test_a_cache_python_writes_itself_during_the_run_is_left_alone(sealed_package):
    pkg, seal = sealed_package
    importlib.import_module("rt9pkg.fresh")  # let in with no cache yet; Python's own cache written below
    cache = importlib.util.cache_from_source(str(pkg / "fresh.py"))
    py_compile.compile(str(pkg / "fresh.py"), cfile=cache)
    rewritten = importlib.util.cache_from_source(str(pkg / "helper.py"))
    py_compile.compile(str(pkg / "helper.py"), cfile=rewritten)  # the same code again, as a concurrent process would
    assert seal_audit.findings(seal) == []
    assert os.path.exists(cache) and os.path.exists(rewritten)


def test_a_stale_cache_that_python_would_not_read_is_left_alone(sealed_package):
    pkg, seal = sealed_package
    cache = importlib.util.cache_from_source(str(pkg / "helper.py"))
    code = compile("def activate(x):\n    return x\n", "helper.py", "exec")
    with open(cache, "wb") as f:  # a header for another time: Python recompiles the source instead
        f.write(importlib._bootstrap_external._code_to_timestamp_pyc(code, 12345, 6))
    assert seal_audit.findings(seal) == []


def test_a_loaded_source_written_since_the_seal_is_found(sealed_package):
    pkg, seal = sealed_package
    (pkg / "helper.py").write_text("def activate(x):\n    return x\n")
    found = seal_audit.findings(seal)
    assert len(found) == 1 and "helper.py, loaded by the clean reference process, was written" in found[0]


def test_a_library_replaced_on_disk_after_it_was_mapped_is_found(tmp_path, monkeypatch):
    maps = tmp_path / "maps"
    lib = tmp_path / "libx.so"
    lib.write_bytes(b"new")
    maps.write_text(f"7f00-7f01 r-xp 00000000 fd:00 123 {lib} (deleted)\n"
                    "7f01-7f02 r-xp 00000000 00:01 9 /memfd:trampoline (deleted)\n"
                    f"7f02-7f03 rw-p 00000000 fd:00 124 {tmp_path / 'data'} (deleted)\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: real_open(maps if p == "/proc/self/maps" else p, *a, **k))
    found = seal_audit._replaced_mappings()
    assert len(found) == 1 and str(lib) in found[0]


# --------------------------------------------------------------- the timing's own sets off the distribution


def test_the_timing_pool_rewrites_about_one_set_in_vary_every_off_the_distribution_and_says_which():
    seeds = iter(range(1, 10_000))
    pool = FreshInputPool(lambda s: [torch.rand(8, 64, generator=torch.Generator().manual_seed(s))],
                          lambda: next(seeds), mirror=False,
                          vary=lambda fresh: variant({"kind": "rows"}, fresh, next(seeds), torch.device("cpu")))
    varied = []
    for _ in range(400):
        pool.advance()
        x = pool.ref_inputs()[0]
        assert pool.varied == bool(x.abs().max() > 1.0 or (x < 0).any())  # get_inputs() draws [0, 1)
        varied.append(pool.varied)
    assert 400 / VARY_EVERY / 2 < sum(varied) < 400 / VARY_EVERY * 2
    gaps = [b - a for a, b in zip([-1] + [i for i, v in enumerate(varied) if v], [i for i, v in enumerate(varied) if v])]
    assert max(gaps) <= 2 * VARY_EVERY


def test_a_timed_pair_off_the_distribution_fails_only_where_a_row_is_far_off():
    (x,) = variant({"kind": "rows"}, [torch.rand(48, 96)], 3, torch.device("cpu"))
    w, b = torch.randn(64, 96), torch.randn(64)
    ref = torch.relu(x @ w.t() + b)
    other_order = torch.relu((x.double() @ w.double().t() + b.double()).float())  # honest rounding, rows at 1e2
    assert compare_timed(0, other_order, ref, 1e-4, 1e-4, off_distribution=True) == (True, None)
    shifted = torch.softmax(x, dim=1)
    e = torch.exp(x)
    ok, why = compare_timed(0, e / e.sum(dim=1, keepdim=True), shifted, 1e-4, 1e-4, off_distribution=True)
    assert not ok and "non-finite" in why
    ok, why = compare_timed(0, torch.zeros_like(shifted), shifted, 1e-4, 1e-4, off_distribution=True)
    assert not ok and "48 of 48 rows far off" in why
    assert not compare_timed(0, other_order + 1e-3, ref, 1e-4, 1e-4)[0]  # on the distribution: the pass mark


def test_the_judge_compares_every_pair_off_the_distribution_whatever_its_draw(tmp_path):
    class Never(random.Random):
        def random(self) -> float:
            return 1.0  # never drawn

    channel = JudgeChannel()
    judge = Judge(channel.child_fd, str(tmp_path / "own"), rng=Never())
    judge.start(os.getpid(), dropout=False)
    judge.atol = judge.rtol = 1e-4
    exporter = Exporter(str(tmp_path))
    last = [torch.softmax(torch.randn(4, 8) * 100, dim=1)]
    for varied in (False, True):
        judge.called()
        judge.commit([{"tensor": exporter.put(f"c{varied}", torch.zeros(4, 8), staging=True)}], last,
                     torch.device("cpu"), varied=varied)
    judge.end()
    end = summarize(channel.finish(), channel.nonce)["end"]
    assert end["sampled"] == 1 and end["wrong"] == 1


def test_a_cache_forged_for_a_harness_module_the_reference_process_never_loads_is_found(monkeypatch, tmp_path):
    """The worker imports checks the reference process never loads; their caches are the next worker's checks."""
    seal = import_seal.ImportSeal(time.time_ns() - 10**9)
    harness = os.path.dirname(os.path.abspath(seal_audit.__file__))
    source = os.path.join(harness, "checks", "static_scan.py")
    assert seal_audit._harness_modules()[source] == importlib.util.cache_from_source(source)
    cache = str(tmp_path / "static_scan.cpython.pyc")  # not the checkout's own __pycache__: other runs read that
    monkeypatch.setattr(seal_audit, "_harness_modules", lambda: {source: cache})
    st = os.stat(source)
    with open(cache, "wb") as f:
        f.write(importlib._bootstrap_external._code_to_timestamp_pyc(compile("def scan_source(*a): return None\n",
                                                                             source, "exec"),
                                                                     int(st.st_mtime), st.st_size))
    found = seal_audit.findings(seal)
    assert len(found) == 1 and "static_scan.py" in found[0] and not os.path.exists(cache)


def test_lone_spikes_are_few_and_only_a_full_read_sees_them():
    (x,) = variant({"kind": "spikes"}, [torch.rand(64, 4096)], 7, torch.device("cpu"))
    spikes = (x.reshape(-1) == 100.0).nonzero().flatten()
    assert 1 <= len(spikes) <= 64 // 8 and float(x.abs().amax()) == 100.0
    rest = x.clone()
    rest.view(-1)[spikes] = 0.0
    assert float(rest.abs().amax()) < 10.0  # randn elsewhere: a sample of the values looks like any other randn


def test_modules_the_interpreter_imported_before_the_seal_are_audited_too():
    """encodings and what a .pth imports run at every interpreter's start, the next reference process's before its
    seal exists: their files and caches are read again with the rest."""
    loaded = import_seal.loaded_before()
    aliases = sys.modules["encodings.aliases"]
    assert loaded[aliases.__file__] == aliases.__cached__


def test_the_reference_process_seal_holds_what_the_interpreter_imported_before_it(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from kforge_worker import import_seal\n"
                     "print(any(p.endswith('aliases.py') for p in import_seal._SEAL.let_in))\n")
    time.sleep(0.06)
    boot = _BOOT.replace("'kforge_worker.reference_process'", "'probe'")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([PACKAGE_PARENT, str(tmp_path)]), ENV_SEAL: str(time.time_ns())}
    out = subprocess.run([sys.executable, "-c", boot], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True"], out.stderr


def test_outputs_wrong_only_on_pairs_off_the_distribution_are_systematic():
    """A switch met now and then (its own detector unsure it is timed) is wrong on a few of the pairs off the
    distribution and right on every plain one: not a race, which would miss plain pairs as well."""
    sampler = OutputSampler(lambda cand, ref: (cand == "right", None if cand == "right" else "NaN rows"),
                            rng=random.Random(0))
    for pair in range(60):
        varied = pair % 5 == 0
        sampler.after_pair(pair, "ref", "wrong" if varied and pair % 15 == 0 else "right", always=varied)
    check = sampler.check(5)
    assert check["outcome"] == "fail" and check["failVerdict"] == "cheating", check
    race = OutputSampler(lambda cand, ref: (cand == "right", None if cand == "right" else "off"), rng=random.Random(0))
    for pair in range(60):
        race.after_pair(pair, "ref", "wrong" if pair in (20, 41) else "right", always=pair % 5 == 0)
    assert race.check(5)["failVerdict"] == "incorrect"
