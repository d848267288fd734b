"""Device script for the attention recipe: build, correctness sweep, benchmarks - one process.

Run on the GPU host from the repo root:  python3 bench/attention/device_run.py [--quick] [--out DIR]
It imports the generated ModelNew file (generated/attention/model_new.py), i.e. exactly what ships.

Correctness: every case draws fresh random inputs, computes a float64 reference, runs each applicable
kforge kernel on a poisoned (NaN-filled) output allocation, and requires
    err(ours) <= 2 * err(PyTorch SDPA on the same inputs)   (err = ||out - ref||_F / ||ref||_F)
with a 1e-5 floor for cases PyTorch gets exactly right (a single key). Non-finite output fails.
Timing (METHOD.md): CUDA events, 256 MB L2 flush before every timed call, warm-up, medians;
PyTorch's SDPA and the unfused baddbmm -> softmax -> bmm peer timed in the same process.
"""

import argparse
import faulthandler
import importlib.util
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]


def load_generated():
    path = REPO / "generated" / "attention" / "model_new.py"
    spec = importlib.util.spec_from_file_location("kforge_attention_generated", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ref64(q, k, v, causal, scale):
    qd, kd, vd = q.double(), k.double(), v.double()
    s = torch.matmul(qd, kd.transpose(-1, -2)) * scale
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), vd)


def rel_err(out, ref):
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref)).item()


def make_inputs(b, h, sq, sk, d, dv, dtype, strided, gen):
    """Fresh normal inputs; `strided` builds (B, S, H, D) storage viewed as (B, H, S, D)."""
    def one(s, e):
        if strided:
            return torch.randn(b, s, h, e, dtype=dtype, device="cuda", generator=gen).transpose(1, 2)
        return torch.randn(b, h, s, e, dtype=dtype, device="cuda", generator=gen)
    return one(sq, d), one(sk, d), one(sk, dv)


def run_poisoned(fn, out_shape, dtype):
    """Fills the allocation the op will reuse with NaN first; returns (out, poisoned_reused)."""
    poison = torch.full(out_shape, float("nan"), dtype=dtype, device="cuda")
    ptr = poison.data_ptr()
    del poison
    out = fn()
    return out, out.data_ptr() == ptr


def kernel_paths(mod, sk):
    """Every kernel the extension can launch that holds S_k keys, by name (each is swept on every case it can
    take, not only where the automatic choice picks it)."""
    paths = [("chunked", mod.PATH_CHUNKED)] if sk > mod.WGMMA_MAX_KEYS else []
    if sk <= 512:
        paths += [("wgmma512", mod.PATH_WGMMA_512), ("wgmma512_regp_mc", mod.PATH_WGMMA_512_REGP_MC)]
    if sk <= 1024:
        paths += [("wgmma1024", mod.PATH_WGMMA_1024), ("regp_split", mod.PATH_WGMMA_1024_REGP_SPLIT)]
    return paths


