"""Where the time of a register-P launch goes, CTA by CTA (device script).

    python3 bench/attention/timeline.py [NAME=-DFLAG=1,... ...] [--reps 5] [--out DIR]

Builds the generated ModelNew's CUDA with -DKFORGE_TIMELINE (attn_timeline.cuh: each CTA records its SM and
the global-timer ns of its start and of its last consumer warp's end) and, for the two target shapes (seed
shape through the multicast path, B16 H16 S1024 D512 through the split-key path), launches the kernel after
an L2 flush and reads the spans back. Printed per shape (medians over reps):
  span       first CTA start to last CTA end
  busy       sum of CTA durations / (SMs x span): the share of SM time inside a CTA
  start/tail mean per-SM idle before its first CTA / after its last one
  gaps       mean per-SM idle between one CTA's end and the next one's start
  waves      CTA duration by position on its SM (first, middle, last)
Variants (NAME=defines, as in ab_variants.py) are built in parallel and launched round-robin.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import Timer, load_generated, make_inputs  # noqa: E402

MAX_CTAS = 16384
READBACK = r"""
at::Tensor kforge_timeline_read() {
  auto out = at::empty({KFORGE_TIMELINE, 3}, at::TensorOptions().dtype(at::kLong));
  C10_CUDA_CHECK(cudaDeviceSynchronize());
  C10_CUDA_CHECK(cudaMemcpyFromSymbol(out.data_ptr(), kforge_attn::g_kforge_timeline,
                                      sizeof(kforge_attn::g_kforge_timeline)));
  return out;
}
at::Tensor kforge_timeline_marks() {
  auto out = at::empty({KFORGE_TIMELINE, 2, kforge_attn::kTimelineMarks}, at::TensorOptions().dtype(at::kLong));
  C10_CUDA_CHECK(cudaDeviceSynchronize());
  C10_CUDA_CHECK(cudaMemcpyFromSymbol(out.data_ptr(), kforge_attn::g_kforge_marks, sizeof(kforge_attn::g_kforge_marks)));
  return out;
}
void kforge_timeline_reset() {
  void* ptr = nullptr;
  C10_CUDA_CHECK(cudaGetSymbolAddress(&ptr, kforge_attn::g_kforge_timeline));
  C10_CUDA_CHECK(cudaMemset(ptr, 0, sizeof(kforge_attn::g_kforge_timeline)));
  C10_CUDA_CHECK(cudaGetSymbolAddress(&ptr, kforge_attn::g_kforge_marks));
  C10_CUDA_CHECK(cudaMemset(ptr, 0, sizeof(kforge_attn::g_kforge_marks)));
}
"""


def build(mod, name, defines):
    from torch.utils.cpp_extension import load_inline

    header = "".join(f"#define {d[2:].replace('=', ' ', 1)}\n" for d in defines)
    cpp = mod._CPP_SOURCE + "\nat::Tensor kforge_timeline_read();\nat::Tensor kforge_timeline_marks();\nvoid kforge_timeline_reset();\n"
    cuda = f"#define KFORGE_TIMELINE {MAX_CTAS}\n" + header + mod._CUDA_SOURCE + READBACK
    return load_inline(name=f"kforge_attention_timeline_{name}", cpp_sources=[cpp], cuda_sources=[cuda],
                       functions=["kforge_attention_forward", "kforge_timeline_read", "kforge_timeline_marks",
                                  "kforge_timeline_reset"],
                       extra_cflags=["-O3"],
                       extra_cuda_cflags=["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a"])


def analyse(spans, n_sms):
    """spans: (n, 3) int64 rows of start, end, smid | cta << 32 for the CTAs of one launch."""
    start, end = spans[:, 0].tolist(), spans[:, 1].tolist()
    smid = (spans[:, 2] & 0xFFFFFFFF).tolist()
    t0, t1 = min(start), max(end)
    per_sm = {}
    for s, e, sm in zip(start, end, smid):
        per_sm.setdefault(sm, []).append((s, e))
    lead, tail, gaps, first, middle, last, counts = [], [], [], [], [], [], []
    for runs in per_sm.values():
        runs.sort()
        counts.append(len(runs))
        lead.append(runs[0][0] - t0)
        tail.append(t1 - runs[-1][1])
        gaps.extend(b[0] - a[1] for a, b in zip(runs, runs[1:]))
        first.append(runs[0][1] - runs[0][0])
        last.append(runs[-1][1] - runs[-1][0])
        middle.extend(e - s for s, e in runs[1:-1])
    span = t1 - t0
    busy = sum(e - s for s, e in zip(start, end)) / (n_sms * span)
    us = lambda xs: statistics.mean(xs) / 1e3 if xs else 0.0  # noqa: E731
    return dict(span_us=span / 1e3, busy=busy, sms_used=len(per_sm), ctas_per_sm=[min(counts), max(counts)],
                lead_us=us(lead), tail_us=us(tail), gap_us=us(gaps), gap_max_us=max(gaps, default=0) / 1e3,
                cta_first_us=us(first), cta_middle_us=us(middle), cta_last_us=us(last),
                # idle SM time after the last CTA, as a share of the span
                tail_share=sum(tail) / (n_sms * span), lead_share=sum(lead) / (n_sms * span),
                gap_share=sum(gaps) / (n_sms * span))


# Marks in tile order (attn_hopper_regp.cu): 0 first data, 1/3 key block 0/1 QK^T retired, 2/4 its softmax
# done, 5+j output chunk j's P.V retired, 13+j chunk j stored (or sent to the peer, split keys).
MARK_ORDER = [0, 1, 2, 3, 4] + [m for j in range(8) for m in (5 + j, 13 + j)]
MARK_NAMES = {0: "first data", 1: "QK block 0", 2: "softmax 0", 3: "QK block 1", 4: "softmax 1",
              **{5 + j: f"PV chunk {j}" for j in range(8)}, **{13 + j: f"store {j}" for j in range(8)}}


def segments(spans, marks):
    """Mean duration (us) of each segment of the tile per consumer warpgroup, over CTAs that were not the
    first on their SM (the first wave starts all at once and is slower)."""
    first_on_sm = {}
    for row in spans.tolist():
        sm = row[2] & 0xFFFFFFFF
        if sm not in first_on_sm or row[0] < first_on_sm[sm][0]:
            first_on_sm[sm] = (row[0], row[2] >> 32)
    skip = {cta for _, cta in first_on_sm.values()}
    out = {}
    for wg in range(2):
        sums, n = {}, 0
        for row, mk in zip(spans.tolist(), marks[:, wg].tolist()):
            cta = row[2] >> 32
            if cta in skip:
                continue
            seq = [("start", row[0])] + [(MARK_NAMES[m], mk[m]) for m in MARK_ORDER if mk[m]] + [("end", row[1])]
            for (_, a), (name, b) in zip(seq, seq[1:]):
                sums[name] = sums.get(name, 0) + (b - a)
            n += 1
        out[f"wg{wg}"] = {name: round(v / n / 1e3, 3) for name, v in sums.items()}
    return out


def timelines(mod, exts, reps, gen, out):
    """Every variant launched round-robin, rep by rep, after an L2 flush each time."""
    n_sms = torch.cuda.get_device_properties(0).multi_processor_count
    timer = Timer()
    shapes = [("seed fp16", 32, 32, 512, 1024, mod.PATH_WGMMA_512_REGP_MC),
              ("D512 S1024 fp16", 16, 16, 1024, 512, mod.PATH_WGMMA_1024_REGP_SPLIT)]
    results = {}
    for shape, b, h, s, d, path in shapes:
        q, k, v = make_inputs(b, h, s, s, d, d, torch.float16, False, gen)
        call = lambda ext: ext.kforge_attention_forward(q, k, v, False, 1 / math.sqrt(d), path)  # noqa: E731
        for ext in exts.values():
            for _ in range(3):
                call(ext)
        rows = {name: [] for name in exts}
        last = {}
        for _ in range(reps):
            for name, ext in exts.items():
                ext.kforge_timeline_reset()
                timer.flush.zero_()
                call(ext)
                spans = ext.kforge_timeline_read()
                n = int((spans[:, 1] > 0).sum())
                last[name] = (spans[:n], ext.kforge_timeline_marks()[:n])
                rows[name].append(analyse(*[last[name][0], n_sms]))
        for name in exts:
            med = {key: statistics.median([r[key] for r in rows[name]]) for key in rows[name][0]
                   if not isinstance(rows[name][0][key], list)}
            med["ctas"] = int(last[name][0].shape[0])
            med["segments_us"] = segments(*last[name])
            results[f"{shape} {name}"] = med
            print(f"{shape} [{name}]: " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                                  for k, v in med.items() if k != "segments_us"), flush=True)
            for wg, parts in med["segments_us"].items():
                print(f"  {wg}: " + ", ".join(f"{k} {v}" for k, v in parts.items()), flush=True)
            torch.save(dict(spans=last[name][0], marks=last[name][1]),
                       Path(out) / f"timeline_{shape.replace(' ', '_')}_{name}.pt")
        del q, k, v
        torch.cuda.empty_cache()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="*", default=["base="], help="NAME=-DFLAG=1,-DOTHER=2 (default: base=)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--build-one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    variants = {}
    for spec in args.variants:
        name, _, defs = spec.partition("=")
        variants[name] = [x for x in defs.split(",") if x]
    mod = load_generated()
    if args.build_one:
        (name, defines), = variants.items()
        build(mod, name, defines)
        return
    Path(args.out).mkdir(parents=True, exist_ok=True)
    t = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "--build-one", spec]) for spec in args.variants]
    if any(p.wait() for p in procs):
        raise SystemExit("a variant failed to build")
    exts = {name: build(mod, name, defines) for name, defines in variants.items()}
    print(f"built {list(exts)} in {time.time() - t:.0f}s", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(23)
    result = dict(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
                  cuda=torch.version.cuda, variants=variants, timelines=timelines(mod, exts, args.reps, gen, args.out))
    (Path(args.out) / "timeline.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
