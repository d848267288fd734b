"""Every CPU-runnable corpus entry, each in its own worker process, must get exactly its label.

The workers are forked from corpus.ForkServer (fork_server.py) rather than started as fresh interpreters;
test_a_forked_worker_meets_the_candidate_as_a_fresh_one_does holds the two ways to the same state.

The manifest (test/verify/manifest.json) names, per entry, the verdict it must get and the check that must
fail with it; honest entries must come out `correct` with no failing check. Entries with a `strict` block run
a second time under --strict (`<id>@strict`) and must get that label. An entry with `caughtBy` may be
rejected by any one of the listed (verdict, check) pairs (corpus.py says when). GPU-only entries run in the
device script (bench/verify/run_corpus.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("kforge_verify_corpus", os.path.join(ROOT, "test", "verify", "corpus.py"))
corpus = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = corpus  # dataclasses look their module up there
_spec.loader.exec_module(corpus)  # type: ignore[union-attr]

ENTRIES = [e for e in corpus.with_strict_variants(corpus.load_manifest()) if e["cpu"]]
JOBS = int(os.environ.get("KFORGE_VERIFY_JOBS", "2"))


def _builds(entry: dict) -> bool:
    path = os.path.join(ROOT, entry["candidate"])
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf8", errors="replace") as f:
        return "load_inline" in f.read()


def _expected_cost(entry: dict) -> int:
    # "heavy": an untimed entry run only under -m heavy, its defence covered by a unit test (CI's time budget)
    return 2 * _builds(entry) + bool(entry.get("time")) + bool(entry.get("heavy"))


def _run_entries(entries: list[dict]) -> dict:
    """Every runnable one of `entries`, each in its own worker process, JOBS at a time (CI has two cores)."""
    runnable = [e for e in entries if os.path.exists(os.path.join(ROOT, e["candidate"]))]
    # Longest first (a C++ build, a timing loop), so the two jobs end together instead of one finishing a build alone.
    runnable.sort(key=lambda e: -_expected_cost(e))
    # Each worker forked from a server that imported torch once (test_a_forked_worker_... says it is the same
    # worker); a fresh interpreter per entry would spend minutes of CI's two cores importing torch.
    done = corpus.run_all(runnable, "cpu", JOBS, python=sys.executable, via="fork")
    return {o.entry["id"]: o for o in done}


# The entries that build a C++ extension on a cold cache, run a timing loop or say "heavy" (_expected_cost) run
# under -m heavy: with them the default run took 19 min 59 s on this machine at 6266235, over CI's 20 minutes
# where CI runs slower. The red-team test files keep a unit test of each defence those entries exercise.
CHEAP = [e for e in ENTRIES if _expected_cost(e) == 0]
COSTLY = [e for e in ENTRIES if _expected_cost(e) > 0]


def _representatives(entries: list[dict]) -> list[dict]:
    """What CI's default run keeps of the cheap entries: every honest entry and every --strict variant of one (a false
    flag is the costliest miss), and for each check that catches an attack, the first attack it catches. The
    other attacks (each defence they exercise has its unit test in the red-team files) run under -m heavy with
    the rest: CI at ~22 min with all of them, over its 20."""
    kept: list[dict] = []
    seen: set[object] = set()
    for e in entries:
        strict_of_honest = "@strict" in e["id"] and e["id"].startswith("honest_")
        if e["expect"] == "correct" or strict_of_honest or e["check"] not in seen:
            kept.append(e)
            seen.add(e["check"])
    return kept


DEFAULT = _representatives(CHEAP)
MORE = [e for e in CHEAP if e not in DEFAULT]


@pytest.fixture(scope="module")
def outcomes():
    return _run_entries(DEFAULT)


@pytest.fixture(scope="module")
def more_outcomes():
    return _run_entries(MORE)


@pytest.fixture(scope="module")
def timed_outcomes():
    return _run_entries(COSTLY)


def test_manifest_covers_every_pattern_and_enough_honest_entries():
    entries = corpus.load_manifest()
    patterns = {p for e in entries for p in e["patterns"]}
    assert patterns == set(range(1, 24)), f"patterns without an entry: {sorted(set(range(1, 24)) - patterns)}"
    adversarial = [e for e in entries if e["expect"] != "correct"]
    honest = [e for e in entries if e["expect"] == "correct"]
    assert len(adversarial) >= 20 and len(honest) >= 6
    for e in entries:
        assert os.path.exists(os.path.join(ROOT, e["problem"])), e["problem"]
        assert os.path.exists(os.path.join(ROOT, e["candidate"])) or e.get("optional"), e["candidate"]
        assert (e["check"] is None) == (e["expect"] == "correct"), e["id"]
        if "strict" in e:
            assert set(e["strict"]) == {"expect", "check"}, e["id"]
            assert (e["strict"]["check"] is None) == (e["strict"]["expect"] == "correct"), e["id"]
        if "caughtBy" in e:  # alternatives to a rejection, never a way to let a candidate through
            pairs = [(c["expect"], c["check"]) for c in e["caughtBy"]]
            assert pairs[0] == (e["expect"], e["check"]) and len(set(pairs)) == len(pairs) >= 2, e["id"]
            assert all(v in ("cheating", "incorrect") and c for v, c in pairs), e["id"]
    # The policy split itself is covered: library answers that only --strict condemns, on CPU and GPU.
    split = [e for e in entries if e["expect"] == "correct" and e.get("strict", {}).get("expect") == "cheating"]
    assert any(e["cpu"] for e in split) and any("conv" in e["problem"] for e in split)


def test_a_forked_worker_meets_the_candidate_as_a_fresh_one_does(tmp_path):
    """The fixture's workers are forked from fork_server.py, which imported torch ahead of them. The candidate
    must find the same modules loaded as under `python -m kforge_worker` (whose entry module is __main__ there;
    a candidate's module is named after its path), none of kforge_worker's own imported by the server (they would
    carry its pid and state), and get the same verdict."""
    entry = next(e for e in corpus.load_manifest() if e["id"] == "honest_linear_broadcast")
    with open(os.path.join(ROOT, entry["candidate"]), encoding="utf8") as f:
        source = f.read()
    loaded, outcomes = {}, {}
    server = corpus.ForkServer()
    try:
        assert "torch" in server.modules and not [m for m in server.modules if m.startswith("kforge_worker")]
        for via in ("worker", "fork"):
            dump = tmp_path / f"{via}.modules"
            folder = tmp_path / via
            folder.mkdir()
            candidate = folder / "candidate.py"
            # The worker's import only (the disguised run imports the file again in a plain process of its own)
            candidate.write_text(f"import os, sys\nif not os.path.exists({str(dump)!r}):\n"
                                 f"    open({str(dump)!r}, 'w').write('\\n'.join(sys.modules))\n{source}")
            outcomes[via] = corpus.run_entry({**entry, "candidate": str(candidate)}, "cpu", via=via, server=server)
            loaded[via] = {m for m in dump.read_text().split("\n") if not m.startswith("kforge_candidate_")}
    finally:
        server.close()
    assert loaded["fork"] - loaded["worker"] == {"kforge_worker.__main__"}
    assert not loaded["worker"] - loaded["fork"]
    assert len(loaded["worker"]) > 1000 and "torch._dynamo" in loaded["worker"]
    assert [(o.verdict, o.failing) for o in outcomes.values()] == [("correct", [])] * 2, outcomes


def _outcome(entry, verdict, failing):
    return corpus.Outcome(entry, verdict, failing, "why", 0.0, None)


def test_caught_by_accepts_only_the_listed_rejections():
    """adv_cpp_static_cache's stale output is caught by whichever check first meets a recurring address:
    either listed pair passes, anything else (a pass, another check, a verdict paired with the other check)
    is a miss."""
    entry = next(e for e in corpus.load_manifest() if e["id"] == "adv_cpp_static_cache")
    assert corpus.labels(entry) == [("cheating", "timed_spot_check"), ("incorrect", "state_reload"),
                                    ("cheating", "timed_outputs"), ("incorrect", "input_distribution")]
    assert _outcome(entry, "cheating", ["timed_spot_check"]).ok
    assert _outcome(entry, "incorrect", ["state_reload", "timed_outputs"]).ok
    assert not _outcome(entry, "correct", []).ok
    assert not _outcome(entry, "incorrect", ["timed_outputs"]).ok
    assert not _outcome(entry, "incorrect", ["timed_spot_check"]).ok
    assert not _outcome(entry, "cheating", ["state_reload"]).ok
    assert "cheating (timed_spot_check) or incorrect (state_reload)" in _outcome(entry, "runtime_error", []).miss
    # Without the field an entry has one label; a strict variant never inherits the alternatives.
    plain = {k: v for k, v in entry.items() if k != "caughtBy"}
    assert corpus.labels(plain) == [("cheating", "timed_spot_check")]
    assert not _outcome(plain, "incorrect", ["state_reload"]).ok
    assert "caughtBy" not in corpus.strict_variant({**entry, "strict": {"expect": "cheating", "check": "banned_ops"}})


@pytest.mark.parametrize("entry", DEFAULT, ids=[e["id"] for e in DEFAULT])
def test_corpus_entry_gets_its_label(entry, outcomes):
    _assert_labelled(entry, outcomes)


@pytest.mark.heavy
@pytest.mark.parametrize("entry", MORE, ids=[e["id"] for e in MORE])
def test_more_corpus_entry_gets_its_label(entry, more_outcomes):
    _assert_labelled(entry, more_outcomes)


@pytest.mark.heavy
@pytest.mark.parametrize("entry", COSTLY, ids=[e["id"] for e in COSTLY])
def test_timed_corpus_entry_gets_its_label(entry, timed_outcomes):
    _assert_labelled(entry, timed_outcomes)


def _assert_labelled(entry: dict, outcomes: dict) -> None:
    if not os.path.exists(os.path.join(ROOT, entry["candidate"])):
        pytest.skip(f"{entry['candidate']} not generated yet")
    outcome = outcomes[entry["id"]]
    assert outcome.miss is None, outcome.miss  # the corpus runner's own judgement (corpus.py: Outcome.miss)


def _check(outcome, name):
    return next(c for c in outcome.result["checks"] if c["name"] == name)


def test_a_library_answer_is_disclosed_by_default_and_condemned_under_strict(outcomes):
    """The same pure-PyTorch GEMM answer: `correct` with the GEMM named in a warning, then `cheating` under
    --strict with the same op named as the failure."""
    default, strict = outcomes["honest_library_gemm"], outcomes["honest_library_gemm@strict"]
    assert default.verdict == "correct" and default.result.get("strict") is False
    disclosed = _check(default, "banned_ops")
    assert disclosed["outcome"] == "warn" and "aten::addmm" in disclosed["evidence"]
    assert "disclosed" in disclosed["evidence"] and "--strict" in disclosed["evidence"]
    assert strict.verdict == "cheating" and strict.result.get("strict") is True
    condemned = _check(strict, "banned_ops")
    assert condemned["outcome"] == "fail" and "aten::addmm" in condemned["evidence"]
    assert strict.reason.startswith("banned_ops")


def test_strict_condemns_only_the_replaced_family(outcomes):
    """--strict condemns the replaced family only: GEMMs inside a hand-written attention stay a warning."""
    strict = outcomes["honest_attention_decomposed@strict"]
    assert strict.verdict == "correct"
    assert _check(strict, "banned_ops")["outcome"] == "warn"


@pytest.mark.heavy
def test_speed_and_robustness_switches_are_disclosed_in_the_json(timed_outcomes):
    """Issue 15: the two honest lines are `correct` with their warning in the result, not silently accepted."""
    benchmark = timed_outcomes["honest_cudnn_benchmark"]
    suppress = timed_outcomes["honest_dynamo_suppress_errors"]
    assert benchmark.verdict == suppress.verdict == "correct"
    for outcome, line in ((benchmark, "torch.backends.cudnn.benchmark = True"),
                          (suppress, "torch._dynamo.config.suppress_errors = True")):
        tamper = _check(outcome, "static_tamper")
        assert tamper["outcome"] == "warn" and line in tamper["evidence"], tamper
    integrity = _check(benchmark, "harness_integrity")
    assert integrity["outcome"] == "warn" and "torch.backends.cudnn.benchmark changed" in integrity["evidence"], integrity