def sweep(mod, quick):
    seqs = [1, 7, 77, 129, 1000, 4096]
    dims = [16, 40, 64, 96, 128, 256, 512, 1024]
    if quick:
        seqs, dims = [7, 129, 512, 1000], [64, 512, 1024]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    results = []
    idx = 0
    for dtype in (torch.float16, torch.bfloat16):
        for s in seqs:
            for d in dims:
                for causal in (False, True):
                    idx += 1
                    # Vary the rest deterministically over the cases: batch/heads 1, strided views, S_q != S_k.
                    b, h = [(1, 1), (2, 3), (1, 4), (3, 1)][idx % 4]
                    if s * d >= 4096 * 512:
                        b, h = 1, 2
                    strided = idx % 3 == 0
                    sq = s if idx % 2 == 0 else max(1, (s * 2) // 3 + 1)
                    sk = s
                    dv = d
                    q, k, v = make_inputs(b, h, sq, sk, d, dv, dtype, strided, gen)
                    scale = 1.0 / math.sqrt(d) if idx % 5 else 0.3 / math.sqrt(d)
                    ref = ref64(q, k, v, causal, scale)
                    torch_out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
                    torch_err = rel_err(torch_out, ref)
                    paths = kernel_paths(mod, sk)
                    for name, path in paths:
                        out, poisoned = run_poisoned(
                            lambda: mod.kforge_attention(q, k, v, is_causal=causal, scale=scale, path=path),
                            (b, h, sq, dv), dtype)
                        err = rel_err(out, ref)
                        ok = err <= max(2 * torch_err, 1e-5)
                        results.append(dict(dtype=str(dtype).split(".")[-1], b=b, h=h, sq=sq, sk=sk, d=d, dv=dv,
                                            causal=causal, strided=strided, scale=scale, path=name, err=err,
                                            torch_err=torch_err, poisoned=poisoned, ok=ok))
                    del q, k, v, ref, torch_out
    # Keys 256.. scaled up so block 1's row max exceeds block 0's by far more than the register-P kernel's
    # headroom (its rescale path), with the first 64 query rows scaled down so that in the same launch one
    # warpgroup stays within the headroom (no rescale) and the other does not.
    for dtype in (torch.float16, torch.bfloat16):
        for (s, d, causal) in [(512, 1024, False), (512, 512, True), (300, 1024, False), (450, 256, True),
                               (1024, 512, False), (777, 1024, True)]:
            q, k, v = make_inputs(2, 2, s, s, d, d, dtype, False, gen)
            k[:, :, 256:] *= 6  # for split keys (S_k > 512) the second CTA's half has the larger maxima
            q[:, :, :64] *= 0.05
            ref = ref64(q, k, v, causal, 1 / math.sqrt(d))
            torch_err = rel_err(F.scaled_dot_product_attention(q, k, v, is_causal=causal), ref)
            for name, path in kernel_paths(mod, s):
                out, poisoned = run_poisoned(lambda: mod.kforge_attention(q, k, v, is_causal=causal, path=path),
                                             (2, 2, s, d), dtype)
                err = rel_err(out, ref)
                results.append(dict(dtype=str(dtype).split(".")[-1], b=2, h=2, sq=s, sk=s, d=d, dv=d, causal=causal,
                                    strided=False, scale=1 / math.sqrt(d), path=name, err=err, torch_err=torch_err,
                                    poisoned=poisoned, ok=err <= max(2 * torch_err, 1e-5), case="block1_growth"))
    # Split keys at the edges: halves that are not whole key blocks (S_k 513..640: the first CTA masks the
    # second's keys in its block 1), output chunk counts that leave the last pair half-empty (D_v 128, 384,
    # 640) or end in a partial chunk (D_v 200, 1000), S_q != S_k, strided views.
    for i, (sq, sk, d, dv, causal) in enumerate([(513, 513, 512, 512, False), (600, 600, 1024, 1024, True),
                                                 (300, 640, 512, 384, False), (640, 577, 256, 640, True),
                                                 (129, 1024, 512, 128, False), (1000, 769, 1024, 200, False),
                                                 (77, 1023, 1000, 1000, True), (2, 1024, 64, 1024, False)]):
        dtype = (torch.float16, torch.bfloat16)[i % 2]
        q, k, v = make_inputs(1 + i % 2, 2, sq, sk, d, dv, dtype, i % 3 == 0, gen)
        ref = ref64(q, k, v, causal, 1 / math.sqrt(d))
        torch_err = rel_err(F.scaled_dot_product_attention(q, k, v, is_causal=causal), ref)
        for name, path in [("regp_split", mod.PATH_WGMMA_1024_REGP_SPLIT), ("wgmma1024", mod.PATH_WGMMA_1024)]:
            out, poisoned = run_poisoned(lambda: mod.kforge_attention(q, k, v, is_causal=causal, path=path),
                                         (q.shape[0], 2, sq, dv), dtype)
            err = rel_err(out, ref)
            results.append(dict(dtype=str(dtype).split(".")[-1], b=q.shape[0], h=2, sq=sq, sk=sk, d=d, dv=dv,
                                causal=causal, strided=i % 3 == 0, scale=1 / math.sqrt(d), path=name, err=err,
                                torch_err=torch_err, poisoned=poisoned, ok=err <= max(2 * torch_err, 1e-5),
                                case="split_edges"))
    # A zero or negative scale: the register-P kernels refuse it (their softmax assumes scale > 0), the automatic
    # choice takes the shared-memory-P kernels.
    for i, (s, d, causal, scale) in enumerate([(512, 1024, False, -0.5 / 32), (512, 512, True, 0.0),
                                               (1000, 512, False, -1.0 / math.sqrt(512)), (700, 256, False, 0.0)]):
        dtype = (torch.float16, torch.bfloat16)[i % 2]
        q, k, v = make_inputs(1, 2, s, s, d, d, dtype, i % 2 == 1, gen)
        ref = ref64(q, k, v, causal, scale)
        torch_err = rel_err(F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale), ref)
        out, poisoned = run_poisoned(lambda: mod.kforge_attention(q, k, v, is_causal=causal, scale=scale),
                                     (1, 2, s, d), dtype)
        err = rel_err(out, ref)
        regp = mod.PATH_WGMMA_512_REGP_MC if s <= 512 else mod.PATH_WGMMA_1024_REGP_SPLIT
        try:
            mod.kforge_attention(q, k, v, is_causal=causal, scale=scale, path=regp)
            refused = False
        except RuntimeError as e:
            refused = "positive scale" in str(e)
        results.append(dict(dtype=str(dtype).split(".")[-1], b=1, h=2, sq=s, sk=s, d=d, dv=d, causal=causal,
                            strided=i % 2 == 1, scale=scale, path="auto", err=err, torch_err=torch_err,
                            poisoned=poisoned, ok=err <= max(2 * torch_err, 1e-5) and refused,
                            case="nonpositive_scale"))
    # D_qk != D_v and the dispatcher's own checks.
    for (d, dv) in [(512, 256), (128, 640)]:
        q, k, v = make_inputs(2, 2, 300, 450, d, dv, torch.float16, False, gen)
        ref = ref64(q, k, v, False, 1 / math.sqrt(d))
        torch_err = rel_err(F.scaled_dot_product_attention(q, k, v), ref)
        for name, path in kernel_paths(mod, 450):
            out, poisoned = run_poisoned(lambda: mod.kforge_attention(q, k, v, path=path), (2, 2, 300, dv), q.dtype)
            err = rel_err(out, ref)
            results.append(dict(dtype="float16", b=2, h=2, sq=300, sk=450, d=d, dv=dv, causal=False, strided=False,
                                scale=1 / math.sqrt(d), path=name, err=err, torch_err=torch_err, poisoned=poisoned,
                                ok=err <= max(2 * torch_err, 1e-5)))
    return results


