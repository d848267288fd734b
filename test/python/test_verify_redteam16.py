"""Red team round 16 (2026-11-30, CPU): torch's compiler caches shared between evaluations and processes.

inductor loads a graph's compiled output code by path from its cache directory (one per user,
/tmp/torchinductor_<user>) whenever the file exists — exec of the file, outside the import system — and the clean
reference process used the same directory as the candidate's process. A candidate rewrote the output code there:
a later candidate's torch.compile ran it (adv_suite_inductor_poison: an honest compile judged incorrect), and so did
the reference's own compiled helper in the clean process (adv_inductor_reference_poison: the reference slept 3 ms per
call, 15.5× for a correct eager candidate, 1.54× honestly). Each process now compiles into a private directory
(compiler_cache.py), and a candidate's path into another process's is a runtime_audit event.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import pytest


def _restore_env(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_compiled_code_is_what_this_process_compiled_not_a_file_planted_in_the_shared_cache(tmp_path):
    """The worker's stage after the go points inductor at a fresh directory: the output code another process planted
    in the shared one under the same content key is never loaded (before: PyCodeCache.load ran the planted file)."""
    import torch  # noqa: F401
    from torch._inductor.codecache import PyCodeCache, get_hash, get_path

    from kforge_worker import compiler_cache, pipeline

    names = compiler_cache.VARIABLES
    saved = {name: os.environ.get(name) for name in names}
    shared = tmp_path / "torchinductor_shared"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(shared)
    source = "def call(args):\n    return ('compiled here',)\n"
    planted = get_path(get_hash(source.strip(), "", "code"), "py")[2]
    os.makedirs(os.path.dirname(planted), exist_ok=True)
    with open(planted, "w") as fh:
        fh.write("def call(args):\n    return ('planted by another candidate',)\n")
    ctx = types.SimpleNamespace(checks=None, compiler_dir=None)
    own_before = compiler_cache.OWN
    try:
        pipeline.private_compiler_cache(ctx)
        assert ctx.compiler_dir and os.path.isdir(ctx.compiler_dir)
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == ctx.compiler_dir
        assert os.environ["TRITON_CACHE_DIR"].startswith(ctx.compiler_dir + os.sep)
        assert os.path.isdir(os.environ["PYTORCH_KERNEL_CACHE_PATH"])
        assert os.environ["PYTORCH_KERNEL_CACHE_PATH"].startswith(ctx.compiler_dir + os.sep)
        assert not str(ctx.compiler_dir).startswith(str(shared))
        assert PyCodeCache.load(source).call(None) == ("compiled here",)
        assert not compiler_cache.is_foreign(os.path.join(ctx.compiler_dir, "ab", "x.py"))  # its own
    finally:
        compiler_cache.remove(ctx.compiler_dir)
        compiler_cache.OWN = own_before
        _restore_env(saved)
    assert ctx.compiler_dir and not os.path.exists(ctx.compiler_dir)
    assert pipeline.STAGES.index(pipeline.private_compiler_cache) == pipeline.STAGES.index(pipeline.await_go) + 1
    assert pipeline.STAGES.index(pipeline.private_compiler_cache) < pipeline.STAGES.index(pipeline.load_candidate)


def test_the_clean_reference_process_compiles_into_a_directory_of_its_own(monkeypatch):
    """The reference process's environment points inductor and Triton at a fresh directory — neither the shared one
    nor any the worker's own process uses — removed when it closes."""
    from kforge_worker import compiler_cache
    from kforge_worker import reference_process as rp

    seen: dict = {}

    class FakeProc:
        pid = os.getpid()
        stdout = None

        def __init__(self, *args, env=None, **kwargs):
            seen["env"] = dict(env or {})
            self.stdin = open(os.devnull, "w")  # noqa: SIM115 — closed by close()

        def poll(self):
            return 0

    monkeypatch.setattr(rp.subprocess, "Popen", FakeProc)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_shared_for_the_test")
    handle = rp.ReferenceProcess({"problemPath": "/nonexistent.py", "device": "cpu"})
    directory = handle.compiler_dir
    try:
        env = seen["env"]
        assert directory and os.path.isdir(directory)
        assert env["TORCHINDUCTOR_CACHE_DIR"] == directory
        assert env["TRITON_CACHE_DIR"].startswith(directory + os.sep)
        assert env["PYTORCH_KERNEL_CACHE_PATH"].startswith(directory + os.sep)
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/tmp/torchinductor_shared_for_the_test"  # the worker's own
        assert compiler_cache.is_foreign(os.path.join(directory, "xy", "output.py"))
    finally:
        handle.close()
    assert not os.path.exists(directory)


