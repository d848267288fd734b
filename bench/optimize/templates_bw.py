"""Achieved memory bandwidth of the codegen templates on large tensors, against a measured copy (x.clone()).

    python bench/optimize/templates_bw.py --out X.json      (repo root as cwd, a CUDA GPU)

Floors: every case is memory-bound; bytes = each input read once + the output written once. The copy's
achieved GB/s (read + write of a 1 GiB fp32 tensor) is the ceiling the ratios are taken against; targets:
elementwise >= 0.90 of it, reductions >= 0.80. Timing: CUDA events around each call, L2 flushed (a 256 MiB
write) before every call, warm-up first, median of the repeats. Each case is also checked against float64
torch on the same inputs (`correct`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import bwtime

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test" / "gpu"))
import templates_harness  # noqa: E402


def main() -> int:
    args = bwtime.parse_args(__doc__, "templates_bw")
    if args is None:
        return 2
    kf = templates_harness.build()
    run = bwtime.BandwidthRun(args.reps)
    gen = run.gen

    def case(variant: str, kind: str, dtype: torch.dtype, shape, ours, torch_op, ref64, tol: float, bytes_moved: int) -> None:
        """Times `ours` and torch's own op (`torch_op`) in this process; checks `ours` against float64 `ref64`."""
        rec = run.measure(f"templates_bw/{kind}", variant, dtype, shape, ours, torch_op, ref64, tol, bytes_moved,
                          0.9 if kind == "elementwise" else 0.8)
        print(f"{variant:<38} {rec['dtype']:<9} {rec['ours_ms']:8.3f} ms {rec['ours_gbs']:7.0f} GB/s"
              f" {rec['fraction_of_copy']:5.2f} of copy  torch {rec['ref_ms']:8.3f} ms  correct={rec['correct']}")

    for dtype, tol in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1e-2)):
        esz = torch.finfo(dtype).bits // 8
        n = (1 << 30) // esz // 2  # 512 MiB input
        x = torch.randn(n, device="cuda", generator=gen).to(dtype)
        case("relu (1 input, flat)", "elementwise", dtype, x.shape,
             lambda: kf.ew("relu_affine", [x], [1.0, 0.0]), lambda: torch.relu(x),
             lambda: torch.relu(x.double()), tol, 2 * n * esz)
        y = x.view(8192, -1)
        bias = torch.randn(y.shape[1], device="cuda", generator=gen).to(dtype)
        case("axpy (2 inputs, row broadcast)", "elementwise", dtype, y.shape,
             lambda: kf.ew("axpy", [y, bias], [1.5]), lambda: y * 1.5 - bias,
             lambda: y.double() * 1.5 - bias.double(), tol, 2 * n * esz + bias.numel() * esz)
        # Reductions: fp32 accumulation on both sides; the tolerance covers the output dtype's rounding.
        red_tol = tol * 10
        rows = x.view(-1, 4096)
        case("sum rows (N x 4096, dim 1)", "reduce", dtype, rows.shape,
             lambda: kf.reduce("sum", [rows], 0b10, 1), lambda: rows.sum(1),
             lambda: rows.double().sum(1), red_tol, n * esz)
        long_rows = x.view(16, -1)
        case("sum few long rows (16 x L, dim 1)", "reduce", dtype, long_rows.shape,
             lambda: kf.reduce("sum", [long_rows], 0b10, 1), lambda: long_rows.sum(1),
             lambda: long_rows.double().sum(1), red_tol * 100, n * esz)
        nchw = x.view(32, 64, -1)
        case("sum dim 1 (N x C x HW)", "reduce", dtype, nchw.shape,
             lambda: kf.reduce("sum", [nchw], 0b010, 1), lambda: nchw.sum(1),
             lambda: nchw.double().sum(1), red_tol, n * esz)
        bn = x.view(64, 16, -1)
        case("sum BN-style (64 x 16 x HW, dims 0,2)", "reduce", dtype, bn.shape,
             lambda: kf.reduce("sum", [bn], 0b101, 1), lambda: bn.sum((0, 2)),
             lambda: bn.double().sum((0, 2)), red_tol * 100, n * esz)
        case("var BN-style (Welford)", "reduce", dtype, bn.shape,
             lambda: kf.reduce("var", [bn], 0b101, 1), lambda: torch.var(bn, (0, 2)),
             lambda: bn.double().var((0, 2)), red_tol, n * esz)
        case("sum whole tensor", "reduce", dtype, x.shape,
             lambda: kf.reduce("sum", [x], 0b1, 1), lambda: x.sum(),
             lambda: x.double().sum(), red_tol * 1000, n * esz)
        del x, y, rows, long_rows, nchw, bn

    run.write(args.out)
    print(f"wrote {len(run.records)} records to {args.out}; below target or incorrect: {len(run.below_target_or_incorrect())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
