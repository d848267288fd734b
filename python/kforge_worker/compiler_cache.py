"""torch's compiler caches, private to each process of one evaluation.

inductor (torch.compile's default backend) keeps what it generates in one directory per user,
``/tmp/torchinductor_<user>`` (TORCHINDUCTOR_CACHE_DIR); Triton in ``~/.triton/cache`` (TRITON_CACHE_DIR); PyTorch's
jiterator (CUDA only) in ``~/.cache/torch/kernels`` (PYTORCH_KERNEL_CACHE_PATH). Every later process of that user
reads them: the graphs' output code (``<hash>.py``, loaded by path whenever the file exists, whatever it holds now —
exec of the file, outside the import system the reference process's seal vets), the C++ kernels' ``.so`` files, the
FX graph and AOT autograd caches, compiled kernels. Keyed by content or by name, never checked against what the file
holds. Red team round 16: a suite's candidate rewrote every output-code module there at import (``call`` returning
3× its outputs, mtimes put back) and the next candidate's honest ``torch.compile`` ran it (``incorrect``:
adv_suite_inductor_poison); a candidate compiled a reference's ``torch.compile``'d helper into the shared directory
and rewrote it to sleep 3 ms a call, and the clean reference process loaded it (``correct`` at 15.5×, honestly
1.54×: adv_inductor_reference_poison).

So the worker compiles into a directory of its own, made after the CLI's ``go`` (a worker started ahead waits while
earlier candidates of its suite run: it has no directory they could find until they are done), and the clean
reference process into another, made before the candidate exists and passed in its environment; both are removed at
the end. A candidate's path into a private directory not its own process's is a runtime_audit event (is_foreign).
What a compiled function runs is what its own process compiled. The cost is the cache across runs (a torch.compile
candidate, or a reference that compiles, compiles afresh in every evaluation). An operator's own
TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR or PYTORCH_KERNEL_CACHE_PATH is replaced as well: it is as writable by the
candidates as the default. Not covered: ``kforge optimize``'s own processes (its torch.compile baseline reads the
shared directory, which candidates can still write).
"""

from __future__ import annotations

import os
import shutil
import tempfile

PREFIX = "kforge-compile-"
VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "PYTORCH_KERNEL_CACHE_PATH")


# This process's own private directory (make_private): every other directory of ours (the clean reference process's,
# another evaluation's) is out of the candidate's reach — runtime_audit names a path under one (is_foreign).
OWN: str | None = None


def make_directory() -> str:
    """A fresh directory (mode 0700) for one process's compiler caches, named after this process (its pid: the one
    whose end leaves it to be removed), the directories of processes no longer alive removed first (a worker killed
    at its deadline removes nothing)."""
    sweep()
    directory = os.path.realpath(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    os.makedirs(os.path.join(directory, "torch_kernels"), exist_ok=True)  # PyTorch creates no base folder itself
    return directory


def environment(directory: str) -> dict[str, str]:
    """The variables that point inductor (it reads TORCHINDUCTOR_CACHE_DIR at every use), Triton and PyTorch's own
    CUDA kernel cache (the jiterator's NVRTC cubins, read back by a file name made from the kernel's source, not from
    its contents: ~/.cache/torch/kernels by default — GPU only, unexercised on this CPU round) at ``directory``."""
    return {"TORCHINDUCTOR_CACHE_DIR": directory, "TRITON_CACHE_DIR": os.path.join(directory, "triton"),
            "PYTORCH_KERNEL_CACHE_PATH": os.path.join(directory, "torch_kernels")}


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


def sweep() -> None:
    """Removes the private directories (in the temporary directory) whose maker is no longer alive."""
    root = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def remove(directory: str | None) -> None:
    if directory and os.path.basename(directory).startswith(PREFIX):
        shutil.rmtree(directory, ignore_errors=True)