def _candidate_code(path: str, source: str) -> dict:
    scope: dict = {"__name__": "kforge_candidate_test"}
    exec(compile(textwrap.dedent(source), path, "exec"), scope)  # noqa: S102 — the test's own code
    return scope


@pytest.fixture
def audit(tmp_path):
    from kforge_worker.checks.integrity import AuditMonitor

    monitor = AuditMonitor.install()
    path = str(tmp_path / "candidate.py")
    saved = (set(monitor.candidate_files), list(monitor.events), monitor.active)
    monitor.watch(path)
    monitor.events.clear()
    monitor.active = True
    try:
        yield monitor, path
    finally:
        monitor.active = saved[2]
        monitor.candidate_files.clear()
        monitor.candidate_files.update(saved[0])
        monitor.events[:] = saved[1]


def test_a_candidates_path_into_another_processs_private_compiler_cache_is_a_runtime_audit_event(audit, tmp_path):
    """adv_inductor_reference_dir_poison: found by listing the temporary directory, the clean reference process's
    private directory is written (open), renamed into, linked to, or entered (chdir, then a relative path) by the
    candidate's code: each a runtime_audit event. Its own process's directory, and other paths, are not."""
    from kforge_worker import compiler_cache

    monitor, path = audit
    theirs = compiler_cache.make_directory()
    own_before = compiler_cache.OWN
    own = compiler_cache.make_directory()
    compiler_cache.OWN = own + os.sep
    cwd = os.getcwd()
    monitor.active = False
    scope = _candidate_code(path, """
        import os
        def attack(theirs, own, scratch):
            with open(os.path.join(own, "mine.py"), "w") as fh:  # its own process's: allowed
                fh.write("x = 1")
            with open(os.path.join(scratch, "plain.txt"), "w") as fh:
                fh.write("x")
            names = [n for n in os.listdir(os.path.dirname(theirs)) if n == os.path.basename(theirs)]
            with open(os.path.join(os.path.dirname(theirs), names[0], "out.py"), "w") as fh:
                fh.write("def call(args): pass")
            os.rename(os.path.join(scratch, "plain.txt"), os.path.join(theirs, "moved.py"))
            os.symlink(theirs, os.path.join(scratch, "link"))
            os.chdir(theirs)
            with open("relative.py", "w") as fh:
                fh.write("x = 2")
    """)
    monitor.active = True
    try:
        scope["attack"](theirs, own, str(tmp_path))
    finally:
        os.chdir(cwd)
        compiler_cache.OWN = own_before
        compiler_cache.remove(theirs)
        compiler_cache.remove(own)
    events = [(e.event, e.detail) for e in monitor.events]
    assert not any("mine.py" in d or d.endswith("plain.txt") for _, d in events), events
    kinds = [k for k, d in events if "private compiler cache" in d]
    assert kinds.count("open") >= 2 and "os.rename" in kinds and "os.symlink" in kinds and "os.chdir" in kinds, events


def test_is_foreign_resolves_relative_paths(tmp_path):
    from kforge_worker import compiler_cache

    theirs = compiler_cache.make_directory()
    try:
        assert compiler_cache.is_foreign(theirs)
        cwd = os.getcwd()
        os.chdir(theirs)
        try:
            assert compiler_cache.is_foreign("x.py")
        finally:
            os.chdir(cwd)
        assert not compiler_cache.is_foreign(str(tmp_path / "x.py")) and not compiler_cache.is_foreign("")
    finally:
        compiler_cache.remove(theirs)