def fallback_checks(mod):
    """ModelNew must equal PyTorch wherever it falls back (and not crash)."""
    out = []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    q, k, v = make_inputs(2, 4, 64, 80, 512, 512, torch.float16, False, gen)
    mask = torch.randn(64, 80, device="cuda", dtype=torch.float16, generator=gen)
    cases = {
        "attn_mask": dict(attn_mask=mask),
        "float32": dict(q=q.float(), k=k.float(), v=v.float()),
        "head_dim_12": dict(q=q[..., :12], k=k[..., :12], v=v[..., :12]),
        "cpu": dict(q=q.cpu(), k=k.cpu(), v=v.cpu()),
    }
    for name, kw in cases.items():
        qq, kk, vv = kw.pop("q", q), kw.pop("k", k), kw.pop("v", v)
        reason = mod.fallback_reason(qq, kk, vv, kw.get("attn_mask"))
        got = mod.scaled_dot_product_attention(qq, kk, vv, **kw)
        want = F.scaled_dot_product_attention(qq, kk, vv, **kw)
        out.append(dict(case=name, reason=reason, equal=bool(torch.equal(got, want))))
    qg = q.clone().requires_grad_()
    got = mod.scaled_dot_product_attention(qg, k, v)
    got.float().sum().backward()
    out.append(dict(case="autograd", reason=mod.fallback_reason(qg, k, v), equal=qg.grad is not None))
    return out


def fp32_precision(mod):
    """float32 inputs run PyTorch's own path (fallback); record its error vs float64 (documented in NOTES)."""
    out = []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    for (s, d, causal) in [(512, 1024, False), (512, 1024, True), (1000, 512, False), (77, 96, True)]:
        q, k, v = make_inputs(2, 4, s, s, d, d, torch.float32, False, gen)
        ref = ref64(q, k, v, causal, 1 / math.sqrt(d))
        got = mod.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.append(dict(s=s, d=d, causal=causal, reason=mod.fallback_reason(q, k, v), err=rel_err(got, ref)))
    return out


