"""Device script for long key rows (issue 16): more than 1024 keys and more than 16 query rows run in key chunks
(`PATH_CHUNKED`: each chunk on a wgmma kernel, the chunks merged by their rows' log-sum-exp). Sweep + benchmarks.

Run on the GPU host from the repo root:  python3 bench/attention/long_context.py [--out DIR] [--no-bench]
It imports generated/attention/model_new.py (what ships) and uses decode_gqa.py's and device_run.py's helpers.

Correctness: fresh random inputs per case, a float64 reference (K/V heads repeated for GQA), the output allocation
poisoned (NaN) first, err(ours) <= 2 * err(PyTorch SDPA on the same inputs), 1e-5 floor. Cases: S_k from 1025
(two chunks, the second short) to 16384, S_q below, equal to and above S_k (causal rows past the last key), head
dims 264..1024 with D_qk != D_v, GQA ratios 1/2/4/8, causal, strided views, zero/negative/large scales, keys whose
later chunks hold far larger scores than the first (the merge's rescale); and calls whose scratch exceeds the 1 GiB
bound, so the extension takes batches and K/V head groups one after another (checked on sampled heads).
Records: one per benchmark configuration, `records/<name>.json` under --out, as decode_gqa.py's.
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_gqa import bench, case, make, record_name, repeat_kv, torch_sdpa  # noqa: E402
from device_run import device_env, load_built, ref64, rel_err, run_poisoned, summarize_sweep  # noqa: E402

LONG_CONFIGS = [
    dict(b=4, hq=8, hkv=8, sq=4096, sk=4096, d=1024, dtype=torch.float16, causal=False),  # issue 16's target
    dict(b=2, hq=16, hkv=2, sq=8192, sk=8192, d=512, dtype=torch.bfloat16, causal=True),  # issue 16's GQA target
    dict(b=4, hq=16, hkv=16, sq=4096, sk=4096, d=512, dtype=torch.float16, causal=False),  # the old fallback grid
    dict(b=4, hq=16, hkv=16, sq=4096, sk=4096, d=512, dtype=torch.float16, causal=True),
    dict(b=4, hq=8, hkv=8, sq=2048, sk=2048, d=1024, dtype=torch.bfloat16, causal=True),
    dict(b=4, hq=16, hkv=16, sq=512, sk=8192, d=512, dtype=torch.float16, causal=False),  # prefill on a long cache
    dict(b=1, hq=16, hkv=4, sq=16384, sk=16384, d=512, dtype=torch.bfloat16, causal=True),
    # Not a long row: issue 16's causal target, on the split kernel as the chunks' diagonal is.
    dict(b=8, hq=16, hkv=16, sq=1024, sk=1024, d=1024, dtype=torch.bfloat16, causal=True),
]


def sweep(mod):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(2468)
    res = []
    chunked = mod.PATH_CHUNKED
    i = 0
    for dtype in (torch.float16, torch.bfloat16):
        for sk in (1025, 1500, 2048, 4097, 8192, 16384):
            for sq_kind in ("short", "equal", "long"):
                for d, dv in ((512, 512), (1024, 1024), (264, 512), (512, 264)):
                    i += 1
                    if sk * max(d, dv) >= 8192 * 1024 and i % 2:
                        continue  # the largest combinations on half of the cases
                    sq = {"short": 17 + (i * 37) % 300, "equal": sk, "long": sk + 129}[sq_kind]
                    if sk >= 8192 and sq_kind == "long":
                        sq = sk + 64
                    g = (1, 2, 4, 8)[i % 4]
                    hkv = 1 + i % 2
                    heads = max(1, 2**30 // (sq * sk))  # the float64 reference's scores within 8 GB
                    if hkv * g > heads:
                        hkv, g = 1, max(x for x in (1, 2, 4, 8) if x <= max(heads, 1))
                    causal = i % 3 != 0
                    scale = (1 / math.sqrt(d), 0.0, -0.3 / math.sqrt(d), 3.0 / math.sqrt(d))[i % 4 if i % 5 == 0 else 0]
                    b = 1 if 2 * sq * sk * g * hkv > 2**30 else 1 + i % 2
                    case(mod, res, "chunked", b, hkv * g, hkv, sq, sk, d, dv, dtype, causal, i % 3 == 1, scale,
                         chunked, gen)

    def growth(q, k, v):  # later chunks with far larger scores than the first, a row's maximum in the last key
        k[:, :, k.shape[2] // 2:] *= 6
        k[:, :, -1] *= 3

    for dtype in (torch.float16, torch.bfloat16):
        for sk, causal in ((3000, False), (5000, True)):
            case(mod, res, "chunked_growth", 1, 4, 2, sk, sk, 512, 512, dtype, causal, False, 1 / math.sqrt(512),
                 chunked, gen, growth)
    # The dispatcher sends these calls to the chunks, scratch bound and all (sdpa, not kforge_attention).
    for dtype, causal in ((torch.float16, False), (torch.bfloat16, True)):
        q, k, v = make(2, 8, 2, 1000, 3000, 512, 512, dtype, False, gen)
        ref = ref64(q, *repeat_kv(q, k, v), causal, 1 / math.sqrt(512))
        torch_err = rel_err(torch_sdpa(q, k, v, causal, 1 / math.sqrt(512)), ref)
        out, poisoned = run_poisoned(lambda: mod.scaled_dot_product_attention(q, k, v, is_causal=causal,  # noqa: B023
                                                                               enable_gqa=True), q.shape, dtype)
        err = rel_err(out, ref)
        res.append(dict(case="sdpa_dispatch", dtype=str(dtype).split(".")[-1], b=2, hq=8, hkv=2, sq=1000, sk=3000,
                        d=512, dv=512, causal=causal, strided=False, scale=1 / math.sqrt(512),
                        path=mod.dispatch(q, k, v, is_causal=causal, enable_gqa=True)[0], err=err, torch_err=torch_err,
                        poisoned=poisoned, ok=err <= max(2 * torch_err, 1e-5)))
    res += scratch_groups(mod, gen)
    return res


def scratch_groups(mod, gen):
    """Calls above the 1 GiB scratch bound: whole batches at a time, K/V head groups within a batch, blocks of query
    rows within a group (causal: the blocks' rows offset from the keys). The float64 reference on the first and
    last K/V head group of the first and last batch entry."""
    res = []
    for b, hq, hkv, s, d, causal in ((6, 8, 8, 4096, 1024, False), (1, 32, 16, 8192, 512, True),
                                     (1, 8, 1, 16384, 512, True), (1, 4, 1, 20000, 1024, False)):
        dtype = torch.float16
        q, k, v = make(b, hq, hkv, s, s, d, d, dtype, False, gen)
        chunk = mod.chunk_plan(s, causal, 1.0)[0]
        scratch = -(-s // chunk) * b * hq * s * (d * q.element_size() + 4)  # every chunk's output rows + statistics
        out, poisoned = run_poisoned(lambda: mod.kforge_attention(q, k, v, is_causal=causal,  # noqa: B023
                                                                  path=mod.PATH_CHUNKED), (b, hq, s, d), dtype)
        g = hq // hkv
        for bi in sorted({0, b - 1}):
            for hk in sorted({0, hkv - 1}):
                heads = slice(hk * g, hk * g + min(g, 2))  # two query heads of the group: float64 scores fit
                qs, ks, vs = q[bi:bi + 1, heads], k[bi:bi + 1, hk:hk + 1], v[bi:bi + 1, hk:hk + 1]
                kr, vr = repeat_kv(qs, ks, vs)
                ref = ref64(qs, kr, vr, causal, 1 / math.sqrt(d))
                torch_err = rel_err(torch_sdpa(qs, kr, vr, causal, 1 / math.sqrt(d)), ref)
                err = rel_err(out[bi:bi + 1, heads], ref)
                res.append(dict(case="scratch_groups", dtype="float16", b=b, hq=hq, hkv=hkv, sq=s, sk=s, d=d, dv=d,
                                causal=causal, strided=False, scale=1 / math.sqrt(d), path=mod.PATH_CHUNKED, err=err,
                                torch_err=torch_err, poisoned=poisoned, ok=err <= max(2 * torch_err, 1e-5),
                                sampled=dict(batch=bi, kv_head=hk), scratch_gib=scratch / 2**30))
        del q, k, v, out
        torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--run", default="", help="the run's label in the records")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = device_env()
    mod = load_built()
    t0 = time.time()
    res = sweep(mod)
    (out / "long_sweep.json").write_text(json.dumps(dict(env=env, cases=res), indent=1))
    bad = summarize_sweep(res, "case", time.time() - t0)
    if not args.no_bench:
        recs = bench(mod, env, LONG_CONFIGS, reps=10)
        (out / "long_bench.json").write_text(json.dumps(recs, indent=1))
        (out / "records").mkdir(exist_ok=True)
        for rec in recs:
            rec["correct"] = bool(rec["correct"] and not bad)  # true only when the whole sweep passed too
            rec["run"] = args.run
            (out / "records" / record_name(rec["config"])).write_text(json.dumps(rec, indent=1) + "\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
