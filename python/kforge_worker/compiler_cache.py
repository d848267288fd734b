"""torch's compiler caches, private to one evaluation.

inductor (torch.compile's default backend) keeps what it generates in one directory per user,
``/tmp/torchinductor_<user>`` (TORCHINDUCTOR_CACHE_DIR), and Triton in ``~/.triton/cache`` (TRITON_CACHE_DIR) —
read by every later process of that user: the graphs' output code (``<hash>.py``, loaded by path whenever the file
exists, whatever it holds now), the C++ kernels' ``.so`` files, the FX graph and AOT autograd caches, Triton's
compiled kernels. Keyed by content, never checked against it. Red team round 16 (adv_suite_inductor_poison): a
candidate of a suite rewrote every output-code module there at import (its ``call`` returning 3× its outputs, mtimes
put back); the next candidate, an honest ``torch.compile`` of the same kind of graph, loaded the rewritten module and
was judged ``incorrect`` — the writer's code ran as the victim's (it could as well answer wrong only when timed, or
run anything). The same write reaches a later run of any torch.compile candidate, and the ``torch.compile`` baseline
of ``kforge optimize``.

So each evaluation compiles into a directory of its own, made after the CLI's ``go`` (a worker started ahead
waits while earlier candidates of its suite run; it has no directory they could find until they are done) and
removed at its end: what a candidate's compiled code is, is what this process compiled. The cost is the cache across
runs (a torch.compile candidate compiles afresh in every evaluation). An operator's own TORCHINDUCTOR_CACHE_DIR or
TRITON_CACHE_DIR is replaced as well: it is as writable by the candidates as the default one.
"""

from __future__ import annotations

import os
import shutil
import tempfile

PREFIX = "kforge-compile-"
VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


# This process's own private directory (make_private): every other directory of ours (the clean reference process's,
# another evaluation's) is out of the candidate's reach — runtime_audit names a path under one (is_foreign).
OWN: str | None = None


def make_directory() -> str:
    """A fresh directory (mode 0700) for one process's compiler caches."""
    return os.path.realpath(tempfile.mkdtemp(prefix=PREFIX))


def environment(directory: str) -> dict[str, str]:
    """The variables that point inductor (it reads TORCHINDUCTOR_CACHE_DIR at every use) and Triton at
    ``directory``."""
    return {"TORCHINDUCTOR_CACHE_DIR": directory, "TRITON_CACHE_DIR": os.path.join(directory, "triton")}


def make_private() -> str:
    """This process's private directory, the variables pointing at it."""
    global OWN
    directory = make_directory()
    os.environ.update(environment(directory))
    OWN = directory + os.sep
    return directory


def is_foreign(path: str) -> bool:
    """Whether ``path`` (symlinks and relative parts resolved) lies in a private compiler directory that is not this
    process's own: the clean reference process's (compiled code it will load: red team round 16,
    adv_inductor_reference_poison), or another evaluation's."""
    if not path or (PREFIX not in path and os.path.isabs(path)):
        return False  # an absolute path reaches one only through a link, whose making (os.symlink) names it
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    if OWN is not None and (real + os.sep).startswith(OWN):
        return False
    return any(part.startswith(PREFIX) for part in real.split(os.sep))


def forget_loaded() -> None:
    """Code torch already loaded from the shared directory in this process (nothing, before a candidate exists:
    called to be sure) is dropped from its in-memory caches, so a later compile looks only in the private one."""
    import sys

    if "torch._inductor.codecache" not in sys.modules:
        return
    try:
        from torch._inductor.utils import clear_caches

        clear_caches()
    except Exception:  # noqa: BLE001 — an old torch: nothing cached to drop
        pass


def remove(directory: str | None) -> None:
    if directory and os.path.basename(directory).startswith(PREFIX):
        shutil.rmtree(directory, ignore_errors=True)
