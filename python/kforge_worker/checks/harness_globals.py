"""The harness's own module state, fingerprinted: the worker's modules live in the candidate's process, and
their globals are the rules of the verdict (the comparison's noise multiple, the tolerances, the bound clock
primitives, the sampling floor). A function replaced there is already seen by the function fingerprint; a
constant rebound (`compare.NOISE_MULTIPLE = 1e12`) or an attribute of a harness object rewritten
(`timing._PRIMITIVES.perf_counter`) changes no function, so the values themselves are compared.

Every harness module is imported before the snapshot: the pipeline imports some lazily (compare,
timed_inputs, float64 ...), and a module first loaded after the snapshot would otherwise go unwatched."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

# Imported eagerly so that they are in the snapshot; optional ones (ray, the optimizer) are not harness rules.
HARNESS_MODULES = (
    "kforge_worker.compare", "kforge_worker.interference", "kforge_worker.timed_inputs", "kforge_worker.timing",
    "kforge_worker.stats",
    "kforge_worker.reference_process", "kforge_worker.channel", "kforge_worker.loading", "kforge_worker.errors",
    "kforge_worker.checks.budget", "kforge_worker.checks.context", "kforge_worker.checks.execution_checks",
    "kforge_worker.checks.float64", "kforge_worker.checks.harness_checks", "kforge_worker.checks.input_checks",
    "kforge_worker.checks.instrument", "kforge_worker.checks.judge", "kforge_worker.checks.ops",
    "kforge_worker.checks.output_checks", "kforge_worker.checks.result", "kforge_worker.checks.roofline",
    "kforge_worker.checks.sealed",
    "kforge_worker.checks.state_checks", "kforge_worker.checks.static_scan", "kforge_worker.checks.trace",
    "kforge_worker.checks.verifier",
)
_SKIPPED_PREFIXES = ("kforge_worker.capture", "kforge_worker.optimize_bench", "kforge_worker.ray_")
# Globals the harness itself rewrites during a run, each guarded by its own check.
_OWN_STATE = {
    ("kforge_worker.compare", "_reference_noise"),  # set from the trials; guarded by harness_state
    ("kforge_worker.checks.context", "_PAIRED_RNG"),  # on while the checks of a dropout problem run
    ("kforge_worker.frame_hook", "left"),  # the harness's record of hooks it took away (a process flag itself)
    # the reference outputs held by the checks and what was found written (checks/sealed.py, its own check)
    ("kforge_worker.checks.sealed", "_held"),
    ("kforge_worker.checks.sealed", "_references"),
    ("kforge_worker.checks.sealed", "broken"),
    # the memory peaks open around the running stage and check group (evidence for the budget, never a verdict)
    ("kforge_worker.checks.peaks", "_OPEN"),
}
_SIMPLE = (bool, int, float, complex, str, bytes, type(None))
_MAX_ITEMS = 256


def import_harness() -> None:
    for name in HARNESS_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 — a module that cannot load here is not in use either
            continue


def _shallow(value: Any) -> Any:
    """One level: simple values by repr, containers by identity and their items' identities, else identity."""
    if isinstance(value, _SIMPLE):
        return repr(value)[:120]
    if isinstance(value, dict) and len(value) <= _MAX_ITEMS:
        return (id(value), tuple((repr(k)[:60], _leaf(v)) for k, v in list(value.items())))
    if isinstance(value, (list, tuple, set, frozenset)) and len(value) <= _MAX_ITEMS:
        return (id(value), tuple(_leaf(v) for v in list(value)))
    return id(value)


def _leaf(value: Any) -> Any:
    return repr(value)[:120] if isinstance(value, _SIMPLE) else id(value)


def _print(value: Any) -> Any:
    if isinstance(value, _SIMPLE) or isinstance(value, (dict, list, tuple, set, frozenset)):
        return ("value", _shallow(value))
    if isinstance(value, ModuleType):
        return ("module", id(value))
    code = getattr(value, "__code__", None)
    if code is not None:
        return ("function", id(value), id(code), id(getattr(value, "__defaults__", None)),
                id(getattr(value, "__kwdefaults__", None)))
    if isinstance(value, type):
        members = tuple((attr, _shallow(raw), id(getattr(getattr(raw, "__func__", raw), "__code__", None)))
                        for attr, raw in sorted(vars(value).items())
                        if attr not in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"))
        return ("class", id(value), members)
    try:
        state = vars(value)
    except TypeError:
        return ("object", id(value))
    return ("object", id(value), tuple((k, _shallow(v)) for k, v in list(state.items())))


def _watched(name: str) -> bool:
    return (name == "kforge_worker" or name.startswith("kforge_worker.")) and not name.startswith(_SKIPPED_PREFIXES)


def harness_fingerprint() -> dict[str, Any]:
    """module.global -> what identifies its value, for every loaded harness module."""
    out: dict[str, Any] = {}
    for mod_name, module in list(sys.modules.items()):
        if module is None or not _watched(mod_name):
            continue
        for attr, value in list(vars(module).items()):
            if (attr.startswith("__") and attr.endswith("__")) or (mod_name, attr) in _OWN_STATE:
                continue
            try:
                out[f"{mod_name}.{attr}"] = _print(value)
            except Exception:  # noqa: BLE001 — an exotic value: identity only
                out[f"{mod_name}.{attr}"] = ("object", id(value))
    return out


def harness_changes(before: dict[str, Any]) -> list[str]:
    """What differs from `before` among the globals it had (modules loaded later are new, not changed)."""
    now = harness_fingerprint()
    changes = []
    for qual, then in before.items():
        current = now.get(qual)
        if current is None:
            changes.append(f"{qual} was deleted")
        elif current != then:
            if then[0] == "value" == current[0] and isinstance(then[1], str) and isinstance(current[1], str):
                changes.append(f"{qual} changed from {then[1]} to {current[1]} (a rule of the harness's own verdict)")
            else:
                changes.append(f"{qual} was changed ({_kind(then)}; a rule of the harness's own verdict)")
    return changes


def _kind(fingerprint: Any) -> str:
    if fingerprint[0] == "value":
        return "a value"
    return {"function": "a function", "class": "a class's attributes", "object": "an object's attributes",
            "module": "a module"}.get(fingerprint[0], "a value")
