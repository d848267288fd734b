"""Turns one device run (bench.json + sweep.json from device_run.py) into committed bench records:
one JSON file per measured configuration under bench/attention/records/.

Usage: python3 bench/attention/write_records.py RUN_DIR [RUN_LABEL] [PROBLEM_REGEX] [--out DIR]
(PROBLEM_REGEX: only configurations whose problem string matches, e.g. to take each configuration
from the run that measured the committed code.) When RUN_DIR also holds dispatch_ratio.json
(dispatch_ratio.py: SDPA and the ModelNew alone, 200 alternating reps), the head dims it covers take their
headline from it: there both sides run PyTorch's own kernel, and the full benchmark's 30 round-robin reps
among a dozen variants are noise-bound on those 0.1-1.6 ms problems (the full-benchmark numbers are kept
under `full_bench`).

Each record's headline is what a user gets from the generated ModelNew (`modelnew_dispatch`): ref_ms is
PyTorch's SDPA, ours_ms the ModelNew call, speedup their ratio, all from the same process. `correct` is
true only when the run's whole correctness sweep passed and the timed kernel matched the float64
reference within 2x PyTorch's own error on the timed inputs. Every timed variant (each kforge kernel,
the unfused baddbmm -> softmax -> bmm peer) is kept under `variants`.
"""

import argparse
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None):
    ap = argparse.ArgumentParser(description="device_run.py output -> bench/attention/records/*.json")
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("label", nargs="?", help="the run's name in the records (default: RUN_DIR's name)")
    ap.add_argument("only", nargs="?", type=re.compile, help="only problems matching this regex")
    ap.add_argument("--out", type=Path, default=HERE / "records", help="records folder (default: the committed one)")
    args = ap.parse_args(argv)
    run, only = args.run_dir, args.only
    label = args.label or run.name
    bench = json.loads((run / "bench.json").read_text())
    sweep = json.loads((run / "sweep.json").read_text())
    sweep_ok = all(c["ok"] for c in sweep["cases"]) and all(f["equal"] for f in sweep["fallback"])
    ratio_path = run / "dispatch_ratio.json"
    ratios = {}
    if ratio_path.exists():
        for row in json.loads(ratio_path.read_text())["rows"]:
            ratios[(row["b"], row["h"], row["s"], row["d"], row["causal"])] = row
    by_problem = {}
    for r in bench:
        by_problem.setdefault(r["problem"], []).append(r)
    out_dir = args.out
    out_dir.mkdir(exist_ok=True)
    for problem, recs in by_problem.items():
        if only and not only.search(problem):
            continue
        v = {r["variant"]: r for r in recs}
        head = v["modelnew_dispatch"]
        # The dispatcher runs one of our kernels (or PyTorch); its correctness is that kernel's.
        kernel_errs = [r for name, r in v.items() if name.startswith("kforge_") and r["err"] is not None]
        kernel_ok = all(r["correct"] for r in kernel_errs)
        record = {
            "device": head["device"], "date": head["date"], "problem": problem,
            "variant": "kforge ModelNew (generated/attention/model_new.py)",
            "ref_ms": head["ref_ms"], "ours_ms": head["ours_ms"], "speedup": head["speedup"],
            "correct": bool(sweep_ok and kernel_ok),
            "torch": head["torch"], "cuda": head["cuda"], "run": label, "config": head["config"],
            "peer_unfused_ms": v["unfused"]["ours_ms"] if "unfused" in v else None,
            "speedup_vs_unfused": v["unfused"]["ours_ms"] / head["ours_ms"] if "unfused" in v else None,
            "torch_err": head["torch_err"],
            "variants": [{k: r[k] for k in ("variant", "ours_ms", "min_ms", "max_ms", "speedup", "tflops", "err",
                                            "correct")} for r in recs],
        }
        cfg = head["config"]
        alone = ratios.get((cfg["b"], cfg["h"], cfg["s"], cfg["d"], cfg["causal"])) if cfg["dtype"] == "float16" else None
        if alone is not None:
            record["full_bench"] = {k: record[k] for k in ("ref_ms", "ours_ms", "speedup")}
            record.update(ref_ms=alone["ref_ms"], ours_ms=alone["ours_ms"], speedup=alone["ratio"],
                          run=f"{label}, headline from dispatch_ratio.py (SDPA and the ModelNew alternating)")
        slug = re.sub(r"[^A-Za-z0-9]+", "_", problem).strip("_").lower()
        (out_dir / f"{slug}.json").write_text(json.dumps(record, indent=1) + "\n")
        print(f"{slug}: {record['ours_ms']:.3f} ms, {record['speedup']:.2f}x sdpa, correct={record['correct']}")


if __name__ == "__main__":
    main()