@pytest.mark.heavy
def test_a_shared_cache_poisoned_by_a_sibling_is_not_read_by_the_next_process(tmp_path):
    """End to end in two processes, as a suite runs them: the first writes a planted output module in the shared
    directory; the second, once its private directory is made, compiles the same source and runs its own."""
    shared = tmp_path / "shared"
    code = textwrap.dedent(f"""
        import os, sys, types
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = {str(shared)!r}
        import torch
        from torch._inductor.codecache import PyCodeCache, get_hash, get_path
        from kforge_worker import pipeline, compiler_cache
        source = "def call(args):\\n    return ('own',)\\n"
        if sys.argv[1] == "plant":
            p = get_path(get_hash(source.strip(), "", "code"), "py")[2]
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write("def call(args):\\n    return ('planted',)\\n")
        else:
            if sys.argv[1] == "private":
                ctx = types.SimpleNamespace(checks=None, compiler_dir=None)
                pipeline.private_compiler_cache(ctx)
            print(PyCodeCache.load(source).call(None)[0])
            compiler_cache.remove(compiler_cache.OWN)
    """)
    env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(__file__), "..", "..", "python")}

    def run(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", code, mode], env=env, capture_output=True, text=True,
                              check=True, timeout=120).stdout.strip()

    run("plant")
    assert run("shared") == "planted"  # what every process read before
    assert run("private") == "own"



def test_a_pth_created_in_a_user_site_folder_that_did_not_exist_is_a_file_change(tmp_path, monkeypatch):
    """adv_user_site_startup: where the interpreter enables the user site and its folder does not exist yet, it is on
    no sys.path, so the fingerprint of the sys.path folders missed a .pth created there — code every later process of
    the user runs at start-up (the next evaluation's reference process computed relu × 1.5, and a wrong candidate
    was judged correct by it). The folders site reads at start-up are watched whether they exist or not."""
    import site

    from kforge_worker.checks.process_hooks import file_changes, watched_files

    user_site = tmp_path / "home" / ".local" / "lib" / "python3.x" / "site-packages"
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user_site))
    before = watched_files()
    user_site.mkdir(parents=True)
    (user_site / "startup.pth").write_text("import sys\n")
    changes = file_changes(before)
    assert any("startup.pth was created" in c for c in changes), changes
    honest = watched_files()
    assert not [c for c in file_changes(honest) if "site-packages" in c]  # nothing written since: no change


def test_directories_of_processes_no_longer_alive_are_swept(tmp_path, monkeypatch):
    """A worker or reference process killed at its deadline removes nothing: the next directory made removes those
    whose maker (the pid in the name) is gone, and no other."""
    import tempfile

    from kforge_worker import compiler_cache

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{compiler_cache.PREFIX}{dead.pid}-abc"
    (stale / "xy").mkdir(parents=True)
    alive = tmp_path / f"{compiler_cache.PREFIX}{os.getpid()}-def"
    alive.mkdir()
    unnamed = tmp_path / f"{compiler_cache.PREFIX}legacy"
    unnamed.mkdir()
    made = compiler_cache.make_directory()
    try:
        assert not stale.exists() and alive.exists() and unnamed.exists()
        assert os.path.basename(made).startswith(f"{compiler_cache.PREFIX}{os.getpid()}-")
    finally:
        compiler_cache.remove(made)


def test_a_program_put_ahead_on_path_or_rewritten_is_a_file_change(tmp_path, monkeypatch):
    """adv_path_compiler_shadow: a `g++` script put in a PATH folder ahead of the real compiler compiled a sleep into
    the kernel inductor built for the clean reference process (correct at 12.7x). PATH folders (their change time,
    which a removal does not set back) and the programs builds run are watched."""
    from kforge_worker.checks.process_hooks import file_changes, watched_files

    ahead = tmp_path / "ahead"
    ahead.mkdir()
    real = tmp_path / "real"
    real.mkdir()
    compiler = real / "g++"
    compiler.write_text("#!/bin/sh\nexit 0\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("PATH", f"{ahead}{os.pathsep}{real}")
    before = watched_files()
    assert not file_changes(before)  # nothing changed: nothing reported
    shadow = ahead / "g++"
    shadow.write_text("#!/bin/sh\nexec true\n")
    shadow.chmod(0o755)
    changes = file_changes(before)
    assert any("ahead" in c and "PATH folder" in c for c in changes), changes
    shadow.unlink()  # put back before the next look: the folder's change time still moved
    assert any("ahead" in c and "PATH folder" in c for c in file_changes(before))
    rewritten = watched_files()
    compiler.write_text("#!/bin/sh\nexit 1\n")  # the real one rewritten in place
    assert any(str(compiler) in c and "was written" in c for c in file_changes(rewritten))
