# Red team round 16: reference tampering through the clean reference process's own inductor cache directory (after
# each process got a private one): the directories are found by listing the temporary directory; the reference's
# graph is compiled into each (TORCHINDUCTOR_CACHE_DIR pointed there for the call, then put back) and the output code
# rewritten to sleep. Before the private directories: the same as adv_inductor_reference_poison. The reference's helper is
# torch.compile'd (default backend); its compiled output code is a .py module inductor loads by path from
# /tmp/torchinductor_<user> (exec of the file: outside the import system, so the reference process's import seal
# does not vet it). At import this candidate compiles the same helper on inputs of the benchmark's shape (so the
# cache holds the reference's graph), then rewrites every output-code module there to sleep 3 ms per call, mtimes
# put back. Its own forward is plain eager PyTorch: correct, and "faster" than a reference that now sleeps.
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

_PATCH = '''

import time as _rt16_time
def _rt16_wrap(f):
    def wrapped(*a):
        _rt16_time.sleep(0.003)
        return f(*a)
    return wrapped
if "Runner" in globals():
    Runner.call = _rt16_wrap(Runner.call)
    call = runner.call
else:
    call = _rt16_wrap(call)
'''


def _same_graph(x, w, b):
    return F.gelu(x @ w.t() + b)


def _poison_dir(root):
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".py"):
                continue
            p = os.path.join(d, f)
            try:
                with open(p) as fh:
                    text = fh.read()
                if "def call(" not in text or "_rt16_wrap" in text:
                    continue
                st = os.stat(p)
                with open(p, "w") as fh:
                    fh.write(text + _PATCH)
                os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
            except OSError:
                pass


def _poison():
    lin = nn.Linear(64, 64)
    own = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    tmp = tempfile.gettempdir()
    # kforge's private directories only: the shared one is read by no process of an evaluation any more, and a
    # corpus run must leave the machine's own cache as it found it
    roots = [os.path.join(tmp, n) for n in os.listdir(tmp) if n.startswith("kforge-compile-")]
    for root in roots:
        if own and os.path.realpath(root) == os.path.realpath(own):
            continue
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = root
        try:
            torch._dynamo.reset()
            with torch.no_grad():
                torch.compile(_same_graph)(torch.randn(64, 64), lin.weight, lin.bias)
        except Exception:
            pass
        _poison_dir(root)
    if own is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = own
    torch._dynamo.reset()


_poison()


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x):
        return F.gelu(torch.addmm(self.proj.bias, x, self.proj.weight.t()))
