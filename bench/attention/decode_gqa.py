"""Device script for the attention recipe's decode kernel and grouped K/V heads (issue 16): sweep + benchmarks.

Run on the GPU host from the repo root:  python3 bench/attention/decode_gqa.py [--out DIR] [--no-bench]
It imports generated/attention/model_new.py (what ships), like device_run.py, whose helpers it uses.

Correctness: fresh random inputs per case, a float64 reference (K/V heads repeated for GQA), each kernel run on a
poisoned (NaN-filled) output allocation, err(ours) <= 2 * err(PyTorch SDPA on the same inputs), 1e-5 floor.
Cases: the decode kernel (S_q 1-16) over key lengths 1..32768 (one split up to hundreds), head dims 8..1024 with
D_qk != D_v, GQA ratios 1/2/4/8, causal, strided views, zero/negative scales, and a key range whose later splits
hold far larger scores than the first (the combine's rescale); the other kernels with grouped K/V heads.
Timing: device_run.Timer (CUDA events, L2 flushed, round-robin in shuffled order, medians). For GQA PyTorch is
timed both ways a user can call it - SDPA with enable_gqa=True, and SDPA on K/V repeated to the query heads (the
repeat included) - and the faster is the reference.
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import Timer, device_env, load_built, ref64, rel_err, run_poisoned, summarize_sweep  # noqa: E402


def make(b, hq, hkv, sq, sk, d, dv, dtype, strided, gen):
    def one(h, s, e):
        if strided:  # (B, S, H, D) storage viewed as (B, H, S, D)
            return torch.randn(b, s, h, e, dtype=dtype, device="cuda", generator=gen).transpose(1, 2)
        return torch.randn(b, h, s, e, dtype=dtype, device="cuda", generator=gen)
    return one(hq, sq, d), one(hkv, sk, d), one(hkv, sk, dv)


def repeat_kv(q, k, v):
    g = q.shape[1] // k.shape[1]
    return (k, v) if g == 1 else (k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1))


def torch_sdpa(q, k, v, causal, scale):
    if q.shape[1] != k.shape[1]:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def case(mod, results, tag, b, hq, hkv, sq, sk, d, dv, dtype, causal, strided, scale, path, gen, tweak=None):
    q, k, v = make(b, hq, hkv, sq, sk, d, dv, dtype, strided, gen)
    if tweak:
        tweak(q, k, v)
    kr, vr = repeat_kv(q, k, v)
    ref = ref64(q, kr, vr, causal, scale)
    torch_err = rel_err(torch_sdpa(q, k, v, causal, scale), ref)
    out, poisoned = run_poisoned(lambda: mod.kforge_attention(q, k, v, is_causal=causal, scale=scale, path=path),
                                 (b, hq, sq, dv), dtype)
    err = rel_err(out, ref)
    results.append(dict(case=tag, dtype=str(dtype).split(".")[-1], b=b, hq=hq, hkv=hkv, sq=sq, sk=sk, d=d, dv=dv,
                        causal=causal, strided=strided, scale=scale, path=path, err=err, torch_err=torch_err,
                        poisoned=poisoned, ok=err <= max(2 * torch_err, 1e-5)))


def sweep(mod):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(4321)
    res = []
    dec = mod.PATH_DECODE
    i = 0
    for dtype in (torch.float16, torch.bfloat16):
        for sq in (1, 3, 16):
            for sk in (1, 7, 100, 1000, 4097, 32768):
                for d, dv in ((64, 64), (520, 512), (1024, 1024), (8, 200)):
                    for g in (1, 2, 8):
                        i += 1
                        if sk * d * g >= 32768 * 512 and i % 3:
                            continue  # the largest combinations on a third of the cases
                        hkv = 1 + i % 2
                        causal = i % 4 == 0
                        scale = (1 / math.sqrt(d), 0.0, -0.3 / math.sqrt(d), 2.0 / math.sqrt(d))[i % 4 if i % 5 == 0 else 0]
                        case(mod, res, "decode", 1 + i % 3 if sk < 32768 else 1, hkv * g, hkv, sq, sk, d, dv, dtype,
                             causal, i % 3 == 0, scale, dec, gen)

    # Later splits with far larger scores than the first (and a row whose maximum is in the last split).
    def growth(q, k, v):
        k[:, :, k.shape[2] // 2:] *= 8
        k[:, :, -1] *= 4
    for dtype in (torch.float16, torch.bfloat16):
        for sk, d in ((5000, 512), (32768, 1024), (1500, 64)):
            case(mod, res, "decode_growth", 2, 4, 2, 4, sk, d, d, dtype, False, False, 1 / math.sqrt(d), dec, gen,
                 growth)
    # Grouped K/V heads on every other kernel (S_k <= 1024 there; key chunks: long_context.py).
    others = [("wgmma512", mod.PATH_WGMMA_512),
              ("wgmma1024", mod.PATH_WGMMA_1024), ("regp_mc", mod.PATH_WGMMA_512_REGP_MC),
              ("regp_split", mod.PATH_WGMMA_1024_REGP_SPLIT)]
    for j, (sq, sk, d, g, causal) in enumerate([(300, 300, 512, 2, False), (512, 512, 1024, 4, True),
                                                (129, 1000, 512, 8, False), (1000, 1000, 384, 2, True),
                                                (77, 513, 1024, 4, False)]):
        dtype = (torch.float16, torch.bfloat16)[j % 2]
        for name, path in others:
            if sk > 512 and path in (mod.PATH_WGMMA_512, mod.PATH_WGMMA_512_REGP_MC):
                continue
            case(mod, res, f"gqa_{name}", 2, 2 * g, 2, sq, sk, d, d, dtype, causal, j % 2 == 1, 1 / math.sqrt(d),
                 path, gen)
    # The dispatcher itself: enable_gqa accepted, mismatched heads without it refused, decode chosen at any S_k.
    q, k, v = make(1, 8, 2, 1, 4096, 512, 512, torch.float16, False, gen)
    checks = dict(gqa_decode=mod.dispatch(q, k, v, enable_gqa=True),
                  gqa_without_flag=mod.dispatch(q, k, v),
                  gqa_not_dividing=mod.dispatch(q, k[:, :1].expand(1, 3, 4096, 512), v[:, :1].expand(1, 3, 4096, 512),
                                                enable_gqa=True),
                  prefill_long=mod.dispatch(*make(1, 2, 2, 64, 4096, 512, 512, torch.float16, False, gen)))
    return res, {k_: list(v_) for k_, v_ in checks.items()}


DECODE_CONFIGS = [dict(b=8, hq=16, hkv=16, sq=1, sk=32768, d=512, dtype=torch.float16, causal=False),
                  dict(b=8, hq=16, hkv=16, sq=1, sk=32768, d=512, dtype=torch.bfloat16, causal=False),
                  dict(b=8, hq=32, hkv=4, sq=1, sk=32768, d=512, dtype=torch.bfloat16, causal=False),
                  dict(b=8, hq=16, hkv=16, sq=16, sk=8192, d=512, dtype=torch.float16, causal=False),
                  dict(b=4, hq=8, hkv=8, sq=1, sk=16384, d=1024, dtype=torch.float16, causal=False),
                  dict(b=8, hq=16, hkv=2, sq=1024, sk=1024, d=512, dtype=torch.bfloat16, causal=True),
                  dict(b=8, hq=16, hkv=2, sq=512, sk=512, d=1024, dtype=torch.float16, causal=False)]


def record_name(config):
    """The file name of a configuration's record under bench/attention/records/."""
    c = config
    return (f"sdpa_b_{c['b']}_hq_{c['hq']}_hkv_{c['hkv']}_sq_{c['sq']}_sk_{c['sk']}_d_{c['d']}_{c['dtype']}"
            f"{'_causal' if c['causal'] else ''}.json")