class Timer:
    """settle_cycles > 0: after each flush the GPU spins that many cycles (torch.cuda._sleep) before the timed
    region starts, so that nothing the flush leaves behind is charged to the timed call (see flush_settle.py)."""

    def __init__(self, settle_cycles=0, flush=True):
        self.flush = torch.empty(256 * 1024 * 1024 if flush else 0, dtype=torch.int8, device="cuda")
        self.settle_cycles = settle_cycles

    def median_ms(self, variants, reps, warmup=2):
        """Times all variants round-robin (rep by rep), so clock or thermal drift hits them alike, in a fresh
        random order every rep: the GPU runs at its power cap and a call's time depends on what ran just
        before it (runs 21-26: the ModelNew, always right after the unfused GEMMs, read 2-5% slower than the
        same kernel called after the slow general kernel)."""
        for fn in variants.values():
            for _ in range(warmup):
                fn()
        times = {name: [] for name in variants}
        order = list(variants.items())
        shuffle = random.Random(len(order) * 7919 + reps).shuffle
        for _ in range(reps):
            shuffle(order)
            for name, fn in order:
                self.flush.zero_()
                if self.settle_cycles:
                    torch.cuda._sleep(self.settle_cycles)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times[name].append(start.elapsed_time(end))
        return {n: (statistics.median(v), min(v), max(v)) for n, v in times.items()}


