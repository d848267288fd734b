"""One-shape probe of one kernel path (device script): runs it once against a float64 reference and prints
the error next to PyTorch's. Meant for a subprocess under `timeout` before a full sweep, so that a new
kernel that hangs costs seconds instead of the whole device call.

    python3 bench/attention/probe.py PATH_NAME B H SQ SK D [DV] [--causal] [--bf16]
PATH_NAME is a PATH_* constant of the generated ModelNew file (e.g. PATH_WGMMA_1024_REGP_SPLIT).
"""

import argparse
import math

import torch
import torch.nn.functional as F

from device_run import load_generated, make_inputs, ref64, rel_err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("dims", type=int, nargs="+", help="B H SQ SK D [DV]")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--bf16", action="store_true")
    args = ap.parse_args()
    b, h, sq, sk, d = args.dims[:5]
    dv = args.dims[5] if len(args.dims) > 5 else d
    mod = load_generated()
    path = getattr(mod, args.path)
    dtype = torch.bfloat16 if args.bf16 else torch.float16
    gen = torch.Generator(device="cuda")
    gen.manual_seed(5)
    q, k, v = make_inputs(b, h, sq, sk, d, dv, dtype, False, gen)
    ref = ref64(q, k, v, args.causal, 1 / math.sqrt(d))
    out = mod.kforge_attention(q, k, v, is_causal=args.causal, path=path)
    torch.cuda.synchronize()
    err = rel_err(out, ref)
    torch_err = rel_err(F.scaled_dot_product_attention(q, k, v, is_causal=args.causal), ref)
    ok = err <= max(2 * torch_err, 1e-5)
    print(f"probe {args.path} {args.dims} causal={args.causal} {dtype}: err {err:.3e} torch {torch_err:.3e} "
          f"{'OK' if ok else 'FAIL'}", flush=True)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
