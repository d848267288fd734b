"""Run a KernelBench-style ModelNew once and save what it returns.

    python main.py PROBLEM.py SOLUTION.py

Reads model arguments, weights and inputs from data.pt beside this file (a contiguous input as raw bytes in a file
of its own, named there), and writes each output's raw bytes to out_K.bin with their shapes and dtypes in out.json.
This file is copied, as main.py, into a scratch folder and run there by checks/disguised.py: a plain script in a plain
process, as a user's own would be. It imports nothing of kforge's and must stay that way.
"""

import importlib.util
import json
import math
import os
import sys

import torch
from torch.nn.parameter import is_lazy


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build(cls, args, seed, example):
    torch.manual_seed(seed)
    model = cls(*args)
    if any(is_lazy(t) for t in [*model.parameters(), *model.buffers()]):
        inputs = example()
        inputs = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        training = {m: m.training for m in model.modules()}
        model.eval()
        try:
            with torch.no_grad():
                model(*[x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs])
        except Exception:
            pass  # a kernel that runs only on the GPU: the weights loaded below shape them
        for m, mode in training.items():
            m.training = mode
    torch.seed()
    return model


def raw_size(item):
    """Bytes of a tensor stored as its raw bytes: {"file", "shape", "dtype"}."""
    return math.prod(item["shape"]) * torch.empty((), dtype=getattr(torch, item["dtype"])).element_size()


def read_raw(folder, item):
    """A tensor stored as its raw bytes: {"file", "shape", "dtype"} (written by write_raw)."""
    dtype = getattr(torch, item["dtype"])
    size = raw_size(item)
    if size == 0:
        return torch.empty(item["shape"], dtype=dtype)
    raw = torch.from_file(os.path.join(folder, item["file"]), shared=False, size=size, dtype=torch.uint8)
    return raw.view(dtype).reshape(item["shape"])


def write_raw(folder, name, tensor):
    tensor = tensor.detach().contiguous()
    with open(os.path.join(folder, name), "wb") as f:
        if tensor.numel():
            tensor.reshape(-1).view(torch.uint8).cpu().numpy().tofile(f)
    return {"file": name, "shape": list(tensor.shape), "dtype": str(tensor.dtype).removeprefix("torch.")}


def flat(value):
    if isinstance(value, torch.Tensor):
        return [value.detach().cpu()]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in flat(item)]
    return [torch.as_tensor(value)]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    problem_path, solution_path = sys.argv[1], sys.argv[2]
    for folder in (os.path.dirname(problem_path), os.path.dirname(solution_path)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    problem = load(problem_path)
    solution = load(solution_path)
    data = torch.load(os.path.join(here, "data.pt"), weights_only=False)
    device = torch.device(data["device"])
    torch.backends.cuda.matmul.allow_tf32 = data["allow_tf32"]
    torch.backends.cudnn.allow_tf32 = data["allow_tf32"] or torch.backends.cudnn.allow_tf32
    model = build(solution.ModelNew, data["init_inputs"], data["seed"], problem.get_inputs)
    model = model.to(device)
    if data["dtype"] is not None:
        model = model.to(getattr(torch, data["dtype"]))
    state, own = data["state"], model.state_dict()
    # The reference's weights, where they fit by name and shape; otherwise both were made from the same seed
    if set(state) == set(own) and all(not hasattr(v, "shape") or is_lazy(own[k]) or own[k].shape == v.shape
                                      for k, v in state.items()):
        model.load_state_dict(state, strict=True)
    inputs = [read_raw(here, x["raw"]) if isinstance(x, dict) and set(x) == {"raw"} else x for x in data["inputs"]]
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        out = model(*inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    manifest = [write_raw(here, f"out_{k}.bin", t) for k, t in enumerate(flat(out))]
    with open(os.path.join(here, "out.json"), "w") as f:
        json.dump(manifest, f)


if __name__ == "__main__":
    main()
