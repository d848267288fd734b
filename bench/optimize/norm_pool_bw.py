"""Achieved memory bandwidth of kf_normalize.cuh / kf_pool.cuh on large inputs, against a measured copy and
against the torch op in the same process.

    python bench/optimize/norm_pool_bw.py --out X.json      (repo root as cwd, a CUDA GPU)

Floors (all memory-bound): bytes = x read once + y written once (+ the small parameters); a held-row kernel
moves exactly that, a split-path or column kernel reads x a second time (from L2 where the tile fits) — the
record's fraction_of_copy is against the floor, so it shows that cost. The copy's achieved GB/s (x.clone() of
a 1 GiB fp32 tensor, read + write) is the ceiling; target: one-pass row kernels >= 0.80 of it. Timing: CUDA
events around each call, L2 flushed (a 256 MiB write) before every call, warm-up first, median of the repeats.
Every case is checked against float64 torch on the same inputs before it is timed (`correct`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import bwtime

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test" / "gpu" / "harness"))
import norm_pool_ext as H  # noqa: E402

NO_STATS = torch.empty(0)
EPS = 1e-5


def main() -> int:
    args = bwtime.parse_args(__doc__, "norm_pool_bw")
    if args is None:
        return 2
    kf = H.load()
    run = bwtime.BandwidthRun(args.reps)
    gen = run.gen

    def case(problem: str, variant: str, dtype, shape, ours, torch_op, ref64, tol: float, bytes_moved: int,
             path: str, target: float | None) -> None:
        rec = run.measure(f"norm_pool_bw/{problem}", variant, dtype, shape, ours, torch_op, ref64, tol, bytes_moved,
                          target, extra={"kernel_path": path}, equal_nan=True)
        print(f"{problem:<14} {variant:<34} {rec['dtype']:<9} {rec['ours_ms']:8.3f} ms {rec['ours_gbs']:6.0f} GB/s"
              f" {rec['fraction_of_copy']:5.2f} of copy  torch {rec['ref_ms']:8.3f} ms  x{rec['speedup']:5.2f}"
              f"  correct={rec['correct']}")

    def norm(op, ins, shape, dims, sc):
        return kf.norm(op, ins, list(shape), sum(1 << d for d in dims), sc, NO_STATS, 0)

    for dtype, tol in ((torch.float32, 1e-4), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        esz = torch.finfo(dtype).bits // 8

        def rnd(*shape):
            return torch.randn(shape, device="cuda", generator=gen).to(dtype)

        # softmax / log_softmax over rows: held rows (warp per row, block per row) and split rows
        zero = torch.zeros(1, 1, device="cuda", dtype=dtype)
        for shape, path, target in [((65536, 1000), "warp per row", 0.8), ((16384, 4096), "block per row", 0.8),
                                    ((4096, 16384), "block per row", 0.8), ((16, 2_000_000), "split rows", None)]:
            x = rnd(*shape)
            nbytes = 2 * x.numel() * esz
            case("softmax", f"rows {shape[0]}x{shape[1]}", dtype, shape,
                 lambda: norm(H.OP_SOFTMAX, [x, zero], shape, (1,), [1.0]), lambda: torch.softmax(x, 1),
                 lambda: torch.softmax(x.double(), 1), tol, nbytes, path, target)
            case("log_softmax", f"rows {shape[0]}x{shape[1]}", dtype, shape,
                 lambda: norm(H.OP_LOG_SOFTMAX, [x], shape, (1,), [0.0]), lambda: torch.log_softmax(x, 1),
                 lambda: torch.log_softmax(x.double(), 1), tol, nbytes, path, target)
            del x
        # softmax over channels of NCHW: columns
        x = rnd(32, 64, 128, 128)
        case("softmax", "dim 1 of 32x64x128x128", dtype, x.shape,
             lambda: norm(H.OP_SOFTMAX, [x, zero.view(1, 1, 1, 1)], x.shape, (1,), [1.0]), lambda: torch.softmax(x, 1),
             lambda: torch.softmax(x.double(), 1), tol, 2 * x.numel() * esz, "columns", None)
        del x
        # layer norm (x, gamma, beta over the last dim), rms norm
        for shape, path in [((32768, 1024), "warp per row"), ((16384, 4096), "block per row"), ((4096, 8192), "block per row")]:
            x = rnd(*shape)
            w, b = rnd(shape[1]) + 1, rnd(shape[1])
            nbytes = 2 * x.numel() * esz
            case("layer_norm", f"rows {shape[0]}x{shape[1]}", dtype, shape,
                 lambda: norm(H.OP_AFFINE, [x, w, b], shape, (1,), [EPS]), lambda: F.layer_norm(x, shape[1:], w, b, EPS),
                 lambda: F.layer_norm(x.double(), shape[1:], w.double(), b.double(), EPS), tol, nbytes, path, 0.8)
            ref_rms = (lambda: F.rms_norm(x, shape[1:], w, EPS)) if hasattr(F, "rms_norm") else \
                (lambda: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS).to(dtype) * w)
            case("rms_norm", f"rows {shape[0]}x{shape[1]}", dtype, shape,
                 lambda: norm(H.OP_RMS, [x, w], shape, (1,), [EPS]), ref_rms,
                 lambda: x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + EPS) * w.double(), tol,
                 nbytes, path, 0.8)
            del x
        # group norm [N, C, H, W] with G groups: [N, G, C/G, HW] over the last two dims, per-channel affine
        n, c, g, h = 32, 256, 32, 56
        x = rnd(n, c, h, h)
        w, b = rnd(c) + 1, rnd(c)
        shape = [n, g, c // g, h * h]
        case("group_norm", f"{n}x{c}x{h}x{h} G={g}", dtype, x.shape,
             lambda: norm(H.OP_AFFINE, [x.view(shape), w.view(1, g, c // g, 1), b.view(1, g, c // g, 1)], shape, (2, 3), [EPS]),
             lambda: F.group_norm(x, g, w, b, EPS),
             lambda: F.group_norm(x.double(), g, w.double(), b.double(), EPS).view(shape), tol, 2 * x.numel() * esz,
             "split rows" if (c // g) * h * h > 8192 else "block per row", None)
        del x
        # BatchNorm in training: [N, C, HW] over N and HW (stats split across blocks, finalize, apply)
        for n, c, h in [(64, 16, 112), (128, 64, 56), (256, 256, 14)]:
            x = rnd(n, c, h, h)
            w, b = rnd(c) + 1, rnd(c)
            shape = [n, c, h * h]
            rm, rv = torch.zeros(c, device="cuda", dtype=dtype), torch.ones(c, device="cuda", dtype=dtype)
            case("batch_norm", f"train {n}x{c}x{h}x{h}", dtype, x.shape,
                 lambda: norm(H.OP_AFFINE, [x.view(shape), w.view(1, c, 1), b.view(1, c, 1)], shape, (0, 2), [EPS]),
                 lambda: F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=EPS),
                 lambda: F.batch_norm(x.double(), None, None, w.double(), b.double(), training=True, eps=EPS).view(shape),
                 tol, 2 * x.numel() * esz, "split rows", None)
            del x
        # pooling
        x = rnd(64, 64, 112, 112)
        case("max_pool2d", "64x64x112x112 k3 s2 p1", dtype, x.shape,
             lambda: kf.pool(H.POOL_MAX, x, [], [56, 56], [3, 3], [2, 2], [1, 1], [1, 1], True, 0, False, 1.0),
             lambda: F.max_pool2d(x, 3, 2, 1), lambda: F.max_pool2d(x.double(), 3, 2, 1), 0.0,
             (x.numel() + x.numel() // 4) * esz, "pool", None)
        case("avg_pool2d", "64x64x112x112 k2 s2", dtype, x.shape,
             lambda: kf.pool(H.POOL_AVG, x, [], [56, 56], [2, 2], [2, 2], [0, 0], [1, 1], True, 0, False, 1.0),
             lambda: F.avg_pool2d(x, 2, 2), lambda: F.avg_pool2d(x.double(), 2, 2), tol,
             (x.numel() + x.numel() // 4) * esz, "pool", None)
        # The fixed-window kernel: what generated code launches when the window is known (not adaptive).
        case("max_pool2d", "64x64x112x112 k3 s2 p1 fixed window", dtype, x.shape,
             lambda: kf.pool_fixed([1, 3, 3, 2], H.POOL_MAX, x, [], [56, 56], [3, 3], [2, 2], [1, 1], [1, 1], True, 0,
                                   False, 1.0),
             lambda: F.max_pool2d(x, 3, 2, 1), lambda: F.max_pool2d(x.double(), 3, 2, 1), 0.0,
             (x.numel() + x.numel() // 4) * esz, "pool", None)
        case("avg_pool2d", "64x64x112x112 k2 s2 fixed window", dtype, x.shape,
             lambda: kf.pool_fixed([1, 2, 2, 2], H.POOL_AVG, x, [], [56, 56], [2, 2], [2, 2], [0, 0], [1, 1], True, 0,
                                   False, 1.0),
             lambda: F.avg_pool2d(x, 2, 2), lambda: F.avg_pool2d(x.double(), 2, 2), tol,
             (x.numel() + x.numel() // 4) * esz, "pool", None)
        del x
        x = rnd(256, 512, 7, 7)
        case("adaptive_avg", "256x512x7x7 -> 1x1", dtype, x.shape,
             lambda: kf.pool(H.POOL_AVG, x, [], [1, 1], [1, 1], [1, 1], [0, 0], [1, 1], True, 0, True, 1.0),
             lambda: F.adaptive_avg_pool2d(x, 1), lambda: F.adaptive_avg_pool2d(x.double(), 1), tol,
             (x.numel() + x.numel() // 49) * esz, "pool", None)
        del x

    run.write(args.out)
    slower = [r for r in run.records if r["speedup"] < 1.0]
    print(f"wrote {len(run.records)} records to {args.out}; below target or incorrect: {len(run.below_target_or_incorrect())};"
          f" slower than torch: {len(slower)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
