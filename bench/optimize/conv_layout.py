"""Where the conv anchors' time goes: a problem's first conv timed in NCHW (as eager runs it) and in channels-last
(input converted inside the timed call, weight converted once), with and without converting the output back,
next to the whole model eager and under torch.compile; the compiled model's top GPU kernels from the profiler.

    python bench/optimize/conv_layout.py --out conv_layout.json problems/conv2d_relu_bias.py ...
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).parent))
from bwtime import time_ms  # noqa: E402

CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def load(path: str):
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def channels_last_format(t: torch.Tensor):
    return torch.channels_last_3d if t.dim() == 5 else torch.channels_last


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("problems", nargs="+")
    args = parser.parse_args()
    records = []
    for path in args.problems:
        mod = load(path)
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs()).cuda()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
        conv = next(m for m in model.modules() if isinstance(m, CONVS))
        seen = {}
        handle = conv.register_forward_hook(lambda m, i, o: seen.update(x=i[0]))
        with torch.no_grad():
            model(*inputs)
        handle.remove()
        x = seen["x"]
        fmt = channels_last_format(x)
        w_cl = conv.weight.detach().contiguous(memory_format=fmt)
        fwd = type(conv)._conv_forward if hasattr(type(conv), "_conv_forward") else None
        rec = {"problem": Path(path).stem, "device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat()}
        with torch.no_grad():
            rec["conv_nchw_ms"] = time_ms(lambda: conv(x), args.reps)
            saved = conv.weight.data
            conv.weight.data = w_cl
            rec["conv_cl_ms"] = time_ms(lambda: conv(x.contiguous(memory_format=fmt)), args.reps)
            rec["conv_cl_back_ms"] = time_ms(lambda: conv(x.contiguous(memory_format=fmt)).contiguous(), args.reps)
            xc = x.contiguous(memory_format=fmt)
            rec["conv_cl_preconverted_ms"] = time_ms(lambda: conv(xc), args.reps)
            conv.weight.data = saved
            rec["eager_ms"] = time_ms(lambda: model(*inputs), args.reps)
            compiled = torch.compile(model)
            rec["compile_ms"] = time_ms(lambda: compiled(*inputs), args.reps)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    compiled(*inputs)
                torch.cuda.synchronize()
            events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
            events.sort(key=lambda e: -e.device_time_total)
            rec["compiled_kernels"] = [
                {"name": e.key[:120], "ms": e.device_time_total / 1000 / 3} for e in events[:6]
            ]
            out = compiled(*inputs)
            rec["compiled_out_strides"] = list(out.stride()) if isinstance(out, torch.Tensor) else None
        print(json.dumps(rec), flush=True)
        records.append(rec)
        Path(args.out).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
