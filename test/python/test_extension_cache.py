"""adv_suite_extension_poison (bench/verify/NOTES.md, round 15's open attack): in a suite, one candidate's code rewrote
another's build in the shared, content-keyed extension cache (mtime put back), and the victim loaded it when its turn
came. The worker now checks the candidate's folder against what the suite's builds left (extension_cache.py) before
the import, and builds afresh in a new folder where it does not hold, saying so."""

from __future__ import annotations

import os
import time

from conftest import candidate, evaluate, make_request, problem

_CACHED = os.path.join("kforge_test_cached", "kforge_test_cached.so")


def _run(name: str, cache_dir: str, extension_cache: dict | None) -> dict:
    request = make_request(problem("tiny_linear"), candidate(name), cache_dir, trials=2)
    request["candidate"]["source"] = open(candidate(name)).read()
    request["options"]["referenceProcess"] = False  # the reference beside it: this is about the import
    if extension_cache is not None:
        request["extensionCache"] = extension_cache
    result, _ = evaluate(request)
    return result


def _warning(result: dict) -> dict | None:
    return next((c for c in result["checks"] if c["name"] == "extension_cache"), None)


def test_a_build_rewritten_by_another_candidate_of_the_suite_is_not_loaded(cache_dir):
    since = time.time() * 1000
    first = _run("cached_build_victim", cache_dir, {"since": since, "libraries": None})
    assert first["verdict"] == "correct" and _warning(first) is None, first
    libraries = first["extensionLibraries"]  # what the suite holds for this code from now on
    assert list(libraries) == [_CACHED]

    poisoner = _run("cache_poisoner", cache_dir, {"since": since, "libraries": None})
    assert poisoner["verdict"] == "correct"  # it is not named here: nothing shows which candidate wrote

    victim = _run("cached_build_victim", cache_dir, {"since": since, "libraries": libraries})
    assert victim["verdict"] == "correct", (victim["verdict"], victim["reason"])  # before: incorrect (3× its answer)
    warning = _warning(victim)
    assert warning is not None and warning["outcome"] == "warn" and warning["failVerdict"] is None
    assert _CACHED in warning["evidence"] and "bytes differ" in warning["evidence"], warning["evidence"]
    assert "extensionLibraries" not in victim  # a fresh folder's build speaks for no shared folder

    # A request from outside a suite (no extensionCache) uses the cache as found, as before.
    assert _run("cached_build_victim", cache_dir, None)["verdict"] == "incorrect"


def test_a_build_of_an_earlier_run_is_trusted_until_it_changes_during_the_suite(cache_dir):
    assert _run("cached_build_victim", cache_dir, None)["verdict"] == "correct"  # an earlier run built it
    time.sleep(0.02)
    since = time.time() * 1000  # this suite starts; it has no record of that build

    untouched = _run("cached_build_victim", cache_dir, {"since": since, "libraries": None})
    assert untouched["verdict"] == "correct" and _warning(untouched) is None  # no rebuild, no warning
    assert list(untouched["extensionLibraries"]) == [_CACHED]

    _run("cache_poisoner", cache_dir, {"since": since, "libraries": None})
    victim = _run("cached_build_victim", cache_dir, {"since": since, "libraries": None})
    assert victim["verdict"] == "correct", (victim["verdict"], victim["reason"])
    warning = _warning(victim)
    assert warning is not None and "changed after the suite started" in warning["evidence"], victim["checks"]


def test_suspects_name_each_file_nobody_vouches_for(tmp_path):
    from kforge_worker.extension_cache import guard, manifest, suspects

    ext = tmp_path / "torch_extensions" / "abc"
    (ext / "op").mkdir(parents=True)
    (ext / "op" / "op.so").write_bytes(b"built")
    (ext / "op" / ".ninja_log").write_text("# ninja log v5\n")  # bookkeeping: rebuilt from, never loaded
    recorded = manifest(str(ext))
    assert list(recorded) == [os.path.join("op", "op.so")]
    since = time.time() * 1000 + 60_000  # everything here predates the suite
    assert suspects(str(ext), recorded, since) == []
    assert guard(str(ext), {"since": since, "libraries": recorded}) == (str(ext), [])

    (ext / "op" / "extra.o").write_bytes(b"x")  # unrecorded, but older than the suite: trusted as before
    (ext / "op" / ".ninja_log").write_text("rewritten\n")
    assert suspects(str(ext), recorded, since) == []
    assert suspects(str(ext), recorded, 0) == [os.path.join("op", "extra.o") + " (changed after the suite started, "
                                               "by no build it recorded)"]

    os.symlink(tmp_path / "elsewhere.so", ext / "op" / "link.so")
    (ext / "op" / "op.so").write_bytes(b"other")
    found = suspects(str(ext), recorded, since)
    assert [f.split(" ")[0] for f in found] == [os.path.join("op", "link.so"), os.path.join("op", "op.so")], found
    fresh, named = guard(str(ext), {"since": since, "libraries": recorded})
    assert named == found and os.path.dirname(fresh) == str(ext.parent) and os.listdir(fresh) == []
    assert (ext / "op" / "op.so").read_bytes() == b"other"  # the shared folder is left as found


def test_a_prebuild_does_not_build_on_a_folder_changed_during_the_suite(tmp_path):
    from kforge_worker.compile_capture import extension_dir
    from kforge_worker.prebuild import build

    import torch

    path = candidate("cached_build_victim")
    source = open(path).read()
    cache = str(tmp_path / "cache")
    since = time.time() * 1000
    built = build(path, cache, source, since)
    assert built["ok"] and list(built["libraries"]) == [_CACHED], built
    folder = extension_dir(cache, source.encode(), torch.__version__, torch.version.cuda)
    assert os.path.isfile(os.path.join(folder, _CACHED))

    again = build(path, cache, source, since)  # its own build, changed after `since`: nothing here vouches for it
    assert not again["ok"] and again["libraries"] is None and "changed during this suite" in again["error"]
    assert build(path, cache, source, since + 60_000)["ok"]  # a build older than the suite is built on
