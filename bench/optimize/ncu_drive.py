"""Runs an emitted ModelNew's forward a few times on its problem's inputs, for ncu to profile its kernels.

On the GPU host (device run 113 profiled the scan kernel this way):
    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats -k regex:kf_scan_rows -c 1 \
        python3 bench/optimize/ncu_drive.py EMITTED_new.py PROBLEM.py
"""

import importlib.util
import sys

import torch


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    new, problem = load(sys.argv[1], "emitted"), load(sys.argv[2], "problem")
    torch.manual_seed(0)
    model = new.ModelNew(*problem.get_init_inputs()).cuda()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in problem.get_inputs()]
    # Without grad: a ModelNew runs the reference's ops while autograd records (its parameters require grad).
    with torch.no_grad():
        for _ in range(3):
            out = model(*inputs)
    torch.cuda.synchronize()
    print(sys.argv[1], "ran", tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__)


if __name__ == "__main__":
    main()
