"""Turns a `kforge optimize --json` results file from a device run into one record per problem under
bench/optimize/records/ (the fields every bench record carries, plus the optimizer's: compile_ms,
speedup_vs_compile, the regions with their kernel-vs-PyTorch times, what stayed in PyTorch).

    python bench/optimize/records_from_results.py RESULTS.json --run device-run-N [--date YYYY-MM-DD]
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

METHOD = ("kforge optimize: full kforge eval (3 trials, all checks) for correctness; eager / torch.compile / "
          "ours rotated in one process, CUDA events, L2 flushed, 30 iterations, medians")


def record(result: dict, run: str, date: str) -> dict:
    return {
        "device": result.get("device"),
        "date": date,
        "problem": result["problem"],
        "variant": "kforge-optimize",
        "ref_ms": result.get("eagerMs"),
        "ours_ms": result.get("oursMs"),
        "speedup": result.get("speedup"),
        "correct": result.get("verdict") == "correct",
        "compile_ms": result.get("compiledMs"),
        "speedup_vs_compile": result.get("speedupVsCompile"),
        # torch.compile's outputs under the check the file passed (null: not checked), and where they pass only
        # with TF32 off, that compiled model's time and ours against it (compile_check.py)
        "compile_correct": (result.get("compileCheck") or {}).get("correct"),
        "compile_check_note": (result.get("compileCheck") or {}).get("note"),
        "compile_exact_ms": result.get("compiledExactMs"),
        "speedup_vs_compile_exact": result.get("speedupVsCompileExact"),
        "regions": [{"id": r["id"], "summary": r["summary"], "status": r["status"], "kernel_ms": r["kernelMs"],
                     "torch_ms": r["torchMs"]} for r in result.get("regions", [])],
        "kept": result.get("kept", []),
        "verdict": result.get("verdict"),
        "rejected": result.get("rejected"),
        # the file's forward replayed as a CUDA graph, timed in the same rotation (absent: no replay tried), and
        # whether the shipped file replays
        "graphed_ms": result.get("graphedMs"),
        "graphed": result.get("graphed"),
        "seconds": result.get("seconds"),
        "run": run,
        "method": METHOD,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--run", required=True)
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--out-dir", default=str(Path(__file__).parent / "records"))
    args = parser.parse_args()
    data = json.loads(Path(args.results).read_text())
    results = data["optimize"] if isinstance(data, dict) else data
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for result in results:
        if result.get("verdict") is None:
            continue  # not verified (cut by the run's time limit)
        rec = record(result, args.run, args.date)
        (out / f"{result['problem']}.json").write_text(json.dumps(rec, indent=1) + "\n")
        print(f"{rec['problem']}: {rec['verdict']} {rec['speedup'] and round(rec['speedup'], 2)}x eager, "
              f"{rec['speedup_vs_compile'] and round(rec['speedup_vs_compile'], 2)}x compile")


if __name__ == "__main__":
    main()
