"""Line-per-key differences between two snapshots (files, module globals, the environment)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def keyed_changes(before: Mapping[str, Any], now: Mapping[str, Any], added: Callable[[str, Any], str],
                  removed: Callable[[str, Any], str], changed: Callable[[str, Any, Any], str],
                  skip: Callable[[str], bool] = lambda key: False) -> list[str]:
    """One line per key whose value differs, in key order; a key absent (or None) on one side was added or removed."""
    out = []
    for key in sorted(before.keys() | now.keys()):
        was, is_ = before.get(key), now.get(key)
        if was == is_ or skip(key):
            continue
        if was is None:
            out.append(added(key, is_))
        elif is_ is None:
            out.append(removed(key, was))
        else:
            out.append(changed(key, was, is_))
    return out
