"""How accurate can fp32 attention on 16-bit tensor cores be? A go/no-go study before writing the kernel.

Issue 16 asks for fp32 attention whose error vs float64 is at most 2x PyTorch's own fp32 SDPA error. The
candidate method splits every fp32 operand x into hi = round16(x) and lo = round16(x - hi) and sums the
products that matter (hi*hi + hi*lo + lo*hi, optionally lo*lo) with fp32 accumulation. This script emulates
that arithmetic with PyTorch ops and reports each variant's normwise error next to PyTorch's:
- products of two 16-bit values are exact in fp32, so an fp32 GEMM (TF32 off) on 16-bit-representable
  operands reproduces a tensor core's products; where torch offers a 16-bit GEMM with an fp32 result
  (`out_dtype`), that real tensor-core accumulation is measured too;
- P is the unnormalised exp(S - rowmax) in [0, 1], split like the operands, normalised after P*V as the
  kernel does.
Writes one JSON with the errors per (distribution, variant) and prints a table.
"""
import argparse
import json
import math

import torch
import torch.nn.functional as F


def rel_err(out, ref):
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref)).item()


def split(x, dtype):
    hi = x.to(dtype)
    return hi, (x - hi.float()).to(dtype)


def mm_exact(a, b):
    """fp32 GEMM of 16-bit operands: exact products, fp32 accumulation (TF32 off)."""
    return torch.matmul(a.float(), b.float())


def mm_tensor_core(a, b):
    """A 16-bit GEMM with an fp32 result, when this torch has one (None otherwise)."""
    try:
        return torch.bmm(a.flatten(0, 1), b.flatten(0, 1), out_dtype=torch.float32).view(*a.shape[:2], a.shape[2], b.shape[3])
    except (TypeError, RuntimeError):
        return None


def split_product(a, b, dtype, terms, mm):
    ah, al = split(a, dtype)
    bh, bl = split(b, dtype)
    pairs = [(ah, bh), (ah, bl), (al, bh)] + ([(al, bl)] if terms == 4 else [])
    out = None
    for x, y in pairs:
        part = mm(x, y)
        if part is None:
            return None
        out = part if out is None else out + part
    return out


def split_attention(q, k, v, scale, dtype, terms, mm):
    s = split_product(q * scale, k.transpose(-1, -2), dtype, terms, mm)
    if s is None:
        return None
    p = torch.exp(s - s.amax(dim=-1, keepdim=True))
    o = split_product(p, v, dtype, terms, mm)
    return None if o is None else o / p.sum(dim=-1, keepdim=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", default="4,8,512,1024")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    b, h, s, d = (int(x) for x in args.shape.split(","))
    scale = 1 / math.sqrt(d)
    gen = torch.Generator(device=args.device).manual_seed(7)
    rows = []
    for dist in ("rand", "randn", "randn_x8"):
        def make():
            if dist == "rand":
                return torch.rand(b, h, s, d, device=args.device, generator=gen)
            t = torch.randn(b, h, s, d, device=args.device, generator=gen)
            return t * 8 if dist == "randn_x8" else t
        q, k, v = make(), make(), make()
        qd, kd, vd = q.double(), k.double(), v.double()
        ref = torch.matmul(torch.softmax(torch.matmul(qd, kd.transpose(-1, -2)) * scale, dim=-1), vd)
        row = {"dist": dist, "torch_fp32": rel_err(F.scaled_dot_product_attention(q, k, v), ref)}
        for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            for terms in (3, 4):
                for mm_name, mm in (("exact", mm_exact), ("tc", mm_tensor_core)):
                    out = split_attention(q, k, v, scale, dtype, terms, mm)
                    row[f"{name}x{terms}_{mm_name}"] = None if out is None else rel_err(out, ref)
        row["fp32_gemm"] = rel_err(torch.matmul(torch.softmax(torch.matmul(q * scale, k.transpose(-1, -2)), -1), v), ref)
        rows.append(row)
        print(dist, {key: (f"{val:.3g}" if isinstance(val, float) else val) for key, val in row.items() if key != "dist"},
              flush=True)
        del q, k, v, qd, kd, vd, ref
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name() if args.device == "cuda" else args.device, "torch": torch.__version__, "shape": [b, h, s, d],
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