def bench(mod, env, configs=DECODE_CONFIGS, reps=20):
    """Times the ModelNew's dispatch against PyTorch on each configuration: one record each (JSON-ready dicts)."""
    timer = Timer()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(77)
    records = []
    for cfg in configs:
        b, hq, hkv, sq, sk, d, dtype, causal = (cfg[x] for x in ("b", "hq", "hkv", "sq", "sk", "d", "dtype", "causal"))
        scale = 1 / math.sqrt(d)
        q, k, v = make(b, hq, hkv, sq, sk, d, d, dtype, False, gen)
        gqa = hq != hkv
        # Correctness of what is timed, on these inputs: float64 on the first batch entry's first K/V head group (a
        # long row's float64 scores for every head would not fit the GPU).
        q1, k1, v1 = q[:1, :hq // hkv], k[:1, :1], v[:1, :1]
        ref = ref64(q1, *repeat_kv(q1, k1, v1), causal, scale)
        torch_err = rel_err(torch_sdpa(q1, k1, v1, causal, scale), ref)
        ours = lambda: mod.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)  # noqa: E731
        err = rel_err(mod.scaled_dot_product_attention(q1, k1, v1, is_causal=causal, enable_gqa=gqa), ref)
        path, reason = mod.dispatch(q, k, v, is_causal=causal, enable_gqa=gqa)
        variants = {"pytorch_sdpa": lambda: torch_sdpa(q, k, v, causal, scale), "modelnew_dispatch": ours}
        if gqa:
            variants["pytorch_repeat_kv"] = lambda: F.scaled_dot_product_attention(
                q, *repeat_kv(q, k, v), is_causal=causal, scale=scale)
        times = timer.median_ms(variants, reps)
        ref_name = min((n for n in variants if n.startswith("pytorch")), key=lambda n: times[n][0])
        ref_ms = times[ref_name][0]
        t = times["modelnew_dispatch"]
        kv_bytes = (k.numel() + v.numel()) * k.element_size()
        io_bytes = kv_bytes + 2 * q.numel() * q.element_size()
        problem = (f"sdpa B={b} Hq={hq} Hkv={hkv} Sq={sq} Sk={sk} D={d} {str(dtype).split('.')[-1]}"
                   f"{' causal' if causal else ''}")
        records.append(dict(device=env["device"], date=env["date"], problem=problem,
                            variant="kforge ModelNew (generated/attention/model_new.py)", ref_ms=ref_ms, ours_ms=t[0],
                            speedup=ref_ms / t[0], correct=bool(err <= max(2 * torch_err, 1e-5)), err=err,
                            torch_err=torch_err, reference_variant=ref_name, kernel_path=path, fallback_reason=reason,
                            io_bytes=io_bytes, achieved_gbps=io_bytes / t[0] / 1e6, torch=env["torch"],
                            cuda=env["cuda"], config=dict(b=b, hq=hq, hkv=hkv, sq=sq, sk=sk, d=d,
                                                          dtype=str(dtype).split(".")[-1], causal=causal),
                            variants=[dict(variant=n, median_ms=x[0], min_ms=x[1], max_ms=x[2]) for n, x in times.items()]))
        print(f"{problem:58s} ours {t[0]:8.3f} ms  ref({ref_name}) {ref_ms:8.3f} ms  x{ref_ms / t[0]:5.2f}  "
              f"{io_bytes / t[0] / 1e6:6.0f} GB/s  err {err:.2e} (torch {torch_err:.2e})  path {path}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    return records


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = device_env()
    mod = load_built()
    t0 = time.time()
    res, checks = sweep(mod)
    (out / "decode_sweep.json").write_text(json.dumps(dict(env=env, cases=res, dispatch=checks), indent=1))
    bad = summarize_sweep(res, "case", time.time() - t0)
    print("dispatch:", checks, flush=True)
    if not args.no_bench:
        recs = bench(mod, env)
        (out / "decode_bench.json").write_text(json.dumps(recs, indent=1))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
