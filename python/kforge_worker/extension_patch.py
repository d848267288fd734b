"""Swapping torch.utils.cpp_extension's build functions for wrappers, and back.

Two recorders need this: the compile capture (logs, timings, compile_error) and the verification's
extension recorder (which compiled code the forward really calls). Each supplies its own ``_wrap``.
"""

from __future__ import annotations

from typing import Any

BUILD_FUNCTIONS = ("load_inline", "load")


class CppExtensionPatch:
    """Mixin: ``install`` replaces load_inline/load with ``self._wrap(name, original)``; ``uninstall``
    restores the originals. Subclasses declare ``_originals: dict[str, Any]`` (empty at start)."""

    _originals: dict[str, Any]

    def _wrap(self, fn_name: str, original: Any) -> Any:
        raise NotImplementedError

    def install(self) -> None:
        import torch.utils.cpp_extension as cpp_extension

        for fn_name in BUILD_FUNCTIONS:
            original = getattr(cpp_extension, fn_name)
            self._originals[fn_name] = original
            setattr(cpp_extension, fn_name, self._wrap(fn_name, original))

    def uninstall(self) -> None:
        import torch.utils.cpp_extension as cpp_extension

        for fn_name, original in self._originals.items():
            setattr(cpp_extension, fn_name, original)
        self._originals.clear()
