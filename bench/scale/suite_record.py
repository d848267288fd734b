"""Issue 17's suite record from one bench/scale/device_suite.sh run: the suite's wall time against the sum of its
GPU phases.

A result's GPU phases are the worker stages that hold the GPU for that candidate: building the models, the trials
(check_correctness), the checks (verify) and timing (time_models). Everything else — the extension builds, the
worker's start-up (torch, the CUDA context, the reference process), the candidate's import — is what a pipelined
suite must hide behind them. Target: wall ≤ 1.3 × Σ GPU phases.
    python3 bench/scale/suite_record.py OUT_DIR --run NAME --date YYYY-MM-DD --device TEXT -o record.json
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

GPU_STAGES = ("build_models", "check_correctness", "verify", "time_models")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--run", required=True)
    parser.add_argument("--date", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()

    wall_text = (args.out_dir / "wall.txt").read_text()
    wall = float(re.search(r"wall ([\d.]+) s", wall_text).group(1))
    entries = [json.loads(line) for line in (args.out_dir / "suite.jsonl").read_text().splitlines() if line]
    planned = sum(1 for line in (args.out_dir / "pairs.txt").read_text().splitlines() if "=" in line)
    stage_totals: Counter[str] = Counter()
    candidates = []
    for entry in entries:
        result = entry["result"]
        stages = result.get("stageSeconds") or {}
        stage_totals.update(stages)
        timing = result.get("timing") or {}
        candidates.append({
            "problem": result["problem"], "verdict": result["verdict"],
            "speedup": timing.get("speedup"), "gpu_s": round(sum(stages.get(s, 0.0) for s in GPU_STAGES), 2),
            "slot_s": round((entry["finishedAt"] - entry["startedAt"]) / 1000, 2) if "startedAt" in entry else None,
            "stages_s": {k: round(v, 2) for k, v in stages.items()},
        })
    gpu = sum(stage_totals[s] for s in GPU_STAGES)
    first = min(e["startedAt"] for e in entries if "startedAt" in e)
    last = max(e["finishedAt"] for e in entries if "finishedAt" in e)
    record = {
        "device": args.device, "date": args.date, "run": args.run, "problem": "suite", "variant": "1 GPU, cold cache",
        "planned": planned, "finished": len(entries),
        "verdicts": dict(Counter(c["verdict"] for c in candidates)),
        "wall_s": wall, "first_start_to_last_finish_s": round((last - first) / 1000, 1),
        "gpu_phases_s": round(gpu, 1), "wall_over_gpu_phases": round(wall / gpu, 3) if gpu else None,
        "target": "wall <= 1.3 x sum of GPU phases",
        "stage_totals_s": {k: round(v, 1) for k, v in sorted(stage_totals.items())},
        "gpu_stages": list(GPU_STAGES), "candidates": candidates,
    }
    args.output.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(entries)}/{planned} finished; wall {wall:.1f} s; GPU phases {gpu:.1f} s; "
          f"wall / GPU = {record['wall_over_gpu_phases']}; verdicts {record['verdicts']}")
    for stage, seconds in sorted(stage_totals.items(), key=lambda kv: -kv[1]):
        print(f"  {stage:20s} {seconds:8.1f} s{'  (GPU)' if stage in GPU_STAGES else ''}")


if __name__ == "__main__":
    main()
