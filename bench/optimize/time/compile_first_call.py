"""Where a served bench worker's preparation goes: python + torch import, CUDA context, the problem's model and
inputs, the compiler's imports, and torch.compile(reference)'s first call, each timed on its own. Run it twice
with one TORCHINDUCTOR_CACHE_DIR (cold, then warm) and with TORCHINDUCTOR_COMPILE_THREADS set or not to see
what the compiler's worker pool costs when every kernel is already cached.

    python compile_first_call.py PROBLEM.py   ->  one JSON line of seconds
"""

import copy
import importlib.util
import json
import os
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

seconds = {"import_torch": time.perf_counter() - t0}


def step(name, fn):
    start = time.perf_counter()
    out = fn()
    seconds[name] = time.perf_counter() - start
    return out


step("cuda_init", lambda: torch.zeros(1, device="cuda") + 1)
spec = importlib.util.spec_from_file_location("problem", sys.argv[1])
problem = importlib.util.module_from_spec(spec)
spec.loader.exec_module(problem)
torch.manual_seed(0)
ref = step("model_build", lambda: problem.Model(*problem.get_init_inputs()).cuda())
inputs = step("inputs", lambda: [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()])
step("compiler_imports", lambda: __import__("torch._inductor.compile_fx"))
compiled = torch.compile(copy.deepcopy(ref))


def call():
    with torch.no_grad():
        out = compiled(*inputs)
    torch.cuda.synchronize()
    return out


step("compile_first_call", call)
step("second_call", call)
seconds["total"] = time.perf_counter() - t0
print(json.dumps({"problem": os.path.basename(sys.argv[1]),
                  "compile_threads": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "default"),
                  **{k: round(v, 3) for k, v in seconds.items()}}))
