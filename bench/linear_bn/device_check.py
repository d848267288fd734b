"""Device script for the linear_bn_softmax recipe: build, full correctness, precision, timings.

Run on the GPU machine from the repo root:  python3 bench/linear_bn/device_check.py --out $OUT
Everything is measured in one process against the reference Model (PyTorch's own ops):
  1. build the extension (generated file if committed, else the dev rendering of kernels/)
  2. floors: cuBLAS TF32 / fp32 GEMM rates and copy bandwidth on this device
  3. correctness, fp32-accurate and TF32 modes: training output + running_mean/var +
     num_batches_tracked after 3 consecutive calls on fresh inputs, eval mode, load_state_dict with fresh
     random parameters and buffers, an optimiser step (weight-split cache invalidation), odd sizes,
     scale (N,), momentum=None, affine=False, track_running_stats=False, batch 1 error, autograd
     fallback, determinism, poisoned memory (every output element written)
  4. precision against float64 (ours vs PyTorch's own error on the same inputs), both modes
  5. timings (CUDA events, L2 flushed, medians, each side timed twice) for train/eval x fp32/tf32 at
     1024x8192->8192, 128x8192->8192, 1024x4096->4096; also the kforge worker's host-inclusive method
     (device sync inside the timed region)
JSON records + a log go to --out; a short table is printed last.
"""

import argparse
import copy
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import dev_loader  # noqa: E402


def load_reference_module():
    path = os.path.join(REPO, "problems", "gemm_bn_scale_softmax.py")
    return dev_loader.import_path(path, "kforge_problem_gemm_bn_scale_softmax"), path


ARGS = None
TF32_LEVEL = 2e-3  # relative output error that TF32 operands give after BN's normalisation
CHECKS = []  # (name, passed, detail)


def check(name, passed, detail=""):
    CHECKS.append({"name": name, "passed": bool(passed), "detail": detail})
    status = "PASS" if passed else "FAIL"
    print(f"[{status}] {name} {detail}", flush=True)
    return passed


def rel_err(a, b):
    a64, b64 = a.double(), b.double()
    denom = b64.norm().item()
    if not torch.isfinite(a64).all():
        return math.inf
    return (a64 - b64).norm().item() / (denom if denom > 0 else 1.0)


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on


def make_pair(Ref, New, init, seed):
    torch.manual_seed(seed)
    ref = Ref(*init).cuda()
    new = New(*init).cuda()
    new.load_state_dict(ref.state_dict())
    return ref, new


def randomize_state(model, seed):
    """Fresh random parameters and buffers, of the kind training produces, for load_state_dict."""
    g = torch.Generator().manual_seed(seed)
    k = model.gemm.in_features

    def uniform(shape, lo, hi):
        return torch.rand(shape, generator=g) * (hi - lo) + lo

    state = {}
    for key, value in model.state_dict().items():
        shape = value.shape
        if key.endswith("num_batches_tracked"):
            state[key] = torch.randint(0, 50, shape, generator=g, dtype=value.dtype)
        elif key.startswith("gemm."):
            state[key] = uniform(shape, -1.0, 1.0) / math.sqrt(k)
        elif key == "bn.weight":
            state[key] = uniform(shape, 0.25, 1.75)
        elif key == "bn.bias":
            state[key] = uniform(shape, -0.5, 0.5)
        elif key == "bn.running_mean":
            state[key] = uniform(shape, -0.3, 0.3)
        elif key == "bn.running_var":
            state[key] = uniform(shape, 0.05, 0.2)
        elif key == "scale":
            state[key] = uniform(shape, 0.5, 2.0)
        else:
            raise KeyError(f"unexpected state key {key}")
    return state


def tolerances(tf32):
    # Output / stats agreement between ours and PyTorch on the same inputs. fp32-accurate: both are within
    # ~1e-6 of float64; TF32: each side carries its own TF32 rounding (~1e-3 relative).
    return (1e-2, 5e-3) if tf32 else (1e-4, 1e-4)


