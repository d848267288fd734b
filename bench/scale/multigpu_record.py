"""Issue 18's record from one bench/scale/device_multigpu.sh run: the 1-GPU and the all-GPU suite's journals.

Prints, per candidate, the verdict and speedup (95% CI) in both runs and whether the intervals overlap (placement
must not change results), each GPU's busy time, and the efficiency (1-GPU wall / N) / N-GPU wall; writes the
record as JSON.
    python3 bench/scale/multigpu_record.py OUT_DIR WALL_1 WALL_ALL --run NAME --date YYYY-MM-DD -o record.json
(OUT_DIR holds gpus_1.jsonl and gpus_all.jsonl; WALL_*: the walls the script printed, seconds.)
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def journal(path: Path) -> dict[str, dict]:
    entries = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        entries[entry["result"]["problem"]] = entry
    return entries


def busy(entries: dict[str, dict]) -> dict[str, float]:
    per_slot: dict[str, float] = defaultdict(float)
    for entry in entries.values():
        per_slot[entry["slot"]] += (entry["finishedAt"] - entry["startedAt"]) / 1000
    return {slot: round(seconds, 1) for slot, seconds in sorted(per_slot.items())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("wall_1", type=float)
    parser.add_argument("wall_all", type=float)
    parser.add_argument("--run", required=True)
    parser.add_argument("--date", required=True)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()

    one, many = journal(args.out_dir / "gpus_1.jsonl"), journal(args.out_dir / "gpus_all.jsonl")
    if set(one) != set(many):
        raise SystemExit(f"the runs did not evaluate the same problems: {sorted(set(one) ^ set(many))}")
    gpus = len({e["slot"] for e in many.values()})
    candidates, disagree = [], []
    for problem in sorted(one):
        a, b = one[problem]["result"], many[problem]["result"]
        ta, tb = a["timing"], b["timing"]
        overlap = bool(ta and tb and ta["speedupCi"][0] <= tb["speedupCi"][1] and tb["speedupCi"][0] <= ta["speedupCi"][1])
        same_verdict = a["verdict"] == b["verdict"]
        if not (overlap and same_verdict):
            disagree.append(problem)
        candidates.append({
            "problem": problem, "verdict_1gpu": a["verdict"], "verdict_ngpu": b["verdict"],
            "speedup_1gpu": ta and ta["speedup"], "ci_1gpu": ta and ta["speedupCi"],
            "speedup_ngpu": tb and tb["speedup"], "ci_ngpu": tb and tb["speedupCi"],
            "slot_ngpu": many[problem]["slot"], "cis_overlap": overlap,
        })
        print(f"{problem:34s} {a['verdict']:9s} {ta['speedup']:.2f}x ({ta['speedupCi'][0]:.2f}-{ta['speedupCi'][1]:.2f})  "
              f"{b['verdict']:9s} {tb['speedup']:.2f}x ({tb['speedupCi'][0]:.2f}-{tb['speedupCi'][1]:.2f}) "
              f"{many[problem]['slot']}  {'ok' if overlap else 'CIs DISJOINT'}")
    efficiency = (args.wall_1 / gpus) / args.wall_all
    device = next(iter(one.values()))["result"]["environment"]["gpu"]
    record = {
        "device": device, "date": args.date, "run": args.run, "gpu_count": gpus, "problems": len(one),
        "wall_1gpu_s": args.wall_1, "wall_ngpu_s": args.wall_all, "efficiency": round(efficiency, 3),
        "busy_1gpu_s": busy(one), "busy_ngpu_s": busy(many),
        "all_correct": all(c["verdict_1gpu"] == c["verdict_ngpu"] == "correct" for c in candidates),
        "placement_changed_results": disagree, "candidates": candidates,
    }
    print(f"{gpus} GPUs: {args.wall_all:.1f} s vs 1 GPU {args.wall_1:.1f} s -> efficiency {efficiency:.3f}; "
          f"busy {record['busy_1gpu_s']} / {record['busy_ngpu_s']}; disagreeing: {disagree or 'none'}")
    args.output.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
