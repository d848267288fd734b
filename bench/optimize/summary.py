"""Geomeans of the optimize records (bench/optimize/records/) by the issue's target groups: single-op problems,
conv-anchored chains, GEMM-anchored chains; correct, timed records only. Then the built-in problems with no
such record and the ones below the 0.97x-of-eager floor.

    python bench/optimize/summary.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

RECORDS = Path(__file__).parent / "records"
PROBLEMS = Path(__file__).resolve().parents[2] / "problems"
FLOOR = 0.97  # no problem may end below this fraction of eager


def group(problem: str) -> str:
    if problem.startswith(("conv", "depthwise")):
        return "conv-anchored"
    if problem.startswith(("linear", "gemm", "bmm", "mlp", "matmul", "transformer", "sdpa", "topk")):
        return "gemm-anchored"
    return "single-op and other"


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> None:
    rows: dict[str, list[dict]] = {}
    for path in sorted(RECORDS.glob("*.json")):
        rec = json.loads(path.read_text())
        if rec.get("correct") and rec.get("speedup") and rec.get("speedup_vs_compile"):
            rows.setdefault(group(rec["problem"]), []).append(rec)
    for name, recs in rows.items():
        print(f"{name}: {len(recs)} problems, geomean {geomean([r['speedup'] for r in recs]):.2f}x eager, "
              f"{geomean([r['speedup_vs_compile'] for r in recs]):.2f}x torch.compile")
        for r in sorted(recs, key=lambda r: -r["speedup"]):
            print(f"  {r['problem']:40s} {r['speedup']:6.2f}x  {r['speedup_vs_compile']:6.2f}x  ({r['run']})")
    recorded = {r["problem"] for recs in rows.values() for r in recs}
    builtin = sorted(p.stem for p in PROBLEMS.glob("*.py"))
    missing = [name for name in builtin if name not in recorded]
    print(f"built-in problems with a correct, timed record: {len(recorded & set(builtin))} of {len(builtin)}")
    if missing:
        print(f"  none yet: {', '.join(missing)}")
    below = sorted((r for recs in rows.values() for r in recs if r["speedup"] < FLOOR), key=lambda r: r["speedup"])
    print(f"below {FLOOR}x eager: " + (", ".join(f"{r['problem']} {r['speedup']:.2f}x" for r in below) or "none"))


if __name__ == "__main__":
    main()