def compare_states(tag, ref, new, out_ref, out_new, tf32):
    tol_out, tol_stats = tolerances(tf32)
    ok = check(f"{tag} output", rel_err(out_new, out_ref) <= tol_out, f"rel={rel_err(out_new, out_ref):.2e}")
    ok &= check(f"{tag} output finite+shape", out_new.shape == out_ref.shape and bool(torch.isfinite(out_new).all()))
    if ref.bn.running_mean is not None:
        e_m = rel_err(new.bn.running_mean, ref.bn.running_mean)
        e_v = rel_err(new.bn.running_var, ref.bn.running_var)
        ok &= check(f"{tag} running_mean", e_m <= tol_stats, f"rel={e_m:.2e}")
        ok &= check(f"{tag} running_var", e_v <= tol_stats, f"rel={e_v:.2e}")
    if ref.bn.num_batches_tracked is not None:
        ok &= check(
            f"{tag} num_batches_tracked",
            int(new.bn.num_batches_tracked) == int(ref.bn.num_batches_tracked),
            f"{int(new.bn.num_batches_tracked)} vs {int(ref.bn.num_batches_tracked)}",
        )
    return ok


def poison_allocator(nbytes):
    """Fill cached allocator blocks with NaN so outputs that reuse them expose unwritten elements."""
    blocks = [torch.full((nbytes // 4,), float("nan"), device="cuda") for _ in range(3)]
    del blocks


def state_sequence(Ref, New, init, m, tag, tf32, seed, customize=None):
    """3 training calls, eval, load_state_dict(fresh random) + train + eval, SGD step + train."""
    set_tf32(tf32)
    ref, new = make_pair(Ref, New, init, seed)
    if customize is not None:
        customize(ref, new)
    k = init[0]
    with torch.no_grad():
        for call in range(3):
            x = torch.rand(m, k, device="cuda") * 2 - 0.5
            poison_allocator(max(x.numel(), m * init[1]) * 4)
            out_ref, out_new = ref(x), new(x)
            compare_states(f"{tag} train call {call + 1}", ref, new, out_ref, out_new, tf32)
        ref.eval()
        new.eval()
        x = torch.rand(m, k, device="cuda")
        compare_states(f"{tag} eval", ref, new, ref(x), new(x), tf32)
        state = randomize_state(ref, seed + 1)
        ref.load_state_dict(state)
        new.load_state_dict(state)
        x = torch.rand(m, k, device="cuda")
        compare_states(f"{tag} eval after load_state_dict", ref, new, ref(x), new(x), tf32)
        ref.train()
        new.train()
        x = torch.rand(m, k, device="cuda")
        compare_states(f"{tag} train after load_state_dict", ref, new, ref(x), new(x), tf32)
    # An optimiser step changes the weight in place (version counter bump): the cached split must follow.
    x = torch.rand(m, k, device="cuda")
    for model in (ref, new):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        model(x).square().sum().backward()  # grad recording: ModelNew falls back to the original ops
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        x = torch.rand(m, k, device="cuda")
        compare_states(f"{tag} train after optimizer step", ref, new, ref(x), new(x), tf32)
        ref.eval()
        new.eval()
        x = torch.rand(m, k, device="cuda")
        compare_states(f"{tag} eval after optimizer step", ref, new, ref(x), new(x), tf32)


def precision(Ref, New, init, m, tf32, seed, train=True):
    """‖out − f64‖/‖f64‖ for ours and for PyTorch's own path on the same fresh inputs."""
    set_tf32(tf32)
    ref, new = make_pair(Ref, New, init, seed)
    state = randomize_state(ref, seed + 7)
    ref.load_state_dict(state)
    new.load_state_dict(state)
    ref64 = copy.deepcopy(ref).double()
    for model in (ref, new, ref64):
        model.train(train)
    x = torch.rand(m, init[0], device="cuda")
    with torch.no_grad():
        out64 = ref64(x.double())
        out_ref, out_new = ref(x), new(x)
    e_ref, e_new = rel_err(out_ref, out64), rel_err(out_new, out64)
    stats = {}
    if train:
        stats["running_mean_err_ours"] = rel_err(new.bn.running_mean, ref64.bn.running_mean)
        stats["running_mean_err_torch"] = rel_err(ref.bn.running_mean, ref64.bn.running_mean)
        stats["running_var_err_ours"] = rel_err(new.bn.running_var, ref64.bn.running_var)
        stats["running_var_err_torch"] = rel_err(ref.bn.running_var, ref64.bn.running_var)
    return e_new, e_ref, stats


def time_fn(fn, inputs, iters, warmup, flush):
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(warmup):
        fn(inputs[i % len(inputs)])
    for i in range(iters):
        flush.zero_()  # evict L2 (flush buffer > L2) outside the timed region
        starts[i].record()
        fn(inputs[i % len(inputs)])
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def time_fn_host_inclusive(fn, inputs, iters, warmup, flush):
    """kforge_worker's method: a device sync inside the timed region, so per-call host overhead counts."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + iters):
        flush.zero_()
        start.record()
        fn(inputs[i % len(inputs)])
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def bench_config(Ref, New, m, k, n, tf32, train, flush, iters):
    set_tf32(tf32)
    ref, new = make_pair(Ref, New, [k, n, 1e-5, 0.1, (1,)], 1234)
    ref.train(train)
    new.train(train)
    inputs = [torch.rand(m, k, device="cuda") for _ in range(4)]
    nocache = copy.deepcopy(new)
    nocache.cache_weight_split = False
    with torch.no_grad():
        # correctness of this exact configuration first (fresh input, both sides from the same state)
        ref_c, new_c = copy.deepcopy(ref), copy.deepcopy(new)
        x = torch.rand(m, k, device="cuda")
        tol_out, _ = tolerances(tf32)
        ok = rel_err(new_c(x), ref_c(x)) <= tol_out
        r1 = time_fn(ref, inputs, iters, 5, flush)
        o1 = time_fn(new, inputs, iters, 5, flush)
        r2 = time_fn(ref, inputs, iters, 5, flush)
        o2 = time_fn(new, inputs, iters, 5, flush)
        o_nc = time_fn(nocache, inputs, iters, 5, flush) if not tf32 else None
        r_host = time_fn_host_inclusive(ref, inputs, iters, 5, flush)
        o_host = time_fn_host_inclusive(new, inputs, iters, 5, flush)
    return {
        "ok": ok,
        "ref_ms": statistics.median([r1, r2]),
        "ours_ms": statistics.median([o1, o2]),
        "ref_runs_ms": [r1, r2],
        "ours_runs_ms": [o1, o2],
        "ours_weight_split_uncached_ms": o_nc,
        "ref_host_inclusive_ms": r_host,
        "ours_host_inclusive_ms": o_host,
    }


def floors(flush):
    out = {}
    a = torch.rand(1024, 8192, device="cuda")
    b = torch.rand(8192, 8192, device="cuda")
    flops = 2 * 1024 * 8192 * 8192
    for tf32 in (True, False):
        set_tf32(tf32)
        ms = time_fn(lambda x: torch.nn.functional.linear(x, b), [a], 20, 3, flush)
        out[f"linear_{'tf32' if tf32 else 'fp32'}_ms"] = ms
        out[f"linear_{'tf32' if tf32 else 'fp32'}_tflops"] = flops / ms / 1e9
    src = torch.empty(256 * 2**20 // 4, device="cuda")
    dst = torch.empty_like(src)
    ms = time_fn(lambda _: dst.copy_(src), [None], 20, 3, flush)
    out["copy_tb_per_s"] = 2 * src.numel() * 4 / ms / 1e9
    y = torch.rand(1024, 8192, device="cuda")
    out["softmax_1024x8192_ms"] = time_fn(lambda t: torch.softmax(t, 1), [y], 20, 3, flush)
    return out


def study_gemm_precision(ext):
    """Where 3xTF32's error comes from: y = x W^T against float64, per K-chunking of big*big."""
    m, k, n = 1024, 8192, 8192
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.rand(m, k, device="cuda", generator=g)
    w = (torch.rand(n, k, device="cuda", generator=g) * 2 - 1) / math.sqrt(k)
    y64 = x.double() @ w.double().T
    scale = y64.abs().mean().item()

    def metrics(y):
        d = y.double() - y64
        return {
            "rel_err": d.norm().item() / y64.norm().item(),
            # systematic part: error along sign(y) (truncating accumulators shrink |y|)
            "signed_bias": (d * y64.sign()).mean().item() / scale,
            "col_mean_rel_err": (d.mean(0).norm() / y64.mean(0).norm()).item(),
        }

    rows = {}
    set_tf32(False)
    rows["fp32 sgemm"] = metrics(x @ w.T)
    set_tf32(True)
    rows["tf32"] = metrics(x @ w.T)
    # split_weight_tf32x3 with one chunk gives [big | small | big] for any 2-D tensor
    xs3, ws3 = ext.split_weight_tf32x3(x, 0), ext.split_weight_tf32x3(w, 0)
    xb, xs, wb, ws = xs3[:, :k], xs3[:, k : 2 * k], ws3[:, :k], ws3[:, k : 2 * k]
    for chunk in (0, 4096, 2048, 1024, 512, 256):
        y = xs @ ws.T * 0  # allocate
        torch.mm(xs, wb.T, out=y)
        y.addmm_(xb, ws.T)
        c = chunk or k
        for k0 in range(0, k, c):
            y.addmm_(xb[:, k0 : k0 + c], wb[:, k0 : k0 + c].T)
        rows[f"3xtf32 chunk {chunk or k}"] = metrics(y)
    set_tf32(False)
    for name, r in rows.items():
        print(f"gemm precision {name:>22}: " + " ".join(f"{k}={v:.2e}" for k, v in r.items()), flush=True)
    return rows


def study_chunk_sweep(Ref, New, flush, iters):
    rows = []
    for k_features, chunks in ((8192, (0, 2048, 1024, 512)), (4096, (0, 1024, 512))):
        rows += chunk_sweep(Ref, New, flush, iters, k_features, chunks)
    return rows


def chunk_sweep(Ref, New, flush, iters, kf, chunks):
    rows = []
    init = [kf, kf, 1e-5, 0.1, (1,)]
    for chunk in chunks:
        set_tf32(False)
        e = {}
        for train in (True, False):
            ref, new = make_pair(Ref, New, init, 55)
            new.fp32_k_chunk = chunk
            state = randomize_state(ref, 56)
            ref.load_state_dict(state)
            new.load_state_dict(state)
            ref64 = copy.deepcopy(ref).double()
            for mod in (ref, new, ref64):
                mod.train(train)
            x = torch.rand(1024, kf, device="cuda")
            with torch.no_grad():
                out64 = ref64(x.double())
                e[train] = (rel_err(new(x), out64), rel_err(ref(x), out64))
            del ref64
        ref, new = make_pair(Ref, New, init, 57)
        new.fp32_k_chunk = chunk
        inputs = [torch.rand(1024, kf, device="cuda") for _ in range(2)]
        with torch.no_grad():
            r = time_fn(ref, inputs, iters, 3, flush)
            o = time_fn(new, inputs, iters, 3, flush)
        row = {"k": kf, "k_chunk": chunk, "train_err": e[True][0], "train_err_torch": e[True][1], "eval_err": e[False][0],
               "eval_err_torch": e[False][1], "ref_ms": r, "ours_ms": o, "speedup": r / o}
        print("chunk sweep", json.dumps(row), flush=True)
        rows.append(row)
    return rows


def profile_breakdown(Ref, New):
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for tf32 in (False, True):
        set_tf32(tf32)
        _, new = make_pair(Ref, New, [8192, 8192, 1e-5, 0.1, (1,)], 58)
        x = torch.rand(1024, 8192, device="cuda")
        with torch.no_grad():
            for _ in range(3):
                new(x)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    new(x)
                torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70)
        print(f"profile ({'tf32' if tf32 else 'fp32'}, train, 5 calls)\n{table}", flush=True)
        out["tf32" if tf32 else "fp32"] = table
    return out


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/lbs_out"))
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--study", action="store_true", help="precision/K-chunk/profile studies before the checks")
    parser.add_argument("--only-study", action="store_true")
    ARGS = parser.parse_args()
    os.makedirs(ARGS.out, exist_ok=True)

    problem, problem_path = load_reference_module()
    Ref = problem.Model
    t0 = time.time()
    module, model_path = dev_loader.load_model_new_module()
    New = module.ModelNew
    ext = module._extension()
    build_s = time.time() - t0
    so = getattr(ext, "__file__", "")
    ldd = subprocess.run(["ldd", so], capture_output=True, text=True).stdout if so else ""
    cublas_line = [line.strip() for line in ldd.splitlines() if "cublas" in line]
    env = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "model_file": os.path.relpath(model_path, REPO) if model_path.startswith(REPO) else model_path,
        "problem_file": os.path.relpath(problem_path, REPO),
        "build_s": round(build_s, 1),
        "extension_cublas_link": cublas_line,
        "link_flags": module._cublas_link_flags(),
    }
    print(json.dumps(env, indent=1), flush=True)

    flush = torch.empty(256 * 2**20 // 4, device="cuda")
    fl = floors(flush)
    print("floors", json.dumps(fl), flush=True)

    studies = {}
    if ARGS.study or ARGS.only_study:
        studies["gemm_precision"] = study_gemm_precision(ext)
        studies["chunk_sweep"] = study_chunk_sweep(Ref, New, flush, ARGS.iters)
        studies["profile"] = profile_breakdown(Ref, New)
        with open(os.path.join(ARGS.out, "linear_bn_studies.json"), "w") as f:
            json.dump(studies, f, indent=1)
        if ARGS.only_study:
            return

    # ---- correctness ------------------------------------------------------------------------
    def scale_per_feature(ref, new):
        n = ref.bn.num_features
        for mod in (ref, new):
            mod.scale = nn.Parameter(torch.linspace(0.5, 2.0, n, device="cuda"))

    def momentum_none(ref, new):
        for mod in (ref, new):
            mod.bn.momentum = None

    def per_feature_and_momentum_none(ref, new):
        scale_per_feature(ref, new)
        momentum_none(ref, new)

    def affine_false(ref, new):
        n = ref.bn.num_features
        for mod in (ref, new):
            mod.bn = nn.BatchNorm1d(n, affine=False).cuda()

    def no_running_stats(ref, new):
        n = ref.bn.num_features
        for mod in (ref, new):
            mod.bn = nn.BatchNorm1d(n, track_running_stats=False).cuda()

    cases = [
        ("1024x8192->8192", [8192, 8192, 1e-5, 0.1, (1,)], 1024, None),
        ("3x777->1000", [777, 1000, 1e-5, 0.1, (1,)], 3, None),
        ("3x777->1000 scale(N) momentum=None", [777, 1000, 1e-5, 0.1, (1,)], 3, per_feature_and_momentum_none),
        ("7x50->1003 scale(N)", [50, 1003, 1e-3, 0.3, (1,)], 7, scale_per_feature),
        ("33x128->9000 momentum=None", [128, 9000, 1e-5, 0.1, (1,)], 33, momentum_none),
        ("2x16->4 affine=False", [16, 4, 1e-5, 0.1, (1,)], 2, affine_false),
        ("64x256->512 track_running_stats=False", [256, 512, 1e-5, 0.1, (1,)], 64, no_running_stats),
        ("128x8192->8192", [8192, 8192, 1e-5, 0.1, (1,)], 128, None),
        ("1024x4096->4096", [4096, 4096, 1e-5, 0.1, (1,)], 1024, None),
    ]
    for tf32 in (False, True):
        mode = "tf32" if tf32 else "fp32"
        for i, (name, init, m, customize) in enumerate(cases):
            try:
                state_sequence(Ref, New, init, m, f"[{mode}] {name}", tf32, 100 + i, customize)
            except Exception as exc:  # a crash is a failed check, the rest still runs
                check(f"[{mode}] {name} ran", False, f"{type(exc).__name__}: {exc}")
                traceback.print_exc()

    # batch 1 in training: PyTorch's own error, from the fallback
    set_tf32(False)
    ref, new = make_pair(Ref, New, [64, 32, 1e-5, 0.1, (1,)], 5)
    errors = []
    for model in (ref, new):
        try:
            with torch.no_grad():
                model(torch.rand(1, 64, device="cuda"))
            errors.append(None)
        except Exception as exc:
            errors.append((type(exc).__name__, str(exc)))
    check("batch 1 training raises PyTorch's error", errors[0] is not None and errors[0] == errors[1], str(errors))
    new.eval()
    ref.eval()
    with torch.no_grad():
        x1 = torch.rand(1, 64, device="cuda")
        check("batch 1 eval works", rel_err(new(x1), ref(x1)) <= 1e-4)

    # autograd recording falls back (gradients flow, outputs equal the reference)
    ref, new = make_pair(Ref, New, [64, 32, 1e-5, 0.1, (1,)], 6)
    x = torch.rand(16, 64, device="cuda", requires_grad=True)
    out_r, out_n = ref(x), new(x)
    check("grad recording falls back", out_n.requires_grad and rel_err(out_n, out_r) <= 1e-6)

    # determinism: same state, same input -> bitwise equal outputs and stats
    for tf32 in (False, True):
        set_tf32(tf32)
        _, new = make_pair(Ref, New, [8192, 8192, 1e-5, 0.1, (1,)], 9)
        twin = copy.deepcopy(new)
        x = torch.rand(1024, 8192, device="cuda")
        with torch.no_grad():
            a, b = new(x), twin(x)
        check(
            f"[{'tf32' if tf32 else 'fp32'}] deterministic",
            torch.equal(a, b) and torch.equal(new.bn.running_var, twin.bn.running_var),
        )

    # ---- precision vs float64 ---------------------------------------------------------------
    precision_rows = []
    for name, init, m in [
        ("1024x8192->8192", [8192, 8192, 1e-5, 0.1, (1,)], 1024),
        ("3x777->1000", [777, 1000, 1e-5, 0.1, (1,)], 3),
        ("1024x4096->4096", [4096, 4096, 1e-5, 0.1, (1,)], 1024),
    ]:
        for tf32 in (False, True):
            for train in (True, False):
                e_new, e_ref, stats = precision(Ref, New, init, m, tf32, 77, train)
                mode = "tf32" if tf32 else "fp32"
                # fp32 mode: the bar, no worse than 2x PyTorch fp32. TF32 mode: TF32 is allowed, so
                # no worse than 2x PyTorch's TF32 path or the TF32 level (cuBLAS answers tiny batches
                # without tensor cores, at fp32 accuracy, while we always use TF32 there).
                passed = e_new <= 2 * e_ref + 1e-7 if not tf32 else e_new <= max(2 * e_ref, TF32_LEVEL)
                check(f"precision [{mode}] {'train' if train else 'eval'} {name}", passed, f"ours={e_new:.2e} torch={e_ref:.2e}")
                if stats:

                    # Running stats are state, not the output the 2x bar is about. The tensor
                    # cores' truncating accumulator biases every y slightly toward 0, and a batch mean
                    # does not average that out (PyTorch's SGEMM errors are random and do), so ours
                    # sit at the 1e-6 level where PyTorch's are ~5e-8: checked at the fp32 level here,
                    # the ratio recorded (bench/linear_bn/NOTES.md).
                    def within(ours, torch_err):
                        return ours <= max(2 * torch_err, 2e-6) if not tf32 else ours <= max(2 * torch_err, 2e-4)

                    check(
                        f"precision [{mode}] running stats {name}",
                        within(stats["running_mean_err_ours"], stats["running_mean_err_torch"])
                        and within(stats["running_var_err_ours"], stats["running_var_err_torch"]),
                        json.dumps({k: f"{v:.2e}" for k, v in stats.items()}),
                    )
                precision_rows.append(
                    {"case": name, "mode": mode, "train": train, "ours_rel_err": e_new, "torch_rel_err": e_ref, **stats}
                )

    all_correct = all(c["passed"] for c in CHECKS)

    # ---- timings ------------------------------------------------------------------------------
    records = []
    for m, k, n in [(1024, 8192, 8192), (128, 8192, 8192), (1024, 4096, 4096)]:
        for tf32 in (False, True):
            for train in (True, False):
                r = bench_config(Ref, New, m, k, n, tf32, train, flush, ARGS.iters)
                mode = "tf32" if tf32 else "fp32"
                variant = f"{'3xtf32' if not tf32 else 'tf32'}-cublas+fused-bn-softmax/{'train' if train else 'eval'}"
                rec = {
                    **{key: env[key] for key in ("device", "date", "torch", "cuda")},
                    "problem": "gemm_bn_scale_softmax",
                    "shape": {"batch": m, "in_features": k, "out_features": n},
                    "mode": mode,
                    "training": train,
                    "variant": variant,
                    "ref_ms": round(r["ref_ms"], 4),
                    "ours_ms": round(r["ours_ms"], 4),
                    "speedup": round(r["ref_ms"] / r["ours_ms"], 3),
                    "ref_runs_ms": [round(v, 4) for v in r["ref_runs_ms"]],
                    "ours_runs_ms": [round(v, 4) for v in r["ours_runs_ms"]],
                    "ours_weight_split_uncached_ms": None
                    if r["ours_weight_split_uncached_ms"] is None
                    else round(r["ours_weight_split_uncached_ms"], 4),
                    "speedup_weight_split_uncached": None
                    if r["ours_weight_split_uncached_ms"] is None
                    else round(r["ref_ms"] / r["ours_weight_split_uncached_ms"], 3),
                    "ref_host_inclusive_ms": round(r["ref_host_inclusive_ms"], 4),
                    "ours_host_inclusive_ms": round(r["ours_host_inclusive_ms"], 4),
                    "speedup_host_inclusive": round(r["ref_host_inclusive_ms"] / r["ours_host_inclusive_ms"], 3),
                    "correct": bool(all_correct and r["ok"]),
                    "fp32_k_chunk": None if tf32 else module._k_chunk_for(k),
                    "timing": f"CUDA events, L2 flushed (256 MB) before each call, {ARGS.iters} calls x 2 runs, medians",
                }
                records.append(rec)
                print(json.dumps(rec), flush=True)

    headline = records[0]  # fp32, training, 1024x8192->8192
    summary = {
        **{key: env[key] for key in ("device", "date", "torch", "cuda")},
        "problem": "gemm_bn_scale_softmax",
        "variant": "device_check summary (headline: fp32 train 1024x8192->8192; all timings in records)",
        "ref_ms": headline["ref_ms"],
        "ours_ms": headline["ours_ms"],
        "speedup": headline["speedup"],
        "correct": all_correct,
        "env": env,
        "floors": fl,
        "checks": CHECKS,
        "checks_passed": sum(c["passed"] for c in CHECKS),
        "checks_total": len(CHECKS),
        "all_correct": all_correct,
        "precision": precision_rows,
        "records": records,
    }
    with open(os.path.join(ARGS.out, "linear_bn_device.json"), "w") as f:
        json.dump(summary, f, indent=1)

    print("\nfailed checks:", [c["name"] for c in CHECKS if not c["passed"]])
    print(f"checks {summary['checks_passed']}/{summary['checks_total']}  all_correct={all_correct}")
    print("floors:", {k: round(v, 3) for k, v in fl.items()})
    print(f"{'shape':>16} {'mode':>5} {'phase':>5} {'ref_ms':>8} {'ours_ms':>8} {'x':>6} {'nocache_ms':>10} {'x_host':>6}")
    for r in records:
        s = r["shape"]
        print(
            f"{s['batch']}x{s['in_features']}->{s['out_features']:>5} {r['mode']:>5} {'train' if r['training'] else 'eval':>5} "
            f"{r['ref_ms']:8.3f} {r['ours_ms']:8.3f} {r['speedup']:6.2f} {r['ours_weight_split_uncached_ms'] or 0:10.3f}"
            f" {r['speedup_host_inclusive']:6.2f}"
        )


if __name__ == "__main__":
    main()
