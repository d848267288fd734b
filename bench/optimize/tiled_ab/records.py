"""Bench records from tiled_ab's JSON lines: per (case, variant), the variant against the kernel the run calls
`shipped` (ref_ms), with the copy bandwidth of the same bytes beside it.

    python bench/optimize/tiled_ab/records.py RUN.jsonl LABEL DATE SHIPPED_COMMIT > records.json

SHIPPED_COMMIT: the commit whose kf_elementwise.cuh the run's `shipped` variant was built from. Rows with a
"dtype" (fp16 cases, from run 7) are their own cases; their `shipped_f16` variant is the reference there, and an
error within half an fp16 step of the chain's largest output (0.5) is its rounding.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    path, label, date, shipped_commit = sys.argv[1:5]
    rows = [json.loads(line) for line in open(path, encoding="utf8") if line.startswith("{")]
    regs = {row["kernel"]: row["regs"] for row in rows if "kernel" in row}
    rows = [row for row in rows if "N" in row]
    by_case: dict[tuple[int, int, int], dict[str, dict]] = {}
    for row in rows:
        by_case.setdefault((row["N"], row["P"], row["C"], row.get("dtype", "fp32")), {})[row["variant"]] = row
    records = []
    for (n, p, c, dtype), variants in by_case.items():
        shipped = next(row for name, row in variants.items() if name.startswith("shipped"))
        copy = variants.get("memcpy")
        tolerance = 0.0 if dtype == "fp32" else 2.0**-12
        for name, row in variants.items():
            if name == "memcpy":
                continue
            records.append({
                "device": "NVIDIA H200", "date": date, "run": label,
                "problem": f"nhwc_to_nchw_bias_clamp_scale_div N{n} P{p} C{c} {dtype}", "variant": name,
                "ref_ms": shipped["ms"], "ours_ms": row["ms"], "speedup": round(shipped["ms"] / row["ms"], 3),
                "correct": row["max_err"] <= tolerance, "GBps": row["GBps"], "copy_GBps": copy["GBps"] if copy else None,
                "shipped_commit": shipped_commit, "registers": regs.get(name),
            })
    json.dump(records, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
