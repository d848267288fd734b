"""Achieved memory bandwidth of the codegen templates on large tensors, against a measured copy (x.clone()).

    python bench/optimize/templates_bw.py --out X.json      (repo root as cwd, a CUDA GPU)

Floors: every case is memory-bound; bytes = each input read once + the output written once. The copy's
achieved GB/s (read + write of a 1 GiB fp32 tensor) is the ceiling the ratios are taken against; targets:
elementwise >= 0.90 of it, reductions >= 0.80. Timing: CUDA events around each call, L2 flushed (a 256 MiB
write) before every call, warm-up first, median of the repeats. Each case is also checked against float64
torch on the same inputs (`correct`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test" / "gpu"))
import templates_harness  # noqa: E402

FLUSH = None


def flush_l2() -> None:
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    FLUSH.fill_(1)


def time_ms(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        flush_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON records file to write")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("templates_bw: needs a CUDA GPU", file=sys.stderr)
        return 2
    kf = templates_harness.build()
    dev = torch.cuda.get_device_name()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)

    big = torch.randn(1 << 28, device="cuda", generator=gen)  # 1 GiB fp32
    copy_ms = time_ms(lambda: big.clone(), args.reps)
    copy_gbs = 2 * big.numel() * 4 / copy_ms / 1e6
    del big

    records = []

    def case(variant: str, kind: str, dtype: torch.dtype, shape, ours, torch_op, ref64, tol: float, bytes_moved: int) -> None:
        """Times `ours` and torch's own op (`torch_op`) in this process; checks `ours` against float64 `ref64`."""
        out = ours()
        correct = bool(torch.allclose(out.double(), ref64().double(), rtol=tol, atol=tol))
        ms = time_ms(ours, args.reps)
        ref_ms = time_ms(torch_op, args.reps)
        gbs = bytes_moved / ms / 1e6
        rec = {
            "device": dev,
            "date": datetime.date.today().isoformat(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "problem": f"templates_bw/{kind}",
            "variant": variant,
            "dtype": str(dtype).removeprefix("torch."),
            "shape": list(shape),
            "bytes": bytes_moved,
            "ours_ms": ms,
            "ref_ms": ref_ms,
            "speedup": ref_ms / ms,
            "ours_gbs": gbs,
            "copy_gbs": copy_gbs,
            "fraction_of_copy": gbs / copy_gbs,
            "target_fraction": 0.9 if kind == "elementwise" else 0.8,
            "correct": correct,
        }
        records.append(rec)
        print(f"{variant:<38} {rec['dtype']:<9} {ms:8.3f} ms {gbs:7.0f} GB/s {gbs / copy_gbs:5.2f} of copy"
              f"  torch {ref_ms:8.3f} ms  correct={correct}")

    print(f"{dev}: copy {copy_gbs:.0f} GB/s (x.clone() of 1 GiB fp32)")
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

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(records, indent=2) + "\n", encoding="utf8")
    short = [r for r in records if r["fraction_of_copy"] < r["target_fraction"] or not r["correct"]]
    print(f"wrote {len(records)} records to {args.out}; below target or incorrect: {len(short)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