def unfused(q, k, v, causal, scale):
    """The peer a user would write: batched GEMM with the scale folded in, softmax, batched GEMM."""
    b, h, sq, d = q.shape
    sk = k.shape[2]
    q3, k3, v3 = q.reshape(b * h, sq, d), k.reshape(b * h, sk, d), v.reshape(b * h, sk, -1)
    s = torch.empty(b * h, sq, sk, dtype=q.dtype, device=q.device)
    s = torch.baddbmm(s, q3, k3.transpose(1, 2), beta=0.0, alpha=scale)
    if causal:
        s.masked_fill_(~torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return torch.bmm(torch.softmax(s, dim=-1), v3).reshape(b, h, sq, -1)


def bench(mod, quick, env):
    timer = Timer()
    configs = [dict(b=32, h=32, s=512, d=1024, dtype=torch.float16, causal=False, tag="seed"),
               dict(b=32, h=32, s=512, d=1024, dtype=torch.bfloat16, causal=False, tag="seed"),
               dict(b=32, h=32, s=512, d=1024, dtype=torch.float16, causal=True, tag="seed")]
    if quick:
        configs += [dict(b=16, h=16, s=1024, d=512, dtype=torch.float16, causal=c, tag="grid") for c in (False, True)]
    else:
        for d in (64, 128, 256, 512):
            for s in (1024, 4096):
                for causal in (False, True):
                    bh = (16, 16) if s == 1024 else (4, 16)
                    configs.append(dict(b=bh[0], h=bh[1], s=s, d=d, dtype=torch.float16, causal=causal, tag="grid"))
    records = []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(99)
    for cfg in configs:
        b, h, s, d, dtype, causal = cfg["b"], cfg["h"], cfg["s"], cfg["d"], cfg["dtype"], cfg["causal"]
        scale = 1 / math.sqrt(d)
        q, k, v = make_inputs(b, h, s, s, d, d, dtype, False, gen)
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        reps = 15 if s * s * d * b * h > 2**36 else 30
        # Correctness of the timed variants on these very inputs, against a float64 reference on a head subset.
        sub = slice(0, 2)
        ref = ref64(q[:1, sub], k[:1, sub], v[:1, sub], causal, scale)
        torch_err = rel_err(F.scaled_dot_product_attention(q[:1, sub], k[:1, sub], v[:1, sub], is_causal=causal), ref)
        variants = {"pytorch_sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                    "unfused": lambda: unfused(q, k, v, causal, scale),
                    "modelnew_dispatch": lambda: mod.scaled_dot_product_attention(q, k, v, is_causal=causal)}
        ours = {f"kforge_{name}": path for name, path in kernel_paths(mod, s)}
        errs = {}
        for name, path in ours.items():
            variants[name] = (lambda p: lambda: mod.kforge_attention(q, k, v, is_causal=causal, scale=scale, path=p))(path)
            errs[name] = rel_err(mod.kforge_attention(q[:1, sub], k[:1, sub], v[:1, sub], is_causal=causal,
                                                      scale=scale, path=path), ref)
        times = timer.median_ms(variants, reps)
        torch.cuda.empty_cache()
        ref_ms = times["pytorch_sdpa"][0]
        problem = f"sdpa B={b} H={h} S={s} D={d} {str(dtype).split('.')[-1]}{' causal' if causal else ''}"
        for name, t in times.items():
            if t is None:
                continue
            ok = True if name not in errs else errs[name] <= max(2 * torch_err, 1e-5)
            records.append(dict(device=env["device"], date=env["date"], problem=problem, variant=name,
                                ref_ms=ref_ms, ours_ms=t[0], speedup=ref_ms / t[0], min_ms=t[1], max_ms=t[2],
                                tflops=flops / t[0] / 1e9, correct=bool(ok and name in errs) if name in errs else None,
                                err=errs.get(name), torch_err=torch_err, torch=env["torch"], cuda=env["cuda"],
                                config=dict(b=b, h=h, s=s, d=d, dtype=str(dtype).split(".")[-1], causal=causal)))
        del q, k, v
        torch.cuda.empty_cache()
    return records


def device_env():
    """The run's environment, as every record states it."""
    return dict(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
                cuda=torch.version.cuda)


def load_built():
    """The generated ModelNew module with its extension built (the build's time printed)."""
    t0 = time.time()
    mod = load_generated()
    mod._extension()
    print(f"build: {time.time() - t0:.1f}s", flush=True)
    return mod


def summarize_sweep(cases, key, seconds, fields=None):
    """Prints a sweep's outcome: counts, the failures, the worst err/torch_err per `key`. Returns the failures."""
    bad = [c for c in cases if not c["ok"]]
    unpoisoned = sum(not c["poisoned"] for c in cases)
    print(f"sweep: {len(cases)} kernel runs, {len(bad)} failed, {unpoisoned} not on a poisoned buffer, {seconds:.1f}s",
          flush=True)
    for c in bad[:25]:
        print("  FAIL", {k: c[k] for k in fields if k in c} if fields else c)
    worst = {}
    for c in cases:
        worst[c[key]] = max(worst.get(c[key], 0.0), c["err"] / max(c["torch_err"], 1e-5))
    print(f"worst err/torch_err per {key}:", {k: round(v, 3) for k, v in worst.items()}, flush=True)
    return bad


def main():
    faulthandler.enable()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sweep and benchmark set")
    ap.add_argument("--quick-bench", action="store_true", help="full sweep, small benchmark set")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = device_env()
    mod = load_built()

    t0 = time.time()
    sw = sweep(mod, args.quick)
    fb = fallback_checks(mod)
    f32 = fp32_precision(mod)
    (out_dir / "sweep.json").write_text(json.dumps(dict(env=env, cases=sw, fallback=fb, fp32=f32), indent=1))
    bad = summarize_sweep(sw, "path", time.time() - t0,
                          ("dtype", "b", "h", "sq", "sk", "d", "causal", "strided", "path", "err", "torch_err"))
    print("fallback:", fb, flush=True)
    print("fp32 (PyTorch path) rel err vs float64:", [(c["s"], c["d"], c["causal"], f"{c['err']:.1e}") for c in f32])

    if not args.no_bench:
        recs = bench(mod, args.quick or args.quick_bench, env)
        (out_dir / "bench.json").write_text(json.dumps(recs, indent=1))
        print(f"\n{'problem':44s} {'variant':18s} {'ms':>8s} {'TFLOP/s':>8s} {'x sdpa':>7s} {'err':>9s}")
        for r in recs:
            err = "" if r["err"] is None else f"{r['err']:.2e}"
            print(f"{r['problem']:44s} {r['variant']:18s} {r['ours_ms']:8.3f} {r['tflops']:8.1f} {r['speedup']:7.2f} {err:>9s}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
